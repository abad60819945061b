"""Hidden tests never reach a learner: not through any output in the feedback (input history, frames, the
notebook's own code), not through files or history left after grading, and not while they run: the running
test cell's text is gone from the kernel before its first line runs, so what the learner's code reads then
and prints encoded (here reversed, which the feedback's literal scrub cannot recognise) holds nothing."""
import os

import pytest

from autograder import integrity, synthetic

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the kernels are confined only when grading as root")]

GOOD_ADD = "def add(a, b):\n    return np.asarray(a) + np.asarray(b)"
HIDDEN = "allclose(add([-1.5]"  # from the toy chapter's hidden test of `add`
LAST_CELL_PRINTS_HISTORY = """print("\\n".join(In))
print("\\n".join(get_ipython().history_manager.input_hist_raw))
import linecache
print("\\n".join("".join(entry[2]) for entry in linecache.cache.values() if len(entry) > 2))"""
READS_THE_TEST_FRAME = """import inspect
def add(a, b):
    frame = inspect.currentframe().f_back
    print(inspect.getsource(frame))
    return np.asarray(a) + np.asarray(b)"""
STASHES_THE_TEST = """def add(a, b):
    global stash
    stash = In[-1]
    return np.asarray(a) + np.asarray(b)"""
RAISES_THE_TEST = """def add(a, b):
    raise ValueError(In[-1])"""

# name: (cells replaced, expected status: a leak that reached an output is removed and flagged)
LEAKERS = {
    "prints-history": ({"add": GOOD_ADD, "scale": LAST_CELL_PRINTS_HISTORY + "\n"
                        "def scale(x, factor):\n    return np.asarray(x) * factor"}, "graded"),
    "reads-the-test-frame": ({"add": READS_THE_TEST_FRAME}, "needs review"),
    # Both read In[-1] while the test runs: it is empty by then, so nothing is quoted and nothing flagged.
    "stashes-the-test": ({"add": STASHES_THE_TEST, "scale": "print(stash)\ndef scale(x, factor):\n"
                          "    return np.asarray(x) * factor"}, "graded"),
    "raises-the-test": ({"add": RAISES_THE_TEST}, "graded"),
}


def prints_reversed(source: str) -> str:
    """An `add` that prints `source` (an expression read while the test runs) reversed."""
    return f"def add(a, b):\n    print(str({source})[::-1])\n    return np.asarray(a) + np.asarray(b)"


# Where a running cell's text is kept in a kernel: each read while the hidden test of `add` runs.
WHILE_RUNNING = {
    "reads-In": prints_reversed("In[-1]"),
    "reads-its-_i-name": prints_reversed("globals()['_i%d' % (get_ipython().execution_count - 1)]"),
    "reads-the-history-manager": prints_reversed("get_ipython().history_manager._i00"),
    "reads-the-history-cache": prints_reversed("get_ipython().history_manager.db_input_cache"),
    "reads-the-request": prints_reversed("get_ipython().kernel.get_parent('shell')['content']['code']"),
    "reads-the-parent-header": prints_reversed("get_ipython().parent_header['content']['code']"),
    "reads-the-execution-info": prints_reversed("get_ipython().displayhook.exec_result.info.raw_cell"),
    "reads-linecache": prints_reversed("[entry[2] for entry in __import__('linecache').cache.values()]"),
}
# A pre_run_cell callback of the notebook's sees the test cell's ExecutionInfo as it starts (the callback is
# reported as tampering: held for review).
WHILE_RUNNING["reads-in-a-pre-run-callback"] = """seen = []
get_ipython().events.register("pre_run_cell", lambda info: seen.append(info.raw_cell))
def add(a, b):
    print(str(seen)[::-1])
    return np.asarray(a) + np.asarray(b)"""
LEAKERS |= {student: ({"add": source}, "needs review" if "callback" in student else "graded")
            for student, source in WHILE_RUNNING.items()}
# The guard's scrub as a test starts, taken out in the kernel before install() (so it is not seen as tampering).
WITHOUT_SCRUB = "import autograder.guard as g\ng._Checks.scrub = lambda self, nonce, info: False\n"


def grade(tmp_path, course, leakers):
    for student, (sources, _) in leakers.items():
        notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), sources)
        synthetic.write(notebook, tmp_path / f"{student}.ipynb")
        course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
    return course.grade()



@pytest.fixture(scope="module")
def graded(tmp_path_factory, short_limits, make_toy_course):
    tmp_path = tmp_path_factory.mktemp("leaks")
    course = make_toy_course(tmp_path / "grading")
    return course, grade(tmp_path, course, LEAKERS)


def test_no_feedback_quotes_a_hidden_test(graded):
    course, _ = graded
    for student in LEAKERS:
        feedback = course.feedback_html(student, "90_toy")
        assert HIDDEN not in feedback and HIDDEN[::-1] not in feedback, student


def test_without_the_scrub_before_the_run_each_path_leaks(tmp_path, short_limits, make_toy_course, monkeypatch):
    monkeypatch.setattr(integrity, "INSTALL", WITHOUT_SCRUB + integrity.INSTALL)
    course = make_toy_course(tmp_path / "grading")
    grade(tmp_path, course, {student: ({"add": source}, None) for student, source in WHILE_RUNNING.items()})
    assert [student for student in WHILE_RUNNING if HIDDEN[::-1] not in course.feedback_html(student, "90_toy")] == []


def test_leaking_outputs_are_flagged(graded):
    course, report = graded
    for student, (_, status) in LEAKERS.items():
        outcome = report.outcome(student, "90_toy")
        assert outcome.status == status, f"{student}: {outcome}"
