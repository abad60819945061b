"""The course on JupyterHub: the root-run commands around nbgrader's exchange (see hub/ and course/INSTRUCTORS.md).

In a hub the instructor drives nbgrader as usual (formgrader, or `nbgrader` in a terminal of their server):
generate, release, collect, generate and release feedback. Autograding is the one step that cannot run there:
the grader confines every kernel with an unprivileged user, namespaces and a control group, which needs root,
and an instructor's server is not root. So formgrader's Autograde button refuses with the command to run
instead (`AutogradeRefused`, before nbgrader would delete what was graded), and root runs

    sudo /opt/modulecraft-hub/venv/bin/python -m autograder.hub grade --course-root ~teacher/modulecraft-course

which grades every collected submission the way `python -m autograder grade` does and gives what it wrote back
to the course's owner, so the instructor's formgrader keeps working on the gradebook afterwards.

The exchange is writable by every learner, so what comes out of it is checked: `SafeCollect` (formgrader's
Collect) takes a submission only from the learner it names, only regular files, and dates it by what the
learner cannot set; every refusal is listed by `python -m autograder status`.

Every server of the hub loads this module as a Jupyter Server extension, so that what a learner made runs nothing
in whoever's browser opens it: pages made of files are sandboxed without scripts (`InertFiles`), and in
instructors' servers formgrader's page for grading by hand shows a submission cleaned of scripts
(`CleanSubmission`).
"""
from __future__ import annotations

import argparse
import datetime
import html
import json
import os
import pwd
import re
import shutil
import stat
import sys
from pathlib import Path

import bleach
from jupyter_server.base.handlers import JupyterHandler
from nbconvert.exporters import HTMLExporter
from nbconvert.filters import markdown2html
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.server_extensions.formgrader.handlers import SubmissionHandler
from nbgrader.utils import ignore_patterns
from tornado import web

from .collect import record_refusal

DEFAULT_COURSE_ROOT = Path("~/modulecraft-course")  # under the instructor's home: formgrader needs it there


def grade_command(course_root) -> str:
    return f"sudo {sys.executable} -m autograder.hub grade --course-root {course_root}"


def refusal_message() -> str:
    return ("Autograding runs learners' code in a sandbox that needs root, which this server is not. "
            "Collect the submissions here, then ask the hub's administrator to run: "
            f"{grade_command(os.environ.get('MODULECRAFT_COURSE_ROOT') or DEFAULT_COURSE_ROOT.expanduser())} "
            "(add --force to grade again what is graded) and reload this page; generate and release the feedback "
            "here afterwards.")


class AutogradeRefused(JupyterHandler):
    """formgrader's Autograde button, answered before nbgrader's own handler: nbgrader would first delete the
    submission's `autograded/` folder (its scores' source), then fail, since only root can confine kernels."""

    @web.authenticated
    def post(self, assignment_id, student_id):
        # As nbgrader's handler answers: JSON as text, which formgrader's page parses itself.
        self.finish(json.dumps({"success": False, "error": refusal_message(), "log": refusal_message()}))


class InertFiles(web.OutputTransform):
    """Every server of the hub: a page made of someone's files runs no script. Jupyter Server already sandboxes
    what it serves from files (`/files/`, the raw view, nbconvert's exports), but lets scripts run in an origin of
    their own (`sandbox allow-scripts`); formgrader serves the files of a submission (`/formgrader/submissions/
    <id>/<file>`) on the instructor's origin, unsandboxed. Both get `sandbox`: the page shows, its scripts and
    forms do not run."""

    SUBMISSION_FILE = re.compile(r"/formgrader/submissions/[^/]+/[^/]")

    def __init__(self, request):
        super().__init__(request)
        self.path = request.path

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        policy = headers.get("Content-Security-Policy", "")
        if "sandbox" in policy or self.SUBMISSION_FILE.search(self.path):
            kept = [part.strip() for part in policy.split(";") if part.strip() and "sandbox" not in part]
            headers["Content-Security-Policy"] = "; ".join([*kept, "sandbox"])
        return status_code, headers, chunk


