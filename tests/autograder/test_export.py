"""`python -m autograder export --format canvas`: the columns and rows Canvas's gradebook import reads."""
import csv

import pytest

from autograder import synthetic
from autograder.cli import main
from autograder.config import REPO_ROOT
from autograder.reports import CANVAS_IDENTITY, CANVAS_POINTS_ROW, status

pytestmark = pytest.mark.slow

WRONG_ADD = "def add(a, b):\n    return np.asarray(a) - np.asarray(b)"


def without_a_test(notebook, student: str):
    """ed's notebook without its cell `test_add`: a changed structure, which a person must look at."""
    if student == "ed":
        notebook.cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_add"]
    return notebook
CRASH = "import os\nos._exit(1)"
SUBMISSIONS = {  # (student, chapter): (start, changed cells)
    ("ada", "90_toy"): ("solved", {}),
    ("bo", "90_toy"): ("solved", {"add": WRONG_ADD}),
    ("cy", "90_toy"): ("solved", {"add": CRASH}),  # the kernel dies: held for review
    ("ed", "90_toy"): ("solved", {}),  # its test cell deleted (`without_a_test`): held for review
    ("bo", "91_other"): ("solved", {}),
    ("di", "91_other"): ("blank", {}),
}


@pytest.fixture(scope="module")
def graded(make_toy_course, tmp_path_factory, short_limits):
    folder = tmp_path_factory.mktemp("export")
    course = make_toy_course(folder / "grading")
    for (student, chapter), (start, cells) in SUBMISSIONS.items():
        synthetic.write(without_a_test(synthetic.with_cells(getattr(synthetic, start)(course, chapter), cells),
                                       student), folder / "hand-in.ipynb")
        course.submit(student, chapter, folder / "hand-in.ipynb")
    report = course.grade()
    assert [o.student for o in report.needs_review] == ["cy", "ed"]
    return course


def read(path):
    with open(path, newline="") as stream:
        return list(csv.reader(stream))


def export(course, output, *options) -> int:
    return main(["export", "--root", str(course.root), "--format", "canvas", "--output", str(output), *options])


def write_roster(path, encoding="utf-8", delimiter=",", di_current="1", bo_current="4"):
    """What Canvas's own gradebook export looks like: 90_toy exists in Canvas, with some scores already."""
    with open(path, "w", newline="", encoding=encoding) as stream:
        writer = csv.writer(stream, delimiter=delimiter)
        writer.writerow([*CANVAS_IDENTITY, "90_toy (7301)", "Current Score"])
        writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", "5.00", "(read only)"])
        current = {"ada": "", "bo": bo_current, "cy": "2", "di": di_current, "ed": "4", "fay": "5"}
        for n, student in enumerate(["ada", "bo", "cy", "di", "ed", "fay"]):
            writer.writerow([f"Last{n}, {student.title()}", 100 + n, f"U{n}", student, "Section A",
                             current[student], ""])


def test_without_a_roster_one_chapter_rows_only_for_students_with_a_score(graded, tmp_path):
    output = tmp_path / "canvas.csv"
    assert export(graded, output, "--chapter", "90_toy") == 0
    header, points, *rows = read(output)
    assert header == [*CANVAS_IDENTITY, "90_toy"]
    assert points == [CANVAS_POINTS_ROW, "", "", "", "", "5"]
    # keyed by SIS Login ID; di (not submitted), cy and ed (held for review) have no row: no blank in Canvas
    assert rows == [["ada", "", "", "ada", "", "5"], ["bo", "", "", "bo", "", "3"]]


def test_without_a_roster_no_blank_is_written_over_what_canvas_may_hold(graded, tmp_path, capsys):
    output = tmp_path / "canvas.csv"
    assert export(graded, output) == 2  # ada has no 91_other, di no 90_toy: blanks
    error = capsys.readouterr().err
    assert "2 cell(s) would be blank (ada/91_other, di/90_toy)" in error and "--roster" in error
    assert not output.exists()


def test_a_roster_maps_students_and_chapters_and_keeps_canvas_s_scores_where_we_have_none(graded, tmp_path):
    roster = tmp_path / "canvas-export.csv"
    write_roster(roster)
    output = tmp_path / "canvas.csv"
    assert export(graded, output, "--roster", str(roster)) == 0
    header, points, *rows = read(output)
    assert header == [*CANVAS_IDENTITY, "90_toy (7301)", "91_other"]
    assert points[0] == CANVAS_POINTS_ROW
    assert rows == [
        ["Last0, Ada", "100", "U0", "ada", "Section A", "5", ""],  # 91_other: new in Canvas, nothing to clear
        ["Last1, Bo", "101", "U1", "bo", "Section A", "3", "1"],
        ["Last3, Di", "103", "U3", "di", "Section A", "1", "0"],  # 90_toy: Canvas's current 1, unchanged
    ]  # cy and ed (held) and fay (no submissions) have no row: their grades stay as they are


@pytest.mark.parametrize("encoding, delimiter", [("utf-8-sig", ","), ("utf-8-sig", ";"), ("cp1252", ";"),
                                                 ("utf-8", "\t"), ("utf-16", "\t")])  # utf-16: Excel's Unicode Text
def test_a_roster_saved_by_canvas_or_excel_is_read_alike(graded, tmp_path, encoding, delimiter):
    roster = tmp_path / "roster.csv"
    write_roster(roster, encoding, delimiter, di_current="1,5" if delimiter == ";" else "1.5")
    output = tmp_path / "canvas.csv"
    assert export(graded, output, "--roster", str(roster)) == 0
    _, _, *rows = read(output)
    assert [row[:4] for row in rows] == [["Last0, Ada", "100", "U0", "ada"], ["Last1, Bo", "101", "U1", "bo"],
                                         ["Last3, Di", "103", "U3", "di"]]
    assert rows[2][5:] == ["1.5", "0"]


def test_a_roster_older_than_an_imported_export_is_refused_before_it_removes_a_score(graded, tmp_path, capsys):
    remembered = graded.root / "exports" / "canvas.json"
    kept, submission = remembered.read_bytes() if remembered.exists() else None, graded.submission_path("bo", "90_toy")
    handed_in = submission.read_bytes()
    remembered.unlink(missing_ok=True)
    try:
        old = tmp_path / "old-roster.csv"
        write_roster(old, bo_current="")  # Canvas has no 90_toy score for bo yet
        assert export(graded, tmp_path / "first.csv", "--roster", str(old)) == 0  # bo: 3, imported into Canvas
        synthetic.write(synthetic.solved(graded, "90_toy"), tmp_path / "again.ipynb")
        graded.submit("bo", "90_toy", tmp_path / "again.ipynb")  # handed in again: no 90_toy score for now
        capsys.readouterr()
        # bo's row is written for 91_other; its 90_toy cell, the old roster's blank, would remove the 3
        assert export(graded, tmp_path / "second.csv", "--roster", str(old)) == 2
        error = capsys.readouterr().err
        assert "no score where an earlier export wrote one: bo/90_toy (3 on " in error
        assert "export Canvas's gradebook again" in error and not (tmp_path / "second.csv").exists()

        new = tmp_path / "new-roster.csv"
        write_roster(new, bo_current="3")  # exported again after the import
        assert export(graded, tmp_path / "second.csv", "--roster", str(new)) == 0
        assert {row[3]: row[5] for row in read(tmp_path / "second.csv")[2:]}["bo"] == "3"  # unchanged in Canvas
        assert export(graded, tmp_path / "third.csv", "--roster", str(old), "--roster-is-current") == 0
    finally:
        submission.write_bytes(handed_in)
        remembered.unlink(missing_ok=True)
        if kept is not None:
            remembered.write_bytes(kept)


def test_an_unreleased_chapter_is_refused_rather_than_given_no_points(graded, tmp_path, capsys):
    release = graded.root / "release" / "91_other"
    release.rename(release.with_name("91_other.withdrawn"))
    try:
        assert export(graded, tmp_path / "canvas.csv", "--chapter", "91_other") == 2
    finally:
        release.with_name("91_other.withdrawn").rename(release)
    assert "not released yet: 91_other" in capsys.readouterr().err and not (tmp_path / "canvas.csv").exists()


def test_only_released_chapters_by_default(graded, tmp_path):
    release = graded.root / "release" / "91_other"
    release.rename(release.with_name("91_other.withdrawn"))
    try:
        output = tmp_path / "canvas.csv"
        assert export(graded, output) == 0
        header, _, *rows = read(output)
    finally:
        release.with_name("91_other.withdrawn").rename(release)
    assert header == [*CANVAS_IDENTITY, "90_toy"] and [row[3] for row in rows] == ["ada", "bo"]


def test_a_student_missing_from_the_roster_is_an_error_that_names_them(graded, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nAda,1,U1,ada,A\n")
    assert export(graded, tmp_path / "out.csv", "--roster", str(roster)) == 2
    assert "4 student(s) not in the roster's 'SIS Login ID' column: bo, cy, di, ed" in capsys.readouterr().err
    assert export(graded, tmp_path / "out.csv", "--roster", str(roster), "--roster-key", "Login") == 2
    assert "has no column 'Login'" in capsys.readouterr().err


def test_a_held_submission_is_exported_once_a_person_has_graded_it(graded, tmp_path):
    with graded.gradebook() as gb:  # what formgrader does when a person confirms the points
        for grade in gb.find_submission_notebook("90_toy", "90_toy", "ed").grades:
            grade.manual_score = 1.0
            grade.needs_manual_grade = False
        gb.db.commit()
    output = tmp_path / "canvas.csv"
    assert export(graded, output, "--chapter", "90_toy") == 0
    header, _, *rows = read(output)
    assert {row[3]: row[5] for row in rows}["ed"] == "2"


def test_the_plain_csv_gives_the_score_of_what_is_handed_in_and_what_went_wrong(graded, tmp_path):
    synthetic.write(synthetic.solved(graded, "90_toy"), tmp_path / "again.ipynb")
    graded.submit("bo", "90_toy", tmp_path / "again.ipynb")  # handed in again after grading
    output = tmp_path / "grades.csv"
    assert main(["export", "--root", str(graded.root), "--output", str(output)]) == 0
    header, *rows = read(output)
    assert header == ["student", "chapter", "score", "max_score", "status", "reasons", "notes"]
    by_job = {(row[0], row[1]): dict(zip(header, row)) for row in rows}
    assert len(rows) == 10
    bo = by_job[("bo", "90_toy")]
    assert (bo["score"], bo["status"]) == ("", "changed since graded")  # not the stale 3
    assert "the earlier submission scored 3" in bo["reasons"]
    cy = by_job[("cy", "90_toy")]
    assert (cy["score"], cy["status"]) == ("0", "needs review") and "kernel" in cy["reasons"]
    assert (by_job[("ada", "90_toy")]["score"], by_job[("ada", "91_other")]["status"]) == ("5", "not submitted")


def test_status_lists_a_crashed_notebook_for_review_as_the_readme_says(graded):
    readme = (REPO_ROOT / "README.md").read_text()
    assert "hangs or crashes" in readme and "held for review" in readme
    text = status(graded)
    review = text[text.index("needs review (points held"):].split("\n\n")[0].splitlines()
    [cy] = [line for line in review if line.startswith("  cy/90_toy: ")]
    assert "kernel" in cy
    assert "nothing needs review" not in text
