"""Chapters 5-9: the feedback a typical mistake earns names the mistake in the error itself.

test_course_grading.py looks for each mistake's phrase in nbgrader's feedback page, which also shows the source of
the visible test cells, so a phrase quoted from a visible test's description is found there even when the test
failed for an unrelated reason (a bare ValueError from deep inside numpy, say). Here each mistake is executed on
its own (nbclient, as the grader runs it) and the phrase must be in the `ErrorName: message` of one of the
exercise's own test cells: the line the learner actually reads. No other graded cell may fail.
"""
from __future__ import annotations

import pytest
from nbclient import NotebookClient

from course_chapters import CHAPTERS, nbgrader_meta, notebook_path, read_notebook, with_cell_replaced, wrong_implementations

pytestmark = pytest.mark.slow

SECOND_HALF = [chapter for chapter in CHAPTERS if "05" <= chapter[:2] <= "09"]
MISTAKES = [pytest.param(chapter, wrong, id=f"{chapter}-{wrong['mistake']}")
            for chapter in SECOND_HALF for wrong in wrong_implementations(chapter)]


@pytest.mark.parametrize(("chapter", "wrong"), MISTAKES)
def test_the_error_a_mistake_earns_names_it(chapter, wrong, monkeypatch):
    monkeypatch.setenv("MODULECRAFT_GRADING", "1")
    notebook = with_cell_replaced(read_notebook(chapter), wrong["grade_id"], wrong["source"])
    NotebookClient(notebook, timeout=60, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(notebook_path(chapter).parent)}}).execute()

    own = {f"{wrong['grade_id']}_visible", f"{wrong['grade_id']}_hidden"}
    errors = {nbgrader_meta(cell)["grade_id"]: [f"{out['ename']}: {out['evalue']}" for out in cell.outputs
                                                if out.output_type == "error"]
              for cell in notebook.cells if nbgrader_meta(cell).get("grade")}
    assert {gid: lines for gid, lines in errors.items() if gid not in own and lines} == {}
    own_errors = [line for gid in own for line in errors[gid]]
    assert own_errors, f"{wrong['mistake']} passes every test of its exercise"
    assert any(wrong["feedback"] in line for line in own_errors), own_errors
