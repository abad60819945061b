"""Hidden tests never reach a learner: not through any output in the feedback (input history, frames, the
notebook's own code), not through files or history left after grading."""
import os

import pytest

from autograder import synthetic

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the kernels are confined only when grading as root")]

GOOD_ADD = "def add(a, b):\n    return np.asarray(a) + np.asarray(b)"
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
    "stashes-the-test": ({"add": STASHES_THE_TEST, "scale": "print(stash)\ndef scale(x, factor):\n"
                          "    return np.asarray(x) * factor"}, "needs review"),
    "raises-the-test": ({"add": RAISES_THE_TEST}, "needs review"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, short_limits, make_toy_course):
    tmp_path = tmp_path_factory.mktemp("leaks")
    course = make_toy_course(tmp_path / "grading")
    for student, (sources, _) in LEAKERS.items():
        notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), sources)
        synthetic.write(notebook, tmp_path / f"{student}.ipynb")
        course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
    return course, course.grade()


def test_no_feedback_quotes_a_hidden_test(graded):
    course, _ = graded
    for student in LEAKERS:
        assert "allclose(add([-1.5]" not in course.feedback_html(student, "90_toy"), student


def test_leaking_outputs_are_flagged(graded):
    course, report = graded
    for student, (_, status) in LEAKERS.items():
        outcome = report.outcome(student, "90_toy")
        assert outcome.status == status, f"{student}: {outcome}"
