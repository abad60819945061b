"""The guard's count of the notebook's threads at a check: a thread running then can undo a change after the
test's end, or make one while the test runs. Threads are counted however they were started (`_thread` directly,
or a thread taken off threading's list, whose functions are the notebook's to replace). The check as it was is
put back in a kernel of its own (before `install()`), where the thread goes unseen."""
import pytest

from autograder import guard
from test_ffi_free import INSTALL, VERIFY, run_kernel

WAITS = "import threading\nstop = threading.Event()\n"
THREADS = {
    "raw": (WAITS + "import _thread\n_thread.start_new_thread(stop.wait, ())\nthreading.Event().wait(0.05)",
            "1 thread(s) unknown to threading"),
    "off-the-list": (WAITS + "thread = threading.Thread(target=stop.wait, daemon=True)\nthread.start()\n"
                             "del threading._active[thread.ident]", "1 thread(s) unknown to threading"),
    "enumerate-replaced": (WAITS + "thread = threading.Thread(target=stop.wait, name='hidden', daemon=True)\n"
                                   "thread.start()\nthreading.enumerate = lambda: [threading.main_thread()]",
                           "thread 'hidden', started by the notebook"),
}
# The check as it was: threading's list through threading.enumerate().
AS_BEFORE = """import autograder.guard as g, threading
g._Checks.new_threads = lambda self: [f"thread {t.name!r}, started by the notebook, is running"
                                     for t in threading.enumerate()
                                     if t not in self.threads.values() and not self.is_ours(t)]
"""


@pytest.mark.parametrize("started", THREADS)
def test_a_running_thread_is_seen_however_it_was_started(tmp_path, started):
    code, phrase = THREADS[started]
    _, _, verify = run_kernel(tmp_path, [INSTALL, code, VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce tampered: ") and phrase in verify[1][0], verify
    _, _, verify = run_kernel(tmp_path, [AS_BEFORE + INSTALL, code, VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify


def test_threads_that_ended_are_not_counted(tmp_path):
    """A thread leaves threading's list a moment before the interpreter stops counting it: no false alarm."""
    ended = ("import _thread, threading\nfor _ in range(50):\n"
             "    thread = threading.Thread(target=len, args=((),))\n    thread.start()\n    thread.join()\n"
             "_thread.start_new_thread(len, ((),))\nthreading.Event().wait(0.05)")
    _, _, verify = run_kernel(tmp_path, [INSTALL, ended, VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify
