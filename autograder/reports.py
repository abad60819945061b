"""What the instructor reads after grading: a CSV of scores (plain, or for Canvas's gradebook import) and a
status summary."""
from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import MissingEntry

from .grading import file_sha256, load_outcome

# Canvas's gradebook import: these identity columns, one column per assignment, and an optional first row with
# each assignment's points (written exactly as Canvas's own gradebook export writes it).
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "    Points Possible"


def submission_state(course, student: str, chapter: str) -> tuple[str, list[str]]:
    """("not submitted" | "not graded" | "changed since graded" | "graded" | "needs review", reasons)."""
    submitted = course.submission_path(student, chapter)
    if not submitted.exists():
        return "not submitted", []
    outcome = load_outcome(course.root, student, chapter)
    if outcome is None:
        return "not graded", []
    if outcome.submission_sha256 != file_sha256(submitted):
        return "changed since graded", []
    return outcome.status, outcome.needs_review


def export_csv(course, output: Path) -> int:
    """One row per student per chapter: score (from the gradebook, so manual grades count), state, reasons."""
    rows = 0
    with open(output, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["student", "chapter", "score", "max_score", "status", "reasons"])
        for student in course.students():
            for chapter in course.chapters():
                state, reasons = submission_state(course, student, chapter)
                try:
                    scores = course.scores(student, chapter)
                except LookupError:
                    scores = {}
                score = sum(s for s, _ in scores.values()) if state != "not submitted" else 0
                max_score = sum(m for _, m in scores.values()) or _max_score(course, chapter)
                writer.writerow([student, chapter, f"{score:g}", f"{max_score:g}", state, "; ".join(reasons)])
                rows += 1
    return rows


def export_canvas(course, output: Path, roster: Path | None = None, roster_key: str = "SIS Login ID") -> int:
    """A CSV Canvas's gradebook import accepts: one row per student, one column per chapter, points first.

    Canvas finds each row's student by `ID` (its user id), `SIS User ID` or `SIS Login ID`. With `roster` (a
    CSV with the identity columns, e.g. Canvas's own gradebook export), each student id of ours is looked up
    in its `roster_key` column and the row takes the roster's identity; a roster column named
    `<chapter> (<canvas id>)` names the Canvas assignment that chapter's scores go to (otherwise Canvas
    creates an assignment named after the chapter). Without a roster our student id is the `SIS Login ID`.

    A cell is left blank, which Canvas reads as "leave this grade alone", when a submission is missing, not
    graded yet, changed since it was graded, or still needs a person (points held for review).
    Returns the number of students written."""
    identities = _roster(roster, roster_key) if roster is not None else {}
    students = course.students()
    unknown = [s for s in students if identities and s not in identities]
    if unknown:
        raise LookupError(f"{len(unknown)} student(s) not in the roster's {roster_key!r} column: "
                          f"{', '.join(unknown[:10])}; fix the roster or choose the column with --roster-key")
    chapters = course.chapters()
    headers = _canvas_assignment_headers(roster, chapters)
    points = [f"{_max_score(course, chapter):g}" for chapter in chapters]
    with open(output, "w", newline="") as stream, course.gradebook() as gb:
        writer = csv.writer(stream)
        writer.writerow([*CANVAS_IDENTITY, *headers])
        writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", *points])
        for student in students:
            identity = identities.get(student) or {"Student": student, "SIS Login ID": student}
            writer.writerow([*(identity.get(column, "") for column in CANVAS_IDENTITY),
                             *(_canvas_score(course, gb, student, chapter) for chapter in chapters)])
    return len(students)


def _roster(roster: Path, key: str) -> dict[str, dict[str, str]]:
    with open(roster, newline="") as stream:
        rows = list(csv.DictReader(stream))
    if rows and key not in rows[0]:
        raise ValueError(f"the roster {roster} has no column {key!r}; its columns: {', '.join(rows[0])}")
    return {row[key].strip(): row for row in rows
            if row.get(key, "").strip() and row.get("Student", "").strip() != CANVAS_POINTS_ROW.strip()}


def _canvas_assignment_headers(roster: Path | None, chapters: list[str]) -> list[str]:
    """`<chapter> (<canvas id>)` when the roster (a Canvas export) has that column, else the chapter's name."""
    existing = []
    if roster is not None:
        with open(roster, newline="") as stream:
            existing = next(csv.reader(stream), [])
    return [next((h for h in existing if h.startswith(f"{chapter} (") and h.endswith(")")), chapter)
            for chapter in chapters]


def _canvas_score(course, gb, student: str, chapter: str) -> str:
    state, _ = submission_state(course, student, chapter)
    if state not in ("graded", "needs review"):
        return ""
    try:
        notebook = gb.find_submission_notebook(chapter, chapter, student)
    except MissingEntry:
        return ""
    if notebook.needs_manual_grade:  # held for review and not yet looked at
        return ""
    return f"{notebook.score:g}"


def _max_score(course, chapter: str) -> float:
    with course.gradebook() as gb:
        try:
            return float(gb.find_assignment(chapter).max_score)
        except Exception:  # nbgrader raises MissingEntry, or sqlalchemy errors on a fresh gradebook
            return 0.0


def status(course) -> str:
    """Per chapter: how many submissions are in each state; then what still needs grading, and every
    submission that needs a person, with the reasons."""
    lines, to_grade, to_review, notes = [], [], [], []
    students = course.students()
    for chapter in course.chapters():
        counts: dict[str, int] = {}
        for student in students:
            state, reasons = submission_state(course, student, chapter)
            counts[state] = counts.get(state, 0) + 1
            if state in ("not graded", "changed since graded"):
                to_grade.append(f"  {student}/{chapter}: {state}")
            elif state == "needs review":
                to_review.append(f"  {student}/{chapter}: " + "; ".join(reasons))
            outcome = load_outcome(course.root, student, chapter)
            if state != "not submitted" and outcome and outcome.notes:
                notes.append(f"  {student}/{chapter}: " + "; ".join(outcome.notes))
        lines.append(f"{chapter}: " + (", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
                                       or "no students"))
    for title, entries in (("to grade (python -m autograder grade)", to_grade),
                           ("needs review (points held until a person looks; nbgrader formgrader or the gradebook)",
                            to_review),
                           ("graded, with problems the learner should hear about", notes)):
        if entries:
            lines += ["", title + ":", *entries]
    if not to_grade and not to_review:
        lines += ["", "everything submitted is graded; nothing needs review."]
    return "\n".join(lines)
