"""Tamper detection around nbgrader's autograde.

Two layers. Before running anything, `inspect_submission` compares the submitted notebook with the chapter's
source: invalid JSON, another chapter's notebook, test cells deleted, duplicated, reordered, edited or retyped,
solution cells turned into markdown. nbgrader restores the test cells it knows, but a changed notebook
structure is a question for a person, so these submissions are held for review.

While running, the preprocessors below put the guard of `autograder.guard` around the tests: they insert its
cells (and a last line in each test cell) before Execute, and right after it score each test cell by the
guard's signed lines and take every trace of the guard out, so the gradebook and the feedback only ever see
the student's cells.
"""
from __future__ import annotations

import copy
import hashlib
import hmac
import json
import secrets
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config

from . import config as course_config
from . import feedback, sandbox
from .guard import AUDIT_CALL, DEADLINE_REACHED, FFI_REFUSED, MARK, SNAPSHOT

UNGRADABLE = ("not a valid notebook", "not a notebook of chapter", "no notebook was submitted")
GUARD_KEY = "modulecraft_guard"  # cell metadata key of inserted guard cells
AT_THE_END = "(end)"  # where the last verify cell stands
END = "end"  # (END, grade_id): seen by the check at the end of that test cell
INSTALL = "__import__('autograder.guard').guard.install(cell_deadline={deadline})"  # the first cell

# (test cell, problem) reported by the guard in the last autograde run of this process (one at a time per worker).
_verdict: list[tuple[str, str]] = []
_key: bytes | None = None  # the guard's signing key for the notebook being graded by this process
_limits: list[str] = []  # the limits the notebook hit, for the learner and the status (not a review)
OUTPUT_LINES_LIMIT = 1000  # nbgrader's LimitOutput.max_lines, which cuts longer outputs after us


def reset_verdict() -> None:
    _verdict.clear()
    _limits.clear()


def limits_hit() -> list[str]:
    """The limits the last notebook graded by this process hit, each with the cells that hit it, in
    words for the learner: its cells that ran still count."""
    return list(dict.fromkeys(_limits))


def verdict() -> list[str]:
    """Each problem once, with the first test cell it was seen before."""
    first = {}
    for test, problem in _verdict:
        first.setdefault(problem, test)
    return [problem if test is None else f"{problem} (seen {_where(test)})" for problem, test in first.items()]


def _where(test: str | tuple[str, str]) -> str:
    """Where the guard saw a problem: a test cell's grade_id (before it), (END, grade_id) (at its end), or the
    end of the notebook."""
    if test == AT_THE_END:
        return "at the end of the notebook"
    return f"at the end of test cell {test[1]!r}" if isinstance(test, tuple) else f"before test cell {test!r}"


def is_ungradable(problems: list[str]) -> bool:
    return any(problem.startswith(UNGRADABLE) for problem in problems)


