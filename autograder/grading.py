"""Grading a class: one long-lived process pool that autogrades submissions through nbgrader's API.

Stock `nbgrader autograde` grades one notebook after another and pays Python's start-up on every command.
Here each worker process imports nbgrader once and grades one submission at a time, with as many workers
as cores (more would turn correct work into timeouts); its kernels are forks of a server that imported what
they need once (`forkserver`), and work nbgrader repeats per cell is done once (`tuning`). Every submission's
outcome is also written to `<root>/reports/<student>/<chapter>.json`, after its grades are in the gradebook,
so a run that was killed halfway resumes where it stopped.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
import warnings
from pathlib import Path

import sqlalchemy.exc

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory

from . import config as course_config
from . import integrity, sandbox, tuning


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

    @property
    def status(self) -> str:
        return "needs review" if self.needs_review else "graded"


@dataclasses.dataclass
class GradingReport:
    outcomes: list[Outcome]
    seconds: float = 0.0
    skipped: int = 0  # already graded and unchanged since

    def outcome(self, student: str, chapter: str) -> Outcome:
        return next(o for o in self.outcomes if (o.student, o.chapter) == (student, chapter))

    @property
    def needs_review(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.needs_review]


def nbgrader_api(root, course_id: str = course_config.COURSE_ID, *, grading: bool = False) -> NbGraderAPI:
    """nbgrader's API on grading folder `root`; with `grading`, our sandbox and tamper guard are plugged in."""
    _put_our_scripts_on_path()
    cfg = course_config.nbgrader_config(root, course_id)
    if grading:
        tuning.apply()
        cfg.merge(integrity.autograde_config())
        cfg.merge(sandbox.autograde_config())
    return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)


def _put_our_scripts_on_path() -> None:
    """nbgrader runs `alembic` by name: find it next to our interpreter even when the venv is not activated."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


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


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def grade_class(course, jobs, *, workers=None, progress=None, force=False) -> GradingReport:
    """Grade `jobs` [(student, chapter)] of `course` with up to `workers` (default: cores) processes.

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
    skipped = len(done)
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    if todo:
        sandbox.prepare(workers)
        context = multiprocessing.get_context("fork")  # callers need no `if __name__ == "__main__"` guard
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = [pool.submit(grade_submission, str(course.root), course.course_id, student, chapter)
                       for student, chapter in todo]
            for count, future in enumerate(concurrent.futures.as_completed(futures), 1):
                outcome = future.result()
                done.append(outcome)
                if progress is not None:
                    progress(count, len(todo), outcome)
    order = {job: i for i, job in enumerate(jobs)}
    done.sort(key=lambda o: order[(o.student, o.chapter)])
    return GradingReport(done, time.monotonic() - started, skipped)


_apis: dict[tuple[str, str], NbGraderAPI] = {}


def grade_submission(root: str, course_id: str, student: str, chapter: str, *, hold: bool = True) -> Outcome:
    """Autograde one submission (in a worker process): inspect, execute sandboxed, retry once, record.

    With `hold`, a submission that needs review keeps no points until a person looks at it; the self-check
    shows the learner the scores anyway, next to the problems."""
    os.environ[course_config.GRADING_ENV_VAR] = "1"
    # nbgrader's first autograde of a student trips this harmless SQLAlchemy warning on every submission.
    warnings.filterwarnings("ignore", category=sqlalchemy.exc.SAWarning)
    api = _apis.get((root, course_id)) or _apis.setdefault((root, course_id),
                                                           nbgrader_api(root, course_id, grading=True))
    root_path = Path(root)
    sandbox.hide_from_kernels(root_path, root_path / "source")
    started = time.monotonic()
    submitted = root_path / "submitted" / student / chapter / f"{chapter}.ipynb"
    source = root_path / "source" / chapter / f"{chapter}.ipynb"
    outcome = Outcome(student, chapter, submission_sha256=file_sha256(submitted))

    problems = integrity.inspect_submission(submitted, source)
    if integrity.is_ungradable(problems):
        shutil.rmtree(root_path / "autograded" / student / chapter, ignore_errors=True)  # no stale feedback
        _record_zero(api, chapter, student)
        outcome.needs_review = problems
    else:
        for attempt in (1, 2):  # a kernel that died or timed out may have been starved by load: once more
            outcome.attempts = attempt
            integrity.reset_verdict()
            sandbox.events.clear()
            result = api.autograde(chapter, student, force=True, create=True)
            failures = sandbox.events + execution_failures(result, root_path, student, chapter)
            if not failures:
                break
        if (root_path / "autograded" / student / chapter).is_dir():
            outcome.notes = failures  # the cells that failed this way scored zero, the others count
            outcome.needs_review = problems + integrity.verdict()
        else:  # nbgrader gave up on the whole notebook (dead kernel): nothing to show, a person must look
            _record_zero(api, chapter, student)
            outcome.needs_review = problems + failures
    if outcome.needs_review and hold:
        _hold_for_review(api, chapter, student)
    outcome.score, outcome.max_score = _total(api, chapter, student)
    outcome.seconds = round(time.monotonic() - started, 2)
    _save_outcome(root_path, outcome)
    return outcome


def execution_failures(result: dict, root: Path, student: str, chapter: str) -> list[str]:
    """What went wrong running the notebook that load could explain (kernel died, cell timed out)."""
    if not result["success"]:
        return [_why_nbgrader_failed(result.get("log", "") + result.get("error", ""))]
    graded = root / "autograded" / student / chapter / f"{chapter}.ipynb"
    timed_out = integrity.timed_out_cells(graded)
    if timed_out:
        return [f"cell(s) {', '.join(timed_out)} hit the {course_config.CELL_TIMEOUT} s time limit per cell"]
    return []


def _why_nbgrader_failed(log: str) -> str:
    if "DeadKernelError" in log or "Kernel died" in log:
        return "the kernel died while running the notebook (os._exit, a crash, or a resource limit)"
    if "Timeout waiting for IOPub output" in log or "UnresponsiveKernelError" in log:
        return (f"a cell kept running after the {course_config.CELL_TIMEOUT} s time limit per cell and ignored "
                "the interrupt (e.g. a loop that ignores SIGINT), so the notebook could not finish")
    errors = [line.strip() for line in log.splitlines()
              if re.match(r"\s*[\w.]+(Error|Exception): ", line) and "NbGraderException" not in line]
    return "nbgrader could not autograde it: " + (errors[0] if errors else "see `nbgrader autograde` for details")


def _grades(gb: Gradebook, chapter: str, student: str):
    return gb.find_submission_notebook(chapter, chapter, student).grades


def _record_zero(api: NbGraderAPI, chapter: str, student: str) -> None:
    """Give zero to a submission nbgrader could not run, so the gradebook has a row for every submission."""
    with api.gradebook as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(chapter, student)
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
