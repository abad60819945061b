"""Grading throughput, side by side on one generated class: stock nbgrader, ours, ours on Dask, and the floor.

    .venv/bin/python benchmarks/bench_grading.py [--students 12] [--chapters 01_init_and_call ...] [--rounds 3]

A class of N students x the chapters (a third solved, a third with a typical wrong implementation from
tests/course/wrong_implementations/, a third blank) is released and submitted once, then copied into one
grading folder per contender, each graded in turn:

- stock, sequential: one `nbgrader autograde <chapter>` per chapter, the whole class one notebook after another;
- stock, one process per core (the usual workaround): per chapter, the class split into as many
  `nbgrader autograde` commands as cores, run at the same time;
- ours: `Course.grade`, a local pool of as many workers as cores;
- ours on Dask: `Course.grade(scheduler=...)` on a LocalCluster of 1, then 2 one-thread worker processes
  (started and warmed up on a throwaway copy of the class before the clock starts, as a standing cluster
  would be);
- the floor: every code cell of every notebook exec'd in this one process (no kernel, no sandbox, no nbgrader).

Prints each time, per notebook, the ratios against the targets (>= 3.5x stock per-core, within 3x of the floor
per notebook, near-linear Dask scaling), the load average around each run (the machine may be shared), and
which submissions each contender scored otherwise than ours (stock may: it judges in the kernel with the whole
reference; ours on Dask must not, or the run fails). With `--rounds N` the contenders take turns N
times and the ratios use each one's best time.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import config, synthetic
from autograder.course import Course

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for the tests' wrong implementations
from tests.course.course_chapters import wrong_implementations  # noqa: E402

TARGET_VS_STOCK_PARALLEL = 3.5  # issue 44
TARGET_VS_FLOOR = 3.0
STOCK = ("stock-sequential", "stock-per-core")  # nbgrader as shipped: it cannot give our verdicts


def generate_class(course: Course, students: int, chapters: list[str], scratch: Path) -> None:
    for chapter in chapters:
        mistakes = wrong_implementations(chapter)
        for n in range(students):
            kind = ("solved", "wrong", "blank")[n % 3]
            if kind == "wrong" and mistakes:
                mistake = mistakes[n // 3 % len(mistakes)]
                notebook = synthetic.with_cells(synthetic.solved(course, chapter),
                                                {mistake["grade_id"]: mistake["source"]})
            else:
                notebook = synthetic.blank(course, chapter) if kind != "solved" else synthetic.solved(course, chapter)
            synthetic.write(notebook, scratch / "submission.ipynb")
            course.submit(f"student{n:03d}", chapter, scratch / "submission.ipynb")


class StockFailed(Exception):
    """A stock `nbgrader autograde` command failed (its run is timed again, once)."""


def stock_command(chapter: str, *options: str) -> list[str]:
    return ["nbgrader", "autograde", chapter, "--force", *options]


def run_stock(root: Path, commands: list[list[str]], parallel: int) -> float:
    """Run nbgrader commands in the grading folder, `parallel` at a time; seconds taken."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def run(command):
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "Error" in line] or ["(no error line)"]
            raise StockFailed(f"stock {' '.join(command)} failed: {errors[-1].strip()}", done.stderr[-3000:])

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        list(pool.map(run, commands))
    return time.monotonic() - started


def stock_sequential(root: Path, students: list[str], chapters: list[str], cores: int) -> float:
    return run_stock(root, [stock_command(chapter) for chapter in chapters], 1)


def stock_per_core(root: Path, students: list[str], chapters: list[str], cores: int) -> float:
    """Per chapter, `cores` commands at once, each grading its share of the class (the rest excluded)."""
    commands = []
    for chapter in chapters:
        shares = [students[k::cores] for k in range(cores)]
        for share in filter(None, shares):
            others = ",".join(s for s in students if s not in share)
            commands.append(stock_command(chapter, f"--CourseDirectory.student_id_exclude={others}"))
    seconds = 0.0
    for chapter in chapters:
        seconds += run_stock(root, [c for c in commands if c[2] == chapter], cores)
    return seconds


def ours(root: Path, students: list[str], chapters: list[str], cores: int, scheduler=None) -> float:
    report = Course(root).grade(students, chapters, workers=cores, scheduler=scheduler)
    if report.failed:
        raise SystemExit(f"ours failed on {report.failed[:3]}")
    return report.seconds


def floor(root: Path, students: list[str], chapters: list[str], cores: int) -> float:
    """Every code cell of every submission exec'd in this process, errors caught per cell as nbgrader allows."""
    os.environ[config.GRADING_ENV_VAR] = "1"  # the chapters' last cell, check_my_work(), then does nothing
    course = Course(root)
    notebooks = [nbformat.read(course.submission_path(s, c), as_version=4) for c in chapters for s in students]
    started = time.monotonic()
    for notebook in notebooks:
        namespace = {"__name__": "__main__"}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for cell in notebook.cells:
                if cell.cell_type == "code":
                    try:
                        exec(compile(cell.source, "<cell>", "exec"), namespace)
                    except Exception:
                        pass
    return time.monotonic() - started


def all_scores(course: Course, students: list[str], chapters: list[str]) -> dict:
    return {(s, c): course.scores(s, c) for s in students for c in chapters}


