"""`python -m autograder export --format canvas`: the columns and rows Canvas's gradebook import reads."""
import csv

import pytest

from autograder import synthetic
from autograder.cli import main
from autograder.reports import CANVAS_IDENTITY, CANVAS_POINTS_ROW

pytestmark = pytest.mark.slow

WRONG_ADD = "def add(a, b):\n    return np.asarray(a) - np.asarray(b)"
EDITED_TEST = 'assert True, "always passes"'
SUBMISSIONS = {  # (student, chapter): (start, changed cells)
    ("ada", "90_toy"): ("solved", {}),
    ("bo", "90_toy"): ("solved", {"add": WRONG_ADD}),
    ("ed", "90_toy"): ("solved", {"test_add": EDITED_TEST}),  # tampered: held for review
    ("bo", "91_other"): ("solved", {}),
    ("di", "91_other"): ("blank", {}),
}


@pytest.fixture(scope="module")
def graded(make_toy_course, tmp_path_factory, short_limits):
    folder = tmp_path_factory.mktemp("export")
    course = make_toy_course(folder / "grading")
    for (student, chapter), (start, cells) in SUBMISSIONS.items():
        synthetic.write(synthetic.with_cells(getattr(synthetic, start)(course, chapter), cells),
                        folder / "hand-in.ipynb")
        course.submit(student, chapter, folder / "hand-in.ipynb")
    report = course.grade()
    assert [o.student for o in report.needs_review] == ["ed"]
    return course


def read(path):
    with open(path, newline="") as stream:
        return list(csv.reader(stream))


def export(course, output, *options) -> int:
    return main(["export", "--root", str(course.root), "--format", "canvas", "--output", str(output), *options])


def test_without_a_roster_rows_are_keyed_by_sis_login_id(graded, tmp_path):
    output = tmp_path / "canvas.csv"
    assert export(graded, output) == 0
    header, points, *rows = read(output)
    assert header == [*CANVAS_IDENTITY, "90_toy", "91_other"]
    assert points == [CANVAS_POINTS_ROW, "", "", "", "", "5", "1"]
    by_login = {row[3]: dict(zip(header, row)) for row in rows}
    assert set(by_login) == {"ada", "bo", "di", "ed"}
    assert {s: (r["Student"], r["ID"], r["SIS User ID"]) for s, r in by_login.items()} == \
           {s: (s, "", "") for s in by_login}
    assert {s: (r["90_toy"], r["91_other"]) for s, r in by_login.items()} == {
        "ada": ("5", ""),  # not submitted: blank, Canvas leaves the grade alone
        "bo": ("3", "1"),
        "di": ("", "0"),
        "ed": ("", ""),  # held for review: blank until a person has looked
    }


def test_a_roster_maps_students_and_chapters_to_canvas(graded, tmp_path):
    roster = tmp_path / "canvas-export.csv"
    with open(roster, "w", newline="") as stream:  # what Canvas's own gradebook export looks like
        writer = csv.writer(stream)
        writer.writerow([*CANVAS_IDENTITY, "90_toy (7301)", "Current Score"])
        writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", "5.00", "(read only)"])
        for n, student in enumerate(["ada", "bo", "di", "ed", "fay"]):
            writer.writerow([f"Last{n}, {student.title()}", 100 + n, f"U{n}", student, "Section A", "", ""])
    output = tmp_path / "canvas.csv"
    assert export(graded, output, "--roster", str(roster)) == 0
    header, points, *rows = read(output)
    assert header == [*CANVAS_IDENTITY, "90_toy (7301)", "91_other"]
    assert points[0] == CANVAS_POINTS_ROW
    assert rows == [
        ["Last0, Ada", "100", "U0", "ada", "Section A", "5", ""],
        ["Last1, Bo", "101", "U1", "bo", "Section A", "3", "1"],
        ["Last2, Di", "102", "U2", "di", "Section A", "", "0"],
        ["Last3, Ed", "103", "U3", "ed", "Section A", "", ""],
    ]  # fay, in Canvas but without submissions, is not written: her grades stay as they are


def test_a_student_missing_from_the_roster_is_an_error_that_names_them(graded, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,U1,ada,A\n")
    assert export(graded, tmp_path / "out.csv", "--roster", str(roster)) == 2
    assert "3 student(s) not in the roster's 'SIS Login ID' column: bo, di, ed" in capsys.readouterr().err
    assert export(graded, tmp_path / "out.csv", "--roster", str(roster), "--roster-key", "Login") == 2
    assert "has no column 'Login'" in capsys.readouterr().err


def test_a_held_submission_is_exported_once_a_person_has_graded_it(graded, tmp_path):
    with graded.gradebook() as gb:  # what formgrader does when a person confirms the points
        for grade in gb.find_submission_notebook("90_toy", "90_toy", "ed").grades:
            grade.manual_score = 1.0
            grade.needs_manual_grade = False
        gb.db.commit()
    output = tmp_path / "canvas.csv"
    assert export(graded, output) == 0
    header, _, *rows = read(output)
    assert {row[3]: row[5] for row in rows}["ed"] == "2"
