"""Submissions written by a student who read the grader's code and wants points, graded together in one run:
each scores at most what its honest code earns (3/5: `scale` is right, `add` is wrong), or is held for review
with the reason; and the kernels are confined (no network, private writable folders, a disk quota)."""
import os
import socket
import threading
from pathlib import Path

import nbformat
import pytest

from autograder import integrity, synthetic

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
# The guard looks for new classes among the objects the garbage collector tracks: this one is frozen out of them
# (test_new_classes shows it unseen without the guard's marker).
FREEZES_ALWAYS_EQUAL = """import gc
class Anything:
    def __eq__(self, other):
        return True
gc.freeze()
def add(a, b):
    return Anything()"""
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
IMPORTS_SKLEARN = "from sklearn.model_selection import train_test_split\n" + GOOD_ADD  # needs ctypes
IMPORTS_NARWHALS = "import narwhals\n" + GOOD_ADD  # (what scikit-learn imports) its stubs' == gives None
ALWAYS_EQUAL_FROM_A_FILE = """from pathlib import Path
Path("helpers.py").write_text("class Anything:\\n    def __eq__(self, other):\\n        return True\\n")
import helpers
def add(a, b):
    return helpers.Anything()"""
# The guard's own names and methods, replaced (and put back) by the notebook: what the hook runs is bound.
DISABLES_THE_CHECKS = """import autograder.guard
autograder.guard._Checks.problems = lambda self: []
np.allclose = lambda *args, **kwargs: True
""" + WRONG_ADD
# A name added to the guard's module shadows the builtin its checks call (the names it had are watched).
SHADOWS_A_BUILTIN = """import autograder.guard as guard, builtins
honest_allclose = np.allclose
def getattr(owner, name, *default):
    return honest_allclose if owner is np and name == "allclose" else builtins.getattr(owner, name, *default)
guard.getattr = getattr
del getattr
np.allclose = lambda *args, **kwargs: True
def add(a, b):
    return np.abs(np.asarray(a) + np.asarray(b))  # wrong for negative sums: the hidden test's np.allclose fails
"""
CLEARS_THE_REFUSALS = """import gc
import autograder.guard as guard
refused, guard.EXPOSING = guard.EXPOSING, frozenset()
everything = gc.get_objects()  # the audit hook's closure, and the key in it
guard.EXPOSING = refused
""" + WRONG_ADD
FOOLS_THE_MEMORY_CHECK = """import autograder.guard as guard
honest, guard._is_process_memory = guard._is_process_memory, lambda path: False
memory = open("/proc/self/mem", "rb")
guard._is_process_memory = honest
""" + WRONG_ADD
FOOLS_IT_WITH_A_BUILTIN = """import builtins
honest, builtins.isinstance = builtins.isinstance, lambda obj, cls: True
try:
    memory = open("/proc/self/mem", "rb")
finally:
    builtins.isinstance = honest
""" + WRONG_ADD


def undoes_after_the_test(arrange: str) -> str:
    """An `add` that is right for the visible tests only (|a + b|), and that replaces np.allclose while the
    test runs (the hidden check then passes) and has `arrange` put it back after the test, before the next."""
    return f"""honest_allclose = np.allclose
def undo(*args):
    np.allclose = honest_allclose
def add(a, b):
    if np.allclose is honest_allclose:
        np.allclose = lambda *args, **kwargs: True
        count = get_ipython().execution_count
{arrange}
    return np.abs(np.asarray(a) + np.asarray(b))"""


UNDOES_IN_A_CALLBACK = undoes_after_the_test("""        def once(*args):
            undo()
            get_ipython().events.unregister("post_execute", once)
        get_ipython().events.register("post_execute", once)""")
UNDOES_IN_A_THREAD = undoes_after_the_test("""        import threading
        def wait():
            while get_ipython().execution_count == count:
                threading.Event().wait(0.001)
            undo()
        threading.Thread(target=wait).start()""")
UNDOES_IN_A_RAW_THREAD = undoes_after_the_test("""        import _thread, threading
        def wait():
            while get_ipython().execution_count == count:
                threading.Event().wait(0.001)
            undo()
        _thread.start_new_thread(wait, ())  # not in threading's list
        threading.Event().wait(0.05)  # running by the end of the test""")
UNDOES_IN_A_GC_CALLBACK = undoes_after_the_test("""        import gc
        def once(phase, info):
            if get_ipython().execution_count != count:
                undo()
                gc.callbacks.remove(once)
        gc.callbacks.append(once)""")
UNDOES_IN_A_SIGNAL_HANDLER = undoes_after_the_test("""        import signal
        signal.signal(signal.SIGALRM, undo)
        signal.setitimer(signal.ITIMER_REAL, 0.5)""")
