"""Grading kernels forked from a server that has already imported what every kernel imports.

A grading kernel spends most of its start-up importing the same modules for every submission: ipykernel,
IPython, numpy, modulecraft. Each grading process keeps one server that imports them once; every kernel is a
fork of it, confined (limits, unprivileged user, its own view of the file system) before it runs one line of
the submission.

When grading runs as root the server starts in new mount, PID and network namespaces with no new privileges
(`unshare`, `setpriv`): it is PID 1 there (when it ends, every kernel ends), kernels have no network, and the
server builds each kernel's view of the file system in its mount namespace before forking the kernel, and takes
it down after the kernel, one kernel at a time; what every kernel's view shares (the libraries it may import) is
made once, as the server starts.

Each chapter's kernels import their own stripped modulecraft (`answer_key`), so a grading process keeps a server
per chapter it grades. What does not depend on the chapter (ipykernel, numpy, matplotlib: most of the import time)
is imported once per grading process, by a base server started in the namespaces; a chapter's server is a fork of
it that imports that chapter's modulecraft and the probes, in a fraction of the time a fresh process takes.

    grading process --listener, control--> base --fork--> server (one chapter)

jupyter_client still launches and manages one ordinary process per kernel: a stub (this file run as a script,
without site-packages, so it starts in milliseconds) that hands the server its request and its stdio, relays
the signals it gets to the kernel, and exits with the kernel's status. Killing the stub kills the kernel.

    stub --request, stdio--> server (the kernel's mounts) --fork--> keeper --fork--> kernel

The keeper is the kernel's parent: it waits for it, forwards signals, and kills it if the stub goes away. What
the kernel's process does before it runs the kernel (its confinement) is kernel-side code: `autograder.kernel.confine`.
"""
import atexit
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import traceback

MS_BIND = 1 << 12
MS_REC = 1 << 14
MNT_DETACH = 2
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# What every chapter's kernel imports (ipywidgets: the steppers; matplotlib: the timelines), and what
# IPKernelApp.initialize imports (its magics, debugger, tornado queues: 8 ms a kernel); debugpy is blocked:
# ipykernel would import it (and its pydevd) at start-up, a third of its import time, for a debugger nobody
# attaches to a grading kernel. Not pyplot nor matplotlib_inline: importing them in a kernel registers the
# inline display with its shell (which the server has not); what they import is here (0.35 s a kernel).
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger",
           "IPython.core.debugger", "IPython.core.completerlib", "IPython.extensions.storemagic", "tornado.queues",
           "tornado.platform.asyncio", "cProfile", "faulthandler", "numpy", "modulecraft.nn", "modulecraft.checks",
           "modulecraft.viz", "ipywidgets", "matplotlib.figure", "matplotlib.backends.backend_agg",
           "autograder.kernel.confine", "autograder.probes", "autograder.selfcheck")
CHAPTER_PRELOAD = ("modulecraft", "autograder.probes", "autograder.selfcheck")  # a chapter's server imports these
# ipykernel sets it in every kernel (unless set); matplotlib reads it once, when it is imported (by the server)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# The server's start in its own namespaces (root only), without new privileges (nor do kernels gain any).
NAMESPACES = ("unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--mount-proc",
              "--propagation", "slave")
NO_NEW_PRIVILEGES = ("setpriv", "--no-new-privs")
REQUEST_LIMIT = 1 << 20
# A kernel with an IPC namespace of its own (`kernel.confine`) would still reach the machine's POSIX message queues
# through this folder, where one is mounted: hidden from it.
HOST_MESSAGE_QUEUES = "/dev/mqueue"
# All a server and its kernels get of the grader's environment: the interpreter's variables and the locale's.
# Nothing of the instructor's shell (tokens of an LMS, a cloud, git): a kernel's code could print it.
INHERITED = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LANGUAGE", "TZ")


def inherited(env) -> dict:
    """The variables of `env` that a server or a kernel may inherit (`INHERITED`, and the locale's LC_*)."""
    return {name: value for name, value in env.items() if name in INHERITED or name.startswith("LC_")}


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