# What a learner's markdown and outputs may contain on the instructor's formgrader page: text, its formatting and
# images, links to http(s) and mail (bleach drops every attribute and link scheme not listed, escapes other tags).
SHOWN_TAGS = ["a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2", "h3",
              "h4", "h5", "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup",
              "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"]
SHOWN_ATTRIBUTES = {"*": ["class", "title", "align"], "a": ["href"], "img": ["src", "alt", "width", "height"],
                    "td": ["colspan", "rowspan"], "th": ["colspan", "rowspan"]}
SHOWN_OUTPUTS = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/gif",
                 "image/svg+xml"}  # formgrader shows SVG as an <img>, where no script runs


def _clean(markup: str) -> str:
    return bleach.clean(markup, tags=SHOWN_TAGS, attributes=SHOWN_ATTRIBUTES)


def _without_scripts(notebook, resources):
    """The notebook as formgrader may show it: markdown (cells and outputs) rendered and cleaned, outputs only of
    the kinds above, grade ids escaped (formgrader's template writes them into attributes). nbconvert's
    `sanitize_html` would not do: formgrader's template renders markdown cells itself, unsanitized."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = _clean(markdown2html(cell.source))
        grading = cell.metadata.get("nbgrader", {})
        if isinstance(grading.get("grade_id"), str):
            grading["grade_id"] = html.escape(grading["grade_id"])
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                data["text/html"] = data.get("text/html") or markdown2html(data["text/markdown"])
            for kind in list(data):
                if kind not in SHOWN_OUTPUTS or kind == "text/markdown":
                    del data[kind]
            if "text/html" in data:
                data["text/html"] = _clean(data["text/html"])
        if "outputs" in cell:
            cell.outputs = [output for output in cell.outputs if output.get("data", True)]
    return notebook, resources


class CleanSubmission(SubmissionHandler):
    """formgrader's page for grading a submission by hand: it shows the learner's markdown and the outputs their
    code made while it was graded, on the instructor's origin, so it shows them without scripts or event handlers
    (nbgrader's would run them, as the instructor)."""

    @property
    def exporter(self):
        if "modulecraft_exporter" not in self.settings:
            exporter = HTMLExporter(config=self.settings["nbgrader_exporter"].config)
            exporter.register_preprocessor(_without_scripts)
            self.settings["modulecraft_exporter"] = exporter
        return self.settings["modulecraft_exporter"]


def _jupyter_server_extension_points():
    return [{"module": "autograder.hub"}]


def _load_jupyter_server_extension(serverapp):
    """Every server of the hub (hub/jupyterhub_config.py): files served inert. Instructors' servers also get
    formgrader's Autograde button and submission page answered by the handlers above, before nbgrader's (this
    extension loads first, extensions load in the order of their names, so its routes are matched first)."""
    serverapp.web_app.add_transform(InertFiles)
    if not serverapp.jpserver_extensions.get("nbgrader.server_extensions.formgrader"):
        return
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [
        (f"{base}formgrader/api/submission/([^/]+)/([^/]+)/autograde", AutogradeRefused),
        (f"{base}formgrader/submissions/([^/]+)/?", CleanSubmission)])


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit (learners' `ExchangeFactory.submit`), leaving the submission's folder and files to the
    learner and the instructors' group alone (the inbound's, which every file made in it takes) instead of
    nbgrader's 0777 folder, which anyone who learns its name could empty and refill."""

    def do_copy(self, src, dest, log=None):
        """Files copied one by one: nbgrader's copytree would copy the learner's folder's mode onto the new
        folder, dropping the group the inbound passes on to the files written in it afterwards."""
        try:
            _copy_plain(self, src, dest)
        except Refused as why:
            shutil.rmtree(dest, ignore_errors=True)
            self.fail(f"Not submitted: {why}. Submit plain files only.")

    def copy_files(self):
        super().copy_files()
        self.set_perms(os.path.join(self.inbound_path, self.assignment_filename), fileperms=0o640, dirperms=0o750)


