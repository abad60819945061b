"""Fixtures for the whole suite, and its promise to leave the course as it found it."""
from __future__ import annotations

from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parents[1] / "course"
COURSE_BEFORE = pytest.StashKey[set[Path]]()


def _course_paths() -> set[Path]:
    return set(COURSE.rglob("*"))


def pytest_sessionstart(session):
    session.config.stash[COURSE_BEFORE] = _course_paths()


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
