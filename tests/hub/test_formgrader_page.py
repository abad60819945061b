"""Formgrader's page for grading a submission by hand, rendered as the hub's instructors' servers render it
(`autograder.hub.CleanSubmission`) and as nbgrader alone would: no hub needed, so every kind of learner content is
tried here; tests/hub/test_hostile_learners.py opens the page in the real hub."""
from __future__ import annotations

import types
from html.parser import HTMLParser

import nbformat
from nbconvert.exporters import HTMLExporter
from nbgrader.server_extensions.formgrader.handlers import template_path
from traitlets.config import Config

from autograder.hub import CleanSubmission

RAN = "window.ran=1"  # what each piece of learner content below tries to run
RESOURCES = {"base_url": "/user/teacher", "assignment_id": "04_buffers", "notebook_id": "04_buffers",
             "submission_id": "abc", "index": 0, "total": 1, "student": "mallory", "last_name": "", "first_name": "",
             "notebook_path": "modulecraft-course/autograded/mallory/04_buffers/04_buffers.ipynb"}


def hostile_notebook() -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_markdown_cell(
        f"# My answer\n\n**bold** and $x^2$ <img src=missing onerror=\"{RAN}\">\n\n<script>\n{RAN}\n</script>\n\n"
        f"[docs](https://pytorch.org) [click](javascript:{RAN})\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"))
    cell = nbformat.v4.new_code_cell("show()")
    cell.metadata.nbgrader = {"grade_id": f'x"><img src=missing onerror="{RAN}">', "grade": True, "solution": False,
                              "points": 1, "locked": False, "schema_version": 3}
    cell.outputs = [nbformat.v4.new_output("display_data", data={"application/javascript": RAN}),
                    nbformat.v4.new_output("display_data", data={
                        "text/html": f"<table><tr><td>a cell</td></tr></table><img src=x onerror=\"{RAN}\">"}),
                    nbformat.v4.new_output("display_data", data={"text/markdown": f"*md* <script>{RAN}</script>"}),
                    nbformat.v4.new_output("display_data", data={
                        "application/vnd.jupyter.widget-view+json": {"model_id": "1", "version_major": 2}}),
                    nbformat.v4.new_output("stream", text="printed\n")]
    notebook.cells.append(cell)
    return notebook


def render(clean: bool) -> str:
    config = Config()  # formgrader's own exporter settings (nbgrader's FormgradeExtension.build_extra_config)
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [template_path]
    exporter = HTMLExporter(config=config)
    if clean:
        exporter = CleanSubmission.exporter.fget(types.SimpleNamespace(settings={"nbgrader_exporter": exporter}))
    html, _ = exporter.from_notebook_node(hostile_notebook(), resources=dict(RESOURCES))
    return html


class Runnable(HTMLParser):
    """Where RAN would run in a page: in a script element, an event handler, a javascript: link."""

    def __init__(self, html: str):
        super().__init__()
        self.found, self.in_script = [], False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.in_script = tag == "script"
        for name, value in attrs:
            if RAN in (value or "") and (name.startswith("on") or value.strip().startswith("javascript:")):
                self.found.append(f"<{tag} {name}>")

    def handle_endtag(self, tag):
        self.in_script = False

    def handle_data(self, data):
        if self.in_script and RAN in data:
            self.found.append("<script>")


def test_nbgraders_page_would_run_a_learners_scripts():
    assert set(Runnable(render(clean=False)).found) == {"<script>", "<img onerror>", "<a href>"}


def test_the_hubs_page_runs_none_and_shows_the_rest():
    html = render(clean=True)
    assert Runnable(html).found == []
    for shown in ["My answer", "<strong>bold</strong>", "$x^2$", '<a href="https://pytorch.org">docs</a>',
                  "<td>a cell</td>", "<td>2</td>", "<em>md</em>", "printed"]:
        assert shown in html, shown
    assert "widget-view" not in html
