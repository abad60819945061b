"""What the grader checks of a submission besides its tests: its structure, and the limits it ran into.

Before running anything, `inspect_submission` compares the submitted notebook with the chapter's source:
invalid JSON, another chapter's notebook, test cells deleted, duplicated, reordered or retyped, solution cells
turned into markdown. nbgrader restores the test cells it knows, but a changed notebook structure is a question
for a person, so these submissions are held for review. A test cell's edited text is not: nbgrader puts the
course's text back before running it (a learner's copy from an earlier version of the course has older test
cells, which is no fault).

After running, `limits_of` says which limits the notebook ran into (memory, processes, disk, time), in words
for the learner. Nothing here decides a test: `autograder.judging.verdicts` does, outside the kernel.
"""
from __future__ import annotations

import copy
import functools
import json
import os
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config

from . import sandbox

UNGRADABLE = ("not a valid notebook", "not a notebook of chapter", "no notebook was submitted")
OUTPUT_LINES_LIMIT = 1000  # nbgrader's LimitOutput.max_lines, which cuts longer outputs after us


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
    reference = released(source)
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
        if _role(mine) != _role(cell):
            problems.append(f"the nbgrader metadata of {what} {grade_id!r} was changed")
    present = [grade_id for grade_id in dict.fromkeys(found_ids) if grade_id in expected_ids]
    if present != [grade_id for grade_id in expected_ids if grade_id in present]:
        problems.append("cells were reordered (test cells must stay after the code they test)")
    return problems


def source_notebook(path: Path):
    """The chapter's source notebook at `path`, read once per version of the file (every submission of the chapter
    is compared with it). Shared: read it, never change it."""
    return _read_once(*_version(path))


def released(source: Path):
    """The source notebook as released: hidden tests removed (by nbgrader's own preprocessor). Shared, as above."""
    return _released_once(*_version(source))


def _version(path: Path) -> tuple[str, int, int]:
    stat = os.stat(path)
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=32)
def _read_once(path: str, _mtime_ns: int, _size: int):
    return nbformat.read(path, as_version=4)


@functools.lru_cache(maxsize=32)
def _released_once(path: str, mtime_ns: int, size: int):
    view = copy.deepcopy(_read_once(path, mtime_ns, size))
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
    """grade_ids (or indices) of the cells that hit the per-cell time limit in the notebook this process has just
    autograded (`graded`, its autograded copy): as the grader recorded them (`sandbox.timed_out`), not as the
    outputs show them. A learner's `raise KeyboardInterrupt` is a mistake in the learner's code, not a timeout."""
    if not graded.exists():
        return []
    cells = json.loads(graded.read_text())["cells"]
    return [_grade_id(cells[index]) or f"#{index}" for index in sandbox.timed_out]


def autograde_config() -> Config:
    """nbgrader's autograde pipeline: the grader's seed into the test cells, our sandboxed Execute, then the verdicts
    made outside the kernel."""
    c = Config()
    c.Autograde.autograde_preprocessors = [
        "autograder.judging.verdicts.SeedTests",
        "autograder.judging.sandbox.ConfinedExecute",
        "autograder.judging.verdicts.JudgeTests",
        "nbgrader.preprocessors.IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "nbgrader.preprocessors.LimitOutput",
        "nbgrader.preprocessors.SaveAutoGrades",
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
    return c


def limits_hit(nb) -> list[str]:
    """The limits the executed notebook `nb` ran into (before its outputs are cut), each with the cell that hit
    it, in words for the learner: its cells that ran still count."""
    return list(dict.fromkeys(limit for index, cell in enumerate(nb.cells) for limit in _limits_of(cell, index)))


def _limits_of(cell, index: int) -> list[str]:
    """Which limits a cell's outputs show it hit (the error a limit raises in Python, or its output's size)."""
    name = _grade_id(cell) or f"#{index}"
    found = []
    for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
        if output.get("output_type") != "error":
            continue
        ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
        if ename == "MemoryError" or "ran out of memory" in evalue:
            found.append(f"cell {name} ran out of memory (the limit is {sandbox.MEMORY_LIMIT_MB} MB for the kernel "
                         "and every process it starts)")
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
