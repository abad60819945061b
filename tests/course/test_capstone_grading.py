"""The capstone's switches, graded for real (nbgrader, grading kernels without modulecraft's code for the learner's
mechanisms): a mechanism switched to the reference loses its points and those of the whole run (13.8) and nothing
else, switching and delegating
gains nothing, a mechanism left "mine" but not written scores 0 saying so, and the switches are read from the
notebook's text, not from what its kernel does."""
from __future__ import annotations

import html
import re

import nbformat
import pytest

from autograder.judging import verdicts
from course_chapters import graded_cells, nbgrader_meta, read_notebook, solved, with_cell_replaced
from modulecraft import mechanisms

pytestmark = pytest.mark.slow

CHAPTER = "13_capstone"
ENGINE = "engine (10)"
ENGINE_CELLS = {"c13_mine_engine_visible", "c13_mine_engine_hidden"}
RUN_CELLS = {"c13_run_experiment_visible", "c13_run_experiment_hidden"}  # the whole run (13.8) uses every mechanism
BROKEN_ENGINE = ("    if variable._grad is None:\n", "    if True:\n")  # a .grad overwritten, never added to
DELEGATING_ENGINE = """from modulecraft.autograd import engine as modulecrafts_engine
from modulecraft.autograd.graph import AccumulateGrad as ModulecraftsAccumulateGrad
_dependencies = modulecrafts_engine._dependencies
_walk = modulecrafts_engine._walk
accumulate_grad = ModulecraftsAccumulateGrad.backward"""


def whose_cell(**switched) -> str:
    whose = {mechanism: "reference" if mechanism in switched.values() else "mine"
             for mechanism in mechanisms.MECHANISMS}
    return "WHOSE = {\n" + "".join(f'    "{m}": "{w}",\n' for m, w in whose.items()) + "}"


def with_source(nb, cell_id, source):
    copy = nbformat.from_dict(nb)
    (cell,) = [c for c in copy.cells if c.get("id") == cell_id]
    cell.source = source
    return copy


def engine_source(nb) -> str:
    (cell,) = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "c13_mine_engine"]
    return cell.source


SUBMITTED = {}


@pytest.fixture(scope="module")
def graded(course, release, tmp_path_factory):
    folder = tmp_path_factory.mktemp("capstone-switches")
    answers = solved(nbformat.read(release(CHAPTER), as_version=4), read_notebook(CHAPTER))
    broken = with_cell_replaced(answers, "c13_mine_engine", engine_source(answers).replace(*BROKEN_ENGINE))
    submissions = {
        "switched-broken-engine": with_source(broken, "c13_whose", whose_cell(a=ENGINE)),
        "switched-delegating-engine": with_source(with_cell_replaced(answers, "c13_mine_engine", DELEGATING_ENGINE),
                                                  "c13_whose", whose_cell(a=ENGINE)),
        "mine-but-missing-engine": with_cell_replaced(answers, "c13_mine_engine", "pass"),
        "broken-engine": broken,
        # The kernel switches the engine at run time (a solution cell after the switches): the text says "mine".
        "broken-engine-switched-in-kernel": with_cell_replaced(
            broken, "c13_train_epoch", _solution(answers, "c13_train_epoch")
            + '\n\n\nWHOSE["engine (10)"] = "reference"\nmechanisms.use(WHOSE, globals())'),
    }
    for student, notebook in submissions.items():
        path = SUBMITTED[student] = folder / f"{student}.ipynb"
        nbformat.write(notebook, path)
        course.submit(student, CHAPTER, path)
    report = course.grade(students=list(submissions), chapters=[CHAPTER], force=True)
    assert {o.student: o.needs_review for o in report.needs_review} == {}
    return course


def _solution(nb, grade_id):
    (cell,) = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") == grade_id]
    return cell.source


def _scores(course, student):
    return {gid: score for gid, (score, _) in course.scores(student, CHAPTER).items()}


def _lost(course, student):
    full = graded_cells(read_notebook(CHAPTER))
    return {gid for gid, score in _scores(course, student).items() if score != full[gid]}


def _feedback(course, student):
    return html.unescape(re.sub(r"<[^>]+>", "", course.feedback_html(student, CHAPTER)))


def test_a_switched_mechanism_loses_exactly_its_points_and_the_runs_and_the_rest_trains(graded):
    assert _lost(graded, "switched-broken-engine") == ENGINE_CELLS | RUN_CELLS
    assert f"{ENGINE}: {verdicts.SWITCHED}" in _feedback(graded, "switched-broken-engine")
    autograded = nbformat.read(graded.root / "autograded" / "switched-broken-engine" / CHAPTER / f"{CHAPTER}.ipynb", 4)
    (resumed,) = [c for c in autograded.cells if c.get("id") == "c13_code_23"]
    printed = "".join(o.get("text", "") for o in resumed.outputs)
    assert "same 22 losses: True" in printed and "your code in every row: False" in printed


def test_switching_and_delegating_gains_nothing(graded):
    assert _lost(graded, "switched-delegating-engine") == ENGINE_CELLS | RUN_CELLS


def test_mine_but_not_written_scores_zero_there_saying_so(graded):
    scores = _scores(graded, "mine-but-missing-engine")
    assert {gid: scores[gid] for gid in ENGINE_CELLS} == {gid: 0 for gid in ENGINE_CELLS}
    assert "`_dependencies` is not written yet" in _feedback(graded, "mine-but-missing-engine")


def test_the_switches_come_from_the_notebooks_text_not_its_kernel(graded):
    """The kernel that switched its engine at run time has no modulecraft engine to switch to: it scores as the
    same broken engine left "mine"."""
    assert _lost(graded, "broken-engine") >= {"c13_mine_engine_visible"}
    assert _scores(graded, "broken-engine-switched-in-kernel") == _scores(graded, "broken-engine")


def test_without_the_switched_verdict_switching_and_delegating_would_earn_the_points(graded, monkeypatch):
    """The defence that matters above: the kept engine is modulecraft's in the kernel, so only the verdict keeps a
    delegating notebook from its points."""
    start = verdicts.start
    monkeypatch.setattr(verdicts, "start", lambda chapter, source=None, switched=frozenset(): start(chapter, source))
    graded.submit("switched-delegating-again", CHAPTER, SUBMITTED["switched-delegating-engine"])
    graded.grade(students=["switched-delegating-again"], chapters=[CHAPTER], force=True)
    assert not _lost(graded, "switched-delegating-again") & (ENGINE_CELLS | RUN_CELLS)


def test_without_keeping_the_switched_code_the_rest_would_not_train(graded, monkeypatch):
    """The other defence: the switched engine stays in the kernel's modulecraft. Without it, the delegating engine
    has nothing to call, and every mechanism's tests fail with it."""
    monkeypatch.setattr(verdicts, "kept_names", lambda switched: frozenset())
    graded.submit("switched-delegating-unkept", CHAPTER, SUBMITTED["switched-delegating-engine"])
    graded.grade(students=["switched-delegating-unkept"], chapters=[CHAPTER], force=True)
    assert _lost(graded, "switched-delegating-unkept") > ENGINE_CELLS | {"c13_mine_optimizer_visible"}