@contextlib.contextmanager
def dask_cluster(workers: int):
    from distributed import LocalCluster

    from autograder.dask_grading import PRELOAD  # no HTTP server (Dask starts one even without a dashboard)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", scheduler_kwargs={"preload": [PRELOAD]},
                      preload=[PRELOAD]) as cluster:
        yield cluster.scheduler_address


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=12)
    parser.add_argument("--chapters", nargs="*", help="default: every chapter")
    parser.add_argument("--keep", type=Path, help="keep the grading folders in this folder")
    parser.add_argument("--skip", nargs="*", default=[], help="contenders to leave out (e.g. stock-sequential)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every contender this many times, in turn, and keep each one's best time: on a "
                             "shared machine, the run least slowed down by the others")
    args = parser.parse_args()
    cores = os.cpu_count() or 1

    scratch = Path(tempfile.mkdtemp(prefix="bench-grading-")) if args.keep is None else args.keep
    scratch.mkdir(parents=True, exist_ok=True)
    prepared = Course(scratch / "prepared")
    chapters = args.chapters or prepared.chapters()
    print(f"releasing {len(chapters)} chapter(s) and generating {args.students} students ...", flush=True)
    prepared.release(chapters)
    generate_class(prepared, args.students, chapters, scratch)
    students = prepared.students()
    notebooks = len(students) * len(chapters)

    contenders = {
        "floor": floor,
        "stock-sequential": stock_sequential,
        "stock-per-core": stock_per_core,
        "ours": ours,
        "dask-1": lambda *a: _on_dask(1, *a),
        "dask-2": lambda *a: _on_dask(2, *a),
    }
    seconds, graded = {}, {}
    for round_ in range(1, args.rounds + 1):
        for name, run in contenders.items():
            if name in args.skip:
                continue
            root = scratch / name
            for attempt in (1, 2):
                shutil.rmtree(root, ignore_errors=True)
                shutil.copytree(prepared.root, root, symlinks=True)
                Course(root)  # rewrites its own config
                before = os.getloadavg()[0]
                try:
                    took = run(root, students, chapters, cores)
                    break
                except StockFailed as failure:  # (jupyter_client's port race between kernels started at once)
                    if attempt == 2:
                        print(failure.args[1], file=sys.stderr)
                        raise SystemExit(failure.args[0]) from None
                    print(f"  {name}: {failure.args[0]}; timed again from the start", flush=True)
            seconds[name] = min(took, seconds.get(name, took))
            print(f"  {name:16s} {took:7.1f} s  {took / notebooks:6.3f} s/notebook  "
                  f"(load average {before:.1f} -> {os.getloadavg()[0]:.1f}, round {round_})", flush=True)
            if name != "floor":
                graded[name] = all_scores(Course(root), students, chapters)
    if args.rounds > 1:
        print("best of each:", ", ".join(f"{name} {took:.1f} s" for name, took in seconds.items()))

    print()
    print(f"class: {len(students)} students x {len(chapters)} chapters = {notebooks} notebooks, {cores} cores")
    if {"ours", "stock-per-core"} <= seconds.keys():
        ratio = seconds["stock-per-core"] / seconds["ours"]
        print(f"ours vs stock per core: {ratio:.2f}x faster (target >= {TARGET_VS_STOCK_PARALLEL:g}x)")
    if {"ours", "stock-sequential"} <= seconds.keys():
        print(f"ours vs stock sequential: {seconds['stock-sequential'] / seconds['ours']:.2f}x faster")
    if {"ours", "floor"} <= seconds.keys():
        # ours runs `cores` notebooks at once: per notebook, a worker spends cores * (wall time / notebooks)
        per_notebook, floor_per_notebook = seconds["ours"] * cores / notebooks, seconds["floor"] / notebooks
        print(f"ours per notebook (per worker) vs the floor: {per_notebook:.3f} s vs {floor_per_notebook:.3f} s = "
              f"{per_notebook / floor_per_notebook:.1f}x the floor (target <= {TARGET_VS_FLOOR:g}x)")
    if {"dask-1", "dask-2"} <= seconds.keys():
        print(f"dask scaling 1 -> 2 workers: {seconds['dask-1'] / seconds['dask-2']:.2f}x (linear: 2x)")
    reference = graded.get("ours") or next(iter(graded.values()), {})
    different = {name: [k for k in reference if scores[k] != reference[k]] for name, scores in graded.items()}
    for name, keys in different.items():
        print(f"scores of {name} identical to ours: {not keys} ({len(reference) - len(keys)}/{len(reference)})")
        for key in keys[:5]:
            print(f"  differs {key}: {graded[name][key]} vs ours {reference[key]}")
    if any(different.get(name) for name in STOCK):
        print("  (stock judges in the kernel, with the whole reference there: where one exercise builds on another,"
              " a mistake costs stock fewer cells; delegating to the reference would earn stock full marks)")
    if args.keep is None:
        shutil.rmtree(scratch)
    raise SystemExit(1 if any(different.get(name) for name in different if name not in STOCK) else 0)


def _on_dask(workers: int, root, students, chapters, cores) -> float:
    """A standing cluster's time: its workers have graded a notebook each (imports made, forkserver started)
    before the clock starts, in a copy of the class that is then thrown away."""
    with dask_cluster(workers) as address:
        warm_up = root.with_name(root.name + "-warm-up")
        shutil.copytree(root, warm_up, symlinks=True)
        ours(warm_up, students[:workers], chapters[:1], workers, scheduler=address)
        shutil.rmtree(warm_up)
        return ours(root, students, chapters, workers, scheduler=address)


if __name__ == "__main__":
    main()
