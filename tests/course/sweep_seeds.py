"""Which wrong implementations slip through on some seeds? A developer's tool, not a test (minutes for the course).

The grading tests draw one seed per submission and run, so a probe that lets a slip through on one seed in eight
fails CI one run in eight. This runs every wrong implementation of the given chapters (all when none are given) on
seeds 1..N at once, the way a grading kernel runs it (the chapter's modulecraft with the answer key removed, the
notebook's code cells in `__main__`, then the probes), compares with the reference here, and prints each mistake
with the seeds where it keeps the exercise's points or its phrase is not in a failing cell's first failing check
(what the feedback shows).

    .venv/bin/python tests/course/sweep_seeds.py 8 [06_hooks 13_capstone ...]

A mistake whose solution cell no longer defines a class or function (e.g. a delegation whose class statement
fails at once) shows "the test did not report" on every seed; the grading tests see that as a lost cell.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from course_chapters import (CHAPTERS, REPO_ROOT, exercise_test_cells, graded_cells, nbgrader_meta, read_notebook,
                             solution_source, wrong_implementations)

sys.path.insert(0, str(REPO_ROOT))
from autograder import probes  # noqa: E402
from autograder.judging import answer_key  # noqa: E402

KERNEL = r'''
import contextlib, io, json, os, sys
sys.path.insert(0, sys.argv[1])
import matplotlib
matplotlib.use("Agg")
os.environ["MODULECRAFT_GRADING"] = "1"
namespace = __import__("__main__").__dict__
for source in json.load(open(sys.argv[2])):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, "<cell>", "exec"), namespace)
    except Exception:
        pass  # as in a graded notebook, the cells after a failing one still run
from autograder import probes
observed = {f"{seed}:{grade_id}": [check.observed for check in
                                   probes.run_probe(grade_id, probes.Learners(namespace), int(seed)).checks]
            for seed in sys.argv[4].split(",") for grade_id in sys.argv[3].split(",")}
print("@@" + json.dumps(observed))
'''


def code_cells(notebook, grade_id: str, replacement: str) -> list[str]:
    """The notebook's code as a graded submission runs it: solutions (one replaced), locked cells, no test cells."""
    cells = []
    for cell in notebook.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type != "code" or meta.get("grade") or "check_my_work" in cell.source:
            continue
        if meta.get("solution"):
            cells.append(replacement if meta["grade_id"] == grade_id else solution_source(notebook, meta["grade_id"]))
        else:
            cells.append(cell.source)
    return cells


def sweep(chapter: str, seeds: list[int], scratch: Path) -> None:
    notebook = read_notebook(chapter)
    graded = graded_cells(notebook)
    build = answer_key.build(chapter)
    reference = probes.Reference(probes.yours_of(chapter))
    expected = {}
    for wrong in wrong_implementations(chapter):
        grade_ids = [g for g in exercise_test_cells(wrong["grade_id"], graded) if graded[g] > 0]
        if not grade_ids:
            continue  # a prediction worth no points
        cells = scratch / "cells.json"
        cells.write_text(json.dumps(code_cells(notebook, wrong["grade_id"], wrong["source"])))
        ran = subprocess.run([sys.executable, "-c", KERNEL, str(build), str(cells), ",".join(grade_ids),
                              ",".join(map(str, seeds))], capture_output=True, text=True, cwd=scratch,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        lines = [line for line in ran.stdout.splitlines() if line.startswith("@@")]
        observed = json.loads(lines[-1][2:]) if lines else {}
        slipped = []
        for seed in seeds:
            reports = []
            for grade_id in grade_ids:
                if (seed, grade_id) not in expected:
                    expected[seed, grade_id] = probes.run_probe(grade_id, reference, seed)
                got = observed.get(f"{seed}:{grade_id}", [])
                for n, check in enumerate(expected[seed, grade_id].checks):
                    if not probes.agrees(check, got[n] if n < len(got) else None):
                        reports.append(probes.explain(check, got[n] if n < len(got) else None, show_expected=False))
                        break
            if not any(wrong["feedback"] in report for report in reports):
                slipped.append((seed, reports[0].splitlines()[0][:120] if reports else "kept its points"))
        print(f"{chapter} {wrong['mistake']}: {slipped or 'caught on every seed'}", flush=True)


def main() -> None:
    seeds = list(range(1, int(sys.argv[1]) + 1)) if len(sys.argv) > 1 else list(range(1, 9))
    with tempfile.TemporaryDirectory(prefix="sweep-seeds-") as scratch:
        for chapter in sys.argv[2:] or CHAPTERS:
            sweep(chapter, seeds, Path(scratch))


if __name__ == "__main__":
    main()
