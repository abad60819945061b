"""The project's own promises: the two README commands, CI calling the test command, conda and pip agreeing."""
import re
import subprocess
import sys
import time
import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# conda-forge names for the PyPI packages that are named differently there.
CONDA_NAME = {"graphviz": "python-graphviz"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def _conda_dependencies() -> tuple[set[str], list[str]]:
    names, pip_lines, in_pip = set(), [], False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        item = re.match(r"^(\s*)-\s+(\S.*?)\s*(#.*)?$", line)
        if not item:
            continue
        indent, value = len(item.group(1)), item.group(2)
        if value == "pip:":
            in_pip = True
        elif in_pip and indent > 2:
            pip_lines.append(value)
        else:
            in_pip = False
            names.add(_name(value))
    return names, pip_lines


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    conda, pip_lines = _conda_dependencies()
    for requirement in project["dependencies"]:
        name = _name(requirement)
        assert CONDA_NAME.get(name, name) in conda, f"{name} is in pyproject.toml but not in environment.yml"
    assert "graphviz" in conda, "environment.yml must bring Graphviz's dot binary (conda-forge `graphviz`)"
    assert any(line.startswith("-e .[test]") for line in pip_lines), "environment.yml must install the project itself"


def test_environment_yml_offers_torchs_cpu_build_from_the_index_make_uses():
    cpu_index = re.search(r"torch_cpu_index=\$\{MODULECRAFT_TORCH_INDEX:-(\S+)\}",
                          (ROOT / "scripts" / "install.sh").read_text()).group(1)
    _, pip_lines = _conda_dependencies()
    assert f"--extra-index-url {cpu_index}" in pip_lines


def test_the_licence_is_an_spdx_expression_that_setuptools_reads_without_a_warning():
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the licence as a TOML table warns (and stops building in February 2027)
        distribution = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert distribution.metadata.license_expression == "MIT"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    minimum = re.fullmatch(r"setuptools>=(\d+)", requires[0]).group(1)
    assert int(minimum) >= 77, "setuptools reads an SPDX licence expression since version 77"


def test_torch_is_a_pinned_test_dependency_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(_name(r) == "torch" for r in project["dependencies"])
    assert "torch==2.13.0" in project["optional-dependencies"]["test"]


def test_readme_names_exactly_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## The two commands\s+```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make lab", "make test"]
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_setup_only_commands_exist_and_the_readme_says_what_they_install():
    """Instructors and CI install without starting JupyterLab or running the tests: `make lab` and `make test` are
    each their setup target followed by one command."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab: setup$", makefile, re.M) and re.search(r"^test: setup-test$", makefile, re.M)
    readme = (ROOT / "README.md").read_text()
    assert "`make setup`" in readme and "`make setup-test`" in readme
    assert "make lab` once" not in readme, "`make lab` starts JupyterLab and blocks: it is no setup step"


def test_the_package_never_imports_torch():
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("reference", "autograder")
        for path in (ROOT / folder).rglob("*.py")
        if re.search(r"^\s*(import torch|from torch)", path.read_text(), re.M)
    ]
    assert offenders == []


def _python_minimum() -> str:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    return re.fullmatch(r">=(3\.\d+)", requires).group(1)


def test_the_python_requirement_is_true_and_stated_alike_everywhere():
    """pyproject, README and environment.yml say the same minimum, and every dependency installed here accepts it
    (nbgrader 0.9.6 requires 3.11: the README's old 3.10 failed after minutes of pip)."""
    from importlib.metadata import PackageNotFoundError, metadata
    from packaging.specifiers import SpecifierSet

    minimum = _python_minimum()
    assert f"Python ≥ {minimum} " in (ROOT / "README.md").read_text()
    assert re.search(rf"^\s*- python>={re.escape(minimum)}\s", (ROOT / "environment.yml").read_text(), re.M)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        try:
            accepted = SpecifierSet(metadata(_name(requirement)).get("Requires-Python") or "")
        except PackageNotFoundError:
            continue
        assert accepted.contains(f"{minimum}.0"), f"{_name(requirement)} requires Python {accepted}"


def _fake_python(path: Path, version: tuple[int, int]) -> Path:
    """An interpreter that reports ``version``: this one, with sys.version_info replaced before running ``-c``."""
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.version_info = ({version[0]}, {version[1]}, 12, 'final', 0)\n"
                    "exec(sys.argv[2])\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("target", ["setup", "setup-test", "lab", "test"])
def test_make_refuses_an_old_python_in_seconds_before_downloading(tmp_path, target):
    old = _fake_python(tmp_path / "python3.10", (3, 10))
    venv = tmp_path / "venv"
    started = time.monotonic()
    result = subprocess.run(["make", "-C", str(ROOT), target, f"PYTHON={old}", f"VENV={venv}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert time.monotonic() - started < 10
    assert f"is Python 3.10; modulecraft needs Python >= {_python_minimum()}" in result.stderr, result.stderr
    assert f"make PYTHON=python{_python_minimum()}" in result.stderr
    assert not venv.exists(), "nothing is created before the interpreter is accepted"


def test_a_venv_made_with_an_old_python_is_refused_with_what_to_delete(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _fake_python(venv / "bin" / "python", (3, 10))
    result = subprocess.run(["bash", str(ROOT / "scripts" / "check-python.sh"), str(venv), sys.executable],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and f"{venv} was made with that Python: delete it" in result.stderr


def test_the_python_check_accepts_this_python_and_names_a_missing_one(tmp_path):
    check = ["bash", str(ROOT / "scripts" / "check-python.sh"), str(tmp_path / "venv")]
    assert subprocess.run(check + [sys.executable], capture_output=True, timeout=60).returncode == 0
    assert subprocess.run(check + [str(_fake_python(tmp_path / "python3.99", (3, 99)))],
                          capture_output=True, timeout=60).returncode == 0
    missing = subprocess.run(check + [str(tmp_path / "python3.42")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "cannot run the Python interpreter" in missing.stderr