PEEKS_WITH_A_UNION = """import ctypes
class Peek(ctypes.Union):
    _fields_ = [("pointer", ctypes.POINTER(ctypes.c_char)), ("address", ctypes.c_size_t)]
peek = Peek()
peek.address = id(np)
first_byte = peek.pointer[0]  # any address: no audit event
""" + WRONG_ADD
# Raises the guard's "end of the cell" while the test runs, then reads the test's code (its constants hold the
# hidden checks' values and messages).
ENDS_THE_WATCH_EARLY = """import sys
def add(a, b):
    sys.audit("modulecraft.guard", "after", None, "")
    print(str(sys._getframe(1).f_code.co_consts)[::-1])
    return np.asarray(a) + np.asarray(b)"""
OBJECT_FROM_AN_ADDRESS = "import _ctypes\nnumpy = _ctypes.PyObj_FromPtr(id(np))\n" + WRONG_ADD
# An array over any address: numpy reads and writes the kernel's memory (the key's too) with no audit event.
READS_MEMORY_WITH_NUMPY = """import types
def add(a, b):
    interface = {"data": (id(a), True), "shape": (16,), "typestr": "|u1", "version": 3}
    raw = np.asarray(types.SimpleNamespace(__array_interface__=interface))
    return 0"""
# The kernel's memory through a path the guard's check of a path does not list (a thread's own copy of
# /proc/self/mem): right only if the kernel can read its memory (the guard's key too). As root, kernels are not
# dumpable: their /proc files are root's, and the open fails.
OPENS_A_THREADS_MEMORY = """import threading
def add(a, b):
    with open(f"/proc/self/task/{threading.get_native_id()}/mem", "rb") as memory:
        memory.seek(id(a))
        memory.read(8)
    return np.asarray(a) + np.asarray(b)"""
