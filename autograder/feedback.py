"""Feedback preprocessing: keep hidden tests out of what the learner sees."""
from __future__ import annotations

import re

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_BLOCK = re.compile(r"^\s*### BEGIN HIDDEN TESTS\s*$(.*?)^\s*### END HIDDEN TESTS\s*$", re.MULTILINE | re.DOTALL)
MIN_QUOTED = 12  # a hidden line shorter than this (e.g. `x = 1`) is too common to count as quoted
REMOVED = "[output removed: it quoted the hidden tests]\n"


class ReduceTestErrors(NbGraderPreprocessor):
    """Reduce every error shown under a test cell to `ErrorName: message`.

    `ClearHiddenTests` removes the hidden lines from the cell source, but a failing hidden test's traceback
    still quotes them. The assertion message stays: it is written for the learner.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_test(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [error_line(output.ename, output.evalue)]
        return cell, resources


class RemoveHiddenTestLeaks(NbGraderPreprocessor):
    """The last check before feedback is written (runs before `ClearHiddenTests`, which needs the hidden
    lines to find them): no output may quote a hidden test."""

    def preprocess(self, nb, resources):
        remove_leaks(nb)
        return nb, resources


def is_test(cell) -> bool:
    return utils.is_grade(cell) and not utils.is_solution(cell)


def hidden_lines(nb) -> set[str]:
    """The lines of every hidden test block of `nb`'s test cells, stripped, long enough to be telling, except
    those the course shows anyway (in its own cells, or in visible tests)."""
    lines, shown = set(), set()
    for cell in nb.cells:
        if utils.is_solution(cell):
            continue  # the learner's: no proof that a line is public
        for block in HIDDEN_BLOCK.findall(cell.source) if is_test(cell) else []:
            lines |= {line.strip() for line in block.splitlines() if len(line.strip()) >= MIN_QUOTED}
        shown |= {line.strip() for line in HIDDEN_BLOCK.sub("", cell.source).splitlines()}
    return lines - shown


def remove_leaks(nb, lines: set[str] | None = None) -> list[str]:
    """Replace each output that quotes a hidden line; return the cells (grade_id or #index) that had one.

    A test cell's error keeps its traceback (it quotes the test, for the instructor; the feedback reduces it)
    but not a message that quotes hidden lines."""
    lines = hidden_lines(nb) if lines is None else lines
    leaked = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not lines:
            continue
        outputs = cell.get("outputs", [])
        for position, output in enumerate(outputs):
            text = _shown_text(output, with_traceback=not is_test(cell))
            if any(line in text for line in lines):
                outputs[position] = _removed(output)
                leaked.append(cell.metadata.get("nbgrader", {}).get("grade_id") or f"#{index}")
    return list(dict.fromkeys(leaked))


def _removed(output):
    """What replaces a leaking output: an error stays an error (its cell still fails), the rest a note."""
    if output.get("output_type") == "error":
        return nbformat.v4.new_output("error", ename=output.ename, evalue=REMOVED.strip(),
                                      traceback=[error_line(output.ename, REMOVED.strip())])
    return nbformat.v4.new_output("stream", name="stdout", text=REMOVED)


def _shown_text(output, with_traceback: bool) -> str:
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join([str(output.get("evalue", "")), *(output.get("traceback", []) if with_traceback else [])])
    return "\n".join(str(value) if isinstance(value, str) else "\n".join(map(str, value))
                     for value in output.get("data", {}).values() if isinstance(value, (str, list)))


def error_line(ename: str, evalue: str) -> str:
    """`ename: evalue`, or just `ename` when the error carries no message."""
    return f"{ename}: {evalue}" if evalue else ename
