"""The learner's workspace: student copies of the chapters, and JupyterLab opened on them.

    python -m autograder.workspace prepare [--workspace DIR]
    python -m autograder.workspace launch  [--workspace DIR] [JupyterLab options, e.g. --port 8899 --no-browser]
    python -m autograder.workspace launch --instructor [--course-root DIR] [JupyterLab options]

`prepare` generates the student version of every chapter with nbgrader (the grader's own `Course.release`, in a
temporary course root) and copies it into the workspace. A learner's file is never overwritten: when the course
changed a chapter the learner already has, the new version is put next to theirs (`<chapter>.updated.ipynb`) and
the command says so. `workspace/.modulecraft/manifest.json` remembers the course version each chapter was offered
from and a fingerprint of every file written, which tells a course update from a learner's edit.

`launch` prepares, writes a private Jupyter configuration (nothing goes to the user's home) with the nbgrader
extensions that fit the role, and replaces itself with JupyterLab.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader import utils as nbgrader_utils

from autograder.config import COURSE_SOURCE, GRADING_KERNEL_ARGUMENT, REPO_ROOT

DEFAULT_WORKSPACE = REPO_ROOT / "workspace"
DEFAULT_COURSE_ROOT = Path(os.environ.get("MODULECRAFT_GRADING_ROOT", REPO_ROOT / ".grading"))  # as autograder.cli
STATE_DIR = ".modulecraft"  # hidden in JupyterLab's file browser
INDEX = "index.ipynb"
IGNORED_NAMES = {".ipynb_checkpoints", "__pycache__", ".DS_Store"}

# The nbgrader extensions that fit each role. The assignment and course lists need an nbgrader exchange, which
# neither a self-paced learner nor our classroom flow (collect from a folder or a zip) uses.
SERVER_EXTENSIONS = {
    "learner": {"validate_assignment"},
    "instructor": {"validate_assignment", "formgrader"},
}
LAB_PLUGINS = {
    "learner": {"validate-assignment"},
    "instructor": {"validate-assignment", "menu", "formgrader", "create-assignment"},
}
ALL_SERVER_EXTENSIONS = {"validate_assignment", "formgrader", "assignment_list", "course_list"}
ALL_LAB_PLUGINS = {"validate-assignment", "menu", "formgrader", "create-assignment", "assignment-list", "course-list"}


# ---------------------------------------------------------------------------------------------------------------
# Fingerprints and the manifest


def fingerprint(path: Path) -> str:
    """What the learner wrote in a file (see `fingerprint_of`)."""
    return fingerprint_of(path.name, path.read_bytes())


def fingerprint_of(name: str, data: bytes) -> str:
    """For a notebook, its cells' types and sources: running cells, which only changes outputs and metadata, is
    not an edit. For any other file (or a notebook that no longer parses), its bytes."""
    if name.endswith(".ipynb"):
        try:
            cells = nbformat.reads(data.decode(), as_version=4).cells
            data = json.dumps([[cell.cell_type, cell.source] for cell in cells]).encode()
        except Exception:
            pass
    return hashlib.sha256(data).hexdigest()


def tree_hash(folder: Path) -> str:
    """The version of a chapter's source folder: every file's relative path and bytes."""
    digest = hashlib.sha256()
    for path in sorted(_files(folder)):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _files(folder: Path):
    for path in folder.rglob("*"):
        if path.is_file() and not IGNORED_NAMES.intersection(path.relative_to(folder).parts):
            yield path


@dataclass
class Manifest:
    """`chapters`: chapter -> version of its course source last offered; `written`: workspace-relative path ->
    fingerprint of what `prepare` wrote there (to know whether the learner changed it since)."""

    path: Path
    chapters: dict[str, str] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, workspace: Path) -> Manifest:
        path = workspace / STATE_DIR / "manifest.json"
        if not path.exists():
            return cls(path)
        data = json.loads(path.read_text())
        return cls(path, data.get("chapters", {}), data.get("written", {}))

    def save(self) -> None:
        text = json.dumps({"chapters": self.chapters, "written": self.written}, indent=1, sort_keys=True)
        _write_atomically(self.path, text.encode())


def _write_atomically(target: Path, data: bytes) -> None:
    """Never leave half a file behind, even if interrupted."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)


# ---------------------------------------------------------------------------------------------------------------
# prepare


