"""The course on JupyterHub: the root-run commands around nbgrader's exchange (see hub/ and course/INSTRUCTORS.md).

In a hub the instructor drives nbgrader as usual (formgrader, or `nbgrader` in a terminal of their server):
generate, release, collect, generate and release feedback. Autograding is the one step that cannot run there:
the grader confines every kernel with an unprivileged user, namespaces and a control group, which needs root,
and an instructor's server is not root. So formgrader's Autograde button refuses with the command to run
instead (`SandboxedGradingOnly`), and root runs

    sudo /opt/modulecraft-hub/venv/bin/python -m autograder.hub grade --course-root ~teacher/modulecraft-course

which grades every collected submission the way `python -m autograder grade` does and gives what it wrote back
to the course's owner, so the instructor's formgrader keeps working on the gradebook afterwards.
"""
from __future__ import annotations

import argparse
import os
import pwd
import shutil
import sys
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

DEFAULT_COURSE_ROOT = Path("~/modulecraft-course")  # under the instructor's home: formgrader needs it there


def grade_command(course_root) -> str:
    return f"sudo {sys.executable} -m autograder.hub grade --course-root {course_root}"


class SandboxedGradingOnly(NbGraderPreprocessor):
    """Put first in an instructor's `Autograde` pipeline in a hub: stock autograding would run learners' code
    unconfined, as the instructor, next to the gradebook and the hidden tests. Refuses with the command to run."""

    def preprocess(self, nb, resources):
        raise RuntimeError("Autograding runs learners' code in a sandbox that needs root, which this server is not. "
                           "Collect the submissions here, then ask the hub's administrator to run: "
                           f"{grade_command(os.environ.get('MODULECRAFT_COURSE_ROOT') or DEFAULT_COURSE_ROOT.expanduser())} "
                           "and reload this page; generate and release the feedback here afterwards.")


def setup(course_root: Path, owner: str, exchange: Path, source: Path, selfcheck: Path, chapters=None) -> Path:
    """Make `course_root` an nbgrader course of `owner` (the instructor): the chapters copied into
    `<root>/chapters` (with solutions and hidden tests, readable by the owner alone), and `<root>/exchange` the
    hub's exchange, which `exchange` becomes (world-writable and sticky, as nbgrader's exchange must be).
    The learners' self-check source is (re)published into `selfcheck` from the course's chapters."""
    from .course import Course

    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o1777)
    course_root.mkdir(parents=True, exist_ok=True)
    copied = course_root / "chapters"
    for chapter in chapters or sorted(p.parent.name for p in source.glob("*/*.ipynb") if p.stem == p.parent.name):
        if not (copied / chapter).exists():
            shutil.copytree(source / chapter, copied / chapter,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    link = course_root / "exchange"
    if not link.is_symlink():
        if link.is_dir():
            link.rmdir()
        link.symlink_to(exchange, target_is_directory=True)
    Course(course_root, source=copied)
    give_back(course_root, owner)
    publish_selfcheck(copied, selfcheck)
    return course_root


def publish_selfcheck(chapters: Path, target: Path) -> None:
    """The chapters as learners' self-check grades them: solutions cleared, tests (visible and hidden) kept.

    A hidden test cell is one line, `run_tests("<id>")`, whose checks are the public probes; what must stay
    private is the solutions. Without the hidden cells the self-check would count them as failed."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions

    from .config import nbgrader_config

    clear = ClearSolutions(config=nbgrader_config(chapters))
    for source in sorted(chapters.glob("*/*.ipynb")):
        if source.stem != source.parent.name:
            continue
        notebook, _ = clear.preprocess(nbformat.read(source, as_version=4), {})
        published = target / source.parent.name / source.name
        published.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, published)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def grade(course_root: Path, workers: int | None = None) -> int:
    """Grade every collected submission, sandboxed (as `python -m autograder grade`), then hand the files back."""
    from .cli import main as cli_main

    owner = course_root.stat().st_uid
    try:
        return cli_main(["grade", "--root", str(course_root)] + (["--workers", str(workers)] if workers else []))
    finally:
        give_back(course_root, owner)


def give_back(course_root: Path, owner) -> None:
    """Whatever root wrote in the course folder becomes the owner's again (links are left as they are)."""
    user = pwd.getpwuid(owner) if isinstance(owner, int) else pwd.getpwnam(owner)
    uid, gid = user.pw_uid, user.pw_gid
    for folder, subfolders, files in os.walk(course_root):
        for path in [folder, *(os.path.join(folder, name) for name in subfolders + files)]:
            if not os.path.islink(path) and os.lstat(path).st_uid != uid:
                os.lchown(path, uid, gid)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.hub", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("setup", help="make the instructor's course folder, linked to the hub's exchange (root)")
    p.add_argument("--course-root", type=Path, required=True)
    p.add_argument("--owner", required=True, help="the instructor's Unix user, who owns the course folder")
    p.add_argument("--exchange", type=Path, default=Path("/srv/nbgrader/exchange"))
    p.add_argument("--source", type=Path, default=None, help="the chapters (default: the repository's course/source)")
    p.add_argument("--chapters", nargs="*", help="copy only these chapters (default: all)")
    p.add_argument("--selfcheck-source", type=Path, default=Path("/srv/modulecraft-hub/selfcheck"),
                   help="where learners' self-check finds the chapters without solutions (world-readable)")
    p = sub.add_parser("grade", help="autograde the collected submissions, sandboxed (root)")
    p.add_argument("--course-root", type=Path, required=True)
    p.add_argument("--workers", type=int)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print(f"python -m autograder.hub {args.command}: run as root (sudo)", file=sys.stderr)
        return 2
    if args.command == "setup":
        from .config import COURSE_SOURCE
        print(setup(args.course_root.resolve(), args.owner, args.exchange, args.source or COURSE_SOURCE,
                    args.selfcheck_source, args.chapters))
        return 0
    return grade(args.course_root.resolve(), args.workers)


if __name__ == "__main__":
    sys.exit(main())