# -- static inspection ------------------------------------------------------------------------------------
def inspect_submission(submitted: Path, source: Path) -> list[str]:
    """What is wrong with the structure of `submitted` compared to the chapter's `source` notebook."""
    if not submitted.exists():
        return ["no notebook was submitted"]
    try:
        notebook = nbformat.read(str(submitted), as_version=4)
    except Exception as error:  # nbformat raises JSON, schema and encoding errors alike
        first_line = (str(error).splitlines() or [""])[0]
        return [f"not a valid notebook ({type(error).__name__}: {first_line[:200]})"]
    reference = _student_view(nbformat.read(str(source), as_version=4))
    chapter = source.stem
    expected = [c for c in reference.cells if _grade_id(c)]
    expected_ids = [_grade_id(c) for c in expected]
    found = [c for c in notebook.cells if _grade_id(c)]
    found_ids = [_grade_id(c) for c in found]
    if not set(found_ids) & set(expected_ids):
        return [f"not a notebook of chapter {chapter}" + _which_chapter(found_ids, source.parent.parent)]

    problems = []
    counts = Counter(found_ids)
    by_id = {_grade_id(c): c for c in found}
    for cell in expected:
        grade_id, what = _grade_id(cell), _describe(cell)
        if counts[grade_id] == 0:
            if _is_test(cell):  # a deleted solution or course cell can only cost its author points
                problems.append(f"{what} {grade_id!r} was deleted")
            continue
        if counts[grade_id] > 1:
            problems.append(f"{what} {grade_id!r} appears {counts[grade_id]} times")
        mine = by_id[grade_id]
        if mine.cell_type != cell.cell_type:
            problems.append(f"{what} {grade_id!r} was turned into a {mine.cell_type} cell")
        elif _is_test(cell) and mine.source.strip() != cell.source.strip():
            problems.append(f"{what} {grade_id!r} was edited")
        if _role(mine) != _role(cell):
            problems.append(f"the nbgrader metadata of {what} {grade_id!r} was changed")
    present = [grade_id for grade_id in dict.fromkeys(found_ids) if grade_id in expected_ids]
    if present != [grade_id for grade_id in expected_ids if grade_id in present]:
        problems.append("cells were reordered (test cells must stay after the code they test)")
    return problems


def _student_view(notebook):
    """The source notebook as released: hidden tests removed (by nbgrader's own preprocessor)."""
    view = copy.deepcopy(notebook)
    ClearHiddenTests(enabled=True).preprocess(view, {})
    return view


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _is_test(cell) -> bool:
    return utils.is_grade(cell) and not utils.is_solution(cell)


def _role(cell) -> tuple:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")), bool(meta.get("solution")), bool(meta.get("locked")), meta.get("points")


def _describe(cell) -> str:
    if _is_test(cell):
        return "test cell"
    return "solution cell" if utils.is_solution(cell) else "course cell"


def _which_chapter(found_ids: list[str], source_root: Path) -> str:
    for other in sorted(source_root.glob("*/*.ipynb")):
        try:
            ids = {_grade_id(c) for c in json.loads(other.read_text())["cells"]}
        except (OSError, ValueError, KeyError):
            continue
        if set(found_ids) & ids:
            return f" (it looks like chapter {other.stem})"
    return ""


def timed_out_cells(graded: Path) -> list[str]:
    """grade_ids (or indices) of the cells that hit the per-cell time limit in an autograded notebook: ended by the
    guard's deadline, or interrupted by nbclient (no guard, or its deadline could not start its thread)."""
    if not graded.exists():
        return []
    cells = json.loads(graded.read_text())["cells"]
    return [_grade_id(cell) or f"#{index}" for index, cell in enumerate(cells)
            if any(_timed_out(output) for output in cell.get("outputs", []))]


def _timed_out(output) -> bool:
    ename = output.get("ename")
    return ename == "CellTimeoutError" or (ename == "KeyboardInterrupt" and output.get("evalue") == DEADLINE_REACHED)


