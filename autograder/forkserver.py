"""Grading kernels forked from a server that has already imported what every kernel imports.

A grading kernel spends most of its start-up importing the same modules for every submission: ipykernel,
IPython, numpy, modulecraft. A server imports them once (one per grading process, shared with the processes it
forks: the local pool's workers); every kernel is a fork of it, confined (namespaces, limits, unprivileged
user) before it runs one line of the submission.

jupyter_client still launches and manages one ordinary process per kernel: a stub (this file run as a script,
without site-packages, so it starts in milliseconds) that hands the server its request and its stdio, relays
the signals it gets to the kernel, and exits with the kernel's status. Killing the stub kills the kernel.

    stub --request, stdio--> server --fork--> keeper --fork, in new PID, mount, network namespaces--> kernel (PID 1)

The keeper is the kernel's parent: it waits for it, forwards signals, and kills it if the stub goes away.
"""
import atexit
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import traceback

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 12, 1 << 14, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# What every chapter's kernel imports, and what IPKernelApp.initialize imports (its magics, debugger, tornado
# queues: 8 ms a kernel); debugpy is blocked: ipykernel would import it (and its pydevd) at start-up, a third of
# its import time, for a debugger nobody attaches to a grading kernel.
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger",
           "IPython.core.debugger", "IPython.core.completerlib", "IPython.extensions.storemagic", "tornado.queues",
           "tornado.platform.asyncio", "cProfile", "faulthandler", "numpy", "modulecraft.nn", "modulecraft.checks",
           "modulecraft.viz", "autograder.guard", "autograder.selfcheck")
REQUEST_LIMIT = 1 << 20


def abstract(name: str) -> str:
    """The address of a Linux abstract socket: no file to leave behind; who connects is checked by credentials."""
    return "\0" + name


# -- the stub, in the process jupyter_client launched --------------------------------------------------------
def stub(server_name: str, spec: str, kernel_args: list[str]) -> int:
    request = dict(json.loads(spec), args=kernel_args, cwd=os.getcwd(), env=dict(os.environ))
    keeper = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keeper.connect(abstract(server_name))
    socket.send_fds(keeper, [json.dumps(request).encode()], [0, 1, 2])
    for signum in RELAYED:
        signal.signal(signum, lambda signum, _: keeper.send(bytes([signum])))
    status = keeper.recv(16)  # the kernel's exit code, once it has exited
    return int(status) if status else 1


# -- the server ----------------------------------------------------------------------------------------------
def serve(listener: socket.socket) -> None:
    """Import what kernels need, then fork a keeper per connection until the grading process closes stdin
    (it ended)."""
    sys.modules["debugpy"] = None  # `import debugpy` raises ImportError: ipykernel starts without its debugger
    for module in PRELOAD:
        __import__(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished keepers vanish: no zombies to wait for
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:
            return
        connection, _ = listener.accept()
        if _peer_uid(connection) != os.getuid():  # only the grading process's user may ask (kernels are others)
            connection.close()
            continue
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 1
            try:
                code = keep(connection)
            finally:
                os._exit(code)
        connection.close()


def _peer_uid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[4:8], sys.byteorder)


