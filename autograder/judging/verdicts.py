"""The verdict on each test cell, made in the grader's process from what the kernel observed.

The kernel runs each test cell's probe on the learner's code (`autograder.probes`) and displays its observations;
nothing else it shows or does counts. Here, after the notebook has run, the same probes run on the whole
reference with the same seed, the two are compared check by check, and the test cell's outputs are replaced by
the verdict alone: nothing when every check agrees, otherwise one error naming the first check that does not,
what the learner's code did and the hint. nbgrader then scores the cells as usual (an error: no points).

The seed is drawn per submission when grading starts (`start`), so expected observations exist nowhere before
the kernel has run, and observations copied from someone else's feedback or notebook describe other inputs. It
reaches the kernel in the test cells' own text (`SeedTests`), not in its environment: no cell before the first
test cell can know it.

What counts of a test cell is what it showed while it ran, as it was when it finished (`sandbox.finished`: a later
cell can change an earlier cell's displays), with no error beside its one report. A cell that ran over its time
limit or that the kernel did not finish fails for what the grader saw happen (`sandbox.timed_out`, no
`sandbox.finished`), never for the name of an error in its outputs, which the learner's code can raise too.

The capstone lets a learner switch a mechanism to modulecraft's code (one line of `WHOSE` in the cell `c13_whose`).
Which ones is read here from the submitted notebook's text, never from the kernel: those stay in the kernel's
modulecraft (`answer_key.build(kept=...)`), and the test cells that grade them fail, whatever they observed.
"""
from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

from modulecraft import mechanisms

from .. import config as course_config
from .. import probes
from . import integrity, sandbox

FAILED = "TestFailed"
WHOSE_CELL = "c13_whose"  # the id of the cell that switches the capstone's mechanisms
SWITCHED = "switched to the reference in 13.1 (WHOSE), so modulecraft's code ran for it: no points for it here"


@dataclasses.dataclass(frozen=True)
class Judging:
    chapter: str
    seed: int
    source: Path | None = None  # the chapter's source notebook: which exercise defines which name
    switched: frozenset[str] = frozenset()  # the capstone's mechanisms the submission runs on modulecraft's code


current: Judging | None = None  # the submission this process is grading (one at a time per process)
limits: list[str] = []  # the limits its notebook ran into, read before nbgrader cuts long outputs


def start(chapter: str, source: Path | None = None, switched: frozenset[str] = frozenset()) -> Judging:
    """Draw a fresh seed for grading one submission of `chapter` (whose source notebook is `source`; `switched`:
    `switched_mechanisms` of the submission)."""
    global current
    current = Judging(chapter, secrets.randbits(62), source, switched)
    limits.clear()
    return current


def switched_mechanisms(chapter: str, submitted: Path) -> frozenset[str]:
    """The mechanisms a submission of `chapter` runs on modulecraft's code: its `WHOSE` cell read as text (a literal
    only; anything else, or no such cell, reads as every mechanism the learner's). Chapters without mechanisms: none."""
    if not getattr(probes.chapter_module(chapter), "MECHANISM_OF", None):
        return frozenset()
    cells = [cell for cell in nbformat.read(submitted, as_version=4).cells
             if cell.get("id") == WHOSE_CELL and cell.cell_type == "code"]
    return frozenset(mechanisms.switched(mechanisms.read_whose(cells[0].source) if len(cells) == 1 else {}))


def kept_names(switched: frozenset[str]) -> frozenset[str]:
    """The learner names whose modulecraft code stays in the grading kernel: those of the switched mechanisms."""
    return frozenset(name for mechanism in switched for name in mechanisms.MECHANISMS[mechanism])


class Expected(Mapping):
    """Every probe of `chapter` on the reference with `seed`, run when a verdict needs it and as far as it needs
    (`until`): a test cell that did not run to the end needs none, one whose learner's check disagrees needs the
    checks up to that one (a blank capstone's probes cost the grader 0.13 s of CPU run whole). Each probe draws its
    inputs from the seed and its grade id as it goes, whichever ran before it: a run's checks are the whole run's."""

    def __init__(self, chapter: str, seed: int):
        self._reference, self._seed = probes.Reference(probes.yours_of(chapter)), seed
        self._runs: dict[str, probes.Run | None] = dict.fromkeys(probes.grade_ids(chapter))

    def until(self, grade_id: str, disagrees: Callable[[int, probes.Check], bool]) -> probes.Run:
        """The probe of `grade_id` run up to its first check that `disagrees(index, check)`, or to its end."""
        return self._runs[grade_id] or probes.run_probe(grade_id, self._reference, self._seed, until=disagrees)

    def __getitem__(self, grade_id: str) -> probes.Run:
        if self._runs[grade_id] is None:
            self._runs[grade_id] = probes.run_probe(grade_id, self._reference, self._seed)
        return self._runs[grade_id]

    def __contains__(self, grade_id) -> bool:  # Mapping's own would run the probe
        return grade_id in self._runs

    def __iter__(self):
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)


def expected(chapter: str, seed: int) -> Expected:
    """Every probe of `chapter` on the reference with `seed` (each run when first needed)."""
    return Expected(chapter, seed)