@dataclass
class Report:
    workspace: Path
    added: list[str] = field(default_factory=list)
    offered: list[tuple[str, str]] = field(default_factory=list)  # (the learner's file, the new version next to it)
    up_to_date: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (chapter, why nbgrader could not generate it)
    retired: list[str] = field(default_factory=list)  # the learner's chapters the course no longer has (kept)

    def changes(self) -> int:
        return len(self.added) + len(self.offered)

    def __str__(self) -> str:
        lines = [f"Your workspace: {self.workspace}"]
        lines += [f"  added      {path}" for path in self.added]
        for theirs, offer in self.offered:
            lines.append(f"  UPDATED    {theirs}: the new version is {offer} (your copy is untouched)")
        if self.up_to_date:
            lines.append(f"  up to date: {', '.join(self.up_to_date)}")
        if self.offered:
            lines.append("  Compare the .updated notebooks with yours and carry your solutions over (or keep yours).")
        for chapter in self.retired:
            lines.append(f"  kept       {chapter}/: {retirement(chapter)}")
        for chapter, why in self.failed:
            lines.append(f"  FAILED     {chapter}: nbgrader could not generate it: {why}")
            lines.append("             Your files for it are unchanged; tell the course's authors. The next run tries again.")
        return "\n".join(lines)


# Chapters the course renamed: a learner's notebook under the old name stays where it is, pointed at its successor.
MOVED_CHAPTERS = {"09_capstone": "13_capstone", "10_gradients": "11_backward_hooks", "11_optimizers": "12_optimizers",
                  "12_capstone": "13_capstone"}


def retirement(chapter: str) -> str:
    """What to tell a learner about their notebook of a chapter the course no longer has."""
    successor = MOVED_CHAPTERS.get(chapter)
    where = f"it is now {successor}, a new notebook; carry your work over" if successor else "it was removed"
    return f"this chapter is no longer in the course ({where}). Your notebook is kept as it is."


def retired_chapters(workspace: Path, chapters: list[str]) -> list[str]:
    """Chapter folders `<chapter>/<chapter>.ipynb` in the workspace that are not in the course (any more)."""
    if not workspace.is_dir():
        return []
    return sorted(p.name for p in workspace.iterdir()
                  if p.name not in chapters and (p / f"{p.name}.ipynb").is_file())


def course_chapters(source: Path = COURSE_SOURCE) -> list[str]:
    """Chapters in course order: folders `<chapter>/<chapter>.ipynb`."""
    return sorted(p.name for p in source.iterdir() if (p / f"{p.name}.ipynb").is_file()) if source.is_dir() else []


def prepare(workspace: Path = DEFAULT_WORKSPACE, source: Path = COURSE_SOURCE) -> Report:
    """Create or update the workspace; returns what was done (its `str` is the message for the learner)."""
    workspace = Path(workspace).resolve()
    chapters = course_chapters(source)
    if not chapters:
        raise SystemExit(f"No chapters found in {source}: expected folders <chapter>/<chapter>.ipynb.")
    manifest = Manifest.load(workspace)
    report = Report(workspace)
    versions = {chapter: tree_hash(source / chapter) for chapter in chapters}
    stale = [
        chapter for chapter in chapters
        if manifest.chapters.get(chapter) != versions[chapter]
        or not (workspace / chapter / f"{chapter}.ipynb").exists()
    ]
    report.up_to_date = [chapter for chapter in chapters if chapter not in stale]
    if stale:
        with tempfile.TemporaryDirectory(prefix="modulecraft-release-") as scratch:
            for chapter, notebook in _release(stale, source, Path(scratch), report).items():
                released, changes = Path(notebook).parent, report.changes()
                for path in sorted(_files(released)):
                    relative = Path(chapter) / path.relative_to(released)
                    _place(workspace, relative, path.read_bytes(), manifest, report, ours=False)
                if report.changes() == changes:  # the course changed, but not what learners see
                    report.up_to_date.append(chapter)
                manifest.chapters[chapter] = versions[chapter]
                manifest.save()
            report.up_to_date.sort()
    report.retired = retired_chapters(workspace, chapters)
    index = nbformat.writes(index_notebook(workspace, chapters)).encode()
    _place(workspace, Path(INDEX), index, manifest, report, ours=True)
    manifest.save()
    return report


