"""The grading kernel has no answer key: a notebook that hands an exercise to the reference, by a call, by
inheritance or by reading the reference's source, scores what a blank one does; so does one that puts a runner of
its own in place of the probes' (nothing in a kernel can tell it from the real one) to run them on the reference.
Without the defence (the kernel given the whole reference, as before), the same notebook scores full marks on those
exercises."""
from __future__ import annotations

import os

import nbformat
import pytest

from autograder import config
from autograder.judging import answer_key, sandbox
from autograder.course import Course
from tests.course.course_chapters import read_notebook, solved, with_cell_replaced

pytestmark = pytest.mark.slow

CHAPTER = "05_traversal"
EXERCISE = "c05_named_modules"
LEFT_BLANK = "c05_named_members"  # left as released, under a runner that runs every probe on the reference
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


RUNS_THE_PROBES_ON_THE_REFERENCE = f"""
import autograder.probes as probes
from IPython.display import display
def forged(grade_id, seed=None):
    run = probes.run_probe(grade_id, probes.Reference(probes.yours_of({CHAPTER!r})), seed)
    display({{probes.MIME: {{"grade_id": grade_id, "observed": [c.observed for c in run.checks]}}}}, raw=True)
probes.run_tests = forged
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer-key")
    course = Course(root / "grading")
    course.release([CHAPTER])
    released = nbformat.read(course.release_path(CHAPTER), as_version=4)
    answers = with_cell_replaced(solved(released, read_notebook(CHAPTER)), EXERCISE, DELEGATES)
    blank = next(cell.source for cell in released.cells
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == LEFT_BLANK)
    answers = with_cell_replaced(answers, LEFT_BLANK, RUNS_THE_PROBES_ON_THE_REFERENCE + blank)
    nbformat.write(answers, root / "delegates.ipynb")
    course.delegating_notebook = root / "delegates.ipynb"
    return course


def _graded(course, student):
    course.submit(student, CHAPTER, course.delegating_notebook)
    course.grade(students=[student], chapters=[CHAPTER], force=True)
    scores = course.scores(student, CHAPTER)
    graded = nbformat.read(course.root / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    earned = [sum(scores[g][0] for g in (f"{exercise}_visible", f"{exercise}_hidden"))
              for exercise in (EXERCISE, LEFT_BLANK)]
    return earned, printed


def test_delegating_to_the_reference_earns_nothing(course, monkeypatch):
    score, printed = _graded(course, "delegates")
    assert score == [0, 0]
    assert "source of nn.Module.named_modules: a seam" in printed
    if os.geteuid() == 0 and sandbox.namespaces_available():
        assert "file: PermissionError" in printed or "file: FileNotFoundError" in printed, printed
    # Without the defence: the kernel's modulecraft is the whole reference again.
    monkeypatch.setattr(answer_key, "build", lambda chapter, cache=None, kept=frozenset(): answer_key.REFERENCE.parent)
    score, printed = _graded(course, "delegates-again")
    assert score == [4, 3]
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