EXITS_WITH_SYS_EXIT = "import sys\nsys.exit()\n" + GOOD_ADD
# The tests look `np` up in the notebook's namespace: a module of the notebook's own under that name.
REBINDS_NP = """import types
fake = types.ModuleType("numpy")
vars(fake).update(vars(np))
fake.allclose = lambda *args, **kwargs: True
np = fake
def add(a, b):
    return a + b"""


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
    "freezes-always-equal": (FREEZES_ALWAYS_EQUAL, 0, "needs review", "class 'Anything' compares equal"),
    "returns-mock-any": (RETURNS_MOCK_ANY, 0, "needs review", "class '_ANY' compares equal"),
    "hunts-the-guard": (HUNTS_THE_GUARD, 0, "needs review", "key was dropped after gc.get_objects"),
    "reads-memory": (READS_MEMORY, HONEST_CEILING, "graded", "is not available while grading"),
    "opens-its-memory": (OPENS_ITS_MEMORY, 0, "needs review", "key was dropped after opening"),
    "sets-profile": (SETS_PROFILE, 0, "needs review", "key was dropped after sys.setprofile"),
    "patches-isinstance": (PATCHES_ISINSTANCE, 0, "needs review", "builtins.isinstance was replaced"),
    "replaces-code": (REPLACES_CODE, 0, "needs review", "the code of modulecraft.checks"),
    "patches-during-the-last-test": (PATCHES_DURING_THE_LAST_TEST, 0, "needs review",
                                     "numpy.allclose was replaced (seen at the end of the notebook)"),
    "exits-in-a-test": (EXITS_IN_A_TEST, 0, "needs review", "kernel exited"),
    "sys-exit": (EXITS_WITH_SYS_EXIT, 3, "graded", "cell add called sys.exit()"),
    "imports-sklearn": (IMPORTS_SKLEARN, HONEST_CEILING, "graded", "such as scipy and scikit-learn"),
    "imports-narwhals": (IMPORTS_NARWHALS, 5, "graded", None),
    "always-equal-from-a-file": (ALWAYS_EQUAL_FROM_A_FILE, 0, "needs review", "class 'Anything' compares equal"),
    "disables-the-checks": (DISABLES_THE_CHECKS, 0, "needs review", "the guard's _Checks.problems was replaced"),
    "shadows-a-builtin": (SHADOWS_A_BUILTIN, 0, "needs review", "the guard's module was given the name 'getattr'"),
    "clears-the-refusals": (CLEARS_THE_REFUSALS, 0, "needs review", "key was dropped after gc.get_objects"),
    "fools-the-memory-check": (FOOLS_THE_MEMORY_CHECK, 0, "needs review", "key was dropped after opening"),
    "fools-it-with-a-builtin": (FOOLS_IT_WITH_A_BUILTIN, 0, "needs review", "key was dropped after opening"),
    "undoes-in-a-callback": (UNDOES_IN_A_CALLBACK, 0, "needs review",
                             "numpy.allclose was replaced (seen at the end of test cell 'test_add')"),
    "undoes-in-a-thread": (UNDOES_IN_A_THREAD, 0, "needs review", "started by the notebook, is running"),
    "undoes-in-a-raw-thread": (UNDOES_IN_A_RAW_THREAD, 0, "needs review", "1 thread(s) unknown to threading"),
    "opens-a-threads-memory": (OPENS_A_THREADS_MEMORY, HONEST_CEILING, "graded", None),
    "undoes-in-a-gc-callback": (UNDOES_IN_A_GC_CALLBACK, 0, "needs review", "gc.callbacks were changed"),
    "undoes-in-a-signal-handler": (UNDOES_IN_A_SIGNAL_HANDLER, 0, "needs review", "a handler for signal 14"),
    "peeks-with-a-union": (PEEKS_WITH_A_UNION, HONEST_CEILING, "graded", "is not available while grading"),
    "object-from-an-address": (OBJECT_FROM_AN_ADDRESS, HONEST_CEILING, "graded", "is not available while grading"),
    "ends-the-watch-early": (ENDS_THE_WATCH_EARLY, 0, "needs review", "looked at frames or code (sys._getframe)"),
    "rebinds-np": (REBINDS_NP, 0, "needs review", "the name 'np' no longer refers to the module numpy"),
    "reads-memory-with-numpy": (READS_MEMORY_WITH_NUMPY, 0, "needs review", "names numpy's raw memory access"),
}
# What the guard cannot see (guard.py "Limits", INSTRUCTORS "Known limits"), graded as it is today. The hidden tests
# run in the student's process, to look inside the student's objects; there CPython has no event for a store into a
# module's dict, and numpy reads an object's `__array_interface__` in C. Each still fools the grader: a change that
# closes one makes `test_the_known_limits_are_as_documented` fail (then move it into ATTACKS).
KNOWN_LIMITS = {
    # replaces np.allclose with a fake that puts the original back as it answers: both checks see the original
    "undoes-within-the-test": ("""honest_allclose = np.allclose
def add(a, b):
    def once(*args, **kwargs):
        np.allclose = honest_allclose
        return True
    np.allclose = once
    return np.abs(np.asarray(a) + np.asarray(b))  # right for the visible tests only""", 5, "graded"),
    # reads 16 bytes at any address (a forger would look for the guard's key), the name built as the code runs
    "reads-memory-by-a-built-name": ("""import types
name = "__array_" + "interface__"
def add(a, b):
    interface = {"data": (id(a), True), "shape": (16,), "typestr": "|u1", "version": 3}
    np.asarray(types.SimpleNamespace(**{name: interface}))
    return 0""", HONEST_CEILING, "graded"),
}
# Without the defence each one needs (taken out in the kernel before install(), so not seen as tampering):
# honest narwhals (scikit-learn's) is held for review, and each attack scores above its honest code, unflagged,
# or (object-from-an-address, reads-memory-with-numpy) reads the kernel's memory, unseen.
WITHOUT_DEFENCES = """import autograder.guard as g
g._answers = lambda result: result is not NotImplemented
g.CHECKED_AT = frozenset(["verify"])
g._ffi_types = lambda classes: []
g._refuse_ffi_imports = lambda: (lambda event, args: None)
g.EXPOSING = g.EXPOSING - frozenset(["ctypes.PyObj_FromPtr"])
g._Checks.outside_the_cells = lambda self: True
g.SNAPSHOT = "(no locked cell ends with this)"
g._names_raw_memory = lambda source: False
g._added_names = lambda module, originals: []
"""
UNDEFENDED = {
    "imports-narwhals": (0, "needs review"),
    "undoes-in-a-callback": (5, "graded"),
    "object-from-an-address": (HONEST_CEILING, "graded"),
    "ends-the-watch-early": (5, "graded"),
    "rebinds-np": (5, "graded"),
    "reads-memory-with-numpy": (HONEST_CEILING, "graded"),
    "shadows-a-builtin": (5, "graded"),
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
    port, _ = listener
    submissions = {name: solution for name, (solution, *_) in {**ATTACKS, **KNOWN_LIMITS}.items()}
    submissions["confined"] = confinement(port)
    return grade(make_toy_course(tmp_path / "grading"), tmp_path, submissions)


def grade(course, tmp_path, submissions):
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
    assert wrong == [], "\n".join(wrong)


def test_the_known_limits_are_as_documented(graded):
    course, report = graded
    outcomes = {student: report.outcome(student, "90_toy") for student in KNOWN_LIMITS}
    assert {student: (outcome.score, outcome.status, outcome.needs_review) for student, outcome in outcomes.items()} \
        == {student: (score, status, []) for student, (_, score, status) in KNOWN_LIMITS.items()}, outcomes


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


def test_each_new_defence_matters(tmp_path, short_limits, make_toy_course, monkeypatch):
    monkeypatch.setattr(integrity, "INSTALL", WITHOUT_DEFENCES + integrity.INSTALL)
    _, report = grade(make_toy_course(tmp_path / "grading"), tmp_path,
                      {student: ATTACKS[student][0] for student in UNDEFENDED})
    outcomes = {student: report.outcome(student, "90_toy") for student in UNDEFENDED}
    assert {student: (outcome.score, outcome.status) for student, outcome in outcomes.items()} == UNDEFENDED, outcomes
