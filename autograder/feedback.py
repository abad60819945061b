"""Feedback preprocessing: keep hidden tests out of the learner's feedback."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from nbgrader import utils


class ReduceTestErrors(NbGraderPreprocessor):
    """Reduce every error shown under a test cell to `ErrorName: message`.

    `ClearHiddenTests` removes the hidden lines from the cell source, but a failing hidden test's traceback
    still quotes them. The assertion message stays: it is written for the learner.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [error_line(output.ename, output.evalue)]
        return cell, resources


def error_line(ename: str, evalue: str) -> str:
    """`ename: evalue`, or just `ename` when the error carries no message."""
    return f"{ename}: {evalue}" if evalue else ename
