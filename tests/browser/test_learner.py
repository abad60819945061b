"""A learner in JupyterLab: open chapter 1 from the workspace, run it, solve an exercise, check their work."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from jupyterlab_driver import CHAPTER, Notebook
from playwright.sync_api import expect
from solutions import solutions

from autograder.workspace import chapter_title

pytestmark = pytest.mark.browser
NOTEBOOK = f"{CHAPTER}/{CHAPTER}.ipynb"


@dataclass
class Chapter:
    """Chapter 1 as released, and what a learner who solves it types (taken from the course's source)."""

    solutions: dict[int, str]  # solution cell index -> the solution's code
    first_test: int  # the visible test of the first exercise
    first_tests: dict[str, float]  # grade_id -> points of the first exercise's tests (visible and hidden)
    total_points: float
    last_cell: int  # the self-check

    @property
    def first_solution(self) -> int:
        return min(self.solutions)

    def code_cells_of_first_exercise(self, released: nbformat.NotebookNode) -> list[int]:
        return [i for i in range(self.first_solution, self.first_test + 1) if released.cells[i].cell_type == "code"]


@pytest.fixture(scope="module")
def released(learner_workspace) -> nbformat.NotebookNode:
    return nbformat.read(learner_workspace / NOTEBOOK, as_version=4)


@pytest.fixture(scope="module")
def chapter(released) -> Chapter:
    meta = [cell.metadata.get("nbgrader", {}) for cell in released.cells]
    solved = solutions(CHAPTER, released)
    first, second = (sorted(solved) + [len(meta)])[:2]
    first_test = next(i for i, m in enumerate(meta) if i > first and m.get("grade"))
    first_tests = {m["grade_id"]: m["points"] for m in meta[first:second] if m.get("grade")}
    return Chapter(solved, first_test, first_tests, sum(m.get("points", 0) for m in meta if m.get("grade")),
                   len(meta) - 1)


@pytest.fixture
def own_copy(request, learner_workspace, released) -> str:
    """A fresh copy of the chapter as released, for one test, so tests do not see each other's edits."""
    path = Path("attempts") / request.node.name / CHAPTER / f"{CHAPTER}.ipynb"
    (learner_workspace / path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(released, learner_workspace / path)
    return str(path)


def test_open_chapter_one_from_the_index_solve_it_run_all_and_see_the_tree_drawing(page, lab, released, chapter):
    page.goto(lab.page_url("index.ipynb"))
    index = Notebook(page, lab, "index.ipynb")
    index.wait_idle()
    index.run_cell(1)  # the live progress table: the index's kernel reaches the course's code
    title = chapter_title(released, CHAPTER).replace("`", "")  # the link shows `x` as code
    expect(index.cells.nth(1).locator(".jp-OutputArea")).to_contain_text(f"{title} not started")
    page.locator(".jp-RenderedMarkdown a", has_text=title).first.click()
    notebook = Notebook(page, lab, NOTEBOOK)
    notebook.wait_idle()
    expect(page.locator('.lm-TabBar-tab.lm-mod-current[data-type="document-title"]')).to_have_attribute(
        "title", re.compile(f"Path: {re.escape(NOTEBOOK)}"))
    for index, solution in chapter.solutions.items():
        notebook.set_source(index, solution)

    notebook.run_all()

    code_cells = [i for i, cell in enumerate(released.cells) if cell.cell_type == "code"]
    assert [notebook.prompt(i) for i in code_cells if not re.fullmatch(r"\[\d+\]:", notebook.prompt(i))] == []
    assert notebook.cells_with_errors() == []
    tree = notebook.panel.locator(".jp-OutputArea-output svg:has(g.node.module)")
    expect(tree.first).to_be_visible()
    assert tree.first.locator("g.node.module").count() >= 2, "the module tree drawing shows fewer than two modules"

    notebook.panel.locator(".jp-Toolbar-item", has_text="Validate").click()  # saves, then runs the visible tests
    expect(page.locator(".validation-success")).to_contain_text("Success! Your notebook passes all the tests.",
                                                                timeout=120_000)
    expect(page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")).to_have_count(0)  # instructors only
    assert not [e for e in page.errors if "nbgrader" in e.lower()], page.errors
    assert lab.logged_errors() == []


def test_a_typed_solution_passes_its_visible_test(page, lab, released, chapter, own_copy):
    notebook = Notebook.open(page, lab, own_copy)
    expect(notebook.panel.locator(".jp-Toolbar-item", has_text="Validate")).to_be_visible()
    notebook.run_all()  # stops at the first error: the first exercise is not solved yet
    failing = notebook.cells_with_errors()
    assert failing and chapter.first_solution < failing[0] <= chapter.first_test, failing

    notebook.set_source(chapter.first_solution, chapter.solutions[chapter.first_solution])
    for index in chapter.code_cells_of_first_exercise(released):
        notebook.run_cell(index)

    assert [i for i in notebook.cells_with_errors() if i <= chapter.first_test] == []
    assert re.fullmatch(r"\[\d+\]:", notebook.prompt(chapter.first_test))


def test_the_self_check_prints_the_score(page, lab, chapter, own_copy):
    notebook = Notebook.open(page, lab, own_copy)
    notebook.set_source(chapter.first_solution, chapter.solutions[chapter.first_solution])
    notebook.save()

    notebook.run_cell(chapter.last_cell)

    report = notebook.output_text(chapter.last_cell)
    for grade_id, points in chapter.first_tests.items():
        assert re.search(rf"{re.escape(grade_id)}\s+{points:g}/{points:g}\s+ok", report), report
    assert f"Total: {sum(chapter.first_tests.values()):g}/{chapter.total_points:g}" in report, report
