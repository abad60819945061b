"""Bad submissions, graded together with a good one in one class run: each is graded correctly (zero where
deserved) and reported clearly, the good student is unaffected, and the gradebook stays intact."""
import copy
import pwd
import sqlite3
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder import synthetic
from autograder.judging import sandbox
from autograder.config import COURSE_SOURCE, REPO_ROOT

pytestmark = pytest.mark.slow

GOOD_ADD = "def add(a, b):\n    return np.asarray(a) + np.asarray(b)"
WRONG_ADD = "def add(a, b):\n    return 0"


def cells(**sources):
    """A solved notebook with some cells replaced."""
    return lambda course: synthetic.with_cells(synthetic.solved(course, "90_toy"), sources)


def edited(change):
    """A solved notebook whose cell list is changed by `change(cells)`."""
    def build(course):
        notebook = synthetic.solved(course, "90_toy")
        change(notebook.cells)
        return notebook
    return build


def index(notebook_cells, grade_id):
    return next(i for i, c in enumerate(notebook_cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def duplicate(notebook_cells):
    i = index(notebook_cells, "test_scale")
    copied = copy.deepcopy(notebook_cells[i])
    copied.id = "copy-of-test-scale"
    notebook_cells.insert(i, copied)


def to_markdown(notebook_cells):
    i = index(notebook_cells, "scale")
    old = notebook_cells[i]
    notebook_cells[i] = nbformat.v4.new_markdown_cell(old.source, metadata=old.metadata)


def main_checkout_sources() -> list[str]:
    """Run from a git worktree, the main checkout (where its `.git` file points), which has the same sources."""
    common = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            capture_output=True, text=True).stdout.strip()
    main = Path(common).parent if common else REPO_ROOT
    return [str(main / "course" / "source")] if main != REPO_ROOT else []


MAIN_CHECKOUT_SOURCES = main_checkout_sources()
OUTSIDE_READS = 6 + len(MAIN_CHECKOUT_SOURCES)


def read_and_write_outside(course):
    """Tries to read the hidden tests (also through git history, the test suite and, in a worktree, the main
    checkout) and the gradebook, and to write to the gradebook and the repository."""
    code = f"""
import pathlib
for target in [{str(COURSE_SOURCE)!r}, {str(REPO_ROOT / '.git')!r}, {str(REPO_ROOT / 'tests')!r},
               {str(course.root / 'source' / '90_toy' / '90_toy.ipynb')!r},
               {str(course.root / 'gradebook.db')!r}, {str(course.root / 'submitted')!r},
               *{MAIN_CHECKOUT_SOURCES!r}]:
    try:
        path = pathlib.Path(target)
        found = sorted(p.name for p in path.iterdir()) if path.is_dir() else path.read_bytes()[:20]
        print("LEAKED", target, found)
    except OSError as error:
        print("blocked", type(error).__name__)
for target in [{str(course.root / 'gradebook.db')!r}, {str(course.source.parent / 'planted.txt')!r}, "/root/planted.txt"]:
    try:
        with open(target, "a") as f:
            f.write("garbage")
        print("WROTE", target)
    except OSError as error:
        print("blocked", type(error).__name__)
{GOOD_ADD}
"""
    return cells(add=code)(course)


IGNORES_SIGINT = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
SWALLOWS_INTERRUPTS = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
MEMORY_BOMB = "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))"
FORK_LOOP = "import subprocess\nchildren = [subprocess.Popen(['sleep', '120']) for _ in range(200)]"  # bounded
HUGE_OUTPUT = "for _ in range(100_000):\n    print('spam ' * 40)\n" + GOOD_ADD
NAMED_AS_A_TIMEOUT = ("class CellTimeoutError(BaseException):\n    pass\n\n"
                      "def scale(x, factor):\n    raise CellTimeoutError('No reply from kernel before timeout')")
ALWAYS_EQUAL = "class Always:\n    def __eq__(self, other):\n        return True\n\ndef add(a, b):\n    return Always()"

# name: (how the notebook is made, expected total score, status, phrase the report must contain)
SUBMISSIONS = {
    "good": (cells(), 5, "graded", None),
    # A hang or a crash, twice: held for review (no points until a person looks).
    "infinite-loop": (cells(add="def add(a, b):\n    while True:\n        pass"), 0, "needs review", "time limit"),
    "ignores-sigint": (cells(add=IGNORES_SIGINT), 0, "needs review", "ignored the interrupt"),
    "swallows-interrupts": (cells(add=SWALLOWS_INTERRUPTS), 0, "needs review", "ignored the interrupt"),
    "os-exit": (cells(add="import os\nos._exit(1)"), 0, "needs review", "kernel exited"),
    # (the interrupt at the time limit raises KeyboardInterrupt too: only the grader's own counts as a timeout)
    "raises-keyboard-interrupt": (cells(add="def add(a, b):\n    raise KeyboardInterrupt"), 3, "graded", None),
    # (nor does an error named as the grader's own: what happened to a cell is what the grader saw)
    "raises-cell-timeout-error": (cells(scale=NAMED_AS_A_TIMEOUT), 2, "graded", None),
    "memory-bomb": (cells(add=MEMORY_BOMB), 3, "graded", "cell add ran out of memory"),
    "fork-loop": (cells(add=FORK_LOOP), 3, "graded", "cell add hit the limit of"),
    "huge-output": (cells(add=HUGE_OUTPUT), 5, "graded", "the output of cell add was cut to 1000 lines"),
    "invalid-json": (None, 0, "needs review", "not a valid notebook"),
    "other-chapter": (lambda course: synthetic.solved(course, "91_other"), 0, "needs review",
                      "not a notebook of chapter 90_toy (it looks like chapter 91_other)"),
    "deleted-test": (edited(lambda c: c.pop(index(c, "test_add"))), 0, "needs review",
                     "test cell 'test_add' was deleted"),
    "duplicated-test": (edited(duplicate), 0, "needs review", "test cell 'test_scale' appears 2 times"),
    "reordered-test": (edited(lambda c: c.insert(index(c, "add"), c.pop(index(c, "test_add")))), 0,
                       "needs review", "reordered"),
    # (nbgrader puts the course's text back: an edited test cell, or one from an older course version, runs as it is)
    "edited-test": (edited(lambda c: c[index(c, "test_add")].__setitem__("source", "pass")), 5, "graded", None),
    "solution-as-markdown": (edited(to_markdown), 0, "needs review", "solution cell 'scale' was turned into a markdown"),
    # Tampering with what a test compares with gains nothing: the verdict is made outside the kernel.
    "patches-numpy": (cells(add="np.allclose = lambda *args, **kwargs: True\n" + WRONG_ADD), 3, "graded", None),
    # (the kernel's probe uses abs() too: what a notebook breaks in its own kernel can only cost it points)
    "patches-builtins": (cells(add="import builtins\nbuiltins.abs = lambda x: 0\n" + GOOD_ADD), 3, "graded", None),
    "patches-assertion-error": (cells(add="import builtins\nclass Lenient(Exception):\n    pass\n"
                                          "builtins.AssertionError = Lenient\n" + WRONG_ADD), 3, "graded", None),
    "swallows-assertions": (cells(add="get_ipython().set_custom_exc((AssertionError,), lambda *a, **k: None)\n"
                                      + WRONG_ADD), 3, "graded", None),
    "always-equal": (cells(add=ALWAYS_EQUAL), 3, "graded", None),
    "sets-trace": (cells(add="import sys\nsys.settrace(lambda *args: None)\n" + GOOD_ADD), 5, "graded", None),
    "rewrites-cells": (cells(add="get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n"
                                 + WRONG_ADD), 0, "graded", None),
    # (observations forged from a run of the probes at home: test_defences.py, with and without the seed)
    # A test cell that ends quietly (bdb.BdbQuit, which IPython swallows), or an error cleared after the cell
    # (a post_execute callback), shows no observation: no pass.
    "quits-the-tests": (cells(add="import bdb, autograder.probes\n"
                                  "def quit(grade_id):\n    raise bdb.BdbQuit\n"
                                  "autograder.probes.run_tests = quit\n" + WRONG_ADD), 0, "graded", None),
    "clears-errors-after-cells": (cells(add="import sys\nget_ipython().events.register('post_execute', "
                                            "lambda: setattr(sys, 'last_value', None))\n" + WRONG_ADD), 3, "graded",
                                  None),
    "patches-checks": (cells(add="import modulecraft.checks\nmodulecraft.checks.expect = lambda *a, **k: None\n"
                                 + GOOD_ADD), 5, "graded", None),
    "reads-and-writes-outside": (read_and_write_outside, 5, "graded", None),
}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, short_limits, make_toy_course):
    tmp_path = tmp_path_factory.mktemp("hostile")
    toy_course = make_toy_course(tmp_path / "grading")
    for student, (build, *_) in SUBMISSIONS.items():
        path = tmp_path / f"{student}.ipynb"
        if build is None:
            path.write_text('{"cells": [{"cell_type": "code", "source": "def add(a, b):')  # cut off mid-file
        else:
            synthetic.write(build(toy_course), path)
        toy_course.submit(student, "90_toy", path)
    gradebook_before = (toy_course.root / "gradebook.db").stat().st_ino
    report = toy_course.grade()
    return toy_course, report, gradebook_before


