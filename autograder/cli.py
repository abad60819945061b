"""`python -m autograder` (or `modulecraft-grade`): the instructor's grading commands and the learner's check."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_ROOT = os.environ.get("MODULECRAFT_GRADING_ROOT", ".grading")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name, help, with_root=True):
        p = sub.add_parser(name, help=help, description=help)
        if with_root:
            p.add_argument("--root", default=DEFAULT_ROOT,
                           help=f"grading folder (default: {DEFAULT_ROOT}, or $MODULECRAFT_GRADING_ROOT)")
        return p

    p = command("release", "generate the student version of the chapters (nbgrader generate_assignment)")
    p.add_argument("chapters", nargs="*", help="default: every chapter in course/source")

    p = command("collect", "copy submissions in from a folder or a .zip, matching files to students and chapters")
    p.add_argument("submissions", type=Path, help="folder or .zip of notebooks")

    p = command("grade", "autograde submissions in parallel (all students and chapters unless narrowed)")
    p.add_argument("--student", action="append", help="only this student (repeatable)")
    p.add_argument("--chapter", action="append", help="only this chapter (repeatable)")
    p.add_argument("--workers", type=int, help="parallel notebooks (default: number of cores)")
    p.add_argument("--force", action="store_true", help="regrade submissions already graded and unchanged")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=os.environ.get("MODULECRAFT_DASK_SCHEDULER") or None,
                       help="grade on the Dask cluster of this scheduler, e.g. tcp://10.0.0.5:8786 "
                            "(default: $MODULECRAFT_DASK_SCHEDULER, else on this machine)")
    where.add_argument("--cluster", choices=["local"],
                       help="local: a Dask LocalCluster of --workers processes on this machine")

    p = command("feedback", "write feedback HTML (hidden tests removed) for graded submissions")
    p.add_argument("--student", action="append")
    p.add_argument("--chapter", action="append")

    p = command("export", "write the grades as a CSV: one row per student per chapter (plain), or for Canvas")
    p.add_argument("--output", type=Path, default=Path("grades.csv"))
    p.add_argument("--format", choices=["plain", "canvas"], default="plain",
                   help="canvas: the gradebook import of Canvas (one row per student, a column per chapter)")
    p.add_argument("--roster", type=Path, help="canvas: Canvas's gradebook export, to map student ids to Canvas")
    p.add_argument("--roster-key", default="SIS Login ID",
                   help="canvas: the roster column that holds our student ids (default: SIS Login ID)")
    p.add_argument("--roster-is-current", action="store_true",
                   help="canvas: the roster was exported from Canvas after every file you imported there (a score "
                        "removed in Canvas on purpose then stays removed)")
    p.add_argument("--chapter", action="append",
                   help="only this chapter (repeatable; default: plain, every chapter; canvas, the released ones)")

    command("status", "what was graded, and what needs a manual look and why")

    p = command("check", "grade a copy of your notebook against the hidden tests (learners)", with_root=False)
    p.add_argument("notebook", type=Path, nargs="?")
    p.add_argument("--chapter", help="default: the notebook's file name")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the check server (autograder.selfcheck)

    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, FileExistsError, ValueError, LookupError, ConnectionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _course(args):
    from .course import Course
    return Course(args.root)


def cmd_release(args) -> int:
    for chapter, path in _course(args).release(args.chapters or None).items():
        print(f"{chapter}: {path}")
    return 0


def cmd_collect(args) -> int:
    from .collect import collect
    result = collect(_course(args), args.submissions)
    print(result.render())
    return 0 if not result.unmatched else 1


def cmd_grade(args) -> int:
    from .grading import ProgressBar
    course = _course(args)
    report = course.grade(args.student, args.chapter, workers=args.workers, progress=ProgressBar(), force=args.force,
                          scheduler=args.cluster or args.scheduler)
    print(f"graded {len(report.outcomes) - report.skipped} submission(s) in {report.seconds:.1f} s"
          + (f"; {report.skipped} already graded and unchanged" if report.skipped else ""))
    for outcome in report.needs_review:
        print(f"needs review: {outcome.student}/{outcome.chapter}: " + "; ".join(outcome.needs_review))
    for student, chapter, why in report.failed:
        print(f"not graded: {student}/{chapter}: {why} (run grade again)")
    return 1 if report.failed else 0


def cmd_feedback(args) -> int:
    for path in _course(args).generate_feedback(args.student, args.chapter):
        print(path)
    return 0


def cmd_export(args) -> int:
    from .reports import export_canvas, export_csv
    if args.format == "canvas":
        rows = export_canvas(_course(args), args.output, args.roster, args.roster_key, args.chapter,
                             roster_is_current=args.roster_is_current)
        print(f"wrote {rows} student(s) to {args.output} (Canvas: Grades > Import)")
    elif args.roster:
        raise ValueError("--roster is for --format canvas")
    else:
        rows = export_csv(_course(args), args.output, args.chapter)
        print(f"wrote {rows} row(s) to {args.output}")
    return 0


def cmd_status(args) -> int:
    from .reports import status
    print(status(_course(args)))
    return 0


def cmd_check(args) -> int:
    from . import selfcheck
    if args.serve:
        selfcheck.serve()
        return 0
    if args.notebook is None:
        raise ValueError("name the notebook to check: python -m autograder check <notebook.ipynb>")

    def progress(text: str) -> None:  # one line, rewritten in place, in a terminal only
        if sys.stderr.isatty():
            print(f"\r{text[:100]:<100}\r", end="", file=sys.stderr, flush=True)

    result = selfcheck.check_notebook(args.notebook, args.chapter, progress=progress)
    progress("")
    print(result.render())
    return 0 if result.passed else 1


COMMANDS = {"release": cmd_release, "collect": cmd_collect, "grade": cmd_grade, "feedback": cmd_feedback,
            "export": cmd_export, "status": cmd_status, "check": cmd_check}
