"""`Course`: an nbgrader grading folder for the modulecraft chapters, driven through nbgrader's Python API."""
from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import nbgrader.api
from nbgrader.api import Gradebook, MissingEntry

from . import config as course_config
from .grading import GradingReport, grade_class, nbgrader_api

# Each new gradebook asks `alembic heads` (a subprocess: 3 s of CPU) for nbgrader's schema version, which is fixed by
# the nbgrader installed: asked once per process (a learner's first self-check of a chapter, a test's folder).
nbgrader.api.get_alembic_version = functools.cache(nbgrader.api.get_alembic_version)


class Course:
    """A grading folder `root` laid out as an nbgrader course whose `source` is the repository's chapters
    (or `source`; an existing folder keeps the source it was created with).

    Everything generated (releases, submissions, gradebook, feedback) lives under `root`; nothing is written
    into the repository. The folder is private to its owner: grading kernels run as another user.
    """

    def __init__(self, root: str | os.PathLike, source: str | os.PathLike | None = None,
                 course_id: str = course_config.COURSE_ID):
        self.root = Path(root).resolve()
        link = self.root / "source"
        if source is None and link.is_symlink():  # a grading folder remembers the chapters it was made from
            source = link.resolve()
        self.source = Path(source or course_config.COURSE_SOURCE).resolve()
        self.course_id = course_id
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        (self.root / "exchange").mkdir(exist_ok=True)  # nbgrader's API insists on one; we do not use it
        self._link_source()
        (self.root / "nbgrader_config.py").write_text(
            course_config.CONFIG_FILE_TEXT.format(root=str(self.root), course_id=course_id))

    def _link_source(self) -> None:
        link = self.root / "source"
        if link.is_symlink() and link.resolve() == self.source:
            return
        if link.exists() or link.is_symlink():
            raise FileExistsError(f"{link} exists and is not a link to {self.source}; "
                                  "use an empty folder or the one this course created")
        link.symlink_to(self.source, target_is_directory=True)

    # -- chapters -------------------------------------------------------------------------------------
    def chapters(self) -> list[str]:
        """The chapters in the source folder: `<ch>/<ch>.ipynb`, in order."""
        return sorted(p.parent.name for p in self.source.glob("*/*.ipynb") if p.stem == p.parent.name)

    def _chapters(self, chapters) -> list[str]:
        known = self.chapters()
        if chapters is None:
            return known
        chapters = [chapters] if isinstance(chapters, str) else list(chapters)
        unknown = sorted(set(chapters) - set(known))
        if unknown:
            raise ValueError(f"unknown chapter(s) {unknown}; the source folder {self.source} has {known}")
        return chapters

    def release(self, chapters=None) -> dict[str, Path]:
        """Generate the student version of each chapter (nbgrader generate_assignment); released notebook per chapter."""
        api = nbgrader_api(self.root, self.course_id)
        released = {}
        for chapter in self._chapters(chapters):
            result = api.generate_assignment(chapter, force=True, create=True)
            if not result["success"]:
                raise RuntimeError(f"nbgrader could not generate chapter {chapter}:\n{result.get('log', '')}"
                                   f"\n{result.get('error', '')}")
            released[chapter] = self.release_path(chapter)
        return released

    def release_path(self, chapter: str) -> Path:
        return self.root / "release" / chapter / f"{chapter}.ipynb"

    # -- submissions ----------------------------------------------------------------------------------
    def submission_path(self, student: str, chapter: str) -> Path:
        return self.root / "submitted" / student / chapter / f"{chapter}.ipynb"

    def submit(self, student: str, chapter: str, notebook_path: str | os.PathLike) -> Path:
        """Copy a learner's notebook in as `student`'s submission of `chapter` (replacing an earlier one)."""
        check_student_id(student)
        self._chapters([chapter])
        target = self.submission_path(student, chapter)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook_path, target)
        return target

    def students(self) -> list[str]:
        submitted = self.root / "submitted"
        return sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []

    # -- grading ----------------------------------------------------------------------------------------
    def grade(self, students=None, chapters=None, *, workers: int | None = None, progress=None,
              force: bool = False, scheduler=None) -> GradingReport:
        """Autograde the submissions of `students` x `chapters` (default: all) in parallel, safely: on this
        machine, or on the Dask cluster at `scheduler`: an address, a cluster object (dask-jobqueue's, with its TLS
        settings), or "local" for a LocalCluster of `workers` processes."""
        students = [students] if isinstance(students, str) else (students or self.students())
        jobs = [(student, chapter) for chapter in self._chapters(chapters) for student in students
                if self.submission_path(student, chapter).exists()]
        return grade_class(self, jobs, workers=workers, progress=progress, force=force, scheduler=scheduler)

    def gradebook(self) -> Gradebook:
        return Gradebook(f"sqlite:///{self.root / 'gradebook.db'}", course_id=self.course_id)

    def scores(self, student: str, chapter: str) -> dict[str, tuple[float, float]]:
        """grade_id -> (score, max_score) for one graded submission."""
        with self.gradebook() as gb:
            try:
                notebook = gb.find_submission_notebook(chapter, chapter, student)
            except MissingEntry:
                raise LookupError(f"no graded submission of {chapter} by {student}; run grade() first") from None
            return {grade.name: (float(grade.score), float(grade.max_score)) for grade in notebook.grades}

    # -- feedback -------------------------------------------------------------------------------------
    def feedback_path(self, student: str, chapter: str) -> Path:
        return self.root / "feedback" / student / chapter / f"{chapter}.html"

    def generate_feedback(self, students=None, chapters=None) -> list[Path]:
        """Write the feedback HTML of each graded submission (hidden tests and their tracebacks removed)."""
        api = nbgrader_api(self.root, self.course_id)
        students = [students] if isinstance(students, str) else (students or self.students())
        written = []
        for chapter in self._chapters(chapters):
            for student in students:
                if not (self.root / "autograded" / student / chapter).is_dir():
                    continue
                result = api.generate_feedback(chapter, student, force=True)
                if not result["success"]:
                    raise RuntimeError(f"nbgrader could not write feedback for {student}/{chapter}:\n"
                                       f"{result.get('error', '')}")
                written.append(self.feedback_path(student, chapter))
        return written

    def feedback_html(self, student: str, chapter: str) -> str:
        """The feedback page of one graded submission (generated if needed)."""
        path = self.feedback_path(student, chapter)
        if not path.exists():
            self.generate_feedback([student], [chapter])
        if not path.exists():
            raise LookupError(f"no feedback for {student}/{chapter}: the submission was not autograded "
                              "(see `python -m autograder status`)")
        return path.read_text()


def check_student_id(student: str) -> None:
    """Student ids become folder names and gradebook keys: keep them to a safe alphabet."""
    if not student or not all(ch.isalnum() or ch in "-_." for ch in student) or student.startswith("."):
        raise ValueError(f"invalid student id {student!r}: use letters, digits, '-', '_' or '.'")
