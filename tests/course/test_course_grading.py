"""Real nbgrader autograding of every chapter: solutions earn everything, untouched releases nothing, and each
typical wrong implementation loses points on its own exercise with feedback that names the mistake.

The submissions of every chapter this session tests are graded in ONE run, started when the tests are collected
(see shared_grading.py): per chapter solved, untouched, delegating to the reference, and the wrong implementations
packed several to a submission (one per exercise, never in exercises that build on each other: see `packs`); none is
held for review, and the solved, untouched and delegating ones hit no limit.
"""
from __future__ import annotations

import html
import re

import nbformat
import pytest

from course_chapters import CHAPTERS, builds_on, exercise_test_cells, graded_cells, nbgrader_meta, read_notebook, \
    wrong_implementations
from shared_grading import grade, packs, worth_points

pytestmark = pytest.mark.slow

# (a prediction worth no points cannot lose any: its mistakes are listed, for the visible test's feedback)
WRONG = [pytest.param(chapter, wrong, id=f"{chapter}-{wrong['mistake']}")
         for chapter in CHAPTERS for wrong in wrong_implementations(chapter) if worth_points(chapter, wrong["grade_id"])]


def pack_of(chapter: str, mistake: str) -> tuple[str, list[dict]]:
    """(the student id of the submission holding `mistake`, the mistakes in it)."""
    return next((f"pack-{i}", pack) for i, pack in enumerate(packs(chapter))
                if any(w["mistake"] == mistake for w in pack))


@pytest.fixture(scope="session")
def graded(course, release, shared_run, tmp_path_factory):
    """graded(chapter) returns the course once the chapter's submissions are graded: those of every chapter this
    session's tests need are graded by the shared run (conftest.py); a chapter asked for later, not among them,
    gets a run of its own."""
    reports = dict.fromkeys(shared_run.chapters, shared_run.wait()[1]) if shared_run else {}

    def grade_chapter(chapter: str):
        if chapter not in reports:
            reports[chapter] = grade(course, release, [chapter], tmp_path_factory.mktemp("submissions"))
        outcomes = [o for o in reports[chapter].outcomes if o.chapter == chapter]
        review = {o.student: o.needs_review for o in outcomes if o.needs_review}
        assert review == {}, f"submissions held for review instead of graded: {review}"
        notes = {o.student: o.notes for o in outcomes if o.student in ("solved", "untouched", "delegates") and o.notes}
        assert notes == {}, f"limits hit by submissions that should hit none: {notes}"
        return course

    return grade_chapter


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solved_notebook_gets_full_marks(chapter, graded):
    scores = graded(chapter).scores("solved", chapter)
    assert {gid: score for gid, (score, _) in scores.items()} == graded_cells(read_notebook(chapter))
    # the text's cells that ran before the learner's definitions met the removed answer key: explained, not blamed
    page = _text(graded(chapter).feedback_html("solved", chapter))
    assert "not written yet" not in page and "does not exist while grading" not in page


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_untouched_release_scores_zero_on_every_graded_cell(chapter, graded):
    scores = graded(chapter).scores("untouched", chapter)
    assert set(scores) == set(graded_cells(read_notebook(chapter)))
    assert {gid: score for gid, (score, _) in scores.items() if score != 0} == {}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_untouched_release_feedback_says_what_is_not_written_yet(chapter, graded):
    page = _text(graded(chapter).feedback_html("untouched", chapter))
    assert "not written yet" in page
    assert "Got:      NotImplementedError: \n" not in page and "AssertionError\n" not in page


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solutions_that_delegate_to_the_reference_score_zero(chapter, graded):
    """Every name the learner writes defined as a call of (or a subclass of) the reference's own: while grading, the
    reference has none of them, so the notebook scores what a blank one does, with feedback that says why."""
    course = graded(chapter)
    scores = course.scores("delegates", chapter)
    assert {gid: score for gid, (score, _) in scores.items() if score != 0} == {}
    feedback = _text(course.feedback_html("delegates", chapter))
    assert "does not exist while grading" in feedback or "maximum recursion depth" in feedback


@pytest.mark.parametrize(("chapter", "wrong"), WRONG)
def test_wrong_implementation_loses_points_and_feedback_names_it(chapter, wrong, graded):
    course = graded(chapter)
    student, pack = pack_of(chapter, wrong["mistake"])
    full = graded_cells(read_notebook(chapter))
    scores = {gid: score for gid, (score, _) in course.scores(student, chapter).items()}
    own = set(exercise_test_cells(wrong["grade_id"], full))
    assert sum(scores[g] for g in own) < sum(full[g] for g in own), f"{wrong['mistake']} kept full marks"
    # Graded mechanisms run on the learner's code everywhere in the grading kernel: an exercise that calls another
    # may lose points with it, where the chapter's probes say it builds on it. (The other mistakes of the
    # submission are in exercises that neither build on this one nor it on them.)
    def reach(mistake):
        return set(exercise_test_cells(mistake["grade_id"], full)) | {
            g for b, calls in builds_on(chapter).items() if mistake["grade_id"] in calls
            for g in exercise_test_cells(b, full)}
    expected_losses = set().union(*(reach(w) for w in pack))
    others = {g: scores[g] for g in full if g not in expected_losses and scores[g] != full[g]}
    assert others == {}, "a mistake in one exercise must not cost points in another it does not build on"
    # The phrase must come from a failing test of this exercise (hints also sit in the visible tests' source) ...
    autograded = nbformat.read(course.root / "autograded" / student / chapter / f"{chapter}.ipynb", 4)
    errors = [f"{out.ename}: {out.evalue}" for cell in autograded.cells if nbgrader_meta(cell).get("grade_id") in own
              for out in cell.get("outputs", []) if out.output_type == "error"]
    assert any(wrong["feedback"] in error for error in errors), errors
    # ... and reach the learner in the feedback page.
    assert wrong["feedback"] in _text(course.feedback_html(student, chapter))
    # An exercise that builds on this one and loses points with it names this mistake, not its own code.
    for cell in autograded.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if "dependents_feedback" in wrong and grade_id in reach(wrong) - own and scores[grade_id] < full[grade_id]:
            failed = [f"{out.ename}: {out.evalue}" for out in cell.get("outputs", []) if out.output_type == "error"]
            assert any(wrong["dependents_feedback"] in error for error in failed), (grade_id, failed)


def _text(page: str) -> str:
    """The visible text of a feedback page: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))
