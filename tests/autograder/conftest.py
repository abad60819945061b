"""Fixtures for the grading tests: a grading folder on the toy chapters, with short time limits."""
import shutil
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


@pytest.fixture(scope="session")
def make_toy_course(tmp_path_factory):
    """`make_toy_course(root)`: a grading folder at `root` with the toy chapters released. nbgrader releases them
    once per test run; each folder gets a copy of that release and of its gradebook (neither holds a path)."""
    released = Course(tmp_path_factory.mktemp("toy-release") / "grading", source=TOY_CHAPTERS)
    released.release()

    def make(root) -> Course:
        course = Course(root, source=TOY_CHAPTERS)
        shutil.copytree(released.root / "release", course.root / "release")
        shutil.copyfile(released.root / "gradebook.db", course.root / "gradebook.db")
        return course

    return make


@pytest.fixture
def toy_course(tmp_path, short_limits, make_toy_course) -> Course:
    return make_toy_course(tmp_path / "grading")
