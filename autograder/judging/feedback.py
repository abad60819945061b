"""Feedback preprocessing: what the learner's feedback page shows of the graded notebook.

A test cell's only output is its verdict (`autograder.judging.verdicts`), which never quotes a probe, and nbgrader's
`ClearHiddenTests` removes the hidden cells' lines. What the learner's own cells displayed is shown as text:
HTML, SVG, JavaScript and the like come from code nobody checked, and a feedback page is opened in a browser.
"""
from __future__ import annotations

import base64
import binascii

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

SAFE_IMAGES = ("image/png", "image/jpeg", "image/gif")  # drawn by the browser from pixels, never run
MAX_TEXT = 20_000


class ReduceTestErrors(NbGraderPreprocessor):
    """Reduce every error shown under a test cell to `ErrorName: message` (the verdict, written for the learner)."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_test(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [error_line(output.ename, output.evalue)]
        return cell, resources


class OutputsAsText(NbGraderPreprocessor):
    """Keep of each rich output only its plain text and its pixel images; no markup reaches the page."""

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") not in ("display_data", "execute_result"):
                continue
            data = output.get("data", {})
            kept = {key: value for key, value in data.items() if key in SAFE_IMAGES and _is_base64(value)}
            text = data.get("text/plain")
            if text is not None or not kept:
                text = "".join(text) if isinstance(text, list) else str(text or "")
                dropped = sorted(set(data) - set(kept) - {"text/plain"})
                kept["text/plain"] = text[:MAX_TEXT] or f"[{', '.join(dropped)} output, not shown in feedback]"
            output["data"] = kept
            output["metadata"] = {}
        return cell, resources


class ExplainRemovedCode(NbGraderPreprocessor):
    """A cell of the chapter's text that runs before the learner's definitions uses modulecraft's own code for them,
    which is removed while grading (`answer_key`): what it shows then (an error, or one it caught and printed) is
    not the learner's doing, so the page says what happened instead of "not written yet" under a complete notebook."""

    def preprocess_cell(self, cell, resources, index):
        if (cell.cell_type == "code" and not utils.is_grade(cell) and not utils.is_solution(cell)
                and any(REMOVED in _text_of(output) for output in cell.get("outputs", []))):
            cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=(
                "While grading, this cell ran on modulecraft without the code you write in this chapter (in your "
                "JupyterLab it ran on modulecraft's own, before your definitions). Nothing here counts.\n"))]
        return cell, resources


REMOVED = "while grading"  # in the messages of `answer_key`'s seams and stubs


def _text_of(output) -> str:
    text = output.get("evalue") or output.get("text") or output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else str(text)


def _is_base64(value) -> bool:
    try:
        base64.b64decode("".join(value) if isinstance(value, list) else value, validate=True)
    except (binascii.Error, TypeError, ValueError):
        return False
    return True


def is_test(cell) -> bool:
    return utils.is_grade(cell) and not utils.is_solution(cell)


def error_line(ename: str, evalue: str) -> str:
    """`ename: evalue`, or just `ename` when the error carries no message."""
    return f"{ename}: {evalue}" if evalue else ename