def _release(chapters: list[str], source: Path, scratch: Path, report: Report) -> dict[str, Path]:
    """Student versions of `chapters`, generated by nbgrader in the throwaway course root `scratch`. A chapter
    nbgrader cannot generate is reported and skipped: it must not keep the learner from the others."""
    from autograder.course import Course  # nbgrader's apps are slow to import; only needed when something changed

    print(f"Generating the student version of {', '.join(chapters)} with nbgrader ...", flush=True)
    course, released = Course(scratch, source=source), {}
    for chapter in chapters:
        try:
            released.update(course.release([chapter]))
        except RuntimeError as error:
            log = report.workspace / STATE_DIR / f"{chapter}.release-error.log"
            _write_atomically(log, str(error).encode())
            report.failed.append((chapter, f"{_cause(str(error))} (details: {log})"))
    return released


def _cause(log: str) -> str:
    """The exception an nbgrader error log is about, without the traceback and nbgrader's generic wrapper."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    causes = [line for line in lines if re.match(r"[\w.]+(Error|Exception): ", line) and "NbGrader" not in line]
    return causes[-1] if causes else lines[0]


def _place(workspace: Path, relative: Path, data: bytes, manifest: Manifest, report: Report, ours: bool) -> None:
    """Put `data` at `relative` without ever destroying the learner's work.

    A missing file is written. A file with the same content is left alone. Otherwise the file is replaced only
    when it is `ours` (the index) and nobody changed it since we wrote it; a learner's file stays as it is and
    the new version is offered next to it (reusing an earlier offer the learner has not touched).
    """
    target = workspace / relative
    new = fingerprint_of(relative.name, data)
    if not target.exists():
        _write(workspace, relative, data, manifest)
        report.added.append(str(relative))
        return
    current = fingerprint(target)
    if current == new:
        manifest.written.setdefault(str(relative), current)
        return
    if ours and manifest.written.get(str(relative)) == current:
        _write(workspace, relative, data, manifest)
        return
    offer = _offer_path(workspace, relative, manifest, new)
    if not (workspace / offer).exists() or fingerprint(workspace / offer) != new:
        _write(workspace, offer, data, manifest)
    report.offered.append((str(relative), str(offer)))


def _offer_path(workspace: Path, relative: Path, manifest: Manifest, new: str) -> Path:
    """`x.updated.ipynb`, or `x.updated-2.ipynb`, ...: the first one that is free, already holds this version, or
    is an earlier offer the learner has not touched."""
    number = 1
    while True:
        suffix = ".updated" if number == 1 else f".updated-{number}"
        offer = relative.with_name(f"{relative.stem}{suffix}{relative.suffix}")
        path = workspace / offer
        if not path.exists() or fingerprint(path) in (new, manifest.written.get(str(offer))):
            return offer
        number += 1


def path_with_python_tools(path: str) -> str:
    """PATH with this Python's scripts folder first: nbgrader runs tools of its environment by name (`alembic`),
    and `make lab` uses `.venv/bin/python` without activating the venv."""
    scripts = str(Path(sys.executable).parent)
    return os.pathsep.join([scripts, *(p for p in path.split(os.pathsep) if p and p != scripts)])


def _write(workspace: Path, relative: Path, data: bytes, manifest: Manifest) -> None:
    _write_atomically(workspace / relative, data)
    manifest.written[str(relative)] = fingerprint(workspace / relative)


# ---------------------------------------------------------------------------------------------------------------
# The index notebook and the learner's progress


def chapter_title(notebook: nbformat.NotebookNode, chapter: str) -> str:
    """The first markdown heading of the chapter, else its folder name."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return chapter


def exercise_progress(notebook: nbformat.NotebookNode) -> tuple[int, int]:
    """(exercises the learner has written something in, exercises): a solution cell counts as attempted once its
    source no longer matches the checksum nbgrader stored when it generated the student version."""
    solutions = [cell for cell in notebook.cells if nbgrader_utils.is_solution(cell)]
    attempted = [
        cell for cell in solutions
        if cell.metadata.nbgrader.get("checksum") not in (None, nbgrader_utils.compute_checksum(cell))
    ]
    return len(attempted), len(solutions)


SELF_CHECK_TOTAL = re.compile(r"^Total: (\d+(?:\.\d+)?/\d+(?:\.\d+)?)\s*$", re.M)


def last_self_check(notebook: nbformat.NotebookNode) -> str | None:
    """The score the self-check printed in the notebook as saved ("4/9"), if it was run and saved."""
    texts = [output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
             for output in cell.get("outputs", []) if output.get("output_type") == "stream"]
    scores = [match for text in texts for match in SELF_CHECK_TOTAL.findall(text)]
    return scores[-1] if scores else None