# -- the base and the servers --------------------------------------------------------------------------------
def serve_base(listener: socket.socket, view: list[list[str]]) -> None:
    """Make `view` (the mounts every kernel shares, `libraries.mounts`, in the mount namespace the servers forked
    from the base share), import what every chapter's kernels need but modulecraft, then fork a server for each
    chapter the grading process asks for (its listener and control socket come with the request), until the
    grading process closes stdin (it ended)."""
    Mounter().make(view)  # kept as long as the base (its own mount namespace) lives
    sys.modules["debugpy"] = None  # ipykernel starts without its debugger
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    for module in PRELOAD:
        if not module.startswith(CHAPTER_PRELOAD):
            __import__(module)
    _format_a_traceback()
    _flush_only_what_was_written()
    _signatures_read_once()
    # the machine's addresses, which a kernel looks up as it reads its connection file (with psutil, 5 ms): the
    # base's network namespace is the kernels'
    from jupyter_client import localinterfaces
    localinterfaces.localhost()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children (and, as PID 1, orphans) vanish: no zombies
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:
            return
        connection, _ = listener.accept()
        with connection:
            if _peer_uid(connection) != os.getuid():
                continue
            message, fds, _, _ = socket.recv_fds(connection, REQUEST_LIMIT, 2)
            if len(fds) == 2 and os.fork() == 0:
                listener.close()
                os.dup2(fds[1], 0)  # the control socket: closed by the grading process when it is done with it
                modulecraft = json.loads(message).get("modulecraft")
                sys.path[0:0] = [modulecraft] if modulecraft else []
                try:
                    serve(socket.socket(fileno=fds[0]))
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)


def serve(listener: socket.socket) -> None:
    """Import the chapter's modulecraft and the probes, then serve one kernel at a time until the grading process
    closes stdin (it is done with this chapter, or ended)."""
    mounter = Mounter()
    for module in PRELOAD:
        __import__(module)
    _import_every_probe()
    import gc
    gc.freeze()  # a kernel's garbage collections never walk the 250,000 objects it inherits from the server
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:
            return
        connection, _ = listener.accept()
        if _peer_uid(connection) != os.getuid():  # only the grading process's user may ask (kernels are others)
            connection.close()
            continue
        if not serve_kernel(connection, mounter):
            return


def _import_every_probe() -> None:
    """The chapters' probes, in memory before any kernel: their source files are hidden from kernels (see
    `sandbox.repository_secrets`), so that no notebook can copy a hidden probe's text into its outputs."""
    import importlib
    import pkgutil

    import autograder.probes
    for info in pkgutil.iter_modules(autograder.probes.__path__):
        importlib.import_module(f"autograder.probes.{info.name}")


def _format_a_traceback() -> None:
    """Format one traceback as a grading kernel's shell does (the course's traceback mode, IPython's default
    theme for ipykernel). A process's first one imports and builds what formatting needs: paid here once instead
    of in every kernel."""
    from ipykernel.zmqshell import ZMQInteractiveShell
    from IPython.core.ultratb import AutoFormattedTB

    from autograder.config import TRACEBACK_MODE

    theme = ZMQInteractiveShell.class_traits()["colors"].default()
    formatter = AutoFormattedTB(mode=TRACEBACK_MODE, theme_name=theme, tb_offset=1)
    try:
        raise RuntimeError("a traceback formatted before any kernel starts")
    except RuntimeError:
        formatter.structured_traceback(*sys.exc_info())


def _flush_only_what_was_written() -> None:
    """ipykernel flushes stdout and stderr before and after every cell, each flush a round trip to its IOPub
    thread (two wake-ups of that thread, and a wait for it) even when nothing was written: a third of a cell's
    messaging time for a cell that prints nothing. A kernel's streams flush here only when they hold text or the
    IOPub thread is flushing them (until it has queued what it took: the cell's idle status, which nbclient
    waits for, must come after it); then as stock ipykernel does."""
    from ipykernel.iostream import OutStream

    stock_flush, stock_send = OutStream.flush, OutStream._flush

    def flush(self):
        if self._buffers or self._sending or self.echo is not None:
            stock_flush(self)

    def send(self):
        self._sending = True
        try:
            stock_send(self)
        finally:
            self._sending = False

    flush.__doc__, send.__doc__ = stock_flush.__doc__, stock_send.__doc__
    OutStream.flush, OutStream._flush, OutStream._sending = flush, send, False


def _signatures_read_once() -> None:
    """ipykernel reads the signature of the shell's `run_cell` (`inspect.signature`) before every cell, to learn
    whether it takes `cell_id` and `cell_meta`: a twentieth of a cell's time in the kernel, for the same answer
    each time. Here each method's answer is kept (a method the notebook puts in its place gets its own)."""
    import ipykernel.ipkernel

    stock = ipykernel.ipkernel._accepts_parameters
    known = {}

    def accepts(meth, param_names):
        key = (getattr(meth, "__func__", meth), tuple(param_names))
        if key not in known:
            known[key] = stock(meth, param_names)
        return dict(known[key])

    ipykernel.ipkernel._accepts_parameters = accepts


