"""The guard in a kernel that never loaded an FFI (`_ctypes`, `_cffi_backend`): every way to load one later is
refused with an ImportError that says what to do, and the guard's cell deadline needs none.

Each kernel is an IPython shell in a fresh interpreter started here, with the FFI kept out before numpy as the
grading server keeps it out, so these tests do not depend on how the server starts kernels. Each defence is
also taken out in a kernel of its own (before `install()`, so not seen as tampering), where the attempt works.
"""
import json
import subprocess
import sys

import nbformat
import pytest

from autograder import config, guard, integrity

DRIVER = """import json, sys
if json.loads(sys.argv[1]):
    for name in ("_ctypes", "ctypes", "_cffi_backend", "cffi"):  # as the grading server starts
        sys.modules[name] = None
import numpy
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shown = []  # the traceback lines a kernel sends as the cell's error output
shell._showtraceback = lambda etype, evalue, lines: shown.append(lines)
for cell in json.loads(sys.argv[2]):
    error = shell.run_cell(cell).error_in_exec
    print("RESULT", json.dumps(error and [type(error).__name__, str(error), shown.pop()]), flush=True)
"""
INSTALL = integrity.INSTALL.format(deadline=1)
VERIFY = f"__import__('sys').audit({guard.EVENT!r}, 'verify', 'nonce', '')"
# A walk over every class alive: the FFI's own types are there once it was loaded, whatever sys.modules says.
FFI_TYPES = """found, stack = set(), [object]
while stack:
    for sub in type.__subclasses__(stack.pop()):
        if sub not in found:
            found.add(sub)
            stack.append(sub)
print("FFI types:", sorted({cls.__module__ for cls in found} & {"_ctypes", "_cffi_backend"}))"""
CTYPES_FILE = ("import glob, sys\n"
               "path = glob.glob(sys.base_prefix + '/lib/python3.11/lib-dynload/_ctypes.cpython-*.so')[0]\n")
ATTEMPTS = {
    "import": "import ctypes",
    "its-entry-deleted": "import sys\nsys.modules.pop('_ctypes', None)\nimport _ctypes",
    "import_module": "import importlib, sys\nsys.modules.pop('_ctypes', None)\nimportlib.import_module('_ctypes')",
    "spec-from-file": CTYPES_FILE + "import importlib.util\n"
                      "importlib.util.module_from_spec(importlib.util.spec_from_file_location('_ctypes', path))",
    # Any name whose last part names the extension's init function (PyInit__ctypes) loads it.
    "spec-under-another-name": CTYPES_FILE + "import importlib.util\nimportlib.util.module_from_spec("
                                             "importlib.util.spec_from_file_location('disguised._ctypes', path))",
    "imp": CTYPES_FILE + "import imp\nimp.load_dynamic('_ctypes', path)",
    "create_dynamic": CTYPES_FILE + "import _imp, importlib.machinery\n"
                                    "_imp.create_dynamic(importlib.machinery.ModuleSpec('_ctypes', None, origin=path))",
    "cffi": "import sys\nsys.modules.pop('_cffi_backend', None)\nimport _cffi_backend",
}
WITHOUT_THE_REFUSAL = "import autograder.guard as g\ng._refuse_ffi_imports = lambda: (lambda event, args: None)\n"
IGNORES_SIGINT = """import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
end = time.monotonic() + 4
while time.monotonic() < end:
    pass
print("ran to its end")"""
WITHOUT_THE_DEADLINE = "import autograder.guard as g\ng._stop_cells_after = lambda seconds: None\n"