class Refused(Exception):
    """Why a folder of the exchange's inbound is not a submission of the learner its name gives."""


def submission_time(folder: str, owner: int) -> datetime.datetime:
    """The latest status change (ctime) of the folder and everything in it, which nobody but root can set back
    (a learner writes `timestamp.txt` and the folder's name, and can set modification times); raises Refused
    when an entry is not a regular file or folder of `owner`."""
    latest = 0.0
    for entry in [folder, *(os.path.join(d, n) for d, subs, files in os.walk(folder) for n in subs + files)]:
        info = os.lstat(entry)
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else None if (
            stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)) else "not a regular file"
        if kind:
            raise Refused(f"{os.path.relpath(entry, folder)} is {kind}")
        if info.st_uid != owner:
            raise Refused(f"{os.path.relpath(entry, folder)} belongs to {_user_name(info.st_uid)}")
        latest = max(latest, info.st_ctime)
    return datetime.datetime.fromtimestamp(latest, datetime.timezone.utc).replace(tzinfo=None)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class SafeCollect(ExchangeCollect):
    """formgrader's Collect (instructors' `ExchangeFactory.collect`): a folder of the inbound is collected only
    when it and everything in it belong to the learner it names and are regular files and folders; its time is
    `submission_time`, not the name or `timestamp.txt`; the copy never follows a link. Every refused folder is
    recorded for `python -m autograder status`."""

    def init_src(self):
        self.inbound_path = os.path.join(self.root, self.coursedir.course_id, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        records = []
        for name in sorted(os.listdir(self.inbound_path)):
            learner, _, rest = name.partition("+")
            if rest.split("+", 1)[0] != self.coursedir.assignment_id or \
                    self.coursedir.student_id not in ("", "*", learner):
                continue
            try:
                records.append({"username": learner, "filename": name,
                                "timestamp": self._check(learner, os.path.join(self.inbound_path, name))})
            except Refused as why:
                self.log.error("Not collected: %s: %s", name, why)
                record_refusal(self.coursedir.root, learner, self.coursedir.assignment_id, name, str(why))
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                due = gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                due = None
        self.src_records = []
        for group in groupby(records, lambda record: record["username"]).values():
            latest_first = self._sort_by_timestamp(group)
            in_time = [r for r in latest_first if due is not None and self.before_duedate and r["timestamp"] <= due]
            self.src_records.append((in_time or latest_first)[0])
        self._times = {os.path.join(self.inbound_path, r["filename"]): r["timestamp"] for r in self.src_records}

    @staticmethod
    def _check(learner: str, path: str) -> datetime.datetime:
        try:
            owner = pwd.getpwnam(learner).pw_uid
        except KeyError:
            raise Refused(f"no user named {learner}") from None
        info = os.lstat(path)
        if info.st_uid != owner:
            raise Refused(f"named after {learner} but made by {_user_name(info.st_uid)}")
        if not stat.S_ISDIR(info.st_mode):
            raise Refused("not a folder")
        return submission_time(path, owner)

    def do_copy(self, src, dest, log=None):
        """Regular files only, each opened without following links and checked again once open (the learner
        may change the folder between the check and the copy); `timestamp.txt` is the submission's time."""
        try:
            _copy_plain(self, src, dest)
        except Refused as why:
            shutil.rmtree(dest, ignore_errors=True)
            name = os.path.basename(src)
            record_refusal(self.coursedir.root, name.split("+", 1)[0], self.coursedir.assignment_id, name, str(why))
            raise
        Path(dest, "timestamp.txt").write_text(self._times[src].strftime("%Y-%m-%d %H:%M:%S.%f UTC"))

    def copy_files(self):
        try:
            super().copy_files()
        except Refused as why:
            self.fail(f"a submission changed while it was collected, not collected: {why}")


def _copy_plain(exchange, src: str, dest: str) -> None:
    """Copy the regular files and folders of `src` that belong to its owner into a new folder `dest`, within
    nbgrader's limits and ignore list; raises Refused at anything else."""
    limit = 1000 * exchange.coursedir.max_dir_size
    if exchange.get_size(src) > limit:
        raise Refused(f"larger than {limit} bytes (CourseDirectory.max_dir_size)")
    ignore = ignore_patterns(exclude=exchange.coursedir.ignore, include=exchange.coursedir.include,
                             max_file_size=exchange.coursedir.max_file_size, log=exchange.log)
    _copy_regular(src, dest, os.lstat(src).st_uid, ignore)


def _copy_regular(src: str, dest: str, owner: int, ignore) -> None:
    os.makedirs(dest)
    names = sorted(os.listdir(src))
    for name in sorted(set(names) - set(ignore(src, names))):
        path, target = os.path.join(src, name), os.path.join(dest, name)
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == owner:
            _copy_regular(path, target, owner, ignore)
            continue
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            raise Refused(f"{name} cannot be opened as a file ({error.strerror})") from None
        with open(handle, "rb") as source:
            opened = os.fstat(source.fileno())
            if not stat.S_ISREG(opened.st_mode) or opened.st_uid != owner:
                raise Refused(f"{name} is not a regular file of the learner")
            with open(target, "wb") as copy:
                shutil.copyfileobj(source, copy)


def setup(course_root: Path, owner: str, exchange: Path, source: Path, selfcheck: Path, chapters=None) -> Path:
    """Make `course_root` an nbgrader course of `owner` (the instructor): the chapters copied into
    `<root>/chapters` (with solutions and hidden tests, readable by the owner alone), and `<root>/exchange` the
    hub's exchange, whose course folders `exchange_folders` makes. The learners' self-check source is
    (re)published into `selfcheck` from the course's chapters."""
    from .config import COURSE_ID
    from .course import Course

    exchange_folders(exchange, COURSE_ID, owner)
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


# The exchange's course folders, the instructor's, no wider than nbgrader needs: everyone reads the released
# chapters (outbound); learners create their submission folders in the inbound but cannot list it, nor rename
# or remove what others put there (sticky), and what they put there takes the instructor's group (set-group-id);
# feedback is reached by a name only its learner knows.
EXCHANGE_MODES = {"": 0o755, "outbound": 0o755, "inbound": 0o3733, "feedback": 0o711}


def exchange_folders(exchange: Path, course_id: str, owner: str) -> None:
    """The exchange (everyone's, sticky, as nbgrader needs) and the course's folders in it, made before any
    learner can: a folder made by a learner first would be theirs (and block releases), so one not the
    instructor's is refused."""
    user = pwd.getpwnam(owner)
    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o1777)
    for name, mode in EXCHANGE_MODES.items():
        folder = exchange / course_id / name
        if not folder.is_symlink() and not folder.exists():
            folder.mkdir()
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, user.pw_uid):
            raise SystemExit(f"{folder} was made by {_user_name(info.st_uid)}, not by {owner}: look at what is in "
                             f"it, remove it, and run setup again")
        os.chown(folder, user.pw_uid, user.pw_gid)
        folder.chmod(mode)


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


def grade(course_root: Path, workers: int | None = None, force: bool = False) -> int:
    """Grade every collected submission, sandboxed (as `python -m autograder grade`), then hand the files back."""
    from .cli import main as cli_main

    owner = course_root.stat().st_uid
    try:
        return cli_main(["grade", "--root", str(course_root)] + (["--workers", str(workers)] if workers else [])
                        + (["--force"] if force else []))
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
    p.add_argument("--force", action="store_true", help="grade again what is graded and unchanged")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print(f"python -m autograder.hub {args.command}: run as root (sudo)", file=sys.stderr)
        return 2
    if args.command == "setup":
        from .config import COURSE_SOURCE
        print(setup(args.course_root.resolve(), args.owner, args.exchange, args.source or COURSE_SOURCE,
                    args.selfcheck_source, args.chapters))
        return 0
    return grade(args.course_root.resolve(), args.workers, args.force)


if __name__ == "__main__":
    sys.exit(main())
