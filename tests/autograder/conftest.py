"""Fixtures for the grading tests: a grading folder on the toy chapters, with short time limits."""
from pathlib import Path

import pytest

from autograder import config
from autograder.course import Course

TOY_CHAPTERS = Path(__file__).parent / "chapters"
CELL_TIMEOUT = 3  # CPU seconds: plenty for a toy cell whatever the load, short for the hanging submissions
NOTEBOOK_TIMEOUT = 45


@pytest.fixture(scope="module")
def short_limits():
    """Time limits read at grading time (the worker processes fork from this one and inherit them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "CELL_TIMEOUT", CELL_TIMEOUT)
        patch.setattr(config, "NOTEBOOK_TIMEOUT", NOTEBOOK_TIMEOUT)
        yield


def released_toy_course(root) -> Course:
    course = Course(root, source=TOY_CHAPTERS)
    course.release()
    return course


@pytest.fixture(scope="session")
def make_toy_course():
    """For fixtures wider than one test: `make_toy_course(root)` releases the toy chapters there."""
    return released_toy_course


@pytest.fixture
def toy_course(tmp_path, short_limits) -> Course:
    return released_toy_course(tmp_path / "grading")