def test_each_bad_submission_is_graded_and_reported(graded_class):
    course, report, _ = graded_class
    for student, (_, score, status, phrase) in SUBMISSIONS.items():
        outcome = report.outcome(student, "90_toy")
        said = "; ".join(outcome.needs_review + outcome.notes)
        assert (outcome.score, outcome.status) == (score, status), f"{student}: {outcome}"
        if phrase:
            assert phrase in said, f"{student}: expected {phrase!r} in {said!r}"
        else:
            assert not outcome.needs_review, f"{student}: {said}"
    assert report.outcome("infinite-loop", "90_toy").attempts == 2  # a timeout is retried once


def test_the_gradebook_and_the_other_students_are_intact(graded_class):
    course, report, inode_before = graded_class
    database = course.root / "gradebook.db"
    assert database.stat().st_ino == inode_before
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = db.execute("SELECT student.id, COUNT(*) FROM submitted_assignment JOIN student "
                          "ON student.id = submitted_assignment.student_id GROUP BY student.id").fetchall()
    assert dict(rows) == {student: 1 for student in SUBMISSIONS}
    assert course.scores("good", "90_toy") == {"test_add": (2.0, 2.0), "test_scale": (3.0, 3.0)}
    assert not (course.source.parent / "planted.txt").exists()


