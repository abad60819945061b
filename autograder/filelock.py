"""An exclusive lock on a file, shared by every process on the machine (grading workers, self-checks)."""
import contextlib
import fcntl


@contextlib.contextmanager
def exclusive(path):
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield
