"""What the instructor reads after grading: a CSV of scores (plain, or for Canvas's gradebook import) and a
status summary."""
from __future__ import annotations

import csv
import datetime
import io
import json
import re
from pathlib import Path

from nbgrader.api import MissingEntry

from .collect import refusals
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


def export_csv(course, output: Path, chapters: list[str] | None = None) -> int:
    """One row per student per chapter (default: every chapter): the score of the submission handed in now
    (from the gradebook, so manual grades count; blank until it is graded), its state, why it needs review, and
    what the learner should hear about it (limits hit)."""
    rows = 0
    chapters = course._chapters(chapters)
    with open(output, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["student", "chapter", "score", "max_score", "status", "reasons", "notes"])
        for student in course.students():
            for chapter in chapters:
                state, reasons = submission_state(course, student, chapter)
                outcome = load_outcome(course.root, student, chapter)
                try:
                    scores = course.scores(student, chapter)
                except LookupError:
                    scores = {}
                score = sum(s for s, _ in scores.values())
                if state == "changed since graded":
                    reasons = [f"handed in again after grading (the earlier submission scored {score:g}): "
                               "run grade"]
                shown = f"{score:g}" if state in ("graded", "needs review") else ""
                max_score = sum(m for _, m in scores.values()) or _max_score(course, chapter)
                notes = outcome.notes if outcome is not None and state in ("graded", "needs review") else []
                writer.writerow([student, chapter, shown, f"{max_score:g}", state, "; ".join(reasons),
                                 "; ".join(notes)])
                rows += 1
    return rows


def released_chapters(course) -> list[str]:
    return [chapter for chapter in course.chapters() if course.release_path(chapter).exists()]


def export_canvas(course, output: Path, roster: Path | None = None, roster_key: str = "SIS Login ID",
                  chapters: list[str] | None = None, *, roster_is_current: bool = False) -> int:
    """A CSV Canvas's gradebook import accepts: one row per student, one column per chapter (default: the
    released ones), points first.

    Canvas finds each row's student by `ID` (its user id), `SIS User ID` or `SIS Login ID`. With `roster` (a
    CSV with the identity columns, e.g. Canvas's own gradebook export, as Canvas or Excel saved it), each student
    id of ours is looked up in its `roster_key` column and the row takes the roster's identity; a roster column
    named `<chapter> (<canvas id>)` names the Canvas assignment that chapter's scores go to (otherwise Canvas
    creates an assignment named after the chapter). Without a roster our student id is the `SIS Login ID`.

    A score is written once a submission is graded and nobody needs to look at it. Canvas's importer may read a
    blank cell as "remove this score", so no blank goes over a score Canvas may hold: a student with nothing to
    write has no row; in a row, a cell without a score gets the roster's current value (no change) or, for an
    assignment the roster lacks, stays blank. Without a roster, a row that would need a blank is an error that
    says what to do.

    A roster older than a file already imported into Canvas would put its blanks over the scores imported since.
    Every export remembers the scores it wrote (`exports/canvas.json` in the grading folder); a roster with no
    score where an earlier export wrote one, in a cell we have no score for now, is refused as stale unless
    `roster_is_current` (a score removed in Canvas on purpose). Returns the number of students written."""
    header, rows = _roster(roster, roster_key) if roster is not None else ([], {})
    students = course.students()
    unknown = [s for s in students if rows and s not in rows]
    if unknown:
        raise LookupError(f"{len(unknown)} student(s) not in the roster's {roster_key!r} column: "
                          f"{', '.join(unknown[:10])}; fix the roster or choose the column with --roster-key")
    released = released_chapters(course)
    if chapters:
        chapters = course._chapters(chapters)
        unreleased = [chapter for chapter in chapters if chapter not in released]
        if unreleased:
            raise LookupError(f"not released yet: {', '.join(unreleased)}; Canvas would get 0 points possible for "
                              "it: release it first (python -m autograder release CHAPTER)")
    chapters = chapters or released
    if not chapters:
        raise LookupError("no chapter released yet: release chapters first (python -m autograder release)")
    exported = _exported(course)
    headers = [next((h for h in header if h.startswith(f"{chapter} (") and h.endswith(")")), chapter)
               for chapter in chapters]
    written, blanks, stale, now = [], [], [], {}
    with course.gradebook() as gb:
        for student in students:
            scores = [_canvas_score(course, gb, student, chapter) for chapter in chapters]
            if all(score is None for score in scores):
                continue  # no row: Canvas leaves this student's grades as they are
            identity = rows.get(student) or {"Student": student, "SIS Login ID": student}
            cells = []
            for chapter, column, score in zip(chapters, headers, scores):
                if score is None and roster is None:
                    blanks.append(f"{student}/{chapter}")
                current = _unchanged(identity.get(column, ""))
                before = exported.get(student, {}).get(chapter)
                if score is None and not current and before and not roster_is_current:
                    stale.append(f"{student}/{chapter} ({before['score']} on {before['at']})")
                if score is not None:
                    now.setdefault(student, {})[chapter] = score
                cells.append(score if score is not None else current)
            written.append([*(identity.get(column, "") for column in CANVAS_IDENTITY), *cells])
    if blanks:
        raise ValueError(f"{len(blanks)} cell(s) would be blank ({', '.join(blanks[:5])}"
                         f"{', ...' if len(blanks) > 5 else ''}), and Canvas may read a blank as 'remove this "
                         "score': pass Canvas's gradebook export as --roster (its current scores are written "
                         "back unchanged), or export one chapter at a time with --chapter")
    if stale:
        raise ValueError(f"the roster has no score where an earlier export wrote one: {', '.join(stale[:5])}"
                         f"{', ...' if len(stale) > 5 else ''}; a roster exported from Canvas before that file was "
                         "imported would remove those scores: export Canvas's gradebook again and pass the new file "
                         "(if the scores were removed in Canvas on purpose, add --roster-is-current)")
    points = [f"{_max_score(course, chapter):g}" for chapter in chapters]
    with open(output, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow([*CANVAS_IDENTITY, *headers])
        writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", *points])
        writer.writerows(written)
    _remember_export(course, now)
    return len(written)


def _exported(course) -> dict[str, dict[str, dict[str, str]]]:
    """{student: {chapter: {"score", "at"}}}: the last score each Canvas export wrote, and when."""
    path = Path(course.root) / "exports" / "canvas.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _remember_export(course, scores: dict[str, dict[str, str]]) -> None:
    at = datetime.datetime.now().isoformat(timespec="minutes")
    exported = _exported(course)
    for student, chapters in scores.items():
        for chapter, score in chapters.items():
            exported.setdefault(student, {})[chapter] = {"score": score, "at": at}
    path = Path(course.root) / "exports" / "canvas.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(exported, indent=1, sort_keys=True))


def _unchanged(current: str) -> str:
    """A roster's score as Canvas reads it back: a decimal comma (Excel in many locales) as a point."""
    current = current.strip()
    return current.replace(",", ".") if re.fullmatch(r"-?\d+,\d+", current) else current


def _roster(roster: Path, key: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    """(header, rows by `key`) of a roster saved by Canvas (UTF-8 with a byte-order mark, commas) or by Excel
    (also semicolons or tabs, and the locale's code page; "Unicode Text" is UTF-16 with tabs)."""
    raw = Path(roster).read_bytes()
    try:
        text = raw.decode("utf-16") if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("cp1252")
    first = text.splitlines()[0] if text else ""
    delimiter = max(",;\t", key=first.count)
    table = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    header = [column.strip() for column in table[0]] if table else []
    if table and key not in header:
        raise ValueError(f"the roster {roster} has no column {key!r}; its columns: {', '.join(header)}")
    rows = {}
    for values in table[1:]:
        row = dict(zip(header, values))
        if row.get(key, "").strip() and row.get("Student", "").strip() != CANVAS_POINTS_ROW.strip():
            rows[row[key].strip()] = row
    return header, rows


def _canvas_score(course, gb, student: str, chapter: str) -> str | None:
    """The score to write, or None: not submitted, not graded yet, changed since, or held for review."""
    state, _ = submission_state(course, student, chapter)
    if state not in ("graded", "needs review"):
        return None
    try:
        notebook = gb.find_submission_notebook(chapter, chapter, student)
    except MissingEntry:
        return None
    if notebook.needs_manual_grade:  # held for review and not yet looked at
        return None
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
    refused = [f"  {r['learner']}/{r['chapter']}: {folder}: {r['why']}" for folder, r in refusals(course.root).items()]
    for title, entries in (("to grade (python -m autograder grade)", to_grade),
                           ("needs review (points held until a person looks; nbgrader formgrader or the gradebook)",
                            to_review),
                           ("graded, with problems the learner should hear about", notes),
                           ("not collected from the hub's exchange (not the named learner's own files; the folders "
                            "stay in the inbound)", refused)):
        if entries:
            lines += ["", title + ":", *entries]
    if not to_grade and not to_review and not refused:
        lines += ["", "everything submitted is graded; nothing needs review."]
    return "\n".join(lines)