def test_student_code_never_reads_or_writes_outside_its_copy(graded_class):
    course, *_ = graded_class
    graded = nbformat.read(course.root / "autograded" / "reads-and-writes-outside" / "90_toy" / "90_toy.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    assert printed.count("blocked") == OUTSIDE_READS + 3, printed
    assert "LEAKED" not in printed and "WROTE" not in printed


def test_student_code_runs_unprivileged_and_leaves_no_process_behind(graded_class):
    course, *_ = graded_class
    slot_users = ",".join(p.pw_name for p in pwd.getpwall() if p.pw_name.startswith(sandbox.USER_PREFIX))
    leftover = subprocess.run(["pgrep", "-u", slot_users, "-f", "^sleep 120$"], capture_output=True,
                              text=True).stdout.split()  # the machine's other sleeps are not ours
    assert leftover == []
    graded = nbformat.read(course.root / "autograded" / "fork-loop" / "90_toy" / "90_toy.ipynb", 4)
    fork_cell = graded.cells[index(graded.cells, "add")]
    assert fork_cell.outputs[-1].ename in ("BlockingIOError", "OSError", "PermissionError")


def test_huge_output_is_cut_down(graded_class):
    course, *_ = graded_class
    graded = (course.root / "autograded" / "huge-output" / "90_toy" / "90_toy.ipynb")
    assert graded.stat().st_size < 2 * 2**20


def _verdict(course, student: str, grade_id: str) -> str:
    graded = nbformat.read(course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
    return " ".join(o.get("evalue", "") for o in graded.cells[index(graded.cells, grade_id)].outputs)


def test_a_cell_timed_out_only_when_the_grader_interrupted_it(graded_class):
    course, *_ = graded_class
    assert "time limit per cell: the grader interrupted it" in _verdict(course, "infinite-loop", "test_add")
    said = _verdict(course, "raises-cell-timeout-error", "test_scale")
    assert "did not run to the end (CellTimeoutError: No reply" in said and "time limit" not in said, said
