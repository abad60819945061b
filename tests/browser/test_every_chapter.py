"""Every chapter, solved, runs top to bottom in JupyterLab, renders its drawings, and self-checks full marks."""
from __future__ import annotations

import re

import pytest
from jupyterlab_driver import COURSE_SOURCE, Notebook
from playwright.sync_api import expect
from solutions import write_solved

from autograder.workspace import course_chapters

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("chapter", course_chapters(COURSE_SOURCE))
def test_the_solved_chapter_runs_in_jupyterlab_and_self_checks_full_marks(page, lab, learner_workspace, chapter):
    path = f"solved/{chapter}/{chapter}.ipynb"
    write_solved(chapter, learner_workspace / chapter / f"{chapter}.ipynb", learner_workspace / path)
    notebook = Notebook.open(page, lab, path)

    notebook.run_all()

    prompts = notebook.prompts()
    assert notebook.cells_with_errors() == []
    assert [i for i, prompt in enumerate(prompts) if prompt.startswith("[") and not re.match(r"\[\d+\]", prompt)] == []
    outputs = notebook.panel.locator(".jp-OutputArea-output")
    expect(outputs.filter(has_text="Cannot display")).to_have_count(0)  # untrusted or unrenderable outputs
    expect(outputs.filter(has_text="Error displaying widget")).to_have_count(0)  # the steppers' ipywidgets
    report = notebook.output_text(len(prompts) - 1)
    total = re.search(r"^Total: (\S+)/(\S+)$", report, re.M)
    assert total and total.group(1) == total.group(2), report
