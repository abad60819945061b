"""The worker side of grading: one submission in, its autograded notebook and findings out.

A grading worker (a process of the local pool, or a Dask worker on any machine) never touches the
coordinator's gradebook. It keeps a private scratch grading folder per course, made once per process from a
`CourseBundle` the coordinator ships: the chapters' source files (with hidden tests) and a copy of the
gradebook holding only the assignments (no student, no grade). In that folder it runs nbgrader's own
`autograde` on one submission at a time, inside our sandbox, judges its tests outside the kernel, and returns the autograded
folder's files and what went wrong (`GradedSubmission`). Nothing else travels back.

Why the coordinator imports the *autograded notebook*, not the scratch gradebook's numbers: it replays
nbgrader's own `SaveAutoGrades` and `AssignLatePenalties` on that notebook against the real gradebook
(`grading.Recorder`), which is exactly what stock autograde writes. So nbgrader's semantics hold where they
depend on the real gradebook: a grade a person already gave (`manual_score`) still marks the cell for
review, the late penalty uses the submission's timestamp and the course's plugin, and feedback and
formgrader read the same autograded folder as always.

A task is a pure function of (student, chapter, submission sha256, course bundle): a worker that dies
mid-notebook leaves nothing behind that counts, and the task can run again anywhere.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import sqlalchemy.engine
import sqlalchemy.event
import sqlalchemy.exc
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory

from . import config as course_config
from . import tuning
from .judging import answer_key, integrity, sandbox, verdicts

# Where a worker makes its scratch grading folder (default: the Dask worker's --local-directory, or the temp dir).
SCRATCH_ENV_VAR = "MODULECRAFT_WORKER_SCRATCH"
# Gradebook tables that hold students and their work: emptied in the copy shipped to workers.
STUDENT_TABLES = ("comment", "grade", "submitted_notebook", "submitted_assignment", "student")


@dataclasses.dataclass
class Outcome:
    """What happened to one submission."""

    student: str
    chapter: str
    score: float = 0.0
    max_score: float = 0.0
    needs_review: list[str] = dataclasses.field(default_factory=list)  # why a person must look (points held)
    notes: list[str] = dataclasses.field(default_factory=list)  # what went wrong but was graded (e.g. timeouts)
    attempts: int = 0
    seconds: float = 0.0
    submission_sha256: str = ""
    grader_version: str = ""  # the code that graded it (`grader_version()` of the worker)

    @property
    def status(self) -> str:
        return "needs review" if self.needs_review else "graded"


@dataclasses.dataclass(frozen=True)
class CourseBundle:
    """What a worker needs to grade a course's chapters, on any machine with the same repository checkout."""

    course_id: str
    files: dict[str, bytes]  # source/<chapter>/... relative path -> content
    gradebook: bytes  # the coordinator's gradebook with the student tables emptied
    cell_timeout: int
    notebook_timeout: int
    private: tuple[str, ...]  # the coordinator's folder and sources: hidden from kernels on the coordinator's machine

    @functools.cached_property
    def sha256(self) -> str:
        """The course's fingerprint: what grades (sources, the assignments' cells and points, limits, what is
        hidden from kernels), not the gradebook's bytes, which differ between two copies of the same course."""
        digest = hashlib.sha256(json.dumps(gradebook_structure(self.gradebook)).encode())
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        digest.update(json.dumps([self.course_id, self.cell_timeout, self.notebook_timeout, self.private]).encode())
        return digest.hexdigest()

    @classmethod
    def of(cls, root: Path, source: Path, course_id: str) -> CourseBundle:
        """Every chapter of `source` (the inspection names the chapter a notebook handed in by mistake is of)."""
        files = {}
        for chapter in sorted(p.parent.name for p in source.glob("*/*.ipynb") if p.stem == p.parent.name):
            for path in sorted((source / chapter).rglob("*")):
                if path.is_file() and ".ipynb_checkpoints" not in path.parts:
                    files[str(path.relative_to(source))] = path.read_bytes()
        return cls(course_id, files, assignments_only(Path(root) / "gradebook.db"), course_config.CELL_TIMEOUT,
                   course_config.NOTEBOOK_TIMEOUT, (str(root), str(Path(source).resolve())))


