"""What the instructor reads after grading: a CSV of scores and a status summary."""
from __future__ import annotations

import csv
from pathlib import Path

from .grading import file_sha256, load_outcome


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
