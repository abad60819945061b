"""An instructor in JupyterLab: nbgrader's formgrader and create-assignment tool load and show the course."""
from __future__ import annotations

import pytest
import nbformat
from jupyterlab_driver import CHAPTER, COURSE_SOURCE, Notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_the_formgrader_opens_from_the_nbgrader_menu_and_lists_the_chapters(page, instructor_lab):
    page.goto(instructor_lab.page_url(""))
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    expect(page.locator(".lm-Menu-itemLabel", has_text="Create Assignment")).to_be_visible()
    page.locator(".lm-Menu-itemLabel", has_text="Formgrader").first.click()

    formgrader = page.frame_locator("#formgrader iframe")
    expect(formgrader.get_by_role("heading", name="Manage Assignments")).to_be_visible(timeout=30_000)
    expect(formgrader.locator("table")).to_contain_text(CHAPTER, timeout=30_000)
    assert not [e for e in page.errors if "nbgrader" in e.lower()], page.errors
    assert instructor_lab.logged_errors() == []


def test_create_assignment_shows_the_chapters_nbgrader_cells_and_points(page, instructor_lab):
    source = f"source/{CHAPTER}/{CHAPTER}.ipynb"  # the course root links a copy of the repository's course/source
    cells = nbformat.read(COURSE_SOURCE / CHAPTER / f"{CHAPTER}.ipynb", as_version=4).cells
    points = sum(cell.metadata.get("nbgrader", {}).get("points", 0) for cell in cells)
    Notebook.open(page, instructor_lab, source)

    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Create assignment").click()

    tool = page.locator(".nbgrader-CreateAssignmentWidget")
    expect(tool).to_be_visible()
    expect(tool.locator(".nbgrader-TotalPointsInput")).to_have_value(f"{points:g}")
    expect(tool.locator(".nbgrader-CellWidget")).to_have_count(len(cells))
    assert not [e for e in page.errors if "nbgrader" in e.lower()], page.errors
    assert instructor_lab.logged_errors() == []
