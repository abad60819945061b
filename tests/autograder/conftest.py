"""Fixtures for the grading tests: a grading folder on the toy chapters, with short time limits."""
from pathlib import Path

import pytest

from autograder import config
from autograder.course import Course

TOY_CHAPTERS = Path(__file__).parent / "chapters"
CELL_TIMEOUT = 10  # enough for a toy cell on a loaded machine, short enough for the hanging submissions
NOTEBOOK_TIMEOUT = 45


@pytest.fixture
def short_limits(monkeypatch):
    """Time limits read at grading time (the worker processes fork from this one and inherit them)."""
    monkeypatch.setattr(config, "CELL_TIMEOUT", CELL_TIMEOUT)
    monkeypatch.setattr(config, "NOTEBOOK_TIMEOUT", NOTEBOOK_TIMEOUT)


@pytest.fixture
def toy_course(tmp_path, short_limits) -> Course:
    course = Course(tmp_path / "grading", source=TOY_CHAPTERS)
    course.release()
    return course
