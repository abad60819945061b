"""The submissions test_course_grading.py grades, and the shared run that grades them.

The run of every chapter the session tests takes minutes on all cores, and much of the suite before it waits on
servers, sleeps and timeouts: `start` runs it in a process of its own as soon as the tests are collected (see
conftest.py), and the course's fixtures take its grading folder when it is done. Run as a script, this module is
that process: `python shared_grading.py <folder> <chapter>...`.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat

from course_chapters import (REPO_ROOT, builds_on, delegating, exercise_test_cells, graded_cells, read_notebook,
                             solved, with_cell_replaced, wrong_implementations)

STOP_WAIT = 30  # seconds a run stopped early (the session ended first) may take to stop its workers


def worth_points(chapter: str, solution_id: str) -> bool:
    graded = graded_cells(read_notebook(chapter))
    return sum(graded[g] for g in exercise_test_cells(solution_id, graded)) > 0


def packs(chapter: str) -> list[list[dict]]:
    """The chapter's wrong implementations worth points, several to a submission: at most one per exercise, and
    never two exercises one of which builds on the other (its points could go with the other's mistake)."""
    related = {(b, a) for b, calls in builds_on(chapter).items() for a in calls}
    related |= {(a, b) for b, a in related}
    result: list[list[dict]] = []
    for wrong in (w for w in wrong_implementations(chapter) if worth_points(chapter, w["grade_id"])):
        exercise = wrong["grade_id"]
        fits = (pack for pack in result if all(w["grade_id"] != exercise and (w["grade_id"], exercise) not in related
                                               for w in pack))
        pack = next(fits, None)
        if pack is None:
            result.append(pack := [])
        pack.append(wrong)
    return result


def submit(course, chapter: str, released: Path, folder: Path) -> list[str]:
    """Submit the chapter's test submissions (solved, untouched, delegating to the reference, and the packs of
    wrong implementations) written under `folder`; their student ids."""
    folder.mkdir(parents=True)
    answers = solved(nbformat.read(released, as_version=4), read_notebook(chapter))
    submissions = {"solved": _write(folder / "solved.ipynb", answers), "untouched": released,
                   "delegates": _write(folder / "delegates.ipynb", delegating(answers, chapter))}
    for i, pack in enumerate(packs(chapter)):
        submission = answers
        for wrong in pack:
            submission = with_cell_replaced(submission, wrong["grade_id"], wrong["source"])
        submissions[f"pack-{i}"] = _write(folder / f"pack-{i}.ipynb", submission)
    for student, path in submissions.items():
        course.submit(student, chapter, path)
    return list(submissions)


def grade(course, release, chapters: list[str], folder: Path):
    """Submit and grade the chapters' test submissions in ONE run (one pool of workers kept busy across
    chapters, one feedback pass); `release(chapter)` gives the released notebook. The run's report."""
    students = sorted({student for chapter in chapters
                       for student in submit(course, chapter, release(chapter), folder / chapter)})
    # only these submissions: other tests' (the capstone's switches) are graded by their own fixtures
    report = course.grade(students, chapters, force=True)
    course.generate_feedback(students, chapters)
    return report


def _write(path: Path, nb) -> Path:
    nbformat.write(nb, path)
    return path


class Run:
    """The shared run, in a process of its own, grading in `folder`: its course in `course/`."""

    def __init__(self, folder: Path, chapters: list[str]):
        self.folder, self.chapters = folder, chapters
        self.log = folder / "run.log"
        with self.log.open("wb") as log:  # its own session: stopping it stops its workers and kernels too
            self.process = subprocess.Popen([sys.executable, __file__, str(folder), *chapters], cwd=REPO_ROOT,
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    @property
    def course_root(self) -> Path:
        return self.folder / "course"

    def wait(self) -> tuple[dict[str, Path], object]:
        """Wait for the run to end: (released notebook per chapter, grading report); raise if it failed."""
        if self.process.wait() != 0:
            raise RuntimeError(f"the shared grading run failed (exit code {self.process.returncode}):\n"
                               + self.log.read_text(errors="replace")[-6000:])
        return pickle.loads((self.folder / "result.pickle").read_bytes())

    def stop(self) -> None:
        """End the run if the session ends before it does (nothing of it outlives the session)."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def _stop_when_orphaned(parent: int) -> None:
    """End this run's session when the pytest that started it is gone without stopping it (killed: a SIGTERM or
    SIGKILL runs no session end), as `Run.stop` would have."""
    while os.getppid() == parent:
        time.sleep(1)
    os.killpg(0, signal.SIGINT)
    time.sleep(STOP_WAIT)
    os.killpg(0, signal.SIGKILL)


def _main(folder: Path, chapters: list[str]) -> None:
    from autograder import Course

    course = Course(folder / "course")
    released = course.release(chapters)
    report = grade(course, released.__getitem__, chapters, folder / "submissions")
    (folder / "result.pickle").write_bytes(pickle.dumps((released, report)))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))  # the checkout's autograder, as the tests import it
    threading.Thread(target=_stop_when_orphaned, args=(os.getppid(),), daemon=True).start()
    _main(Path(sys.argv[1]), sys.argv[2:])
