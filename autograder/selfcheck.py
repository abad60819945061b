"""Self-check for learners: grade a copy of your own notebook against the hidden tests, no server needed.

In a notebook, the chapter's last cell runs `check_my_work()`; in a terminal, `python -m autograder check
<notebook.ipynb>`. Both grade a copy (the learner's notebook is never modified) in a private grading folder
cached under `~/.cache/modulecraft/selfcheck`, built from the course's source chapters, and print the score
of every graded test cell with its feedback.

The self-check grades through the same pipeline as the class: the kernel's modulecraft without the chapter's
answer key, the probes' observations judged outside the kernel on a fresh seed. Without root there is no slot user, namespace (network, private folders) or tmpfs quota:
only the resource limits (memory, file size, open files, CPU time) confine the kernel.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from . import config as course_config
from .filelock import exclusive

LEARNER = "learner"


def check_my_work(chapter: str | None = None) -> None:
    """Grade the notebook this kernel belongs to (as last saved) and print the score per exercise."""
    if os.environ.get(course_config.GRADING_ENV_VAR):
        print("check_my_work: skipped while grading")
        return
    notebook = find_my_notebook(chapter)
    command = [sys.executable, "-m", "autograder", "check", str(notebook)]
    if chapter:
        command += ["--chapter", chapter]
    # A separate process: the grader runs its own event loop and kernel, which cannot nest in this one.
    done = subprocess.run(command, capture_output=True, text=True)
    print(done.stdout, end="")
    if done.returncode not in (0, 1):
        print(done.stderr, end="", file=sys.stderr)


def find_my_notebook(chapter: str | None = None) -> Path:
    """The notebook of this kernel: Jupyter's JPY_SESSION_NAME, else `<chapter>.ipynb` in the current folder."""
    session = os.environ.get("JPY_SESSION_NAME")
    candidates = []
    if session:
        candidates += [Path(session), Path.cwd() / Path(session).name]
    name = chapter or Path.cwd().name
    candidates.append(Path.cwd() / f"{name}.ipynb")
    for candidate in candidates:
        if candidate.suffix == ".ipynb" and candidate.is_file():
            return candidate.resolve()
    raise FileNotFoundError(
        f"check_my_work could not find your notebook (looked for {', '.join(map(str, candidates))}); "
        "pass the chapter, e.g. check_my_work('01_init_and_call'), or run "
        "`python -m autograder check <notebook.ipynb>` in a terminal")


@dataclasses.dataclass
class TestResult:
    grade_id: str
    score: float
    max_score: float
    feedback: str
    passed: bool  # no failure, whatever the points (a 0-point prediction fails too)


@dataclasses.dataclass
class CheckResult:
    notebook: Path
    chapter: str
    tests: list[TestResult]
    problems: list[str]  # why the grade would need a person's look in class (tampering, crash, ...)
    notes: list[str] = dataclasses.field(default_factory=list)  # what went wrong but was graded (limits hit)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.tests) and not self.problems

    def render(self) -> str:
        saved = datetime.fromtimestamp(self.notebook.stat().st_mtime).strftime("%H:%M:%S")
        width = max([len(t.grade_id) for t in self.tests] + [10])
        lines = [f"Checked {self.notebook.name} as saved at {saved} (save first if you changed it since)."]
        for test in self.tests:
            head = f"  {test.grade_id:<{width}}  {test.score:g}/{test.max_score:g}  "
            first, *rest = test.feedback.splitlines() or [""]
            lines += [head + first, *(" " * len(head) + line for line in rest)]
        lines += [f"  ! {problem}" for problem in self.problems]
        lines += [f"  - {note}" for note in self.notes]
        failed = sum(not t.passed for t in self.tests)
        if failed:  # 0-point predictions included: the total alone would not show them
            lines.append(f"{failed} of {len(self.tests)} test cells fail: each says why above.")
        lines.append(f"Total: {self.score:g}/{self.max_score:g}")
        return "\n".join(lines)


def check_notebook(notebook, chapter: str | None = None, source=None) -> CheckResult:
    """Grade a copy of `notebook` as chapter `chapter` (default: its file name) against the hidden tests."""
    from . import sandbox
    from .course import Course
    from .grading import grade_submission

    notebook = Path(notebook).resolve()
    chapter = chapter or notebook.stem
    source = Path(source or course_config.COURSE_SOURCE).resolve()
    source_notebook = source / chapter / f"{chapter}.ipynb"
    if not source_notebook.is_file():
        raise FileNotFoundError(f"no chapter {chapter!r} in {source}: name the chapter with --chapter "
                                f"(one of {sorted(p.name for p in source.iterdir() if p.is_dir())})")
    cache = cache_folder(source)
    sandbox.prepare(workers=1)
    with exclusive(cache / ".lock"):
        root = cache / f"{chapter}-{_sha256(source_notebook)[:16]}"  # a new grading folder per chapter version
        if not (root / "release" / chapter).is_dir():
            for stale in cache.glob(f"{chapter}-*"):
                shutil.rmtree(stale)
            Course(root, source=source).release([chapter])
        course = Course(root, source=source)
        course.submit(LEARNER, chapter, notebook)
        outcome = grade_submission(str(course.root), course.course_id, LEARNER, chapter, hold=False)
        tests = _test_results(course, chapter) if outcome.max_score or not outcome.needs_review else []
    return CheckResult(notebook, chapter, tests, outcome.needs_review, outcome.notes)


def _test_results(course, chapter: str) -> list[TestResult]:
    """One result per graded test cell, in notebook order, with the error the cell ended on."""
    from .feedback import error_line

    scores = course.scores(LEARNER, chapter)
    graded = course.root / "autograded" / LEARNER / chapter / f"{chapter}.ipynb"
    cells = json.loads(graded.read_text())["cells"] if graded.exists() else []
    feedback, order = {}, []
    for cell in cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id not in scores:
            continue
        order.append(grade_id)
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            feedback[grade_id] = error_line(errors[0]["ename"], errors[0]["evalue"])
    order += [grade_id for grade_id in scores if grade_id not in order]
    results = []
    for grade_id in order:
        score, max_score = scores[grade_id]
        passed = grade_id not in feedback and score == max_score
        results.append(TestResult(grade_id, score, max_score,
                                  "ok" if passed else feedback.get(grade_id, "not run"), passed))
    return results


def cache_folder(source: Path) -> Path:
    """Where the self-check keeps its grading folders for one course source, private to this user."""
    base = Path(os.environ.get("MODULECRAFT_SELFCHECK_CACHE") or Path.home() / ".cache" / "modulecraft" / "selfcheck")
    folder = base / hashlib.sha256(str(source).encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
