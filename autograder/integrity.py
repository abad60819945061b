"""Tamper detection around nbgrader's autograde.

Two layers. Before running anything, `inspect_submission` compares the submitted notebook with the chapter's
source: invalid JSON, another chapter's notebook, test cells deleted, duplicated, reordered, edited or retyped,
solution cells turned into markdown. nbgrader restores the test cells it knows, but a changed notebook
structure is a question for a person, so these submissions are held for review.

While running, the preprocessors below put the guard of `autograder.guard` around the tests: they insert its
cells before Execute and take them out (reading their verdicts) right after, so the gradebook and the
feedback only ever see the student's cells.
"""
from __future__ import annotations

import copy
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
from .guard import MARK

UNGRADABLE = ("not a valid notebook", "not a notebook of chapter", "no notebook was submitted")
GUARD_KEY = "modulecraft_guard"  # cell metadata key of inserted guard cells

# (test cell, problem) reported by the guard in the last autograde run of this process (one at a time per worker).
_verdict: list[tuple[str, str]] = []


def reset_verdict() -> None:
    _verdict.clear()


def verdict() -> list[str]:
    """Each problem once, with the first test cell it was seen before."""
    first = {}
    for test, problem in _verdict:
        first.setdefault(problem, test)
    return [f"{problem} (seen before test cell {test!r})" for problem, test in first.items()]


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
    """grade_ids (or indices) of the cells that hit the per-cell time limit in an autograded notebook."""
    if not graded.exists():
        return []
    cells = json.loads(graded.read_text())["cells"]
    return [_grade_id(cell) or f"#{index}" for index, cell in enumerate(cells)
            if any(output.get("ename") == "CellTimeoutError" for output in cell.get("outputs", []))]


# -- the guard around the tests ---------------------------------------------------------------------------
def autograde_config() -> Config:
    """nbgrader's autograde pipeline with the guard inserted before Execute and removed right after it."""
    c = Config()
    c.Autograde.autograde_preprocessors = [
        "autograder.integrity.InsertGuard",
        "nbgrader.preprocessors.Execute",
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


class InsertGuard(NbGraderPreprocessor):
    """Guard cells: install first, snapshot after each locked course cell, verify before each test cell."""

    def preprocess(self, nb, resources):
        # A second after the grader's interrupt at the cell time limit, within nbclient's 4 s wait for the cell.
        deadline = course_config.CELL_TIMEOUT + 1
        cells = [_guard_cell("install", "import autograder.guard as _mc_guard_module\n"
                                        f"_mc_guard = _mc_guard_module.install(cell_deadline={deadline})\n"
                                        "del _mc_guard_module")]
        for cell in nb.cells:
            if cell.cell_type == "code" and _is_test(cell):
                nonce = secrets.token_hex(16)
                cells.append(_guard_cell("verify", f"_mc_guard.verify({nonce!r}, globals())",
                                         nonce=nonce, test=_grade_id(cell)))
            cells.append(cell)
            if cell.cell_type == "code" and utils.is_locked(cell) and not utils.is_grade(cell):
                cells.append(_guard_cell("snapshot", "_mc_guard.snapshot(globals())"))
        nb.cells = cells
        return nb, resources


class CollectGuard(NbGraderPreprocessor):
    """Read the guard's verdicts from its cells' outputs, then remove the cells."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            guard = cell.metadata.get(GUARD_KEY)
            if guard and guard["role"] == "verify":
                _verdict.extend(_read_verdict(cell, guard["nonce"], guard["test"]))
        nb.cells = [cell for cell in nb.cells if GUARD_KEY not in cell.metadata]
        return nb, resources


def _read_verdict(cell, nonce: str, test: str) -> list[tuple[str, str]]:
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    lines = [line for line in text.splitlines() if line.startswith(MARK)]
    verdicts = [line.split(" ", 2)[2] for line in lines if line.split(" ", 2)[1:2] == [nonce]]
    if len(verdicts) != 1 or len(lines) != 1:
        return [(test, "the tamper guard could not report (its output was suppressed or forged)")]
    if verdicts[0] == "ok":
        return []
    return [(test, problem) for problem in verdicts[0].removeprefix("tampered: ").split("; ")]
