"""What `make setup-test` / `make test` install: torch's CPU build on Linux, PyPI's wheel on macOS, and PyTorch's
index left alone where pip's configured sources already hold the CPU wheel.

Each case runs scripts/install.sh's own pip command as a dry run (pip's PIP_DRY_RUN / PIP_REPORT) against package
indexes served on 127.0.0.1 that stand in for PyPI (whose Linux torch is the CUDA build, pulling nvidia-* wheels)
and for PyTorch's CPU index, and reads pip's report of what it would install.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)  # the test suite's own environment: the dry run installs nothing into it


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal wheel of ``name`` ``version``: metadata only, which is all a dry run reads."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {requirement}\n" for requirement in requires)
    wheel = "Wheel-Version: 1.0\nGenerator: modulecraft-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist_info}/METADATA", metadata)
        archive.writestr(f"{dist_info}/WHEEL", wheel)
        archive.writestr(f"{dist_info}/RECORD", "")
    return path


def _index(root: Path, name: str, *wheels: Path) -> None:
    """A PEP 503 project page listing ``wheels`` (kept in ``root/files``)."""
    page = root / name / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("".join(f'<a href="../../files/{quote(w.name)}">{w.name}</a>\n' for w in wheels))


class Indexes:
    """``/pypi/`` (PyPI: torch 2.13.0 as the CUDA build) and ``/cpu/`` (PyTorch's CPU index: torch 2.13.0+cpu) on one
    loopback server that records every path asked for."""

    def __init__(self, root: Path):
        files = root / "files"
        cuda_torch = _wheel(files, "torch", "2.13.0", requires=("nvidia-cublas-cu12==12.8.4.1",))
        _index(root / "pypi", "torch", cuda_torch)
        _index(root / "pypi", "nvidia-cublas-cu12", _wheel(files, "nvidia-cublas-cu12", "12.8.4.1"))
        _index(root / "cpu", "torch", _wheel(files, "torch", "2.13.0+cpu"))
        self.requested: list[str] = []
        indexes = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                indexes.requested.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def asked(self, index: str) -> list[str]:
        return [path for path in self.requested if path.startswith(f"/{index}/")]


@pytest.fixture
def indexes(tmp_path):
    served = Indexes(tmp_path / "served")
    yield served
    served.server.shutdown()
    served.server.server_close()


def dry_run_install_torch(tmp_path: Path, indexes: Indexes, system: str, wheel_folder: Path | None = None) -> dict:
    """What ``scripts/install.sh VENV torch`` would install on ``system``, from pip's report: {name: url}."""
    report = tmp_path / "report.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "MODULECRAFT_"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,  # this machine's pip configuration is not under test
        PIP_INDEX_URL=f"{indexes.url}/pypi/", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_DRY_RUN="1", PIP_IGNORE_INSTALLED="1", PIP_REPORT=str(report),
        MODULECRAFT_TORCH_INDEX=f"{indexes.url}/cpu/", MODULECRAFT_OS=system,
    )
    if wheel_folder is not None:
        env["PIP_FIND_LINKS"] = str(wheel_folder)
    result = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh"), str(VENV), "torch"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return {item["metadata"]["name"] + "==" + item["metadata"]["version"]: item["download_info"]["url"]
            for item in json.loads(report.read_text())["install"]}


def test_linux_gets_the_cpu_build_from_pytorchs_cpu_index(tmp_path, indexes):
    installed = dry_run_install_torch(tmp_path, indexes, "Linux")
    assert list(installed) == ["torch==2.13.0+cpu"], installed  # no nvidia-* wheel comes along
    assert installed["torch==2.13.0+cpu"].startswith(f"{indexes.url}/files/")
    assert indexes.asked("cpu")


def test_linux_with_the_cpu_wheel_in_pips_wheel_folder_never_asks_pytorchs_index(tmp_path, indexes):
    """Our machines: pip's configured wheel folder holds the CPU wheel and PyTorch's index is out of reach (pip
    would spend about 7 s of retries on each package it looks up there)."""
    wheel = _wheel(tmp_path / "wheels", "torch", "2.13.0+cpu")
    installed = dry_run_install_torch(tmp_path, indexes, "Linux", wheel_folder=wheel.parent)
    assert list(installed) == ["torch==2.13.0+cpu"], installed
    assert installed["torch==2.13.0+cpu"] == wheel.as_uri().replace("+", "%2B")
    assert indexes.asked("cpu") == []


def test_macos_gets_pypis_wheel_and_never_asks_pytorchs_index(tmp_path, indexes):
    """On macOS PyPI's torch is the CPU (and Apple MPS) build, and PyTorch's CPU index has no +cpu wheel for it."""
    installed = dry_run_install_torch(tmp_path, indexes, "Darwin")
    assert "torch==2.13.0" in installed and installed["torch==2.13.0"].startswith(f"{indexes.url}/files/")
    assert indexes.asked("cpu") == []