def assignments_only(gradebook: Path) -> bytes:
    """A copy of `gradebook` without students or grades: workers learn the course, not the class."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "gradebook.db"
        with contextlib.closing(sqlite3.connect(gradebook)) as source, \
                contextlib.closing(sqlite3.connect(copy)) as target:
            source.backup(target)
            for table in STUDENT_TABLES:
                target.execute(f"DELETE FROM {table}")
            target.commit()
            target.execute("PRAGMA journal_mode=DELETE")  # the coordinator's write-ahead log stays with it
            target.execute("VACUUM")
        return copy.read_bytes()


def gradebook_structure(gradebook: bytes) -> list:
    """What nbgrader's autograde reads from a gradebook, by name (its row ids are random per gradebook): the
    notebooks, their cells with points, and the locked cells' sources it restores."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.deserialize(gradebook)
        cells = db.execute(
            "SELECT a.name, n.name, n.kernelspec, c.name, c.type, g.max_score, g.cell_type, t.max_score, t.cell_type"
            " FROM base_cell c JOIN notebook n ON c.notebook_id = n.id JOIN assignment a ON n.assignment_id = a.id"
            " LEFT JOIN grade_cells g ON g.id = c.id LEFT JOIN task_cells t ON t.id = c.id").fetchall()
        sources = db.execute(
            "SELECT a.name, n.name, s.name, s.cell_type, s.locked, s.checksum, s.source FROM source_cell s"
            " JOIN notebook n ON s.notebook_id = n.id JOIN assignment a ON n.assignment_id = a.id").fetchall()
        schema = db.execute("SELECT version_num FROM alembic_version").fetchall()
    return [sorted(map(list, cells), key=repr), sorted(map(list, sources), key=repr), schema]


@functools.cache
def grader_version() -> str:
    """`<project version>+<digest>` of what decides a grade on this machine: the grader's and the reference
    package's source files, and the versions of Python and of the libraries kernels and nbgrader run on.
    Coordinator and Dask workers compare it; every graded submission records it."""
    digest = hashlib.sha256(f"python {sys.version_info[0]}.{sys.version_info[1]}".encode())
    for library in ("nbgrader", "nbclient", "nbconvert", "ipykernel", "jupyter_client", "numpy"):
        digest.update(f"{library} {importlib.metadata.version(library)}".encode())
    for package in (course_config.REPO_ROOT / "autograder", course_config.REPO_ROOT / "reference" / "modulecraft"):
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return f"{importlib.metadata.version('modulecraft')}+{digest.hexdigest()[:12]}"


@dataclasses.dataclass(frozen=True)
class Task:
    """Grade `student`'s submission of `chapter`: the submitted folder's files, keyed by their notebook's sha256."""

    student: str
    chapter: str
    submission_sha256: str
    files: dict[str, bytes]  # submitted/<student>/<chapter>/... relative path -> content
    bundle_sha256: str

    @property
    def key(self) -> str:
        """Names the work, not the attempt: the same submission of the same course is the same task."""
        return f"modulecraft-grade-{self.student}-{self.chapter}-{self.submission_sha256[:16]}-{self.bundle_sha256[:8]}"


@dataclasses.dataclass
class GradedSubmission:
    """A worker's answer: the findings and the autograded folder's files (None: nbgrader produced none)."""

    outcome: Outcome
    autograded: dict[str, bytes] | None


