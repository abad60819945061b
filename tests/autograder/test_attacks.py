"""Submissions written by a student who read the grader's code and wants points, graded together in one run:
each scores at most what its honest code earns (3/5: `scale` is right, `add` is wrong), or is held for review
with the reason; and the kernels are confined (no network, private writable folders, a disk quota)."""
import os
import socket
import threading
from pathlib import Path

import nbformat
import pytest

from autograder import synthetic

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the confinement exists only when grading as root")]

WRONG_ADD = "def add(a, b):\n    return 0"
GOOD_ADD = "def add(a, b):\n    return np.asarray(a) + np.asarray(b)"
HONEST_CEILING = 3  # what WRONG_ADD earns: test_scale only

# The test cell's own source (with the grader's last line) is the running cell's input: In[-1].
FORGES_SIGNED_LINE = """import re
def add(a, b):
    nonce = re.findall(r"'passed', '(\\w+)'", In[-1])[-1]
    print(f"modulecraft-guard {nonce} passed " + "0" * 64)
    __import__('sys').audit('modulecraft.guard', 'passed', nonce)  # signed, but the test still fails
    return 0"""
SWALLOWS_IN_RUN_CODE = """from IPython.core.interactiveshell import InteractiveShell
original = InteractiveShell.run_code
async def run_code(self, code_obj, result=None, *, async_=False):
    try:
        exec(code_obj, self.user_global_ns, self.user_ns)
    except Exception:
        pass
    return False
InteractiveShell.run_code = run_code
""" + WRONG_ADD
HIDES_TRACEBACKS = "get_ipython().showtraceback = lambda *args, **kwargs: None\n" + WRONG_ADD
DISPLAYS_A_SCORE = "import sys\ndef add(a, b):\n    sys.displayhook(2)\n    return 0"
REWRITES_TESTS = """ip = get_ipython()
original = ip.transform_cell
ip.transform_cell = lambda cell: original(cell.replace('assert ', 'assert True or '))
""" + WRONG_ADD
UNNAMED_ALWAYS_EQUAL = """def add(a, b):
    return type('Anything', (float,), {'__eq__': lambda self, other: True})(0)"""
ARRAY_ALWAYS_EQUAL = """class Matches(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(other), dtype=bool)

def add(a, b):
    return np.zeros(2).view(Matches)"""
RETURNS_MOCK_ANY = "from unittest.mock import ANY\ndef add(a, b):\n    return ANY"
HUNTS_THE_GUARD = """import gc
for thing in gc.get_objects():
    pass
""" + WRONG_ADD
READS_MEMORY = "import ctypes\nctypes.string_at(id(0), 8)\n" + WRONG_ADD
OPENS_ITS_MEMORY = "open(b'/proc/self/mem', 'rb')\n" + WRONG_ADD
SETS_PROFILE = "import sys\nsys.setprofile(lambda *args: None)\n" + WRONG_ADD
PATCHES_ISINSTANCE = """import builtins
honest_isinstance = builtins.isinstance
builtins.isinstance = lambda obj, cls: cls is np.ndarray or honest_isinstance(obj, cls)
""" + WRONG_ADD
REPLACES_CODE = ("import modulecraft.checks\n"
                 "modulecraft.checks.expect.__code__ = (lambda *args, **kwargs: None).__code__\n" + WRONG_ADD)
PATCHES_DURING_THE_LAST_TEST = {"add": WRONG_ADD, "scale": """def scale(x, factor):
    np.allclose = lambda *args, **kwargs: True
    return 0"""}
EXITS_IN_A_TEST = "import os\ndef add(a, b):\n    os._exit(0)"
EXITS_WITH_SYS_EXIT = "import sys\nsys.exit()\n" + GOOD_ADD


def confinement(port: int) -> str:
    """Tries the network, the shared writable folders and the disk; prints what happened."""
    return f"""import os, socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("NETWORK reached")
except OSError as error:
    print("network blocked", type(error).__name__)
for folder in ["/tmp", "/var/tmp", "/run/lock", "/dev/shm"]:
    with open(os.path.join(folder, "planted-by-a-kernel"), "w") as f:
        f.write("left for the next student")
try:
    for n in range(8):  # 8 x 48 MB, each file under the file size limit
        with open(f"ballast{{n}}", "wb") as f:
            f.write(b"x" * 48 * 2**20)
    print("DISK unlimited")
except OSError as error:
    print("disk limited", error.errno)
{GOOD_ADD}"""


