"""Fixtures for the whole suite, and its promise to leave the course, and the machine, as it found them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parents[1] / "course"
COURSE_BEFORE = pytest.StashKey[set[Path]]()
SLOT_USERS_BEFORE = pytest.StashKey[set[str]]()


def _course_paths() -> set[Path]:
    return set(COURSE.rglob("*"))


def pytest_sessionstart(session):
    session.config.stash[COURSE_BEFORE] = _course_paths()
    # What the tools write in a home folder (caches of matplotlib, IPython, Chromium, dask's config, the self-check's
    # chapters) lands in the run's temporary folder, not in the user's home: a passing run leaves nothing.
    base = session.config._tmp_path_factory.getbasetemp()
    (base / "home").mkdir(exist_ok=True)
    os.environ["HOME"] = str(base / "home")
    # Dask's workers keep their scratch folder in the system's temporary folder unless told (dask-scratch-space)
    os.environ["DASK_TEMPORARY_DIRECTORY"] = str(base / "dask")
    if "dask" in sys.modules:  # read its environment at import
        sys.modules["dask"].config.refresh()
    if os.geteuid() == 0:
        from autograder.judging import sandbox
        session.config.stash[SLOT_USERS_BEFORE] = sandbox.slot_users()


@pytest.hookimpl(trylast=True)  # after the shared grading run has stopped (tests/course/conftest.py)
def pytest_unconfigure(config):
    """Grading as root makes a system user per kernel slot: those this run made go with it (unless another
    grading run on the machine holds their slot: they are left, and named)."""
    before = config.stash.get(SLOT_USERS_BEFORE, None)
    if before is None:
        return
    from autograder.judging import sandbox
    left = sandbox.remove_slot_users(sandbox.slot_users() - before)
    if left:
        print(f"\nslot users left (busy in another grading run on this machine): {', '.join(left)}")


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test wrote into course/ (e.g. JupyterLab's `.ipynb_checkpoints/` beside a notebook it
    opened there): tests work on copies, and the repository's course stays as committed."""
    before = session.config.stash.get(COURSE_BEFORE, None)
    if before is None:
        return
    written = sorted(str(path.relative_to(COURSE.parent)) for path in _course_paths() - before)
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("!", "the tests wrote into course/ (work on a copy instead):", red=True, bold=True)
            for path in written:
                reporter.write_line(f"  {path}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def playwright_session():
    """The test session's one Playwright (sync API). It runs an event loop for as long as it lives, and a second
    `sync_playwright()` refuses to start beside it: every test that drives Chromium takes this one."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright
