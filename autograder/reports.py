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
    """Per chapter: how many submissions are graded; then every submission that needs a person, and why."""
    lines, attention = [], []
    students = course.students()
    for chapter in course.chapters():
        counts: dict[str, int] = {}
        for student in students:
            state, reasons = submission_state(course, student, chapter)
            counts[state] = counts.get(state, 0) + 1
            if state in ("needs review", "not graded", "changed since graded"):
                attention.append(f"  {student}/{chapter}: {state}" + (": " + "; ".join(reasons) if reasons else ""))
        summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        lines.append(f"{chapter}: {summary or 'no students'}")
    if attention:
        lines += ["", "needs a look:", *attention]
    else:
        lines += ["", "nothing needs a look."]
    return "\n".join(lines)
