"""The learner's self-check: grades a copy against the hidden tests, prints per-exercise feedback, and never
touches the learner's notebook."""
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import config, selfcheck, synthetic
from autograder.selfcheck import check_my_work, check_notebook, find_my_notebook

TOY_CHAPTERS = Path(__file__).parent / "chapters"
IN_PLACE_SCALE = "def scale(x, factor):\n    x = np.asarray(x)\n    x *= factor\n    return x"  # fails a hidden test

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def released(tmp_path_factory, make_toy_course):
    """The toy chapters released once for the module: learners' notebooks are made from them (each check grades
    in a cache of its own)."""
    return make_toy_course(tmp_path_factory.mktemp("released") / "grading")


@pytest.fixture
def learner(released, short_limits, tmp_path, monkeypatch):
    monkeypatch.setenv("MODULECRAFT_SELFCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MODULECRAFT_COURSE_SOURCE", str(TOY_CHAPTERS))
    workspace = tmp_path / "workspace" / "90_toy"
    workspace.mkdir(parents=True)
    yield released, workspace / "90_toy.ipynb"
    selfcheck.stop_server()  # the check server these settings started, if any


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_check_scores_each_exercise_with_its_feedback(learner):
    course, notebook = learner
    synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"),
                                         {"scale": IN_PLACE_SCALE}), notebook)
    before = digest(notebook)
    result = check_notebook(notebook, source=TOY_CHAPTERS)
    assert [(t.grade_id, t.score, t.max_score) for t in result.tests] == [("test_add", 2, 2), ("test_scale", 0, 3)]
    text = result.render()
    assert "test_add    2/2  ok" in text
    assert "scale must return a new array, not modify its input" in text  # a hidden test's message
    assert "Total: 2/5" in text
    assert digest(notebook) == before


