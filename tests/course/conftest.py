"""One nbgrader grading folder for the whole session; each chapter is released at most once."""
from __future__ import annotations

import pytest

from course_chapters import CHAPTERS


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    from autograder import Course

    return Course(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="session")
def release(course):
    """release(chapter) -> the student version of the chapter (nbgrader generate_assignment, cached)."""
    released = {}

    def release_chapter(chapter: str):
        assert chapter in CHAPTERS
        if chapter not in released:
            released.update(course.release([chapter]))
        return released[chapter]

    return release_chapter
