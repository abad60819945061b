"""Every chapter notebook is well-formed nbgrader source, runs with its solutions, and releases cleanly."""
from __future__ import annotations

import os
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader.nbgraderformat import MetadataValidator

from course_chapters import (CHAPTERS, graded_cells, nbgrader_meta, notebook_path, read_notebook, solution_ids,
                      exercise_test_cells, wrong_implementations)

pytestmark = pytest.mark.parametrize("chapter", CHAPTERS)
HIDDEN_CELL = ('# Hidden tests: they run when your notebook is graded.\n### BEGIN HIDDEN TESTS\nrun_tests("{grade_id}")\n'
               "### END HIDDEN TESTS")


def test_notebook_is_valid_nbgrader_source(chapter):
    nb = read_notebook(chapter)
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c)]
    assert len(ids) == len(set(ids)), f"duplicate grade ids: {sorted({i for i in ids if ids.count(i) > 1})}"
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{cell.id}: committed with outputs"
        if cell.cell_type == "markdown":
            assert meta.get("locked"), f"markdown cell {cell.id} is not locked"
        if meta.get("grade"):
            assert meta["locked"] and (meta["points"] > 0 or "_predict_" in meta["grade_id"]), \
                f"test cell {meta['grade_id']} must be locked, with points (only a prediction's may have none)"
        if meta.get("solution"):
            assert not meta["locked"] and "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
    assert nb.cells[-1].source.strip().endswith("check_my_work()"), "the last cell must run check_my_work()"


# The capstone's first eleven exercises are a mechanism of modulecraft.mechanisms each, graded on its own (ten pastes
# and batch norm's backward, derived there), its last the whole run on them; chapter 10 has eight graded exercises and
# a prediction worth no points (the checker comes before any formula).
MAX_EXERCISES = {"10_autograd": 9, "13_capstone": 17}


def test_every_exercise_has_visible_and_hidden_tests_and_points_add_up(chapter):
    nb = read_notebook(chapter)
    graded = graded_cells(nb)
    exercises = solution_ids(nb)
    assert 1 <= len(exercises) <= MAX_EXERCISES.get(chapter, 7), f"{len(exercises)} exercises"
    for solution_id in exercises:
        expected = [f"{solution_id}_visible", f"{solution_id}_hidden"]
        assert exercise_test_cells(solution_id, graded) == expected, solution_id
    for cell in nb.cells:  # a test cell runs its probe (autograder/probes), and nothing else
        grade_id = nbgrader_meta(cell).get("grade_id", "")
        if grade_id.endswith("_visible"):
            assert cell.source.strip() == f'run_tests("{grade_id}")', grade_id
        elif grade_id.endswith("_hidden"):
            assert cell.source.strip() == HIDDEN_CELL.format(grade_id=grade_id), grade_id
    owned = {gid for s in exercises for gid in exercise_test_cells(s, graded)}
    assert set(graded) == owned, "test cells without an exercise"

    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    stated = re.search(r"\*\*Exercises:\*\* (\d+) \((\d+) points\)", text)
    assert stated, "the title cell states '**Exercises:** N (P points)'"
    assert (int(stated[1]), float(stated[2])) == (len(exercises), sum(graded.values()))
    per_exercise = [float(p) for p in re.findall(r"^### Exercise \d+ \((\d+) points?\)", text, re.M)]
    assert per_exercise == [sum(graded[g] for g in exercise_test_cells(s, graded)) for s in exercises]


def test_every_exercise_has_two_wrong_implementations(chapter):
    nb = read_notebook(chapter)
    graded = graded_cells(nb)
    exercises = [s for s in solution_ids(nb) if sum(graded[g] for g in exercise_test_cells(s, graded)) > 0]
    wrong = wrong_implementations(chapter)
    counts = {s: sum(w["grade_id"] == s for w in wrong) for s in exercises}
    assert all(n >= 2 for n in counts.values()), f"wrong implementations per exercise: {counts}"
    assert {w["grade_id"] for w in wrong} <= set(solution_ids(nb))
    labels = [w["mistake"] for w in wrong]
    assert len(labels) == len(set(labels)), "mistake labels must be unique within a chapter"


def test_runs_top_to_bottom_with_solutions_in_under_10_seconds(chapter, monkeypatch):
    monkeypatch.setenv("MODULECRAFT_GRADING", "1")  # the last cell would otherwise grade a copy of the notebook
    nb = read_notebook(chapter)
    started = time.monotonic()
    NotebookClient(nb, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook_path(chapter).parent)}}).execute()
    seconds = time.monotonic() - started
    assert seconds < 10, f"{chapter} took {seconds:.1f} s"
    numbers = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("grade")
               and any(_is_number(o.get("data", {}).get("text/plain")) for o in c.outputs)]
    assert numbers == [], f"test cells displaying a number, which nbgrader reads as partial credit: {numbers}"


def _is_number(text) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.slow
def test_release_has_no_solution_and_no_hidden_test(chapter, release):
    source, student = read_notebook(chapter), nbformat.read(release(chapter), as_version=4)
    text = "\n".join(c.source for c in student.cells)
    for marker in ["BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"]:
        assert marker not in text
    by_id = {nbgrader_meta(c).get("grade_id"): c for c in student.cells}
    for cell in source.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            assert "raise NotImplementedError()" in by_id[meta["grade_id"]].source
            assert _body(cell.source, "SOLUTION").isdisjoint(by_id[meta["grade_id"]].source.splitlines())
        if "### BEGIN HIDDEN TESTS" in cell.source:
            assert _body(cell.source, "HIDDEN TESTS").isdisjoint(by_id[meta["grade_id"]].source.splitlines())


def _body(source: str, region: str) -> set[str]:
    """The non-trivial lines between `### BEGIN <region>` and `### END <region>`."""
    inside = source.split(f"### BEGIN {region}", 1)[1].split(f"### END {region}", 1)[0]
    return {line for line in inside.splitlines() if len(line.strip()) > 12}