# name: (solution of `add` or {grade_id: source}, expected score, status, phrase the report must contain)
ATTACKS = {
    "forges-signed-line": (FORGES_SIGNED_LINE, HONEST_CEILING, "graded", None),
    "swallows-in-run-code": (SWALLOWS_IN_RUN_CODE, 0, "needs review", "InteractiveShell.run_code was changed"),
    "hides-tracebacks": (HIDES_TRACEBACKS, 0, "needs review", "showtraceback was changed on its instance"),
    "displays-a-score": (DISPLAYS_A_SCORE, HONEST_CEILING, "graded", None),
    "rewrites-tests": (REWRITES_TESTS, 0, "needs review", "transform_cell was changed on its instance"),
    "unnamed-always-equal": (UNNAMED_ALWAYS_EQUAL, 0, "needs review", "class 'Anything' compares equal"),
    "array-always-equal": (ARRAY_ALWAYS_EQUAL, 0, "needs review", "class 'Matches' compares equal"),
    "returns-mock-any": (RETURNS_MOCK_ANY, 0, "needs review", "class '_ANY' compares equal"),
    "hunts-the-guard": (HUNTS_THE_GUARD, 0, "needs review", "key was dropped after gc.get_objects"),
    "reads-memory": (READS_MEMORY, 0, "needs review", "key was dropped after ctypes.string_at"),
    "opens-its-memory": (OPENS_ITS_MEMORY, 0, "needs review", "key was dropped after opening"),
    "sets-profile": (SETS_PROFILE, 0, "needs review", "key was dropped after sys.setprofile"),
    "patches-isinstance": (PATCHES_ISINSTANCE, 0, "needs review", "builtins.isinstance was replaced"),
    "replaces-code": (REPLACES_CODE, 0, "needs review", "the code of modulecraft.checks"),
    "patches-during-the-last-test": (PATCHES_DURING_THE_LAST_TEST, 0, "needs review",
                                     "numpy.allclose was replaced (seen at the end of the notebook)"),
    "exits-in-a-test": (EXITS_IN_A_TEST, 0, "graded", "kernel exited"),
    "sys-exit": (EXITS_WITH_SYS_EXIT, 3, "graded", "cell add called sys.exit()"),
}


@pytest.fixture(scope="module")
def listener():
    """Something listening on the grading machine's loopback, that no kernel may reach."""
    server = socket.create_server(("127.0.0.1", 0))
    reached = []
    thread = threading.Thread(target=lambda: reached.append(server.accept()), daemon=True)
    thread.start()
    yield server.getsockname()[1], reached
    server.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, short_limits, make_toy_course, listener):
    tmp_path = tmp_path_factory.mktemp("attacks")
    course = make_toy_course(tmp_path / "grading")
    port, _ = listener
    submissions = {name: solution for name, (solution, *_) in ATTACKS.items()}
    submissions["confined"] = confinement(port)
    for student, solution in submissions.items():
        sources = solution if isinstance(solution, dict) else {"add": solution}
        notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), sources)
        synthetic.write(notebook, tmp_path / f"{student}.ipynb")
        course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
    return course, course.grade()


def test_no_attack_scores_above_its_honest_code_unflagged(graded):
    course, report = graded
    wrong = []
    for student, (_, score, status, phrase) in ATTACKS.items():
        outcome = report.outcome(student, "90_toy")
        said = "; ".join(outcome.needs_review + outcome.notes)
        if (outcome.score, outcome.status) != (score, status) or phrase and phrase not in said:
            wrong.append(f"{student}: {outcome.score:g} {outcome.status}, expected {score} {status} with "
                         f"{phrase!r}; said {said!r}")
    assert wrong == []


def test_kernels_have_no_network_no_shared_folders_and_a_disk_quota(graded, listener):
    course, report = graded
    _, reached = listener
    outcome = report.outcome("confined", "90_toy")
    assert (outcome.score, outcome.needs_review) == (5, [])
    notebook = nbformat.read(course.root / "autograded" / "confined" / "90_toy" / "90_toy.ipynb", 4)
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "network blocked" in printed and "disk limited 28" in printed, printed  # ENOSPC
    assert reached == []
    for folder in ["/tmp", "/var/tmp", "/run/lock", "/dev/shm"]:
        assert not Path(folder, "planted-by-a-kernel").exists()