def progress_table(workspace: Path, chapters: list[str]) -> str:
    """A markdown table: one row per chapter, with a link to the learner's notebook and their progress."""
    rows = ["| # | chapter | your progress |", "|---|---|---|"]
    for chapter in chapters:
        link, number = f"{chapter}/{chapter}.ipynb", chapter.split("_")[0]
        path = workspace / link
        if not path.exists():
            rows.append(f"| {number} | {chapter} | not in your workspace yet: run `make lab` |")
            continue
        try:
            notebook = nbformat.read(path, as_version=4)
        except Exception as error:
            rows.append(f"| {number} | [{chapter}]({link}) | cannot be read as a notebook ({type(error).__name__}) |")
            continue
        attempted, total = exercise_progress(notebook)
        status = ("reading only" if total == 0 else
                  "not started" if attempted == 0 else f"{attempted} of {total} exercises attempted")
        score = last_self_check(notebook)
        if score:
            status += f", last self-check {score}"
        offers = sorted(path.parent.glob(f"{chapter}.updated*.ipynb"))
        if offers:
            status += ", new version: " + ", ".join(f"[{offer.name}]({chapter}/{offer.name})" for offer in offers)
        rows.append(f"| {number} | [{chapter_title(notebook, chapter)}]({link}) | {status} |")
    for chapter in retired_chapters(workspace, chapters):
        rows.append(f"| {chapter.split('_')[0]} | [{chapter}]({chapter}/{chapter}.ipynb) | {retirement(chapter)} |")
    return "\n".join(rows)


INDEX_INTRO = """\
# modulecraft: your workspace

Rebuild `torch.nn.Module` one mechanism at a time. Work through the chapters in order; each one ends with a
self-check.

{table}

*Progress as of the last `make lab`; run the cell below to refresh it.*

**Checking your work.** Run the last cell of a chapter (`check_my_work()`): it grades a copy of your notebook with
the hidden tests and prints your score per exercise with feedback. The **Validate** button in the notebook toolbar
runs the visible tests. Neither changes your code.

**Your files are safe.** This folder (`workspace/`) is yours and is never overwritten. When a chapter you already
have changes in the course, `make lab` puts the new version next to yours as `<chapter>.updated.ipynb`.
This index page is regenerated by `make lab` as long as you do not edit it.
"""


def index_notebook(workspace: Path, chapters: list[str]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell(INDEX_INTRO.format(table=progress_table(workspace, chapters))),
        nbformat.v4.new_code_cell("from autograder.workspace import show_progress\nshow_progress()"),
    ]
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    notebook.metadata.language_info = kernel_language_info()
    for cell in notebook.cells:  # stable ids: the same chapters and progress give byte-identical index files
        cell.pop("id", None)
    notebook.nbformat_minor = 4
    return notebook


def kernel_language_info() -> dict:
    """What the python3 kernel (ipykernel, in this Python) reports about its language. JupyterLab writes it into a
    notebook's metadata when the kernel connects and marks the notebook modified if it changed: an index written with
    it already is not modified by being opened."""
    from ipykernel.ipkernel import IPythonKernel

    return json.loads(json.dumps(IPythonKernel.language_info))


def show_progress(workspace: Path | None = None) -> None:
    """Display the progress table, fresh (for the index notebook)."""
    from IPython.display import Markdown, display

    workspace = Path(workspace or os.getcwd())
    chapters = sorted(p.name for p in workspace.iterdir() if (p / f"{p.name}.ipynb").is_file())
    display(Markdown(progress_table(workspace, chapters)))


# ---------------------------------------------------------------------------------------------------------------
# Jupyter: private configuration, and launch