def serve_kernel(connection: socket.socket, mounter: "Mounter") -> bool:
    """One kernel: its mounts, its keeper until the kernel has ended, its mounts taken down. False: the grading
    process ended meanwhile."""
    message, fds, _, _ = socket.recv_fds(connection, REQUEST_LIMIT, 3)
    request = json.loads(message)
    try:
        mounter.make(request["mounts"] + ([["hide", HOST_MESSAGE_QUEUES]] if request.get("isolated") else []))
        keeper = os.fork()
        if keeper == 0:
            code = 1
            try:
                code = keep(connection, request, fds)
            finally:
                os._exit(code)
        ended = os.pidfd_open(keeper)
        ready, _, _ = select.select([ended, sys.stdin], [], [])
        os.close(ended)
        return sys.stdin not in ready
    except OSError:
        traceback.print_exc()  # the stub gets no status: jupyter_client reports a kernel that died
        return True
    finally:
        for fd in fds:
            os.close(fd)
        connection.close()
        mounter.undo()


def _peer_uid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[4:8], sys.byteorder)


def keep(stub_connection: socket.socket, request: dict, fds: list[int]) -> int:
    """The keeper: start the kernel, relay the stub's signals to it, report its exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    kernel = os.fork()
    if kernel == 0:
        stub_connection.close()
        try:
            from autograder.kernel.confine import become_kernel  # imported by the base
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


# -- the kernel's view of the file system ---------------------------------------------------------------------
class Mounter:
    """The server's mounts for one kernel at a time (`sandbox.Sandbox._mounts`), in the server's mount namespace:
    made before the kernel is forked, taken down after it."""

    def __init__(self):
        import ctypes  # here: the stub, which runs this file too, starts without it

        self.libc, self.errno = ctypes.CDLL(None, use_errno=True), ctypes.get_errno
        self.mounted: list[bytes] = []  # the mounts made for the current kernel, in order

    def make(self, operations: list[list[str]]) -> None:
        for operation, path, *options in operations:
            if operation == "hide":  # an empty folder nobody may enter, over what exists there
                if os.path.exists(path):
                    self._mount(b"modulecraft-hidden", path, b"tmpfs", 0, b"mode=000,size=4k")
            elif operation == "bind":  # `path` onto `options[0]`
                self._mount(path.encode(), options[0], None, MS_BIND, None)
            elif operation == "rebuild":
                self._rebuild(path, options[0], options[1:])
            else:
                raise ValueError(f"unknown mount operation {operation!r}")

    def _rebuild(self, folder: str, tmpfs_options: str, entries: list[str]) -> None:
        """Cover `folder` with a tmpfs, then bring back its `entries` (each with what is mounted under it),
        reached through file descriptors opened before they were covered."""
        kept = {}
        try:
            for name in entries:
                entry = os.path.join(folder, name)
                if os.path.islink(entry):
                    kept[name] = os.readlink(entry)
                elif os.path.lexists(entry):
                    kept[name] = os.open(entry, os.O_PATH)
            self._mount(b"modulecraft", folder, b"tmpfs", 0, tmpfs_options.encode())
            for name, original in kept.items():
                entry = os.path.join(folder, name)
                if isinstance(original, str):
                    os.symlink(original, entry)
                    continue
                if stat.S_ISDIR(os.fstat(original).st_mode):
                    os.mkdir(entry)
                else:
                    os.close(os.open(entry, os.O_CREAT | os.O_WRONLY, 0o644))
                self._mount(f"/proc/self/fd/{original}".encode(), entry, None, MS_BIND | MS_REC, None)
        finally:
            for original in kept.values():
                if isinstance(original, int):
                    os.close(original)

    def _mount(self, source, target: str, fstype, flags: int, options) -> None:
        if self.libc.mount(source, target.encode(), fstype, flags, options) != 0:
            error = self.errno()
            raise OSError(error, f"mount {source!r} on {target}: {os.strerror(error)}")
        self.mounted.append(target.encode())

    def undo(self) -> None:
        """Take down the current kernel's mounts, the last made first."""
        while self.mounted:
            self.libc.umount2(self.mounted.pop(), MNT_DETACH)


