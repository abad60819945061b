"""Which wrong implementations slip through on some seeds? A developer's tool, not a test (minutes for the course).

The grading tests draw one seed per submission and run, so a probe that lets a slip through on one seed in eight
fails CI one run in eight. This runs every wrong implementation of the given chapters (all when none are given) on
seeds 1..N at once, the way a grading kernel runs it (the chapter's modulecraft with the answer key removed, the
notebook's code cells in `__main__`, then the probes), compares with the reference here, and prints each mistake
with the seeds where it keeps the exercise's points or its phrase is not in a failing cell's first failing check
(what the feedback shows).

    .venv/bin/python tests/course/sweep_seeds.py 8 [06_hooks 13_capstone ...]
    .venv/bin/python tests/course/sweep_seeds.py --solved 300 [06_hooks ...]

With `--solved`, the chapters' own solutions instead: the seeds on which a correct notebook loses a check (a
correct learner would lose points on them).

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


class Chapter:
    """A chapter's notebook, its answer key removed as for grading, and the reference's observations by seed."""

    def __init__(self, chapter: str):
        self.notebook = read_notebook(chapter)
        self.graded = graded_cells(self.notebook)
        self.build = answer_key.build(chapter)
        self.reference = probes.Reference(probes.yours_of(chapter))
        self.expected = {}

    def failures(self, cells: list[str], grade_ids: list[str], seeds: list[int], scratch: Path) -> dict:
        """seed -> the first failing check's report of each of `grade_ids` that fails, the notebook's code being
        `cells`, run as a grading kernel runs it."""
        (scratch / "cells.json").write_text(json.dumps(cells))
        ran = subprocess.run([sys.executable, "-c", KERNEL, str(self.build), str(scratch / "cells.json"),
                              ",".join(grade_ids), ",".join(map(str, seeds))], capture_output=True, text=True,
                             cwd=scratch, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        lines = [line for line in ran.stdout.splitlines() if line.startswith("@@")]
        observed = json.loads(lines[-1][2:]) if lines else {}
        found = {}
        for seed in seeds:
            for grade_id in grade_ids:
                if (seed, grade_id) not in self.expected:
                    self.expected[seed, grade_id] = probes.run_probe(grade_id, self.reference, seed)
                got = observed.get(f"{seed}:{grade_id}", [])
                for n, check in enumerate(self.expected[seed, grade_id].checks):
                    if not probes.agrees(check, got[n] if n < len(got) else None):
                        found.setdefault(seed, []).append(
                            probes.explain(check, got[n] if n < len(got) else None, show_expected=False))
                        break
        return found


def sweep(chapter: str, seeds: list[int], scratch: Path) -> None:
    course = Chapter(chapter)
    for wrong in wrong_implementations(chapter):
        grade_ids = [g for g in exercise_test_cells(wrong["grade_id"], course.graded) if course.graded[g] > 0]
        if not grade_ids:
            continue  # a prediction worth no points
        failures = course.failures(code_cells(course.notebook, wrong["grade_id"], wrong["source"]), grade_ids,
                                   seeds, scratch)
        slipped = [(seed, failures[seed][0].splitlines()[0][:120] if failures.get(seed) else "kept its points")
                   for seed in seeds if not any(wrong["feedback"] in report for report in failures.get(seed, []))]
        print(f"{chapter} {wrong['mistake']}: {slipped or 'caught on every seed'}", flush=True)


def sweep_solved(chapter: str, seeds: list[int], scratch: Path) -> None:
    course = Chapter(chapter)
    grade_ids = [g for g, points in course.graded.items() if points > 0]
    failures = course.failures(code_cells(course.notebook, None, ""), grade_ids, seeds, scratch)
    lost = [(seed, reports[0].splitlines()[0][:120]) for seed, reports in failures.items()]
    print(f"{chapter} solved: {lost or f'full marks on all {len(seeds)} seeds'}", flush=True)


def main() -> None:
    arguments = sys.argv[1:]
    solved = arguments[:1] == ["--solved"]
    arguments = arguments[1:] if solved else arguments
    seeds = list(range(1, int(arguments[0]) + 1)) if arguments else list(range(1, 9))
    with tempfile.TemporaryDirectory(prefix="sweep-seeds-") as scratch:
        for chapter in arguments[1:] or CHAPTERS:
            (sweep_solved if solved else sweep)(chapter, seeds, Path(scratch))


if __name__ == "__main__":
    main()
