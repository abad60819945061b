"""A grading run killed halfway leaves the gradebook consistent, and running it again completes the class."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from autograder import synthetic

pytestmark = pytest.mark.slow

STUDENTS = [f"s{n}" for n in range(6)]
WRONG_SCALE = "def scale(x, factor):\n    return x"


def test_a_killed_run_is_completed_by_the_next_without_duplicates_or_losses(toy_course, tmp_path):
    expected = {}
    for n, student in enumerate(STUDENTS):
        notebook = synthetic.solved(toy_course, "90_toy")
        if n % 2:
            notebook = synthetic.with_cells(notebook, {"scale": WRONG_SCALE})
        synthetic.write(notebook, tmp_path / f"{student}.ipynb")
        toy_course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
        expected[student] = 2.0 if n % 2 else 5.0

    command = [sys.executable, "-m", "autograder", "grade", "--root", str(toy_course.root), "--workers", "1"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    reports = toy_course.root / "reports"
    deadline = time.monotonic() + 240
    while len(list(reports.glob("*/90_toy.json"))) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)  # the grader, its worker and the kernel it is running, mid-notebook
    run.wait()
    graded_before = len(list(reports.glob("*/90_toy.json")))
    assert 2 <= graded_before < len(STUDENTS)

    report = toy_course.grade()
    assert report.skipped == graded_before
    assert {o.student: o.score for o in report.outcomes} == expected
    with sqlite3.connect(toy_course.root / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        per_student = db.execute("SELECT student_id, COUNT(*) FROM submitted_assignment GROUP BY student_id")
        assert dict(per_student.fetchall()) == {student: 1 for student in STUDENTS}
        grades = db.execute("SELECT COUNT(*) FROM grade").fetchone()[0]
    assert grades == 2 * len(STUDENTS)  # two graded test cells each, no duplicates
    for student, score in expected.items():
        assert sum(s for s, _ in toy_course.scores(student, "90_toy").values()) == score
