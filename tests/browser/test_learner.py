"""A learner in JupyterLab: open chapter 1 from the workspace, run it, solve an exercise, check their work."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from conftest import CHAPTER, COURSE_SOURCE
from jupyterlab_driver import Notebook
from playwright.sync_api import expect

from autograder.workspace import chapter_title

pytestmark = pytest.mark.browser
NOTEBOOK = f"{CHAPTER}/{CHAPTER}.ipynb"


@dataclass
class Exercise:
    """The first exercise of the chapter: where its cells are, its solution, the points its test gives."""

    solution_cell: int
    test_cell: int
    code_cells: list[int]  # from the solution to its visible test, what the learner runs after solving
    tests: dict[str, float]  # grade_id -> points of the exercise's tests (visible and hidden)
    solution: str
    total_points: float
    last_cell: int


@pytest.fixture(scope="module")
def exercise(learner_workspace) -> Exercise:
    released = nbformat.read(learner_workspace / NOTEBOOK, as_version=4)
    source = {c.metadata.nbgrader["grade_id"]: c for c in nbformat.read(COURSE_SOURCE / NOTEBOOK, as_version=4).cells
              if "nbgrader" in c.metadata}
    meta = [cell.metadata.get("nbgrader", {}) for cell in released.cells]
    solution_cell = next(i for i, m in enumerate(meta) if m.get("solution") and not m.get("grade"))
    test_cell = next(i for i, m in enumerate(meta) if i > solution_cell and m.get("grade") and not m.get("solution"))
    solution = "\n".join(line for line in source[meta[solution_cell]["grade_id"]].source.splitlines()
                         if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
    code_cells = [i for i in range(solution_cell, test_cell + 1) if released.cells[i].cell_type == "code"]
    next_solution = next((i for i, m in enumerate(meta) if i > solution_cell and m.get("solution")), len(meta))
    tests = {m["grade_id"]: m["points"] for m in meta[solution_cell:next_solution] if m.get("grade")}
    return Exercise(solution_cell, test_cell, code_cells, tests, solution,
                    sum(m.get("points", 0) for m in meta if m.get("grade")), len(released.cells) - 1)


@pytest.fixture
def own_copy(request, learner_workspace) -> str:
    """A fresh copy of the learner's chapter for one test, so tests do not see each other's edits."""
    folder = Path("attempts") / request.node.name / CHAPTER
    shutil.copytree(learner_workspace / CHAPTER, learner_workspace / folder, dirs_exist_ok=True)
    return str(folder / f"{CHAPTER}.ipynb")


def test_open_chapter_one_from_the_index_run_all_and_see_the_tree_drawing(page, lab, learner_workspace):
    page.goto(lab.page_url("index.ipynb"))
    title = chapter_title(nbformat.read(learner_workspace / NOTEBOOK, as_version=4), CHAPTER)
    page.locator(".jp-RenderedMarkdown a", has_text=title).click()
    notebook = Notebook(page, lab, NOTEBOOK)
    notebook.wait_idle()
    expect(page.locator('.lm-TabBar-tab.lm-mod-current[data-type="document-title"]')).to_have_attribute(
        "title", re.compile(f"Path: {re.escape(NOTEBOOK)}"))

    notebook.run_all()

    drawing = notebook.panel.locator(".jp-OutputArea-output svg")
    expect(drawing.first).to_be_visible()
    assert drawing.first.locator("g.node").count() >= 2, "the module tree drawing has no nodes"
    assert not [e for e in page.errors if "nbgrader" in e.lower()], page.errors


def test_a_typed_solution_passes_its_visible_test(page, lab, exercise, own_copy):
    notebook = Notebook.open(page, lab, own_copy)
    expect(notebook.panel.locator(".jp-Toolbar-item", has_text="Validate")).to_be_visible()
    notebook.run_all()  # stops at the first error: the exercise is not solved yet
    failing = notebook.cells_with_errors()
    assert failing and exercise.solution_cell < failing[0] <= exercise.test_cell, failing

    notebook.set_source(exercise.solution_cell, exercise.solution)
    for index in exercise.code_cells:
        notebook.run_cell(index)

    assert [i for i in notebook.cells_with_errors() if i <= exercise.test_cell] == []
    expect(notebook.cells.nth(exercise.test_cell).locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"))


def test_the_self_check_prints_the_score(page, lab, exercise, own_copy):
    notebook = Notebook.open(page, lab, own_copy)
    notebook.set_source(exercise.solution_cell, exercise.solution)
    notebook.save()

    notebook.run_cell(exercise.last_cell)

    report = notebook.output_text(exercise.last_cell)
    for grade_id, points in exercise.tests.items():
        assert re.search(rf"{re.escape(grade_id)}\s+{points:g}/{points:g}\s+ok", report), report
    assert f"Total: {sum(exercise.tests.values()):g}/{exercise.total_points:g}" in report, report
