"""The classroom pipeline end to end, through the command line: release, collect, grade, feedback, export."""
import csv
import datetime
import html
import json
import re
import zipfile

import pytest

from autograder import config, synthetic
from autograder.cli import main

pytestmark = pytest.mark.slow

# Each generated student: the cells they changed from the released notebook, and their exact expected scores.
WRONG_ADD = "def add(a, b):\n    return np.asarray(a) - np.asarray(b)"
SCALE_IN_PLACE = "def scale(x, factor):\n    x = np.asarray(x)\n    x *= factor\n    return x"  # hidden test fails
STUDENTS = {
    "ada": ("solved", {}, {"test_add": 2, "test_scale": 3}),
    "bo": ("solved", {"add": WRONG_ADD}, {"test_add": 0, "test_scale": 3}),
    "cy": ("solved", {"scale": SCALE_IN_PLACE}, {"test_add": 2, "test_scale": 0}),
    "di": ("blank", {}, {"test_add": 0, "test_scale": 0}),
}
# The probes' source and the grader's expected observations never reach feedback (nor do tracebacks).
HIDDEN_SOURCE = ["BEGIN HIDDEN TESTS", "draw.array", "yours.scale(x, factor) is not x", "Expected:"]


def visible_text(page: str) -> str:
    """What a reader of the feedback page sees (syntax highlighting splits source lines into many tags)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_release_collect_grade_feedback_export(toy_course, tmp_path, capsys):
    root = ["--root", str(toy_course.root)]
    assert main(["release", *root, "90_toy"]) == 0

    archive = tmp_path / "hand-in.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student, (start, cells, _) in STUDENTS.items():
            notebook = synthetic.with_cells(getattr(synthetic, start)(toy_course, "90_toy"), cells)
            name = f"{student}/90_toy.ipynb" if student != "di" else "di_90_toy.ipynb"
            zf.writestr(name, json.dumps(notebook))
        zf.writestr("notes.txt", "not a notebook")
        zf.writestr("homework.ipynb", "{}")
    capsys.readouterr()
    assert main(["collect", *root, str(archive)]) == 1  # 1: some files were not matched
    report = capsys.readouterr().out
    assert "collected 4 submission(s)" in report
    assert "notes.txt: not a notebook" in report
    assert "homework.ipynb: no chapter name in the file name" in report

    assert main(["grade", *root]) == 0
    for student, (_, _, expected) in STUDENTS.items():
        assert toy_course.scores(student, "90_toy") == {k: (float(v), float(m)) for (k, v), m
                                                        in zip(expected.items(), (2.0, 3.0))}

    assert main(["feedback", *root]) == 0
    feedback = {student: visible_text(toy_course.feedback_path(student, "90_toy").read_text()) for student in STUDENTS}
    for student, page in feedback.items():
        for hidden in HIDDEN_SOURCE:
            assert hidden not in page, f"{student}'s feedback shows hidden test source {hidden!r}"
        assert "Traceback (most recent call last)" not in page  # tracebacks would quote hidden lines
    # What remains is the verdict: the check that failed and what the learner's code gave.
    assert "scale must return a new array, not modify its input" in feedback["cy"]
    assert "add of two arrays" in feedback["bo"] and "Got:" in feedback["bo"]

    output = tmp_path / "grades.csv"
    assert main(["export", *root, "--output", str(output)]) == 0
    rows = {(r["student"], r["chapter"]): r for r in csv.DictReader(output.open())}
    assert {(s, c) for s, c in rows} == {(s, c) for s in STUDENTS for c in ("90_toy", "91_other")}
    for student, (_, _, expected) in STUDENTS.items():
        row = rows[(student, "90_toy")]
        assert (float(row["score"]), float(row["max_score"]), row["status"]) == (sum(expected.values()), 5.0, "graded")
        assert rows[(student, "91_other")]["status"] == "not submitted"

    capsys.readouterr()
    assert main(["status", *root]) == 0
    assert "90_toy: 4 graded" in capsys.readouterr().out


def test_a_regrade_skips_what_is_graded_and_unchanged(toy_course):
    for student in ("ada", "bo"):
        path = toy_course.root.parent / f"{student}.ipynb"
        synthetic.write(synthetic.solved(toy_course, "90_toy"), path)
        toy_course.submit(student, "90_toy", path)
    first = toy_course.grade()
    assert [o.score for o in first.outcomes] == [5.0, 5.0] and first.skipped == 0
    changed = synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": WRONG_ADD})
    synthetic.write(changed, toy_course.submission_path("bo", "90_toy"))
    second = toy_course.grade()
    assert second.skipped == 1
    assert second.outcome("bo", "90_toy").score == 3.0
    assert toy_course.scores("ada", "90_toy")["test_add"] == (2.0, 2.0)


def test_a_late_submission_gets_nbgrader_s_late_penalty(toy_course, monkeypatch):
    """The coordinator replays nbgrader's AssignLatePenalties after the grades it recorded (in one transaction
    per submission): the course's late-submission rule applies, as with stock autograde."""
    course_config = config.nbgrader_config

    def zero_if_late(root, course_id=config.COURSE_ID):
        c = course_config(root, course_id)
        c.LateSubmissionPlugin.penalty_method = "zero"
        return c

    monkeypatch.setattr(config, "nbgrader_config", zero_if_late)
    with toy_course.gradebook() as gb:
        gb.update_or_create_assignment("90_toy", duedate=datetime.datetime(2026, 1, 1))
    for student, handed_in in (("ada", "2025-12-31 23:00:00"), ("bo", "2026-01-02 00:00:00")):
        path = toy_course.root.parent / f"{student}.ipynb"
        synthetic.write(synthetic.solved(toy_course, "90_toy"), path)
        toy_course.submit(student, "90_toy", path)
        toy_course.submission_path(student, "90_toy").with_name("timestamp.txt").write_text(handed_in)
    toy_course.grade()
    with toy_course.gradebook() as gb:
        penalties = {student: (gb.find_submission("90_toy", student).total_seconds_late,
                               gb.find_submission_notebook("90_toy", "90_toy", student).late_submission_penalty)
                     for student in ("ada", "bo")}
    assert penalties == {"ada": (0, None), "bo": (86400, 5.0)}
