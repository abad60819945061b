"""A stepper in a real JupyterLab: its Next / Back / Reset buttons move the lit module on the tree drawing."""
from __future__ import annotations

import nbformat
import pytest
from jupyterlab_driver import Notebook
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
NOTEBOOK = "demos/dfs_stepper.ipynb"
SOURCE = """\
from modulecraft import nn
from modulecraft.viz import DfsStepper

model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
DfsStepper(model)
"""
# named_modules() of that model, as the SVG ids of the tree's nodes ("mc-." is the root).
DFS_ORDER = ["mc-.", "mc-0", "mc-1", "mc-1.0"]


@pytest.fixture
def stepper_notebook(learner_workspace) -> str:
    path = learner_workspace / NOTEBOOK
    path.parent.mkdir(exist_ok=True)
    kernel = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(new_notebook(cells=[new_code_cell(SOURCE)], metadata={"kernelspec": kernel}), path)
    return NOTEBOOK


def test_next_back_and_reset_move_the_lit_module(page, lab, stepper_notebook):
    notebook = Notebook.open(page, lab, stepper_notebook)
    notebook.run_all()
    widget = notebook.panel.locator(".modulecraft-stepper-widget")
    lit = widget.locator("svg g.node.highlighted")
    expect(lit).to_have_count(1)
    expect(lit).to_have_attribute("id", DFS_ORDER[0])
    expect(widget.locator(".modulecraft-back")).to_be_disabled()

    for node in DFS_ORDER[1:]:
        widget.locator(".modulecraft-next").click()
        expect(lit).to_have_attribute("id", node)
    expect(widget).to_contain_text("step 4 of 4: yield ('1.0', ReLU)")
    expect(widget.locator(".modulecraft-next")).to_be_disabled()

    widget.locator(".modulecraft-back").click()
    expect(lit).to_have_attribute("id", DFS_ORDER[2])
    widget.locator(".modulecraft-reset").click()
    expect(lit).to_have_attribute("id", DFS_ORDER[0])
    assert not page.errors, page.errors
