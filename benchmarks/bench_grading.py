"""Grading throughput: stock `nbgrader autograde` against ours, side by side on one generated class.

    .venv/bin/python benchmarks/bench_grading.py [--students 100] [--chapters 01_init_and_call ...]

A class of N students x the chapters (a third solved, a third with a typical wrong implementation from
tests/course/wrong_implementations/, a third blank) is released and submitted once, then copied into two
grading folders. Stock: one `nbgrader autograde <chapter>` command per chapter, each grading the whole class
one notebook after another (the cheapest way to run stock nbgrader on a class), or with --stock-per-student
one command per student and chapter. Ours: `Course.grade`, a pool of as many workers as cores, each kernel
forked from a preloaded server, sandboxed and guarded. The two alternate chapter by chapter,
so that other work on the machine weighs on both alike. Prints both times, the ratio, and whether every
score is identical.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import synthetic
from autograder.course import Course

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for the tests' wrong implementations
from tests.course.course_chapters import wrong_implementations  # noqa: E402


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


def grade_stock(root: Path, chapter: str, students: list[str] | None) -> float:
    """`nbgrader autograde <chapter>` for the whole class in one command, or one command per student."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    commands = ([["nbgrader", "autograde", chapter, "--force"]] if students is None else
                [["nbgrader", "autograde", chapter, "--student", student, "--force"] for student in students])
    started = time.monotonic()
    for command in commands:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"stock {' '.join(command)} failed")
    return time.monotonic() - started


def all_scores(course: Course, students: list[str], chapters: list[str]) -> dict:
    return {(s, c): course.scores(s, c) for s in students for c in chapters}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--chapters", nargs="*", help="default: every chapter")
    parser.add_argument("--workers", type=int, help="ours: parallel notebooks (default: number of cores)")
    parser.add_argument("--keep", type=Path, help="keep the grading folders in this folder")
    parser.add_argument("--stock-per-student", action="store_true",
                        help="run stock nbgrader as one command per student and chapter (as its formgrader does)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-grading-")) if args.keep is None else args.keep
    scratch.mkdir(parents=True, exist_ok=True)
    prepared = Course(scratch / "prepared")
    chapters = args.chapters or prepared.chapters()
    print(f"releasing {len(chapters)} chapter(s) and generating {args.students} students ...", flush=True)
    prepared.release(chapters)
    generate_class(prepared, args.students, chapters, scratch)
    students = prepared.students()
    notebooks = len(students) * len(chapters)

    for name in ("stock", "ours"):
        shutil.copytree(prepared.root, scratch / name, symlinks=True)
    stock, ours = Course(scratch / "stock"), Course(scratch / "ours")  # each rewrites its own config

    # Chapter by chapter, stock then ours: on a shared machine both see the same background load.
    stock_seconds = ours_seconds = 0.0
    flagged = []
    for chapter in chapters:
        stock_chapter = grade_stock(stock.root, chapter, students if args.stock_per_student else None)
        report = ours.grade(students, [chapter], workers=args.workers)
        stock_seconds += stock_chapter
        ours_seconds += report.seconds
        flagged += [f"{o.student}/{o.chapter}: {o.needs_review + o.notes}" for o in report.outcomes
                    if o.needs_review or o.notes]
        print(f"  {chapter}: stock {stock_chapter:6.1f} s, ours {report.seconds:6.1f} s", flush=True)

    stock_scores, our_scores = all_scores(stock, students, chapters), all_scores(ours, students, chapters)
    different = [key for key in stock_scores if stock_scores[key] != our_scores[key]]
    print()
    print(f"class: {len(students)} students x {len(chapters)} chapters = {notebooks} notebooks, "
          f"{os.cpu_count()} cores")
    mode = "one command per student" if args.stock_per_student else "one command per chapter"
    print(f"stock nbgrader autograde ({mode}): {stock_seconds:8.1f} s  ({stock_seconds / notebooks:.2f} s per notebook)")
    print(f"ours (Course.grade, {args.workers or os.cpu_count()} workers): {ours_seconds:8.1f} s  "
          f"({ours_seconds / notebooks:.2f} s per notebook)")
    print(f"ratio: ours is {stock_seconds / ours_seconds:.2f}x faster")
    print(f"scores identical: {not different} ({len(stock_scores) - len(different)}/{len(stock_scores)} submissions)")
    for key in different[:10]:
        print(f"  differs {key}: stock {stock_scores[key]} ours {our_scores[key]}")
    for line in flagged[:10]:
        print(f"  ours flagged {line}")
    if args.keep is None:
        shutil.rmtree(scratch)
    raise SystemExit(1 if different else 0)


if __name__ == "__main__":
    main()
