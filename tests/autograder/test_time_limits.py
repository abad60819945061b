"""Time limits measure the submission, not the machine: a cell's limit counts the kernel's CPU time, so honest work
slowed down by other processes still scores full points, while a cell that computes too long is still cut."""
import os
import subprocess
import sys
import time

import nbformat
import pytest

from autograder import config, synthetic

pytestmark = pytest.mark.slow

CPU_LIMIT = 1  # seconds of CPU time per cell, for this test
HONEST_WORK = 0.7  # seconds of CPU time the honest cell computes for
HOGS = 2  # busy processes on the kernel's one CPU: the kernel gets a third of it, or less
HONEST_ADD = f"""import os, time
os.sched_setaffinity(0, [CPU])  # the submission's kernel runs on the hogs' CPU
started, cpu = time.monotonic(), time.process_time()
while time.process_time() - cpu < {HONEST_WORK}:  # honest work: a fixed amount of computing
    pass
print(f"wall-clock {{time.monotonic() - started:.1f}} s")
def add(a, b):
    return np.asarray(a) + np.asarray(b)"""
HOG = """import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
stop = time.monotonic() + 180  # bounded, whatever happens to the test
while time.monotonic() < stop:
    pass"""


@pytest.fixture(scope="module")
def course(tmp_path_factory, short_limits, make_toy_course):
    """One release of the toy chapters for the module; each test grades a student of its own."""
    return make_toy_course(tmp_path_factory.mktemp("limits") / "grading")


@pytest.fixture
def loaded_cpu(monkeypatch):
    """A CPU kept busy by HOGS processes at this process's niceness (the kernel's too); the wall-clock backstop far."""
    cpu = max(os.sched_getaffinity(0))
    monkeypatch.setattr(config, "CELL_TIMEOUT", CPU_LIMIT)
    monkeypatch.setattr(config, "WALL_CLOCK_BACKSTOP", 40)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(cpu)]) for _ in range(HOGS)]
    try:
        yield cpu
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_honest_work_beside_cpu_hogs_scores_full_points(course, tmp_path, loaded_cpu):
    notebook = tmp_path / "honest.ipynb"
    honest = HONEST_ADD.replace("[CPU]", f"[{loaded_cpu}]")
    synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": honest}), notebook)
    course.submit("honest", "90_toy", notebook)
    report = course.grade("honest")
    outcome = report.outcome("honest", "90_toy")
    assert (outcome.score, outcome.status, outcome.needs_review, outcome.notes) == (5, "graded", [], []), outcome
    graded = nbformat.read(course.root / "autograded" / "honest" / "90_toy" / "90_toy.ipynb", as_version=4)
    printed = "".join(output.get("text", "") for cell in graded.cells for output in cell.get("outputs", []))
    wall = float(printed.split("wall-clock ")[1].split(" s")[0])
    assert wall > CPU_LIMIT, f"the hogs did not slow the cell down ({wall} s): this test shows nothing"


def test_a_kernel_has_its_own_start_up_time_limit_not_a_cells(tmp_path, monkeypatch):
    """A kernel's start-up under load once failed honest notebooks: it was given the tests' 10 s cell limit."""
    monkeypatch.setattr(config, "CELL_TIMEOUT", CPU_LIMIT)
    assert config.nbgrader_config(tmp_path).Execute.startup_timeout == config.KERNEL_STARTUP_TIMEOUT >= 60


def test_a_cell_that_computes_past_the_cpu_limit_is_interrupted(course, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CELL_TIMEOUT", CPU_LIMIT)
    monkeypatch.setattr(config, "WALL_CLOCK_BACKSTOP", 100)
    notebook = tmp_path / "loop.ipynb"
    synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": "while True:\n    pass"}),
                    notebook)
    course.submit("loop", "90_toy", notebook)
    started = time.monotonic()
    outcome = course.grade("loop").outcome("loop", "90_toy")
    assert outcome.status == "needs review" and f"{CPU_LIMIT} s of CPU time" in "; ".join(outcome.needs_review)
    assert time.monotonic() - started < config.cell_wall_timeout()  # twice cut by the CPU limit, not the backstop
