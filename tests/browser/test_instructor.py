"""An instructor in JupyterLab: nbgrader's formgrader and create-assignment tool load and show the course."""
from __future__ import annotations

import pytest
from jupyterlab_driver import CHAPTER
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
