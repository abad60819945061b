"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, against JupyterLab servers started here.

Chromium comes from the system (`make test` installs Debian's `chromium` when root); Playwright's own browser
download is not used. Without Chromium these tests are skipped with a loud message. A failing test leaves a
screenshot and the server log in `test-artifacts/browser/`.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.course import Course
from autograder.workspace import prepare
from jupyterlab_driver import CHAPTER, COURSE_SOURCE, REPO, LabServer

ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-dev-shm-usage"]


def chromium_executable() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


NO_CHROMIUM = ("BROWSER TESTS SKIPPED: no Chromium found. Install it (Debian: `apt-get install -y chromium`; "
               "`make test` does this when run as root) and run them again.")
NO_CHROMIUM_KEY = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def chromium(request):
    executable = chromium_executable()
    if executable is None:
        request.config.stash[NO_CHROMIUM_KEY] = True
        pytest.skip(NO_CHROMIUM)
    return request.getfixturevalue("playwright_session"), executable


@pytest.fixture
def page(chromium, tmp_path, request):
    """A fresh browser profile per test; screenshot on failure."""
    playwright, executable = chromium
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=executable, headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.errors = []  # uncaught exceptions and console errors, for the "loads without errors" checks
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


def pytest_terminal_summary(terminalreporter, config):
    """Repeat the skip where nobody can miss it: at the very end of the run, in red."""
    if config.stash.get(NO_CHROMIUM_KEY, False):
        terminalreporter.write_sep("!", NO_CHROMIUM, red=True, bold=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.report_call = report
    return report


@pytest.fixture(scope="session")
def learner_workspace(tmp_path_factory) -> Path:
    """The learner's workspace as `make lab` builds it: every chapter of the course."""
    if not (COURSE_SOURCE / CHAPTER / f"{CHAPTER}.ipynb").is_file():
        pytest.fail(f"the browser tests need chapter {CHAPTER} in {COURSE_SOURCE}")
    workspace = tmp_path_factory.mktemp("learner") / "workspace"
    report = prepare(workspace, COURSE_SOURCE)
    assert not report.failed, report
    return workspace


def _serve(request, root: Path, role: str, state: Path):
    log = state / "server.log"
    state.mkdir(parents=True, exist_ok=True)
    # The self-check's grading cache goes to the test's folder, not the home directory.
    server = LabServer(root, role, state, log, {"MODULECRAFT_SELFCHECK_CACHE": str(state / "selfcheck-cache")})
    yield server
    server.stop()
    if request.session.testsfailed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, ARTIFACTS / f"jupyterlab-{role}.log")


@pytest.fixture(scope="session")
def learner_lab(request, learner_workspace, tmp_path_factory):
    yield from _serve(request, learner_workspace, "learner", tmp_path_factory.mktemp("learner-jupyter"))


@pytest.fixture
def lab(learner_lab):
    """The learner's server, with no kernel left over from an earlier test."""
    learner_lab.delete_sessions()
    yield learner_lab
    learner_lab.delete_sessions()


@pytest.fixture(scope="session")
def instructor_lab(request, tmp_path_factory):
    """The instructor's JupyterLab on a grading folder made from a copy of the course: JupyterLab writes
    `.ipynb_checkpoints/` beside each notebook it opens, and none may land in the repository's course/."""
    base = tmp_path_factory.mktemp("instructor")
    course = Course(base / "course", source=shutil.copytree(COURSE_SOURCE, base / "source"))
    yield from _serve(request, course.root, "instructor", tmp_path_factory.mktemp("instructor-jupyter"))