def run_kernel(tmp_path, cells, ffi_free=True):
    """Run `cells` in a fresh IPython shell (in `tmp_path`, with a key for the guard); per cell, its error
    ([type, message] or None) and the lines it printed."""
    (tmp_path / guard.KEY_FILE).write_bytes(b"k" * 32)
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(ffi_free), json.dumps(cells)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    results, printed = [], []
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            results.append((json.loads(line.removeprefix("RESULT ")), printed))
            printed = []
        else:
            printed.append(line)
    assert len(results) == len(cells), done.stdout + done.stderr
    return results


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_every_way_to_load_an_ffi_is_refused_saying_what_to_do(tmp_path, attempt):
    install, tried, verify, types = run_kernel(tmp_path, [INSTALL, ATTEMPTS[attempt], VERIFY, FFI_TYPES])
    assert install[0] is None
    assert tried[0][:2] == ["ImportError", guard.FFI_REFUSED], tried
    assert "MODULECRAFT_GRADING" in guard.FFI_REFUSED
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify
    assert types[1] == ["FFI types: []"]


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_without_the_refusal_each_way_loads_it_and_the_next_check_reports_it(tmp_path, attempt):
    install, tried, verify, types = run_kernel(tmp_path, [WITHOUT_THE_REFUSAL + INSTALL, ATTEMPTS[attempt], VERIFY,
                                                          FFI_TYPES])
    assert install[0] is None
    assert attempt == "import" or tried[0] is None, tried  # ctypes' own import opens libraries: refused
    module = "_cffi_backend" if attempt == "cffi" else "_ctypes"
    assert f"the FFI {module} was loaded into the kernel" in verify[1][0], verify
    assert types[1] == [f"FFI types: {[module]}"]


def test_the_learner_hears_why_scikit_learn_cannot_be_imported(tmp_path):
    """scipy replaces the ImportError with its own ("install ... seems to be broken"): the grader finds the
    refusal in the traceback and tells the learner (the report's notes, the self-check)."""
    _, tried = run_kernel(tmp_path, [INSTALL, "from sklearn.model_selection import train_test_split"])
    ename, evalue, traceback = tried[0]
    assert ename == "ImportError" and guard.FFI_REFUSED not in evalue
    cell = nbformat.v4.new_code_cell(metadata={"nbgrader": {"grade_id": "split"}})
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=traceback)]
    assert integrity._limits_of(cell, 0) == [f"cell split: {guard.FFI_REFUSED}"]
    cell.outputs[0].traceback = []
    assert integrity._limits_of(cell, 0) == []


def test_a_kernel_with_ctypes_already_loaded_keeps_it(tmp_path):
    """Today's server imports numpy with ctypes available: nothing to keep out, ctypes' use is reported."""
    _, tried, verify = run_kernel(tmp_path, [INSTALL, "import ctypes\nctypes.sizeof(ctypes.c_int)", VERIFY],
                                  ffi_free=False)
    assert tried[0] is None
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify


def test_the_deadline_ends_a_cell_that_ignores_sigint_without_an_ffi(tmp_path):
    _, looping, after, verify = run_kernel(tmp_path, [INSTALL, IGNORES_SIGINT, "print('next cell')", VERIFY])
    assert looping[0][:2] == ["KeyboardInterrupt", guard.DEADLINE_REACHED] and "ran to its end" not in looping[1]
    assert after == (None, ["next cell"])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify  # the guard's own thread and handler
    _, looping = run_kernel(tmp_path, [WITHOUT_THE_DEADLINE + INSTALL, IGNORES_SIGINT])
    assert looping == (None, ["ran to its end"])


def test_the_grader_counts_the_guards_deadline_as_the_time_limit(tmp_path):
    """The guard ends a cell a second before nbclient would interrupt it (whose SIGINT could land in the guard's
    hook): its KeyboardInterrupt is the time limit (reported, and the notebook tried again); one the notebook
    raised itself is an ordinary error."""
    cells = []
    for grade_id, evalue in [("ended", guard.DEADLINE_REACHED), ("raised", ""), ("interrupted", None)]:
        cell = nbformat.v4.new_code_cell(metadata={"nbgrader": {"grade_id": grade_id}})
        ename = "CellTimeoutError" if evalue is None else "KeyboardInterrupt"
        cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue or "", traceback=[])]
        cells.append(cell)
    graded = tmp_path / "graded.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), graded)
    assert integrity.timed_out_cells(graded) == ["ended", "interrupted"]
    guarded, _ = integrity.InsertGuard().preprocess(nbformat.v4.new_notebook(), {})
    assert guarded.cells[0].source == integrity.INSTALL.format(deadline=config.CELL_TIMEOUT - 1)


SLEEPS_IGNORING_SIGINT = """import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
started = time.monotonic()
time.sleep(6)"""
SENDS_NO_SIGNAL = ("import _thread, time, autograder.guard as g\n"  # what the deadline did before: no signal sent
                   "g._stop_cells_after.__defaults__ = (lambda thread, signum: _thread.interrupt_main(signum), "
                   "time.monotonic)\n")


@pytest.mark.parametrize("sends_a_signal", [True, False])
def test_the_deadline_wakes_a_cell_blocked_in_a_system_call(tmp_path, sends_a_signal):
    """The deadline (1 s) sends a signal, which ends a sleep at once; only tripping Python's handler
    (`_thread.interrupt_main`) waits for the system call to return."""
    install = INSTALL if sends_a_signal else SENDS_NO_SIGNAL + INSTALL
    _, sleeping, took = run_kernel(tmp_path, [install, SLEEPS_IGNORING_SIGINT,
                                              "print(round(time.monotonic() - started))"])
    assert sleeping[0][0] == "KeyboardInterrupt", sleeping
    assert took[1] == (["1"] if sends_a_signal else ["6"]), took


def test_a_cell_runs_when_the_deadline_thread_cannot_start(tmp_path):
    """At the process limit no thread starts (the guard's starts before any code of the notebook, which could
    fill it): the cells run without a deadline instead of failing (a test cell would lose its points)."""
    no_threads = ("import threading\ndef refused(self):\n    raise RuntimeError(\"can't start new thread\")\n"
                  "threading.Thread.start = refused\n")
    _, ran = run_kernel(tmp_path, [no_threads + INSTALL, "print('ran')"])
    assert ran == (None, ["ran"]), ran


def test_a_changed_deadline_handler_is_reported(tmp_path):
    change = "import signal\nimport autograder.guard\nsignal.signal(autograder.guard.DEADLINE_SIGNAL, signal.SIG_IGN)"
    _, changed, verify = run_kernel(tmp_path, [INSTALL, change, VERIFY])
    assert changed[0] is None
    assert f"tampered: a handler for signal {int(guard.DEADLINE_SIGNAL)} was set" in verify[1][0], verify


SLOW_EQUALITY = """import time
class Slow:
    def __eq__(self, other):  # probed by the guard's check for always-equal classes, twice (== and !=) a kind
        time.sleep(0.2)
        return False"""


LOOPS_THROUGH_THE_GUARD = """import time
end = time.monotonic() + 5
while time.monotonic() < end:
    compile("1", "<loop>", "eval")  # an audit event: the guard's hook runs, a third of the time
print("ran to its end")"""
PLAIN_DEADLINE = """import signal, autograder.guard
def stop(signum, frame):
    raise KeyboardInterrupt
signal.signal(autograder.guard.DEADLINE_SIGNAL, stop)"""


@pytest.mark.parametrize("deferred", [True, False])
def test_a_cell_deadline_inside_the_guard_ends_the_cell_not_the_key(tmp_path, deferred):
    """The deadline (1 s) comes while the guard's check runs the notebook's slow `__eq__` (2.4 s in all): the
    check finishes and signs. A loop in and out of the guard's hook is still ended at its deadline, the key
    intact. With a handler that raises wherever it lands (the guard's, before it deferred), the check is cut
    short: the guard drops its key, and neither check signs "ok"."""
    cells = [INSTALL, SLOW_EQUALITY, VERIFY, LOOPS_THROUGH_THE_GUARD, VERIFY]
    if not deferred:
        cells.insert(1, PLAIN_DEADLINE)
    checked, looped, checked_again = run_kernel(tmp_path, cells)[-3:]
    lines = checked[1] + checked_again[1]
    signed_ok = [line for line in lines if line.split()[2] == "ok" and "unsigned" not in line]
    assert len(signed_ok) == (2 if deferred else 0), lines
    if deferred:  # (cut short inside the guard, an interrupt may also be swallowed there: the loop runs on)
        assert looped[0][0] == "KeyboardInterrupt" and "ran to its end" not in looped[1], looped
