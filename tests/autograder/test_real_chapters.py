"""Our grader on the course's own chapters: no false alarms from the tamper guard or the sandbox.

Every chapter solved scores full marks, blank scores zero, and a typical wrong implementation (the first
of `tests/course/wrong_implementations/<chapter>.py`) loses points; none of them is held for review.
"""
import pytest

from autograder import synthetic
from autograder.config import COURSE_SOURCE
from autograder.course import Course
from tests.course.course_chapters import wrong_implementations

pytestmark = pytest.mark.slow

CHAPTERS = sorted(p.parent.name for p in COURSE_SOURCE.glob("*/*.ipynb") if p.stem == p.parent.name)


def first_mistake(chapter):
    mistakes = wrong_implementations(chapter)
    return mistakes[0] if mistakes else None


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not CHAPTERS:
        pytest.skip("no chapters in course/source yet")
    tmp = tmp_path_factory.mktemp("real")
    course = Course(tmp / "grading")
    course.release()
    for chapter in CHAPTERS:
        notebooks = {"solved": synthetic.solved(course, chapter), "blank": synthetic.blank(course, chapter)}
        mistake = first_mistake(chapter)
        if mistake:
            notebooks["wrong"] = synthetic.with_cells(synthetic.solved(course, chapter),
                                                      {mistake["grade_id"]: mistake["source"]})
        for student, notebook in notebooks.items():
            path = tmp / f"{student}-{chapter}.ipynb"
            synthetic.write(notebook, path)
            course.submit(student, chapter, path)
    return course.grade()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solved_blank_and_wrong_are_graded_without_false_alarms(graded, chapter):
    solved, blank = graded.outcome("solved", chapter), graded.outcome("blank", chapter)
    assert solved.score == solved.max_score > 0, solved
    assert blank.score == 0, blank
    outcomes = [solved, blank]
    if first_mistake(chapter):
        wrong = graded.outcome("wrong", chapter)
        assert 0 <= wrong.score < wrong.max_score, wrong
        outcomes.append(wrong)
    for outcome in outcomes:
        assert outcome.needs_review == [] and outcome.notes == [], outcome