def read_folder(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_folder(folder: Path, files: dict[str, bytes]) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    for name, content in files.items():
        path = folder / name
        if not path.resolve().is_relative_to(folder.resolve()):
            raise ValueError(f"file {name!r} would be written outside {folder}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


# nbgrader's steps that only write the gradebook: the coordinator runs them against the real one (`Recorder`).
REPLAYED_BY_THE_COORDINATOR = ("nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties")


def nbgrader_api(root, course_id: str = course_config.COURSE_ID, *, grading: bool = False) -> NbGraderAPI:
    """nbgrader's API on grading folder `root`; with `grading`, our sandbox and the verdicts are plugged in, and
    the steps the coordinator replays are left out (their writes to the scratch gradebook were thrown away)."""
    _put_our_scripts_on_path()
    cfg = course_config.nbgrader_config(root, course_id)
    if grading:
        tuning.apply()
        cfg.merge(tuning.autograde_config())
        cfg.merge(integrity.autograde_config())
        cfg.merge(sandbox.autograde_config())
        cfg.Autograde.autograde_preprocessors = [step for step in cfg.Autograde.autograde_preprocessors
                                                 if step not in REPLAYED_BY_THE_COORDINATOR]
    return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)


def _put_our_scripts_on_path() -> None:
    """nbgrader runs `alembic` by name: find it next to our interpreter even when the venv is not activated."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


# -- the worker's state: a scratch grading folder per course it grades ------------------------------------------
SCRATCH_PREFIX = "modulecraft-worker-"
LOCK_NAME = ".alive"  # locked by the process that owns the folder, for as long as it lives


@dataclasses.dataclass
class _Scratch:
    bundle: CourseBundle
    root: Path
    api: NbGraderAPI
    lock: object  # the open file whose lock says the folder's owner is alive
    holders: set[str]  # who asked for it (a Dask plugin per grading run): removed once none is left


_scratches: dict[str, _Scratch] = {}  # course fingerprint -> its folder
# One submission at a time per process: the sandbox's events and the verdicts' seed are per process.
_one_at_a_time = threading.Lock()


def prepare_worker(bundle: CourseBundle, scratch_base: str | os.PathLike | None = None, holder: str = "") -> Path:
    """This process's scratch grading folder for `bundle`'s course (made on first use), held for `holder`
    until `release_worker`; leftovers of dead processes under the same base are removed first."""
    sha = bundle.sha256
    with _one_at_a_time:
        if sha in _scratches:
            _scratches[sha].holders.add(holder)
            return _scratches[sha].root
        base = Path(scratch_base or os.environ.get(SCRATCH_ENV_VAR) or tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        remove_dead_scratch(base)
        root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{sha[:12]}-", dir=base)).resolve()  # mode 0700
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        lock = _lock_alive(root)
        write_folder(root / "source", bundle.files)
        (root / "gradebook.db").write_bytes(bundle.gradebook)
        (root / "exchange").mkdir()  # nbgrader's API insists on one
        os.environ[course_config.GRADING_ENV_VAR] = "1"
        # nbgrader's first autograde of a student trips this harmless SQLAlchemy warning on every submission.
        warnings.filterwarnings("ignore", category=sqlalchemy.exc.SAWarning)
        # The scratch gradebook is thrown away after each submission: no flush to disk for nbgrader's many commits.
        if not sqlalchemy.event.contains(sqlalchemy.engine.Engine, "connect", _scratch_commits):
            sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", _scratch_commits)
        sandbox.prepare(1)  # slot users are created on first use; this checks kernels can start at all
        sandbox.kernel_server()
        api = nbgrader_api(root, bundle.course_id, grading=True)
        _scratches[sha] = _Scratch(bundle, root, api, lock, {holder})
        _hide_scratches()
        return root


def release_worker(bundle_sha256: str, holder: str = "") -> None:
    """`holder` no longer needs the course's scratch folder: removed when nobody does."""
    with _one_at_a_time:
        scratch = _scratches.get(bundle_sha256)
        if scratch is None:
            return
        scratch.holders.discard(holder)
        if not scratch.holders:
            del _scratches[bundle_sha256]
            shutil.rmtree(scratch.root, ignore_errors=True)
            scratch.lock.close()
            _hide_scratches()


def _hide_scratches() -> None:
    sandbox.hide_from_kernels(*(path for scratch in _scratches.values()
                                for path in (scratch.root, *map(Path, scratch.bundle.private))))


def _lock_alive(root: Path):
    """Lock `root`'s alive file, locked before it appears (a lock taken on a name no other process sees, then
    renamed): an alive file that can be locked is one whose process is dead."""
    stream = open(root / f"{LOCK_NAME}.new", "w")
    fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(root / f"{LOCK_NAME}.new", root / LOCK_NAME)
    return stream  # kept open: the lock lasts as long as this process


def remove_dead_scratch(base: Path) -> list[Path]:
    """Remove the scratch folders under `base` of worker processes that died without cleaning up (SIGKILL, a
    node that lost power): the course's hidden tests do not stay on disk past the next worker's start."""
    removed = []
    for folder in Path(base).glob(f"{SCRATCH_PREFIX}*"):
        try:
            with open(folder / LOCK_NAME) as alive:
                fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (FileNotFoundError, NotADirectoryError, BlockingIOError):
            continue  # alive, or still being made
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _scratch_commits(connection, _record) -> None:
    """No flush to disk for a scratch gradebook (and only for it: a coordinator may share the process)."""
    if not isinstance(connection, sqlite3.Connection):
        return
    files = [Path(row[2]) for row in connection.execute("PRAGMA database_list") if row[2]]
    roots = [scratch.root for scratch in list(_scratches.values())]
    if files and all(any(path.is_relative_to(root) for root in roots) for path in files):
        connection.execute("PRAGMA synchronous=OFF")


def grade_task(task: Task) -> GradedSubmission:
    """Grade one submission in this process's scratch folder for its course (prepared by `prepare_worker`)."""
    with _one_at_a_time:
        scratch = _scratches.get(task.bundle_sha256)
        if scratch is None:
            raise RuntimeError("this worker was not prepared for this course (prepare_worker with its bundle)")
        root, api = scratch.root, scratch.api
        course_config.CELL_TIMEOUT = scratch.bundle.cell_timeout
        course_config.NOTEBOOK_TIMEOUT = scratch.bundle.notebook_timeout
        submitted = root / "submitted" / task.student / task.chapter
        write_folder(submitted, task.files)
        try:
            outcome = _autograde(api, root, task.student, task.chapter)
            outcome.submission_sha256 = task.submission_sha256
            outcome.grader_version = grader_version()
            graded = root / "autograded" / task.student / task.chapter
            return GradedSubmission(outcome, read_folder(graded) if graded.is_dir() else None)
        finally:  # the scratch gradebook keeps its rows (small; gone with the folder)
            for folder in ("submitted", "autograded"):
                shutil.rmtree(root / folder / task.student, ignore_errors=True)


def _autograde(api: NbGraderAPI, root: Path, student: str, chapter: str) -> Outcome:
    """Inspect, execute sandboxed, retry once: what a person must look at, and what the learner should hear."""
    started = time.monotonic()
    outcome = Outcome(student, chapter)
    submitted = root / "submitted" / student / chapter / f"{chapter}.ipynb"
    problems = integrity.inspect_submission(submitted, root / "source" / chapter / f"{chapter}.ipynb")
    if integrity.is_ungradable(problems):
        outcome.needs_review = problems
    else:
        switched = verdicts.switched_mechanisms(chapter, submitted)  # read from the notebook's text, not its kernel
        sandbox.kernel_modulecraft = answer_key.build(chapter, kept=verdicts.kept_names(switched))
        for attempt in (1, 2):  # a kernel that died or timed out may have been starved by load: once more
            outcome.attempts = attempt
            verdicts.start(chapter, root / "source" / chapter / f"{chapter}.ipynb", switched)
            sandbox.events.clear()
            result = api.autograde(chapter, student, force=True, create=True)
            sandbox.raise_shortage()  # not graded at all (the coordinator lists it as failed), never scored 0
            failures = sandbox.events + execution_failures(result, root, student, chapter)
            if not failures:
                break
        # A crash or a hang (kernel died, a cell or the notebook over its time limit) even on the second try:
        # held for a person to look at, whether or not nbgrader produced an autograded notebook.
        outcome.needs_review = problems + failures
        if (root / "autograded" / student / chapter).is_dir():
            outcome.notes = list(verdicts.limits)  # these cells scored zero, the others count
    outcome.seconds = round(time.monotonic() - started, 2)
    return outcome


def execution_failures(result: dict, root: Path, student: str, chapter: str) -> list[str]:
    """What went wrong running the notebook that load could explain (kernel died, cell timed out)."""
    if not result["success"]:
        return [_why_nbgrader_failed(result.get("log", "") + result.get("error", ""))]
    graded = root / "autograded" / student / chapter / f"{chapter}.ipynb"
    timed_out = integrity.timed_out_cells(graded)
    if timed_out:
        return [f"cell(s) {', '.join(timed_out)} hit the time limit per cell ({course_config.CELL_TIMEOUT} s of CPU "
                f"time, or {course_config.cell_wall_timeout()} s waiting)"]
    return []


def _why_nbgrader_failed(log: str) -> str:
    if "DeadKernelError" in log or "Kernel died" in log:
        return "the kernel died while running the notebook (os._exit, a crash, or a resource limit)"
    if "Timeout waiting for IOPub output" in log or "UnresponsiveKernelError" in log:
        return (f"a cell kept running after the time limit per cell ({course_config.CELL_TIMEOUT} s of CPU time) and "
                "ignored the interrupt (e.g. a loop that ignores SIGINT), so the notebook could not finish")
    errors = [line.strip() for line in log.splitlines()
              if re.match(r"\s*[\w.]+(Error|Exception): ", line) and "NbGraderException" not in line]
    return "nbgrader could not autograde it: " + (errors[0] if errors else "see `nbgrader autograde` for details")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