def jupyter_environment(state: Path, role: str) -> dict[str, str]:
    """Environment variables for a JupyterLab whose configuration lives in `state` (never in the user's home),
    with the nbgrader extensions that fit `role` ("learner" or "instructor")."""
    config = state / "config"
    server_extensions = {
        f"nbgrader.server_extensions.{name}": name in SERVER_EXTENSIONS[role] for name in sorted(ALL_SERVER_EXTENSIONS)
    }
    _write_json(config / "jupyter_server_config.json", {
        "ServerApp": {"jpserver_extensions": server_extensions},
        # jupyter-lsp's search for language servers runs `npm prefix -g`, and npm logs into ~/.npm: none is used
        "LanguageServerManager": {"autodetect": False},
    })
    disabled = {f"@jupyter/nbgrader:{name}": True for name in sorted(ALL_LAB_PLUGINS - LAB_PLUGINS[role])}
    _write_json(config / "labconfig" / "page_config.json", {"disabledExtensions": disabled})
    # The Validate button executes the whole notebook; its last cell, check_my_work(), must not grade it again.
    _write_atomically(config / "nbgrader_config.py", VALIDATE_CONFIG.encode())
    settings = state / "lab" / "user-settings"
    for plugin, values in DEFAULT_LAB_SETTINGS.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        if not path.exists():  # a choice made later in Lab's Settings editor is kept
            _write_json(path, values)
    env = {
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "lab" / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTER_DATA_DIR": str(state / "data"),  # e.g. the signatures of trusted notebooks, not in ~/.local
    }
    if role == "learner":  # IPython's profile is private too: its kernel config has the self-check prepare the chapter
        env["IPYTHONDIR"] = str(state / "ipython")
        _write_json(state / "ipython" / "profile_default" / "ipython_kernel_config.json", KERNEL_CONFIG)
    return env


# Settings a fresh private Lab starts with: no prompt asking to fetch Jupyter news over the course's first page.
DEFAULT_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}

KERNEL_CONFIG = {"InteractiveShellApp": {"extensions": ["autograder.selfcheck"]}}  # its load_ipython_extension

VALIDATE_CONFIG = f"""\
# Generated by autograder/workspace.py for the Validate button: validation kernels skip the self-check.
c.Execute.extra_arguments = [{GRADING_KERNEL_ARGUMENT!r}]
"""


def _write_json(path: Path, data: dict) -> None:
    _write_atomically(path, (json.dumps(data, indent=1) + "\n").encode())


def lab_command(root: Path, open_path: str, lab_args: list[str]) -> list[str]:
    """The JupyterLab command line for serving `root` and opening `open_path` (relative to it; "" for none)."""
    default_url = f"/lab/tree/{open_path}" if open_path else "/lab"
    command = [sys.executable, "-m", "jupyterlab",
               f"--ServerApp.root_dir={root}", f"--LabApp.default_url={default_url}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")
    return command + lab_args


def launch_learner(workspace: Path, lab_args: list[str]) -> None:
    report = prepare(workspace)
    print(report, flush=True)
    _exec_lab(report.workspace, INDEX, "learner", lab_args)


def launch_instructor(course_root: Path, lab_args: list[str]) -> None:
    """JupyterLab on a grading folder, with the formgrader and the create-assignment tool."""
    from autograder.course import Course

    course = Course(course_root)
    root = Path(course.root).resolve()
    print(f"Instructor mode on the grading folder {root} (Nbgrader menu: Formgrader).", flush=True)
    _exec_lab(root, "", "instructor", lab_args)


def lab_environment(state: Path, role: str) -> dict[str, str]:
    """This process's environment with the private Jupyter configuration of `role` (see `jupyter_environment`),
    and this Python's tools on PATH for nbgrader's server extensions."""
    env = {**os.environ, **jupyter_environment(state, role)}
    env["PATH"] = path_with_python_tools(env.get("PATH", ""))
    return env


def _exec_lab(root: Path, open_path: str, role: str, lab_args: list[str]) -> None:
    env = lab_environment(root / STATE_DIR / f"jupyter-{role}", role)
    command = lab_command(root, open_path, lab_args)
    os.chdir(root)  # nbgrader's server extensions also read nbgrader_config.py from the working directory
    os.execve(command[0], command, env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.workspace", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser("prepare", help="create or update the workspace, then exit")
    launch_parser = commands.add_parser(
        "launch", help="prepare, then open JupyterLab (other options are passed to JupyterLab, e.g. --port 8899)")
    for sub in (prepare_parser, launch_parser):
        sub.add_argument("--workspace", type=Path, default=DEFAULT_WORKSPACE, help="default: %(default)s")
    launch_parser.add_argument("--instructor", action="store_true",
                               help="open a grading folder with nbgrader's formgrader instead of the workspace")
    launch_parser.add_argument("--course-root", type=Path, default=DEFAULT_COURSE_ROOT,
                               help="grading folder for --instructor (default: %(default)s)")
    args, lab_args = parser.parse_known_args(argv)
    if args.command == "prepare":
        if lab_args:
            parser.error(f"unrecognized arguments: {' '.join(lab_args)}")
        print(prepare(args.workspace))
    elif args.instructor:
        launch_instructor(args.course_root, lab_args)
    else:
        launch_learner(args.workspace, lab_args)


if __name__ == "__main__":
    main()
