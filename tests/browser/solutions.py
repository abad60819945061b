"""What a learner who solves a chapter types: the source notebook's solutions, put into the released notebook."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
from jupyterlab_driver import COURSE_SOURCE


def solutions(chapter: str, released: nbformat.NotebookNode) -> dict[int, str]:
    """Solution cell index in `released` -> the course's solution for it, without the nbgrader markers."""
    source = {cell.metadata.nbgrader["grade_id"]: cell.source
              for cell in nbformat.read(COURSE_SOURCE / chapter / f"{chapter}.ipynb", as_version=4).cells
              if "nbgrader" in cell.metadata}
    return {index: _without_markers(source[cell.metadata.nbgrader["grade_id"]])
            for index, cell in enumerate(released.cells)
            if cell.metadata.get("nbgrader", {}).get("solution") and not cell.metadata.nbgrader.get("grade")}


def write_solved(chapter: str, released_path: Path, target: Path) -> None:
    """The released notebook with every exercise solved, saved at `target`."""
    notebook = nbformat.read(released_path, as_version=4)
    for index, solution in solutions(chapter, notebook).items():
        notebook.cells[index].source = solution
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def _without_markers(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
