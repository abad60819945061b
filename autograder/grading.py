"""Grading a class: workers grade submissions, the coordinator alone writes the gradebook.

Stock `nbgrader autograde` grades one notebook after another and pays Python's start-up on every command.
Here workers (a local process pool, or Dask workers with `scheduler`: see `dask_grading`) import nbgrader once
and grade one submission at a time each in a private scratch folder (`workers`); its kernels are forks of a
server that imported what they need once (`forkserver`), and work nbgrader repeats per cell is done once
(`tuning`). Locally there are as many workers as cores (more would turn correct work into timeouts).

This process, the coordinator, imports each result once, as it arrives: the autograded folder, the grades
through nbgrader's own `SaveAutoGrades` and `AssignLatePenalties`, then holds for review what needs a person.
Every submission's outcome is then written to `<root>/reports/<student>/<chapter>.json`, after its grades are
in the gradebook, so a run that was killed halfway resumes where it stopped.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import multiprocessing
import os
import shutil
import sys
import time
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import nbformat
import sqlalchemy.event
import sqlalchemy.exc
import sqlalchemy.orm
from nbgrader.api import Comment, Grade, Gradebook, MissingEntry
from nbgrader.preprocessors import AssignLatePenalties, NbGraderPreprocessor, SaveAutoGrades

from .workers import (CourseBundle, GradedSubmission, Outcome, Task, file_sha256, grade_task, nbgrader_api,
                      prepare_worker, read_folder, write_folder)

SCRATCH = ".workers"  # under the grading folder: the local pool's scratch grading folders
QUEUED_PER_WORKER = 4  # local pool: tasks sent ahead of the workers (each holds one submission's files)


@dataclasses.dataclass
class GradingReport:
    outcomes: list[Outcome]
    seconds: float = 0.0
    skipped: int = 0  # already graded and unchanged since
    failed: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (student, chapter, why): not graded

    def outcome(self, student: str, chapter: str) -> Outcome:
        return next(o for o in self.outcomes if (o.student, o.chapter) == (student, chapter))

    @property
    def needs_review(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.needs_review]


def report_path(root: Path, student: str, chapter: str) -> Path:
    return Path(root) / "reports" / student / f"{chapter}.json"


def load_outcome(root: Path, student: str, chapter: str) -> Outcome | None:
    path = report_path(root, student, chapter)
    if not path.exists():
        return None
    return Outcome(**json.loads(path.read_text()))


def _save_outcome(root: Path, outcome: Outcome) -> None:
    path = report_path(root, outcome.student, outcome.chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(dataclasses.asdict(outcome), indent=1))
    partial.replace(path)  # atomic: a killed run leaves either the old report or the new one


def grade_class(course, jobs, *, workers=None, progress=None, force=False, scheduler=None) -> GradingReport:
    """Grade `jobs` [(student, chapter)] of `course` with up to `workers` local processes (default: cores), or
    on the Dask cluster at `scheduler` (an address, or "local" for a LocalCluster of `workers` processes).

    Submissions graded before and unchanged since are skipped unless `force`.
    `progress(done, total, outcome)` is called after each submission, with the `Outcome`, or the
    (student, chapter, why) of one that could not be graded; `progress.phase(text)`, if there is one, hears
    the start-up phases and the Dask workers left out.
    """
    started = time.monotonic()
    todo, done = [], []
    for student, chapter in jobs:
        previous = load_outcome(course.root, student, chapter)
        if (not force and previous is not None
                and previous.submission_sha256 == file_sha256(course.submission_path(student, chapter))):
            done.append(previous)
        else:
            todo.append((student, chapter))
    skipped, failed = len(done), []
    # the longest chapters first: the submissions graded last are short ones, so workers finish close together
    todo.sort(key=lambda job: -code_cells(course.source / job[1] / f"{job[1]}.ipynb"))
    if todo:
        bundle = CourseBundle.of(course.root, course.source, course.course_id)
        # read when sent: a MOOC's submissions need not all be in memory at once
        tasks = (submission_task(course.root, student, chapter, bundle) for student, chapter in todo)
        say = getattr(progress, "phase", None)
        if scheduler is None:
            pool_size = min(workers or os.cpu_count() or 1, len(todo))
            if say is not None:
                say(f"starting {pool_size} local worker(s)")
            results = _local_pool(course.root, bundle, tasks, pool_size)
        else:
            from . import dask_grading
            results = dask_grading.grade(scheduler, bundle, tasks, workers, say=say)
        with Recorder(course.root, course.course_id) as recorder:
            for count, (task, result) in enumerate(results, 1):
                if isinstance(result, BaseException):
                    failed.append((task.student, task.chapter, f"{type(result).__name__}: {result}"))
                    finished = failed[-1]
                else:
                    finished = recorder.record(result)
                    done.append(finished)
                if progress is not None:
                    progress(count, len(todo), finished)
    order = {job: i for i, job in enumerate(jobs)}
    done.sort(key=lambda o: order[(o.student, o.chapter)])
    return GradingReport(done, time.monotonic() - started, skipped, failed)


@functools.lru_cache(maxsize=64)
def code_cells(notebook: Path) -> int:
    """How many code cells the chapter's notebook has: how long its submissions take to grade, roughly."""
    try:
        return sum(cell["cell_type"] == "code" for cell in json.loads(notebook.read_text())["cells"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def submission_task(root: Path, student: str, chapter: str, bundle: CourseBundle) -> Task:
    folder = Path(root) / "submitted" / student / chapter
    return Task(student, chapter, file_sha256(folder / f"{chapter}.ipynb"), read_folder(folder), bundle.sha256)


def _local_pool(root: Path, bundle: CourseBundle, tasks: Iterator[Task], workers: int):
    """(task, result or exception) as they complete, from a pool of `workers` forked processes on this machine,
    with a few tasks per worker queued at a time."""
    context = multiprocessing.get_context("fork")  # callers need no `if __name__ == "__main__"` guard
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=prepare_worker,
                                                initargs=(bundle, Path(root) / SCRATCH)) as pool:
        running = {}

        def send_next() -> None:
            task = next(tasks, None)
            if task is not None:
                running[pool.submit(grade_task, task)] = task

        for _ in range(QUEUED_PER_WORKER * workers):
            send_next()
        while running:
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                send_next()
                yield running.pop(future), future.exception() or future.result()


def grade_submission(root: str, course_id: str, student: str, chapter: str, *, hold: bool = True) -> Outcome:
    """Grade one submission in this process (worker and coordinator in one), e.g. for the learner's self-check.

    With `hold`, a submission that needs review keeps no points until a person looks at it; the self-check
    shows the learner the scores anyway, next to the problems."""
    root_path = Path(root)
    source = (root_path / "source").resolve()
    bundle = CourseBundle.of(root_path, source, course_id)
    prepare_worker(bundle, root_path / SCRATCH)
    result = grade_task(submission_task(root_path, student, chapter, bundle))
    with Recorder(root_path, course_id) as recorder:
        return recorder.record(result, hold=hold)


class Recorder:
    """Writes workers' results into the grading folder `root`: autograded folder, gradebook, report.

    The gradebook gets what stock autograde writes: student and submission (with its timestamp), then the
    grades and comments of nbgrader's `SaveAutoGrades`, read off the autograded notebook, and the late penalty
    of `AssignLatePenalties`, run here against the real gradebook.

    The coordinator imports every submission of the class one after another, so its time per submission
    bounds the whole cluster's throughput. One gradebook connection serves the whole run (nbgrader opens one
    per step: a new engine, its schema checked), and SQLite's write-ahead log with `synchronous=NORMAL` spares
    nbgrader's commit per cell a flush to disk each (a killed grader loses nothing; a power cut may lose the
    last commits, which a rerun regrades, as it does the submissions whose report was not written)."""

    def __init__(self, root: Path, course_id: str):
        self.root = Path(root)
        self.api = nbgrader_api(root, course_id)
        self.gradebook = Gradebook(self.api.coursedir.db_url, course_id)
        sqlalchemy.event.listen(self.gradebook.engine, "connect", _write_ahead_log)
        self.gradebook.db.remove()
        self.gradebook.engine.dispose()  # connect again, with the log

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.gradebook.close()

    def record(self, result: GradedSubmission, *, hold: bool = True) -> Outcome:
        """Import one result; with `hold`, a submission that needs review keeps no points until a person looks."""
        outcome = dataclasses.replace(result.outcome)
        student, chapter = outcome.student, outcome.chapter
        gb, autograded = self.gradebook, self.root / "autograded" / student / chapter
        with warnings.catch_warnings():
            # nbgrader's first submission of a student trips this harmless SQLAlchemy warning every time.
            warnings.simplefilter("ignore", sqlalchemy.exc.SAWarning)
            gb.update_or_create_student(student)
            timestamp = self.api.coursedir.get_existing_timestamp(str(self.root / "submitted" / student / chapter))
            submission = gb.update_or_create_submission(chapter, student,
                                                        **({"timestamp": timestamp} if timestamp else {}))
        grades = gb.find_submission_notebook(chapter, chapter, student).grades
        if result.autograded is None:
            shutil.rmtree(autograded, ignore_errors=True)  # no stale feedback
            for grade in grades:  # a row for every submission, even one nbgrader could not run
                grade.auto_score = 0
        else:
            write_folder(autograded, result.autograded)
            notebook = nbformat.reads(result.autograded[f"{chapter}.ipynb"].decode(), as_version=nbformat.NO_CONVERT)
            resources = {"nbgrader": {"notebook": chapter, "assignment": chapter, "student": student,
                                      "db_url": self.api.coursedir.db_url}}
            _SaveAutoGradesInto(gb, config=self.api.config).preprocess(notebook, resources)
            if submission.total_seconds_late > 0:  # nbgrader's own step (it opens the gradebook itself)
                gb.db.commit()
                AssignLatePenalties(config=self.api.config).preprocess(notebook, resources)
                gb.db.expire_all()
            else:
                gb.find_submission_notebook(chapter, chapter, student).late_submission_penalty = None
        if outcome.needs_review and hold:  # keep points a person has not confirmed
            for grade in grades:
                grade.auto_score = 0
                grade.needs_manual_grade = True
        gb.db.commit()
        outcome.score = float(sum(g.score for g in grades))
        outcome.max_score = float(sum(g.max_score for g in grades))
        _save_outcome(self.root, outcome)
        return outcome


def _write_ahead_log(connection, _record) -> None:
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")


class _SaveAutoGradesInto(SaveAutoGrades):
    """nbgrader's `SaveAutoGrades` (its scoring and comments per cell) through a gradebook already open, in the
    Recorder's transaction: nbgrader commits after each cell, and each commit made the next cell's queries
    load their rows again (half the coordinator's time per submission); the Recorder commits once."""

    def __init__(self, gradebook: Gradebook, **kwargs):
        super().__init__(**kwargs)
        self.open_gradebook = gradebook

    def preprocess(self, nb, resources):
        ids = resources["nbgrader"]
        self.notebook_id, self.assignment_id, self.student_id = ids["notebook"], ids["assignment"], ids["student"]
        self.gradebook = _OneSubmission(self.open_gradebook, self.notebook_id, self.assignment_id, self.student_id)
        return NbGraderPreprocessor.preprocess(self, nb, resources)


class _OneSubmission:
    """The gradebook as `SaveAutoGrades` asks it for one submitted notebook: its session's `commit()` only flushes
    (the changes are sent, the transaction stays open), and each cell's grade and comment come from the notebook's
    grades and comments fetched once, with their cells (nbgrader's `find_grade` and `find_comment`: a query of six
    joins per cell; the coordinator's CPU per submission of the capstone, 11 and 3 went from 36 to 26 ms). Anything
    else goes to the gradebook."""

    def __init__(self, gradebook: Gradebook, notebook: str, assignment: str, student: str):
        self.gradebook = gradebook
        self.db = types.SimpleNamespace(commit=gradebook.db.flush)
        submitted = gradebook.find_submission_notebook(notebook, assignment, student)
        rows = {kind: (gradebook.db.query(kind).options(sqlalchemy.orm.joinedload(kind.cell))
                       .filter(kind.notebook_id == submitted.id).all()) for kind in (Grade, Comment)}
        self._by_cell = {(kind, row.cell.type, row.cell.name): row for kind in rows for row in rows[kind]}
        self._where = f"{assignment}/{notebook}/{student}"

    def find_grade(self, name: str, *_ids) -> Grade:
        return self._found(Grade, name, ("GradeCell", "TaskCell"))

    def find_comment(self, name: str, *_ids) -> Comment:
        return self._found(Comment, name, ("SolutionCell", "TaskCell"))

    def _found(self, kind: type, name: str, cell_types: tuple[str, str]):
        """As nbgrader finds it: the row of the cell of the first type with that name."""
        for cell_type in cell_types:
            row = self._by_cell.get((kind, cell_type, name))
            if row is not None:
                return row
        raise MissingEntry(f"No such {kind.__name__.lower()}: {self._where}/{name}")

    def __getattr__(self, name):
        return getattr(self.gradebook, name)


class ProgressBar:
    """`[#####-----] 12/40  1 not graded  ETA 1m05s` on one terminal line (a line per submission when not a
    terminal), after the start-up phases, one line each. The ETA is the work left at the pace of the last
    `window` submissions, so the start-up (a cluster's, the first kernels') does not count as grading time."""

    def __init__(self, stream=sys.stderr, width: int = 30, window: int = 20, clock=time.monotonic):
        self.stream, self.width, self.clock = stream, width, clock
        self.finished_at: list[float] = []  # when the last `window` + 1 submissions finished
        self.window, self.failed, self.line = window, 0, ""

    def phase(self, text: str) -> None:
        """A start-up phase, or news about the workers: a line of its own, above the bar."""
        self._write(f"[grading] {text}", keep=True)

    def __call__(self, done: int, total: int, outcome) -> None:
        self.finished_at = [*self.finished_at, self.clock()][-(self.window + 1):]
        if isinstance(outcome, Outcome):
            flag = "  needs review" if outcome.needs_review else ""
            what = f"{outcome.student}/{outcome.chapter}: {outcome.score:g}/{outcome.max_score:g}{flag}"
        else:  # (student, chapter, why): not graded
            self.failed += 1
            what = f"{outcome[0]}/{outcome[1]}: not graded"
        filled = self.width * done // total
        failures = f"  {self.failed} not graded" if self.failed else ""
        if done == total:
            self.line = ""  # the bar's last line stays, and is not drawn again
        self._write(f"[{'#' * filled}{'-' * (self.width - filled)}] {done}/{total}{failures}  "
                    f"{self._eta(total - done)}  {what}", keep=done == total)

    def _eta(self, left: int) -> str:
        if not left:
            return "done"
        if len(self.finished_at) < 2:
            return "ETA --"
        pace = (self.finished_at[-1] - self.finished_at[0]) / (len(self.finished_at) - 1)
        seconds = int(pace * left)
        return f"ETA {seconds // 60}m{seconds % 60:02d}s"

    def _write(self, line: str, keep: bool) -> None:
        """On a terminal the bar is redrawn in place; a kept line ends with a newline, and the bar follows it."""
        if not self.stream.isatty():
            self.stream.write(line + "\n")
        elif keep:
            self.stream.write("\r\033[K" + line + "\n" + self.line)
        else:
            self.stream.write("\r\033[K" + line)
            self.line = line
        self.stream.flush()
