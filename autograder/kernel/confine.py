"""A grading kernel's first steps, in the process forked for it (`judging.forkserver.keep`), before the learner's
first line: its stdio, control groups, limits, IPC namespace and keyrings of its own, the slot's unprivileged
user, its environment; then the kernel itself."""
import ctypes
import errno
import functools
import os
import resource
import sys

CLONE_NEWIPC = 0x08000000
# Linux's keyrings (keyctl(2)) belong to no namespace: a user's keyrings outlive its processes (the next kernel of
# the same slot user would find what the last one left), and a process inherits its parent's session keyring (the
# grader's, which may hold the instructor's keys, shared by every kernel).
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 1, 7, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5


def become_kernel(request: dict, stdio: list[int]) -> None:
    """Confine this process as the request says, then run the kernel in it (as a fresh process would)."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    os.closerange(3, 1 << 20)  # nothing of the server's or the keeper's stays open in the kernel
    os.chdir(request["cwd"])
    for procs in request.get("cgroups", []):  # the kernel's control groups (memory and processes, children included)
        with open(procs, "w") as joined:
            joined.write(str(os.getpid()))
    for name, value in request["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if request.get("isolated"):  # SysV segments, semaphores, message queues and POSIX queues of its own, gone with it
        _unshare(CLONE_NEWIPC)
    if request["user"]:
        uid, gid = request["user"]
        # Root's capabilities go with the change of user, and Linux makes a process whose user changed not
        # dumpable: the processes a kernel starts cannot read its memory (ptrace, /proc/<pid>/mem).
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if request.get("isolated"):
            _own_keyrings()
    os.environ.clear()
    os.environ.update(request["env"])
    _reseed()
    from ipykernel.kernelapp import IPKernelApp
    sys.argv = [sys.executable, "-m", "ipykernel_launcher", *request["args"]]
    # read from the environment when ipykernel was imported (by the server): set it from the kernel's own
    app = IPKernelApp.instance(parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0))
    app.initialize(request["args"])
    # traitlets leaves its logger at DEBUG for its handler to filter: each message's debug line was still made
    app.log.setLevel(app.log_level)
    app.start()
    os._exit(0)


def _unshare(flags: int) -> None:
    _libc_call("unshare", flags)


def _own_keyrings() -> None:
    """Keyrings of this kernel's own (`SYS_KEYCTL`): its slot user's keyrings emptied of what the slot's last kernel
    left there (which would also count against this kernel's key quota), and a new session keyring, not the
    grader's."""
    call = functools.partial(_libc_call, "syscall", SYS_KEYCTL[os.uname().machine])
    call(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
    call(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)
    call(KEYCTL_JOIN_SESSION_KEYRING, None)
    try:  # kept for days after its user's last process (where the machine's kernel has them)
        call(KEYCTL_CLEAR, call(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING))
    except OSError as error:
        if error.errno != errno.EOPNOTSUPP:
            raise


def _libc_call(name: str, *args) -> int:
    """The C library's `name(*args)`, raising OSError when it fails."""
    result = getattr(ctypes.CDLL(None, use_errno=True), name)(*args)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}{args}: {os.strerror(error)}")
    return result


def _reseed() -> None:
    """A fresh process seeds its random generators from the OS; the forked ones would all share the server's."""
    import random

    import numpy
    random.seed()
    numpy.random.seed()
