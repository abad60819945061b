"""A tiny course of our own for the workspace tests: chapters with one exercise, a visible and a hidden test."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CHAPTERS = ["01_alpha", "02_beta"]


def nbgrader_cell(cell, grade_id: str, solution: bool = False, points: int | None = None):
    cell.metadata.nbgrader = {"grade_id": grade_id, "solution": solution, "grade": points is not None,
                              "locked": not solution, "schema_version": 3}
    if points is not None:
        cell.metadata.nbgrader["points"] = points
    return cell


def write_chapter(source: Path, chapter: str, intro: str = "Read this first.") -> Path:
    """`source/<chapter>/<chapter>.ipynb`: a title, one exercise (answer() returns 42), its visible and hidden test."""
    notebook = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"}})
    notebook.cells = [
        nbgrader_cell(new_markdown_cell(f"# Chapter {chapter}\n\n{intro}"), f"{chapter}_intro"),
        nbgrader_cell(new_code_cell("def answer():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION"),
                      "answer", solution=True),
        nbgrader_cell(new_code_cell("assert answer() == 42\n### BEGIN HIDDEN TESTS\nassert answer() + 1 == 43\n"
                                    "### END HIDDEN TESTS"), "test_answer", points=1),
    ]
    path = source / chapter / f"{chapter}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path
