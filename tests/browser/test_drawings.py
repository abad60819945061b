"""modulecraft.viz drawings in a real JupyterLab: each displays as an inline <svg> with the expected nodes."""
from __future__ import annotations

import nbformat
import pytest
from jupyterlab_driver import Notebook
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
NOTEBOOK = "demos/drawings.ipynb"
CELLS = [
    # a torch model, drawn with DFS numbers (torch is in the test venv; the package itself never imports it)
    """import numpy as np, torch
from modulecraft import nn
from modulecraft.viz import draw_state_dict_diff, draw_tree, trace_calls
draw_tree(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())),
          order="dfs")""",
    # a modulecraft model with a shared module and folded repeats
    """model = nn.Sequential(nn.Linear(4, 4), *[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(3)])
model.again = model[0]
draw_tree(model, fold_repeats=True)""",
    """state = dict(model.state_dict()); del state["0.bias"]; state["zzz"] = np.zeros(1)
draw_state_dict_diff(model, state)""",
    """trace_calls(model, np.ones((2, 4), dtype=np.float32))""",
]


@pytest.fixture
def drawings_notebook(learner_workspace) -> str:
    path = learner_workspace / NOTEBOOK
    path.parent.mkdir(exist_ok=True)
    kernel = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(new_notebook(cells=[new_code_cell(source) for source in CELLS], metadata={"kernelspec": kernel}),
                   path)
    return NOTEBOOK


def test_drawings_render_as_inline_svg(page, lab, drawings_notebook):
    notebook = Notebook.open(page, lab, drawings_notebook)
    notebook.run_all()
    outputs = notebook.panel.locator(".jp-OutputArea-output")
    expect(outputs).to_have_count(len(CELLS))
    torch_tree, folded_tree, diff, timeline = (outputs.nth(index) for index in range(len(CELLS)))
    expect(torch_tree.locator("svg g.node.module")).to_have_count(5)
    expect(torch_tree.locator('svg g.node.module[id="mc-1.0"] text').first).to_have_text("4")  # its DFS number
    expect(folded_tree.locator("svg g.node.module")).to_have_count(5)  # root, 0, 1 (standing for 1-3), 1.0, 1.1
    expect(folded_tree.locator("svg g.node.folded")).to_contain_text("× 3")
    expect(folded_tree.locator("svg g.edge.shared-module")).to_have_count(1)
    expect(diff).to_contain_text("load_state_dict(strict=True) would fail: 1 missing, 1 unexpected")
    expect(timeline.locator("svg")).to_have_count(1)
    assert outputs.locator("img").count() == 0  # inline <svg>, not JupyterLab's <img> for image/svg+xml
    assert not page.errors, page.errors
