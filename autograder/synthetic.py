"""Notebooks a class could hand in, made from the chapters themselves: for tests, demos and the benchmark."""
from __future__ import annotations

import re

import nbformat

SOLUTION_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.MULTILINE)


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def blank(course, chapter: str):
    """The released notebook, as a learner who did nothing would hand it in."""
    return nbformat.read(str(course.release_path(chapter)), as_version=4)


def solved(course, chapter: str):
    """The released notebook with every solution cell filled in from the source's solution."""
    source = nbformat.read(str(course.source / chapter / f"{chapter}.ipynb"), as_version=4)
    solutions = {_grade_id(c): SOLUTION_MARKERS.sub("", c.source) for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    return with_cells(blank(course, chapter), solutions)


def with_cells(notebook, sources: dict[str, str]):
    """`notebook` with the source of the cells named by grade_id replaced."""
    unknown = set(sources) - {_grade_id(c) for c in notebook.cells}
    if unknown:
        raise KeyError(f"no cell with grade_id {sorted(unknown)}")
    for cell in notebook.cells:
        if _grade_id(cell) in sources:
            cell.source = sources[_grade_id(cell)]
    return notebook


def write(notebook, path) -> None:
    nbformat.write(notebook, str(path))