def test_the_command_line_check_exits_nonzero_until_everything_passes(learner):
    course, notebook = learner
    synthetic.write(synthetic.blank(course, "90_toy"), notebook)
    command = [sys.executable, "-m", "autograder", "check", str(notebook)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Total: 0/5" in done.stdout and "NotImplementedError" in done.stdout
    synthetic.write(synthetic.solved(course, "90_toy"), notebook)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Total: 5/5" in done.stdout


def test_check_my_work_finds_the_notebook_from_the_session(learner, monkeypatch, capsys):
    course, notebook = learner
    synthetic.write(synthetic.solved(course, "90_toy"), notebook)
    monkeypatch.chdir(notebook.parent)
    monkeypatch.setenv("JPY_SESSION_NAME", "90_toy/90_toy.ipynb")  # relative to the server root
    monkeypatch.delenv(config.GRADING_ENV_VAR, raising=False)
    assert find_my_notebook() == notebook
    check_my_work()
    assert "Total: 5/5" in capsys.readouterr().out


def test_check_my_work_is_skipped_inside_grading(monkeypatch, capsys):
    monkeypatch.setenv(config.GRADING_ENV_VAR, "1")
    check_my_work()
    assert capsys.readouterr().out == "check_my_work: skipped while grading\n"


def test_a_changed_chapter_is_checked_against_its_new_version(learner, tmp_path):
    course, notebook = learner
    source = tmp_path / "source"
    shutil.copytree(TOY_CHAPTERS, source)
    synthetic.write(synthetic.solved(course, "90_toy"), notebook)
    assert check_notebook(notebook, source=source).max_score == 5

    chapter = source / "90_toy" / "90_toy.ipynb"
    edited = nbformat.read(chapter, as_version=4)
    extra = nbformat.v4.new_code_cell("assert add(0, 0) == 0, 'add(0, 0) should be 0'", metadata={"nbgrader": {
        "grade_id": "test_add_zero", "grade": True, "solution": False, "locked": True, "points": 1,
        "schema_version": 3}})
    edited.cells.insert(-1, extra)
    nbformat.write(edited, chapter)
    result = check_notebook(notebook, source=source)
    assert (result.score, result.max_score) == (5, 6)  # the learner's copy lacks the new test cell
    assert "test cell 'test_add_zero' was deleted" in " ".join(result.problems)


def test_every_failure_reads_as_one_and_names_the_exercise_it_comes_from(tmp_path, monkeypatch):
    """Chapter 1 with a blank prediction (0 points visible), a blank class and a blank module_init that call_impl's
    correct code runs into while graded (BUILDS_ON)."""
    from autograder.course import Course

    monkeypatch.setenv("MODULECRAFT_SELFCHECK_CACHE", str(tmp_path / "cache"))
    chapter = "01_init_and_call"
    course = Course(tmp_path / "grading", source=config.COURSE_SOURCE)
    course.release([chapter])
    blank_cells = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in synthetic.blank(course, chapter).cells
                   if cell.metadata.get("nbgrader", {}).get("solution")}
    notebook = tmp_path / f"{chapter}.ipynb"
    synthetic.write(synthetic.with_cells(synthetic.solved(course, chapter), {
        grade_id: blank_cells[grade_id] for grade_id in ("c01_predict_hooks", "c01_fixed_pipeline", "c01_module_init")
    }), notebook)

    result = check_notebook(notebook)
    tests = {test.grade_id: test for test in result.tests}
    assert tests["c01_predict_hooks_visible"].max_score == 0 and not tests["c01_predict_hooks_visible"].passed
    assert tests["c01_predict_hooks_visible"].feedback != "ok"
    assert not result.passed and "test cells fail" in result.render()
    assert tests["c01_forward_unimplemented_visible"].passed  # builds on nothing blank
    not_written = "NotImplementedError: not written yet"
    for grade_id in ("c01_fixed_pipeline_visible", "c01_module_init_visible", "c01_predict_hooks_hidden"):
        assert not_written in tests[grade_id].feedback, tests[grade_id].feedback
        assert "is not defined" not in tests[grade_id].feedback and "Raised in" not in tests[grade_id].feedback
    for grade_id in ("c01_call_impl_visible", "c01_call_impl_hidden"):
        assert "Raised in your `module_init`, Exercise 1 (`module_init`)" in tests[grade_id].feedback, \
            tests[grade_id].feedback

    # The same notebook run in a kernel as the learner runs it (visible tests judged in the kernel): the blank
    # class's visible test reads as the blank function's.
    monkeypatch.setenv(config.GRADING_ENV_VAR, "1")  # its last cell would check it again
    ran = NotebookClient(nbformat.read(notebook, as_version=4), timeout=60, kernel_name="python3",
                         allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = {cell.metadata["nbgrader"]["grade_id"]: out.evalue for cell in ran.cells
              if cell.metadata.get("nbgrader", {}).get("grade") for out in cell.outputs if out.output_type == "error"}
    for grade_id in ("c01_fixed_pipeline_visible", "c01_module_init_visible"):
        assert not_written in errors[grade_id] and "is not defined" not in errors[grade_id], errors[grade_id]


def test_a_learners_kernel_has_its_chapter_prepared_before_the_first_check(learner, tmp_path):
    """The learner's JupyterLab kernels load the self-check's extension: as a chapter's kernel starts, the check
    server releases the chapter and checks its blank release (starting its forkserver), so the learner's first
    check has nothing left to prepare."""
    from jupyter_client import KernelManager

    from autograder.workspace import jupyter_environment

    course, notebook = learner
    synthetic.write(synthetic.solved(course, "90_toy"), notebook)
    jupyter = subprocess.Popen(["sleep", "600"])  # stands for the learner's Jupyter server (the kernel's parent)
    env = {**os.environ, **jupyter_environment(tmp_path / "jupyter", "learner"),
           "JPY_SESSION_NAME": str(notebook), "JPY_PARENT_PID": str(jupyter.pid)}
    env.pop(config.GRADING_ENV_VAR, None)
    kernel = KernelManager(kernel_name="python3")
    kernel.start_kernel(env=env, cwd=str(notebook.parent))
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "cache").glob("*/90_toy-*/release/90_toy")):
            assert time.monotonic() < deadline, "the kernel's start did not have the chapter prepared"
            time.sleep(0.2)
        said = []
        code, report = selfcheck.ask_server(notebook, None, said.append)  # waits for the preparation under way
    finally:
        kernel.shutdown_kernel(now=True)
        jupyter.kill()
        jupyter.wait()
    assert code == 0 and "Total: 5/5" in report, report
    assert not any("Preparing" in text for text in said), said


def test_checks_reuse_the_learners_warm_server_which_ends_with_jupyter(learner, monkeypatch):
    course, notebook = learner
    synthetic.write(synthetic.solved(course, "90_toy"), notebook)
    jupyter = subprocess.Popen(["sleep", "600"])  # stands for the learner's Jupyter server (the kernel's parent)
    monkeypatch.setenv("JPY_PARENT_PID", str(jupyter.pid))
    starts, said = [], []
    popen = selfcheck.subprocess.Popen
    monkeypatch.setattr(selfcheck.subprocess, "Popen", lambda *a, **k: starts.append(a) or popen(*a, **k))
    try:
        assert selfcheck.ask_server(notebook, None, said.append)[0] == 0
        assert len(starts) == 1 and any("running cell 1 of" in text for text in said), said
        synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"), {"scale": IN_PLACE_SCALE}), notebook)
        code, report = selfcheck.ask_server(notebook, None, said.append)
        assert (code, len(starts)) == (1, 1) and "Total: 2/5" in report  # the same server, the notebook as saved now
    finally:
        jupyter.kill()
        jupyter.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the server ends with Jupyter: nothing of the learner's keeps running
        try:
            selfcheck._connect(start=False).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.1)
    pytest.fail("the check server outlived the Jupyter server that started it")
