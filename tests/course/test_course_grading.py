"""Real nbgrader autograding of every chapter: solutions earn everything, untouched releases nothing, and each
typical wrong implementation loses points on its own exercise with feedback that names the mistake.

The submissions of every chapter this session tests are graded in ONE run: per chapter solved, untouched,
delegating to the reference, and the wrong implementations packed several to a submission (one per exercise, never
in exercises that build on each other: see `packs`); none is held for review, and the solved, untouched and
delegating ones hit no limit.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

from course_chapters import (CHAPTERS, builds_on, delegating, exercise_test_cells, graded_cells, nbgrader_meta,
                             read_notebook, solved, with_cell_replaced, wrong_implementations)

pytestmark = pytest.mark.slow

def _worth_points(chapter: str, solution_id: str) -> bool:
    graded = graded_cells(read_notebook(chapter))
    return sum(graded[g] for g in exercise_test_cells(solution_id, graded)) > 0


# (a prediction worth no points cannot lose any: its mistakes are listed, for the visible test's feedback)
WRONG = [pytest.param(chapter, wrong, id=f"{chapter}-{wrong['mistake']}")
         for chapter in CHAPTERS for wrong in wrong_implementations(chapter) if _worth_points(chapter, wrong["grade_id"])]


def packs(chapter: str) -> list[list[dict]]:
    """The chapter's wrong implementations worth points, several to a submission: at most one per exercise, and
    never two exercises one of which builds on the other (its points could go with the other's mistake)."""
    related = {(b, a) for b, calls in builds_on(chapter).items() for a in calls}
    related |= {(a, b) for b, a in related}
    result: list[list[dict]] = []
    for wrong in (w for w in wrong_implementations(chapter) if _worth_points(chapter, w["grade_id"])):
        exercise = wrong["grade_id"]
        fits = (pack for pack in result if all(w["grade_id"] != exercise and (w["grade_id"], exercise) not in related
                                               for w in pack))
        pack = next(fits, None)
        if pack is None:
            result.append(pack := [])
        pack.append(wrong)
    return result


def pack_of(chapter: str, mistake: str) -> tuple[str, list[dict]]:
    """(the student id of the submission holding `mistake`, the mistakes in it)."""
    return next((f"pack-{i}", pack) for i, pack in enumerate(packs(chapter))
                if any(w["mistake"] == mistake for w in pack))


@pytest.fixture(scope="session")
def graded(course, release, tmp_path_factory, request):
    """graded(chapter) returns the course once the chapter's submissions are graded. The first call grades those of
    every chapter this session's tests need in ONE run (one pool of workers kept busy across chapters, one
    feedback pass); a chapter asked for later, not among them, gets a run of its own."""
    reports, students = {}, set()

    def submit(chapter: str) -> None:
        folder = tmp_path_factory.mktemp(f"submissions-{chapter}")
        answers = solved(nbformat.read(release(chapter), as_version=4), read_notebook(chapter))
        submissions = {"solved": _write(folder / "solved.ipynb", answers), "untouched": release(chapter),
                       "delegates": _write(folder / "delegates.ipynb", delegating(answers, chapter))}
        for i, pack in enumerate(packs(chapter)):
            submission = answers
            for wrong in pack:
                submission = with_cell_replaced(submission, wrong["grade_id"], wrong["source"])
            submissions[f"pack-{i}"] = _write(folder / f"pack-{i}.ipynb", submission)
        for student, path in submissions.items():
            course.submit(student, chapter, path)
        students.update(submissions)

    def grade(chapters: list[str]) -> None:
        for chapter in chapters:
            submit(chapter)
        # only these submissions: other tests' (the capstone's switches) are graded by their own fixtures
        report = course.grade(sorted(students), chapters, force=True)
        course.generate_feedback(sorted(students), chapters)
        reports.update(dict.fromkeys(chapters, report))

    def grade_chapter(chapter: str):
        if chapter not in reports:
            needed = {item.callspec.params["chapter"] for item in request.session.items
                      if item.path == Path(__file__) and hasattr(item, "callspec")}
            grade(sorted(needed - set(reports)) if chapter in needed else [chapter])
        outcomes = [o for o in reports[chapter].outcomes if o.chapter == chapter]
        review = {o.student: o.needs_review for o in outcomes if o.needs_review}
        assert review == {}, f"submissions held for review instead of graded: {review}"
        notes = {o.student: o.notes for o in outcomes if o.student in ("solved", "untouched", "delegates") and o.notes}
        assert notes == {}, f"limits hit by submissions that should hit none: {notes}"
        return course

    return grade_chapter


def _write(path, nb):
    nbformat.write(nb, path)
    return path


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
