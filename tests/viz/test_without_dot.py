"""Without Graphviz's `dot` (a learner who is not root, a laptop without it) a chapter still runs to its end: every
drawing is shown as text, and the first one says how to install `dot`."""
from __future__ import annotations

import html
import os
import re
import shutil
import sys
from pathlib import Path

import graphviz
import nbformat
import pytest
from nbclient import NotebookClient

from modulecraft.viz import DfsStepper, LoadStepper, draw_state_dict_diff, draw_tree, render, text

from . import models

COURSE_SOURCE = Path(__file__).resolve().parents[2] / "course" / "source"
NOTICE = "Graphviz's `dot` program is not on PATH, so drawings are shown as text"
NOTICE_HTML = html.escape(NOTICE)


def path_without_dot(folder: Path) -> str:
    """A PATH holding only this Python (a kernel started from it needs nothing else), and no dot."""
    folder.mkdir(exist_ok=True)
    (folder / "python").symlink_to(sys.executable)
    assert shutil.which("dot", path=str(folder)) is None
    return str(folder)


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", path_without_dot(tmp_path / "bin"))
    monkeypatch.setattr(render, "_notice_given", False)  # as in a kernel that has shown no drawing yet


def test_a_tree_displays_as_text_and_only_the_first_drawing_says_how_to_install_dot(fw, no_dot):
    first = draw_tree(models.mlp(fw))._repr_mimebundle_()
    second = draw_tree(models.shared(fw), order="dfs")._repr_mimebundle_()
    assert set(first) == set(second) == {"text/plain", "text/html"}
    assert first["text/plain"].startswith(NOTICE) and "sudo apt-get install graphviz" in first["text/plain"]
    assert "brew install graphviz" in first["text/html"] and "<svg" not in first["text/html"]
    assert NOTICE not in second["text/plain"] and NOTICE_HTML not in second["text/html"]
    lines = first["text/plain"].splitlines()
    assert "(root)  Sequential" in lines and "├─▸ 0  Linear" in lines and "│       weight  8×4  float32  grad" in lines


def test_a_state_dict_diff_as_text_names_what_would_go_wrong(fw, no_dot):
    mlp = models.mlp(fw)
    state = {key: value for key, value in mlp.state_dict().items() if key != "0.bias"}
    rendering = draw_state_dict_diff(mlp, state)._repr_mimebundle_()["text/plain"]
    assert "load_state_dict(strict=True) would fail: 1 missing, 0 unexpected, 0 size mismatch(es)" in rendering
    assert "missing: the model's parameter has no entry in the checkpoint" in rendering


def test_steppers_show_each_step_as_text(fw, no_dot):
    dfs = DfsStepper(models.shared(fw))._repr_html_()
    assert "<svg" not in dfs and dfs.count(NOTICE_HTML) == 1
    frames = dfs.split('<div class="modulecraft-step" ')[1:]
    assert len(frames) == len(DfsStepper(models.shared(fw)).steps) and all("  ◀" in frame for frame in frames)
    load = LoadStepper(models.mlp(fw), {})._repr_html_()
    drawn = re.findall(r"<pre>(.*?)</pre>", load, re.S)
    assert "<svg" not in load and len(drawn) == len(LoadStepper(models.mlp(fw), {}).steps)
    assert all("no entry in the checkpoint" in frame for frame in drawn)  # each step's key, with its reason


def test_text_of_a_graph_with_a_node_reached_twice_and_a_dashed_edge():
    flow = graphviz.Digraph()
    flow.node("call", "model(x)")
    flow.node("hooks", "any hook\nregistered?")
    flow.edge("call", "hooks")
    flow.edge("hooks", "forward", label="no")
    flow.edge("hooks", "pre", label="yes")
    flow.edge("pre", "forward")
    flow.edge("forward", "call", style="dashed", label="next call")
    assert text.render(flow.source) == "\n".join([
        "model(x)",
        "└─▸ any hook",
        "    │   registered?",
        "    ├─▸ [no] forward",
        "    │   └┄▸ [next call] model(x) (above)",
        "    └─▸ [yes] pre",
        "        └─▸ forward (above)",
    ])


def test_dot_source_the_text_reader_cannot_follow_is_shown_as_it_is(no_dot):
    source = graphviz.Source("digraph { a [label=<unclosed] }")
    assert render.text_bundle(source)["text/plain"].endswith(source.source)


@pytest.mark.parametrize("chapter, drawings", [("01_init_and_call", 2), ("07_state_dict", 4)])
def test_a_chapter_runs_to_its_end_without_dot(chapter, drawings, tmp_path):
    """Chapter 1 shows a module tree and a graphviz flowchart of its own; chapter 7 state_dict diffs and a stepper."""
    notebook = nbformat.read(COURSE_SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    environment = {**os.environ, "PATH": path_without_dot(tmp_path / "bin"),
                   "MODULECRAFT_GRADING": "1"}  # the last cell would otherwise grade a copy of the notebook
    client = NotebookClient(notebook, timeout=60, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.km = client.create_kernel_manager()
    client.execute(env=environment)  # raises CellExecutionError at a cell that fails
    shown = [output.get("data", {}).get("text/html", "") for cell in notebook.cells
             for output in cell.get("outputs", [])]
    assert sum("modulecraft-viz-text" in page for page in shown) == drawings
    assert sum(NOTICE_HTML in page for page in shown) == 1
    assert not any("<svg" in page and "modulecraft-viz" in page for page in shown)
