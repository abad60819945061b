"""The grading kernel has no answer key: a notebook that hands an exercise to the reference, by a call, by
inheritance or by reading the reference's source, scores what a blank one does. Without the defence (the kernel
given the whole reference, as before), the same notebook scores full marks on that exercise."""
from __future__ import annotations

import os

import nbformat
import pytest

from autograder import answer_key, config, sandbox
from autograder.course import Course
from tests.course.course_chapters import read_notebook, solved, with_cell_replaced

pytestmark = pytest.mark.slow

CHAPTER = "05_traversal"
EXERCISE = "c05_named_modules"
MODULE_FILE = config.REPO_ROOT / "reference" / "modulecraft" / "nn" / "modules" / "module.py"

# Three ways to the reference's own walk, tried in turn; the first that works answers.
DELEGATES = f"""
import importlib.util, inspect, sys
from modulecraft import nn
found = []
try:
    text = open({str(MODULE_FILE)!r}).read()
    found.append("read the reference's file")
except OSError as error:
    found.append(f"file: {{type(error).__name__}}")
source = inspect.getsource(nn.Module.named_modules)
found.append("source of nn.Module.named_modules: " + ("the reference's" if "memo" in source else "a seam"))
print("; ".join(found))


def named_modules(self, *args, **kwargs):
    return nn.Module.named_modules(self, *args, **kwargs)
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer-key")
    course = Course(root / "grading")
    course.release([CHAPTER])
    answers = solved(nbformat.read(course.release_path(CHAPTER), as_version=4), read_notebook(CHAPTER))
    nbformat.write(with_cell_replaced(answers, EXERCISE, DELEGATES), root / "delegates.ipynb")
    course.delegating_notebook = root / "delegates.ipynb"
    return course


def _graded(course, student):
    course.submit(student, CHAPTER, course.delegating_notebook)
    course.grade(students=[student], chapters=[CHAPTER], force=True)
    scores = course.scores(student, CHAPTER)
    graded = nbformat.read(course.root / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    return sum(scores[g][0] for g in (f"{EXERCISE}_visible", f"{EXERCISE}_hidden")), printed


def test_delegating_to_the_reference_earns_nothing(course, monkeypatch):
    score, printed = _graded(course, "delegates")
    assert score == 0
    assert "source of nn.Module.named_modules: a seam" in printed
    if os.geteuid() == 0 and sandbox.namespaces_available():
        assert "file: PermissionError" in printed or "file: FileNotFoundError" in printed, printed
    # Without the defence: the kernel's modulecraft is the whole reference again.
    monkeypatch.setattr(answer_key, "build", lambda chapter, cache=None, kept=frozenset(): answer_key.REFERENCE.parent)
    score, printed = _graded(course, "delegates-again")
    assert score == 4
    assert "source of nn.Module.named_modules: the reference's" in printed


def test_a_name_never_defined_is_pointed_to_its_exercise(course):
    """A learner who has not run (or has emptied) an exercise's cell hears which exercise defines the name."""
    notebook = nbformat.read(course.delegating_notebook, 4)
    missing = with_cell_replaced(notebook, EXERCISE, "pass")
    path = course.delegating_notebook.with_name("missing.ipynb")
    nbformat.write(missing, path)
    course.submit("missing", CHAPTER, path)
    course.grade(students=["missing"], chapters=[CHAPTER], force=True)
    graded = nbformat.read(course.root / "autograded" / "missing" / CHAPTER / f"{CHAPTER}.ipynb", 4)
    said = [o.evalue for c in graded.cells for o in c.get("outputs", []) if o.output_type == "error"
            and c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(EXERCISE)]
    assert said and all("`named_modules` is not defined. Run Exercise 1 (`named_modules`), whose cell defines it"
                        in text for text in said), said
