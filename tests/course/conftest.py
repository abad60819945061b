"""One nbgrader grading folder for the whole session; each chapter is released at most once.

The grading run test_course_grading.py shares starts when the tests are collected (`shared_grading`), so it
grades while the suite's earlier tests run; the folder is handed out once it is done (never shared with a run)."""
from __future__ import annotations

from pathlib import Path

import pytest

import shared_grading
from course_chapters import CHAPTERS

GRADING_TESTS = Path(__file__).resolve().parent / "test_course_grading.py"
SHARED_RUN = pytest.StashKey[shared_grading.Run]()


def pytest_collection_finish(session):
    chapters = sorted({item.callspec.params["chapter"] for item in session.items
                       if item.path == GRADING_TESTS and hasattr(item, "callspec")})
    if chapters and not session.config.option.collectonly:
        folder = session.config._tmp_path_factory.mktemp("shared-grading")
        session.config.stash[SHARED_RUN] = shared_grading.Run(folder, chapters)


def pytest_sessionfinish(session):
    run = session.config.stash.get(SHARED_RUN, None)
    if run is not None:
        run.stop()


@pytest.fixture(scope="session")
def shared_run(request):
    """The shared run once it has ended (None when this session tests no chapter's grading)."""
    run = request.config.stash.get(SHARED_RUN, None)
    if run is not None:
        run.process.wait()
    return run


@pytest.fixture(scope="session")
def course(shared_run, tmp_path_factory):
    from autograder import Course

    return Course(shared_run.course_root if shared_run else tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="session")
def release(course, shared_run):
    """release(chapter) -> the student version of the chapter (nbgrader generate_assignment, cached)."""
    released = {}
    if shared_run is not None and shared_run.process.returncode == 0:
        released.update(shared_run.wait()[0])

    def release_chapter(chapter: str):
        assert chapter in CHAPTERS
        if chapter not in released:
            released.update(course.release([chapter]))
        return released[chapter]

    return release_chapter