def keep(stub_connection: socket.socket) -> int:
    """The keeper: start the kernel, relay the stub's signals to it, report its exit."""
    message, fds, _, _ = socket.recv_fds(stub_connection, REQUEST_LIMIT, 3)
    request = json.loads(message)
    if request["namespaces"]:
        _libc_call("unshare", CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET)  # no network at all
        _libc_call("mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    kernel = os.fork()  # in new namespaces: PID 1 of its own, every process it leaves dies with it
    if kernel == 0:
        stub_connection.close()
        try:
            become_kernel(request, fds)
        except BaseException:
            traceback.print_exc()  # on the grading process's stderr, or the stub's once it has them
        finally:
            os._exit(1)
    for fd in fds:
        os.close(fd)
    exited = os.pidfd_open(kernel)
    while True:
        ready, _, _ = select.select([stub_connection, exited], [], [])
        if exited in ready:
            code = os.waitstatus_to_exitcode(os.waitpid(kernel, 0)[1])
            stub_connection.send(str(code).encode())
            return 0
        relayed = stub_connection.recv(16)
        os.kill(kernel, relayed[0] if relayed else signal.SIGKILL)  # no message: the stub is gone


def become_kernel(request: dict, stdio: list[int]) -> None:
    """Confine this process as the request says, then run the kernel in it (as a fresh process would)."""
    _libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)
    if request["namespaces"]:
        _libc_call("mount", b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        mount_all(request["mounts"])
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    os.closerange(3, 1 << 20)  # nothing of the server's or the keeper's stays open in the kernel
    os.chdir(request["cwd"])
    import resource
    for name, value in request["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if request["user"]:
        _drop_privileges(*request["user"])
    # Not dumpable: the processes a kernel starts cannot read its memory (ptrace, /proc/<pid>/mem), where the
    # tamper guard keeps its key.
    _libc_call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.environ.clear()
    os.environ.update(request["env"])
    _reseed()
    from ipykernel.kernelapp import IPKernelApp
    sys.argv = [sys.executable, "-m", "ipykernel_launcher", *request["args"]]
    # read from the environment when ipykernel was imported (by the server): set it from the kernel's own
    IPKernelApp.launch_instance(argv=request["args"], parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0))
    os._exit(0)


def mount_all(operations: list[list[str]]) -> None:
    """Make the kernel's view of the file system (`sandbox.Sandbox._mounts`) with system calls: a shell running
    `mount` for each cost tens of milliseconds per kernel."""
    for operation, path, *options in operations:
        target = path.encode()
        if operation == "mkdir":
            os.makedirs(path, exist_ok=True)
        elif operation == "touch":
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        elif operation == "bind":  # `path` onto `options[0]`
            _libc_call("mount", target, options[0].encode(), None, MS_BIND, None)
        elif operation == "tmpfs":
            _libc_call("mount", b"modulecraft", target, b"tmpfs", 0, options[0].encode())
        elif operation == "hide":  # an empty folder nobody may enter, over what exists there
            if os.path.exists(path):
                _libc_call("mount", b"modulecraft-hidden", target, b"tmpfs", 0, b"mode=000,size=4k")
        elif operation == "detach":
            _libc_call("umount2", target, MNT_DETACH)
        else:
            raise ValueError(f"unknown mount operation {operation!r}")


def _drop_privileges(uid: int, gid: int) -> None:
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:  # until EINVAL: past the last capability
        cap += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _reseed() -> None:
    """A fresh process seeds its random generators from the OS; the forked ones would all share the server's."""
    import random

    import numpy
    random.seed()
    numpy.random.seed()


_libc = ctypes.CDLL(None, use_errno=True)


def _libc_call(name: str, *args) -> None:
    if getattr(_libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}: {os.strerror(error)}")


# -- the grading process's side ------------------------------------------------------------------------------
class Server:
    """This process's forkserver, started on first use, gone when this process is."""

    def __init__(self):
        self.name = f"modulecraft-forkserver-{os.getpid()}-{os.urandom(8).hex()}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(abstract(self.name))
        listener.listen(16)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        # stdin is a pipe from this process: when it closes (this process ended), the server ends too.
        self.process = subprocess.Popen([sys.executable, "-m", "autograder.forkserver", "serve",
                                         str(listener.fileno())],
                                        stdin=subprocess.PIPE, pass_fds=[listener.fileno()], env=env)
        listener.close()
        self.pid = os.getpid()
        atexit.register(self.stop)

    def running(self) -> bool:
        """Whether the server runs, asked by the process that started it or by one forked from it (which cannot
        wait for it: an ended server stays a zombie until its parent does)."""
        if os.getpid() == self.pid:
            return self.process.poll() is None
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    def stop(self) -> None:
        """End the server (closing its stdin) and wait for it; a forked copy of this object leaves it alone."""
        if os.getpid() == self.pid and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()

    def kernel_command(self, spec: dict, kernel_cmd: list[str]) -> list[str]:
        """The stub's command line for a kernel that `kernel_cmd` (`python -m ipykernel_launcher ...`) would start."""
        module = kernel_cmd.index("ipykernel_launcher")
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), self.name, json.dumps(spec), "--",
                *kernel_cmd[module + 1:]]


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(socket.socket(fileno=int(sys.argv[2])))
    else:
        sys.exit(stub(sys.argv[1], sys.argv[2], sys.argv[4:]))