# -- the guard around the tests ---------------------------------------------------------------------------
def autograde_config() -> Config:
    """nbgrader's autograde pipeline with the guard inserted before Execute and removed right after it."""
    c = Config()
    c.Autograde.autograde_preprocessors = [
        "autograder.integrity.InsertGuard",
        "autograder.sandbox.ConfinedExecute",
        "autograder.integrity.CollectGuard",
        "nbgrader.preprocessors.IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "nbgrader.preprocessors.LimitOutput",
        "nbgrader.preprocessors.SaveAutoGrades",
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
    return c


def _guard_cell(role: str, source: str, **extra):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata[GUARD_KEY] = {"role": role, **extra}
    return cell


def _audit(what: str, nonce: str = "", test: str = "") -> str:
    """A line that talks to the guard's audit hook (no name the notebook could rebind but builtins, checked)."""
    return f"{AUDIT_CALL}{what!r}, {nonce!r}, {test!r})"


class InsertGuard(NbGraderPreprocessor):
    """Guard cells and lines: install first; in each test cell a first line that checks (verify) and a last line
    that reports it ran to its end; a last comment in each locked course cell, after which the guard takes its
    snapshot; a last cell that checks once more. The key that signs the guard's lines goes to the kernel's folder
    (`sandbox`), never into the notebook."""

    def preprocess(self, nb, resources):
        global _key
        _key = secrets.token_bytes(32)
        sandbox.guard_key = _key
        # The guard ends a cell a second before the grader would interrupt it (`guard._stop_cells_after`).
        deadline = max(course_config.CELL_TIMEOUT - 1, course_config.CELL_TIMEOUT / 2)
        cells = [_guard_cell("install", INSTALL.format(deadline=deadline))]
        for cell in nb.cells:
            if cell.cell_type == "code" and _is_test(cell):
                passed = secrets.token_hex(16)  # also tells the guard which cell to scrub as the test starts:
                # reversed in the verify line, so that only the last line holds it as written
                verify = secrets.token_hex(16)
                cell.metadata[GUARD_KEY] = {"role": "test", "nonce": passed, "verify": verify, "source": cell.source}
                cell.source = (_audit("verify", verify, passed[::-1]) + "\n" + cell.source.rstrip("\\\n") + "\n"
                               + _audit("passed", passed))
            elif cell.cell_type == "code" and utils.is_locked(cell) and not utils.is_grade(cell):
                # Once it has run, the guard remembers the modules it bound (no cell of its own: a round trip less).
                cell.metadata[GUARD_KEY] = {"role": "course", "source": cell.source}
                cell.source += "\n" + SNAPSHOT
            cells.append(cell)
        # Once more at the end: what code run by the last test left patched is seen too.
        cells.append(_guard_cell("verify", _audit("verify", nonce := secrets.token_hex(16)), nonce=nonce,
                                 test=AT_THE_END))
        nb.cells = cells
        return nb, resources


class CollectGuard(NbGraderPreprocessor):
    """Read the guard's signed lines, score test cells by them, then remove every trace of the guard.

    A test cell counts as passed only with its own signed "passed" line: whatever it displayed is dropped (an
    `execute_result`, e.g. from `sys.displayhook(...)`, would otherwise be read by nbgrader as its score), and
    one that stopped without an error nbgrader can see gets one, and is flagged (its error was hidden)."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            guard = cell.metadata.get(GUARD_KEY)
            if not guard:
                continue
            if guard["role"] == "verify" and not _kernel_gone(cell):
                _verdict.extend(_read_verdict(cell, guard["nonce"], guard["test"]))
            elif guard["role"] == "test":
                if not _kernel_gone(cell) or _signed_lines(cell):  # (a cell the kernel never ran says nothing)
                    _verdict.extend(_read_verdict(cell, guard["verify"], _grade_id(cell)))
                _score_test(cell, guard)
            elif guard["role"] == "course":
                cell.source = guard["source"]
                del cell.metadata[GUARD_KEY]
        nb.cells = [cell for cell in nb.cells if cell.metadata.get(GUARD_KEY, {}).get("role", "test") == "test"]
        _verdict.extend((None, f"an output of cell {cell!r} quoted the hidden tests (removed)")
                        for cell in feedback.remove_leaks(nb))
        _limits.extend(limit for index, cell in enumerate(nb.cells) for limit in _limits_of(cell, index))
        return nb, resources


def _limits_of(cell, index: int) -> list[str]:
    """Which limits a cell's outputs show it hit (the error a limit raises in Python, or its output's size)."""
    name = _grade_id(cell) or f"#{index}"
    found = []
    for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
        if output.get("output_type") != "error":
            continue
        ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
        if FFI_REFUSED in evalue + "".join(map(str, output.get("traceback", []))):  # also a cause: scipy's own
            found.append(f"cell {name}: {FFI_REFUSED}")
        elif ename == "MemoryError":
            found.append(f"cell {name} ran out of memory (the limit is {sandbox.MEMORY_LIMIT_MB} MB)")
        elif "Resource temporarily unavailable" in evalue or "can't start new thread" in evalue:
            found.append(f"cell {name} hit the limit of {sandbox.PROCESS_LIMIT} processes and threads")
        elif "No space left on device" in evalue:
            found.append(f"cell {name} filled its disk space ({sandbox.DISK_LIMIT_MB} MB in its folder, "
                         f"{sandbox.FILE_SIZE_LIMIT_MB} MB in /tmp)")
        elif "File too large" in evalue:
            found.append(f"cell {name} wrote a file over the {sandbox.FILE_SIZE_LIMIT_MB} MB limit")
        elif ename == "SystemExit":
            found.append(f"cell {name} called sys.exit(): the cells after it still ran")
    lines = sum(len(str(o.get("text", "")).splitlines()) for o in cell.get("outputs", [])
                if o.get("output_type") == "stream")
    if lines > OUTPUT_LINES_LIMIT:
        found.append(f"the output of cell {name} was cut to {OUTPUT_LINES_LIMIT} lines")
    return found


def _kernel_gone(cell) -> bool:
    return any(o.get("ename") == sandbox.KERNEL_GONE for o in cell.get("outputs", []))


def _score_test(cell, guard: dict) -> None:
    signed = _signed_lines(cell)
    cell.source = guard["source"]
    del cell.metadata[GUARD_KEY]
    kept = []
    for output in cell.outputs:
        if output.output_type in ("execute_result", "display_data"):
            continue
        if output.output_type == "stream":
            output.text = "".join(line for line in output.text.splitlines(True) if not line.startswith(MARK))
            if not output.text:
                continue
        kept.append(output)
    cell.outputs = kept
    if (guard["nonce"], "passed") in signed or any(o.output_type == "error" for o in kept):
        return
    test = _grade_id(cell)
    # Reached its end, but the guard saw tampering there (what a thread or a callback would undo later).
    tampered = [problem for nonce, verdict in signed if nonce == guard["nonce"] and verdict.startswith("tampered: ")
                for problem in verdict.removeprefix("tampered: ").split("; ")]
    _verdict.extend(((END, test), problem) for problem in tampered)
    if not tampered:
        _verdict.append((test, f"test cell {test!r} stopped before its end without showing an error (hidden)"))
    ename, evalue = ("TestTampered", "the tamper guard saw changes at the end of the test") if tampered else (
        "TestIncomplete", "the test did not run to its end")
    cell.outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                               traceback=[feedback.error_line(ename, evalue)]))


def _signed_lines(cell) -> set[tuple[str, str]]:
    """(nonce, verdict) of every line of the cell's output that the guard signed with this notebook's key."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    found = set()
    for line in text.splitlines():
        body, _, mac = line.rpartition(" ")
        parts = body.split(" ", 2)
        if len(parts) == 3 and parts[0] == MARK and _key and hmac.compare_digest(
                mac, hmac.new(_key, body.encode(), hashlib.sha256).hexdigest()):
            found.add((parts[1], parts[2]))
    return found


def _read_verdict(cell, nonce: str, test: str) -> list[tuple[str, str]]:
    verdicts = [verdict for line_nonce, verdict in _signed_lines(cell) if line_nonce == nonce]
    if len(verdicts) != 1:
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        why = [line.split(" unsigned: ", 1)[1] for line in text.splitlines()
               if line.startswith(f"{MARK} {nonce} ") and " unsigned: " in line]
        return [(test, "the tamper guard could not report (its output was suppressed or forged"
                       + (f"; {why[0]}" if why else "") + ")")]
    if verdicts[0] == "ok":
        return []
    return [(test, problem) for problem in verdicts[0].removeprefix("tampered: ").split("; ")]
