"""The classroom test needs root (Unix accounts, the grader's sandbox), Chromium and the hub's install."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "browser"))  # JupyterLab's notebook driver and the course's solutions

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def hub_install():
    """The hub's install, brought up to date with this checkout (scripts/hub-install.sh: quick when nothing
    changed)."""
    if os.geteuid() != 0:
        pytest.skip("HUB TEST SKIPPED: it creates Unix accounts and grades in the root sandbox; run it as root")
    if not shutil.which("chromium"):
        pytest.skip("HUB TEST SKIPPED: no Chromium (Debian: apt-get install -y chromium; `make test` does this as root)")
    from hub_driver import PREFIX
    done = subprocess.run(["bash", REPO / "scripts" / "hub-install.sh", PREFIX], capture_output=True, text=True)
    assert done.returncode == 0, f"scripts/hub-install.sh failed:\n{done.stdout}\n{done.stderr}"
    return PREFIX


@pytest.fixture
def browser_context(playwright_session, tmp_path):
    """A factory of fresh Chromium profiles, one per person; all closed at the end."""
    contexts = []

    def new_context():
        context = playwright_session.chromium.launch_persistent_context(
            str(tmp_path / f"profile{len(contexts)}"), executable_path=shutil.which("chromium"), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        return context

    yield new_context
    for context in contexts:
        context.close()
