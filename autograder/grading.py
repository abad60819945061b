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
import json
import multiprocessing
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import nbformat
import sqlalchemy.exc
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGraderAPI
from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

from .workers import (CourseBundle, GradedSubmission, Outcome, Task, file_sha256, grade_task, nbgrader_api,
                      prepare_worker, read_folder, write_folder)

SCRATCH = ".workers"  # under the grading folder: the local pool's scratch grading folders


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
    `progress(done, total, outcome)` is called after each submission.
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
    if todo:
        bundle = CourseBundle.of(course.root, course.source, course.course_id, {chapter for _, chapter in todo})
        tasks = [submission_task(course.root, student, chapter, bundle) for student, chapter in todo]
        if scheduler is None:
            results = _local_pool(course.root, bundle, tasks, workers)
        else:
            from . import dask_grading
            results = dask_grading.grade(scheduler, bundle, tasks, workers)
        api = nbgrader_api(course.root, course.course_id)
        for count, (task, result) in enumerate(results, 1):
            if isinstance(result, BaseException):
                failed.append((task.student, task.chapter, f"{type(result).__name__}: {result}"))
                continue
            outcome = record(api, course.root, result)
            done.append(outcome)
            if progress is not None:
                progress(count, len(todo), outcome)
    order = {job: i for i, job in enumerate(jobs)}
    done.sort(key=lambda o: order[(o.student, o.chapter)])
    return GradingReport(done, time.monotonic() - started, skipped, failed)


def submission_task(root: Path, student: str, chapter: str, bundle: CourseBundle) -> Task:
    folder = Path(root) / "submitted" / student / chapter
    return Task(student, chapter, file_sha256(folder / f"{chapter}.ipynb"), read_folder(folder), bundle.sha256)


def _local_pool(root: Path, bundle: CourseBundle, tasks: list[Task], workers: int | None):
    """(task, result or exception) as they complete, from a pool of forked processes on this machine."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    context = multiprocessing.get_context("fork")  # callers need no `if __name__ == "__main__"` guard
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=prepare_worker,
                                                initargs=(bundle, Path(root) / SCRATCH)) as pool:
        futures = {pool.submit(grade_task, task): task for task in tasks}
        for future in concurrent.futures.as_completed(futures):
            yield futures[future], future.exception() or future.result()


def grade_submission(root: str, course_id: str, student: str, chapter: str, *, hold: bool = True) -> Outcome:
    """Grade one submission in this process (worker and coordinator in one), e.g. for the learner's self-check.

    With `hold`, a submission that needs review keeps no points until a person looks at it; the self-check
    shows the learner the scores anyway, next to the problems."""
    root_path = Path(root)
    source = (root_path / "source").resolve()
    bundle = CourseBundle.of(root_path, source, course_id, [chapter])
    prepare_worker(bundle, root_path / SCRATCH)
    result = grade_task(submission_task(root_path, student, chapter, bundle))
    return record(nbgrader_api(root_path, course_id), root_path, result, hold=hold)


def record(api: NbGraderAPI, root: Path, result: GradedSubmission, *, hold: bool = True) -> Outcome:
    """Write a worker's result into the grading folder `root`: autograded folder, gradebook, report.

    The gradebook gets what stock autograde writes: student and submission (with its timestamp), then the
    grades and comments nbgrader's `SaveAutoGrades` reads off the autograded notebook and the late penalty of
    `AssignLatePenalties`, run here against the real gradebook. With `hold`, a submission that needs review
    keeps no points until a person looks."""
    outcome = dataclasses.replace(result.outcome)
    student, chapter = outcome.student, outcome.chapter
    autograded = Path(root) / "autograded" / student / chapter
    with api.gradebook as gb, warnings.catch_warnings():
        # nbgrader's first submission of a student trips this harmless SQLAlchemy warning every time.
        warnings.simplefilter("ignore", sqlalchemy.exc.SAWarning)
        gb.update_or_create_student(student)
        timestamp = api.coursedir.get_existing_timestamp(str(Path(root) / "submitted" / student / chapter))
        gb.update_or_create_submission(chapter, student, **({"timestamp": timestamp} if timestamp else {}))
    if result.autograded is None:
        shutil.rmtree(autograded, ignore_errors=True)  # no stale feedback
        _record_zero(api, chapter, student)
    else:
        write_folder(autograded, result.autograded)
        notebook = nbformat.reads(result.autograded[f"{chapter}.ipynb"].decode(), as_version=nbformat.NO_CONVERT)
        resources = {"nbgrader": {"notebook": chapter, "assignment": chapter, "student": student,
                                  "db_url": api.coursedir.db_url}}
        for step in (SaveAutoGrades, AssignLatePenalties):
            step(config=api.config).preprocess(notebook, resources)
    if outcome.needs_review and hold:
        _hold_for_review(api, chapter, student)
    outcome.score, outcome.max_score = _total(api, chapter, student)
    _save_outcome(Path(root), outcome)
    return outcome


def _grades(gb: Gradebook, chapter: str, student: str):
    return gb.find_submission_notebook(chapter, chapter, student).grades


def _record_zero(api: NbGraderAPI, chapter: str, student: str) -> None:
    """Give zero to a submission nbgrader could not run, so the gradebook has a row for every submission."""
    with api.gradebook as gb:
        for grade in _grades(gb, chapter, student):
            grade.auto_score = 0
        gb.db.commit()


def _hold_for_review(api: NbGraderAPI, chapter: str, student: str) -> None:
    """Keep points a person has not confirmed: zero auto scores, flagged for manual grading."""
    with api.gradebook as gb:
        for grade in _grades(gb, chapter, student):
            grade.auto_score = 0
            grade.needs_manual_grade = True
        gb.db.commit()


def _total(api: NbGraderAPI, chapter: str, student: str) -> tuple[float, float]:
    with api.gradebook as gb:
        try:
            grades = _grades(gb, chapter, student)
        except MissingEntry:
            return 0.0, 0.0
        return float(sum(g.score for g in grades)), float(sum(g.max_score for g in grades))


class ProgressBar:
    """`[#####-----] 12/40  ETA 1m05s` on one terminal line (a line per submission when not a terminal)."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream, self.width, self.started = stream, width, time.monotonic()

    def __call__(self, done: int, total: int, outcome: Outcome) -> None:
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * (total - done)
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        flag = "  needs review" if outcome.needs_review else ""
        line = (f"[{bar}] {done}/{total}  ETA {int(eta) // 60}m{int(eta) % 60:02d}s  "
                f"{outcome.student}/{outcome.chapter}: {outcome.score:g}/{outcome.max_score:g}{flag}")
        if self.stream.isatty():
            self.stream.write("\r\033[K" + line + ("\n" if done == total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