# -- the grading process's side ------------------------------------------------------------------------------
class Base:
    """This process's base server (`serve_base`), started on first use, gone when this process is."""

    def __init__(self, namespaces: bool, view: list[list[str]]):
        """`view`: the mounts every kernel shares (`libraries.mounts`), made in the base's namespaces."""
        self.name = f"modulecraft-forkserver-base-{os.getpid()}-{os.urandom(8).hex()}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(abstract(self.name))
        listener.listen(16)
        # Of our environment only what a kernel may inherit (a kernel is a fork of a server forked from the base:
        # the environment the base started with stays in its memory), and HOME, where what the base imports keeps
        # its caches (matplotlib's fonts); a kernel gets a HOME of its own
        env = dict(inherited(os.environ), HOME=os.environ.get("HOME", "/"), OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        command = [*NO_NEW_PRIVILEGES, sys.executable, "-m", "autograder.judging.forkserver", "base",
                   str(listener.fileno()), json.dumps(view)]
        # stdin is a pipe from this process: when it closes (this process ended), the base ends too.
        self.process = subprocess.Popen([*(NAMESPACES if namespaces else ()), *command],
                                        stdin=subprocess.PIPE, pass_fds=[listener.fileno()], env=env)
        listener.close()
        self.namespaces, self.view, self.pid = namespaces, view, os.getpid()
        atexit.register(self.stop)

    def fork_server(self, modulecraft, listener: socket.socket, control: socket.socket) -> None:
        """Have a server forked for kernels importing `modulecraft`'s folder (None: the installed one), serving on
        `listener` while `control` stays open. Not waited for: the base may still be importing, and this process
        gets on meanwhile (a kernel's stub waits in the listener's queue)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
            connection.connect(abstract(self.name))
            request = json.dumps({"modulecraft": str(modulecraft) if modulecraft is not None else None}).encode()
            socket.send_fds(connection, [request], [listener.fileno(), control.fileno()])

    def alive(self) -> bool:
        return os.getpid() == self.pid and self.process.poll() is None

    def stop(self) -> None:
        """End the base (closing its stdin) and wait for it; a forked copy of this object leaves it alone."""
        if os.getpid() == self.pid and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()


_base: Base | None = None


class Server:
    """This process's forkserver for one chapter's modulecraft, forked by the base on first use; it ends when
    stopped, or with this process."""

    def __init__(self, namespaces: bool, modulecraft: "os.PathLike | None" = None, view: list[list[str]] = ()):
        """`modulecraft`: the folder whose modulecraft the server and its kernels import (first on sys.path);
        `view`: the mounts shared by all kernels, made by the base in its namespaces (`libraries.mounts`)."""
        global _base
        view = [list(mount) for mount in view]
        if _base is None or not _base.alive() or _base.namespaces != namespaces or _base.view != view:
            _base = Base(namespaces, view)
        self.name = f"modulecraft-forkserver-{os.getpid()}-{os.urandom(8).hex()}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(abstract(self.name))  # in this process's network namespace: stubs reach it, kernels do not
        listener.listen(16)
        self.control, theirs = socket.socketpair()
        with listener, theirs:
            _base.fork_server(modulecraft, listener, theirs)
        self.process = _base.process  # the server runs under it: its processes are the kernels'
        self.pid = os.getpid()

    def alive(self) -> bool:
        """Whether the server still serves (it closes its end of the control socket when it ends)."""
        if os.getpid() != self.pid or self.process.poll() is not None:
            return False
        ready, _, _ = select.select([self.control], [], [], 0)
        return not ready or self.control.recv(1, socket.MSG_PEEK) != b""

    def stop(self) -> None:
        """End the server (closing its control socket); a forked copy of this object leaves it alone."""
        if os.getpid() == self.pid:
            self.control.close()

    def kernel_command(self, spec: dict, kernel_cmd: list[str]) -> list[str]:
        """The stub's command line for a kernel that `kernel_cmd` (`python -m ipykernel_launcher ...`) would start."""
        module = kernel_cmd.index("ipykernel_launcher")
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), self.name, json.dumps(spec), "--",
                *kernel_cmd[module + 1:]]


if __name__ == "__main__":
    if sys.argv[1] == "base":
        serve_base(socket.socket(fileno=int(sys.argv[2])), json.loads(sys.argv[3]))
    else:
        sys.exit(stub(sys.argv[1], sys.argv[2], sys.argv[4:]))