def judge(grade_id: str, outputs: list, runs: Expected, exercises: Exercises | None = None) -> str | None:
    """Why the test cell `grade_id` fails, in words for the learner, or None when it passes (`outputs`: the cell's
    as they were when it finished)."""
    exercises = exercises or Exercises()
    if grade_id not in runs:
        return "this test cell has no probe in the grader (a course error: tell your instructor)"
    reports = [output["data"][probes.MIME] for output in outputs
               if output.get("output_type") == "display_data" and probes.MIME in output.get("data", {})]
    reports = [report for report in reports if isinstance(report, dict) and report.get("grade_id") == grade_id]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if errors or len(reports) != 1 or not isinstance(reports[0].get("observed"), list):
        why = f" ({errors[0].get('ename')}: {str(errors[0].get('evalue'))[:200]})" if errors else ""
        return f"the tests of this cell did not run to the end{why}: run the cells above it first, unchanged"
    observed = reports[0]["observed"]

    def seen_at(index: int):
        seen = observed[index] if index < len(observed) else None
        missing = seen.get("missing") if isinstance(seen, dict) else None
        if isinstance(missing, str) and missing in exercises.unwritten:
            # a blank class raises in its body, so its name is never defined: the same verdict as a blank function's
            seen = {"raised": "NotImplementedError", "message": "", "in": missing}
        return seen

    run = runs.until(grade_id, lambda index, check: not probes.agrees(check, seen_at(index)))
    for index, check in enumerate(run.checks):
        seen = seen_at(index)
        if not probes.agrees(check, seen):
            return probes.explain(check, seen, show_expected=False, exercises=exercises.defining,
                                  exercise=exercises.testing.get(grade_id))
    return None


EXERCISE_HEADING = re.compile(r"^###\s+(Exercise\s+\d+)[^:]*:\s*(.*)$", re.MULTILINE)
DEFINITION = re.compile(r"^(?:def|class)\s+(\w+)|^(\w+)\s*=", re.MULTILINE)


@dataclasses.dataclass
class Exercises:
    """The chapter's exercises, to say which one a failure comes from."""
    defining: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> "Exercise 2 (`named_members`)"
    testing: dict[str, str] = dataclasses.field(default_factory=dict)  # test cell's grade id -> its exercise
    unwritten: frozenset[str] = frozenset()  # names whose cell ended in NotImplementedError in the submission


def exercises_of(source, submitted=None) -> Exercises:
    """Which exercise of the chapter's `source` notebook defines each name and holds each test cell; and which
    names the `submitted` (executed) notebook's exercise cells left unwritten (a blank class raises in its body)."""
    defining, testing, exercise = {}, {}, None
    for cell in source.cells:
        if cell.cell_type == "markdown":
            heading = EXERCISE_HEADING.search(cell.source)
            exercise = f"{heading[1]} ({heading[2].strip()})" if heading else exercise
        elif exercise and utils.is_solution(cell):
            for match in DEFINITION.finditer(cell.source):
                defining.setdefault(match[1] or match[2], exercise)
        elif exercise and utils.is_grade(cell):
            testing[cell.metadata["nbgrader"]["grade_id"]] = exercise
    unwritten = {match[1] or match[2]
                 for cell in (submitted.cells if submitted else []) if cell.cell_type == "code" and utils.is_solution(cell)
                 and any(output.get("ename") == "NotImplementedError" for output in cell.get("outputs", []))
                 for match in DEFINITION.finditer(cell.source)}
    return Exercises(defining, testing, frozenset(unwritten))


def is_test(cell) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


texts: dict[int, str] = {}  # the course's text of each test cell of the notebook being graded, by the cell's index


class SeedTests(NbGraderPreprocessor):
    """Before the notebook runs: each test cell's text becomes the line that runs its probe with the grader's seed
    (`probes.graded_line`); `JudgeTests` puts the course's text back."""

    def preprocess(self, nb, resources):
        texts.clear()
        for index, cell in enumerate(nb.cells):
            if is_test(cell):
                texts[index] = cell.source
                cell.source = probes.graded_line(cell.metadata["nbgrader"]["grade_id"], current.seed)
        return nb, resources


class JudgeTests(NbGraderPreprocessor):
    """Replace each test cell's outputs by its verdict (see the module's docstring)."""

    def preprocess(self, nb, resources):
        limits[:] = integrity.limits_hit(nb)
        runs = expected(current.chapter, current.seed)
        exercises = exercises_of(integrity.source_notebook(current.source) if current.source else nb, nb)
        mechanism_of = getattr(probes.chapter_module(current.chapter), "MECHANISM_OF", {})
        for index, cell in enumerate(nb.cells):
            if not is_test(cell):
                continue
            cell.source = texts.get(index, cell.source)
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            outputs = sandbox.finished.get(index)  # None: the cell never finished
            if index in sandbox.timed_out:
                why = (f"this cell ran over the time limit per cell: the grader interrupted it "
                       f"({course_config.CELL_TIMEOUT} s of CPU time, or {course_config.cell_wall_timeout()} s waiting)")
            elif outputs is None:
                why = f"this cell did not finish: {sandbox.kernel_exit_reason()}"
            elif current.switched.intersection(mechanism_of.get(grade_id, ())):
                why = f"{', '.join(m for m in mechanism_of[grade_id] if m in current.switched)}: {SWITCHED}"
            else:
                why = judge(grade_id, outputs, runs, exercises)
            cell.outputs = [] if why is None else [
                nbformat.v4.new_output("error", ename=FAILED, evalue=why, traceback=[f"{FAILED}: {why}"])]
        return nb, resources
