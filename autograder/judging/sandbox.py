"""Grading kernels with resource limits, never as root, seeing nothing but their own copy of the submission.

Every kernel is forked from the grading process's forkserver (`autograder.judging.forkserver`), gets a fresh private
working folder and resource limits (memory, file size, open files, CPU seconds; and process count when it
runs as its own user). When grading runs as root, the kernel also gets, before dropping to an unprivileged
slot user (`modulecraft-grader-<n>`, one per concurrent kernel so that their process limits and files stay
apart):

- the forkserver's PID namespace (the server is its PID 1: when it ends, every kernel ends), and the slot
  user's processes killed after the kernel, even `setsid()` ones;
- the forkserver's network namespace: no network at all (it talks to the grader over Unix sockets in its
  folder);
- the forkserver's mount namespace, where it builds each kernel's view and takes it down after it. The kernel
  sees an allow-list: the system's folders an interpreter needs (`/usr`, `/etc`, `/lib*`, `/bin`, `/sbin`, `/dev`,
  `/proc`, `/sys`) and, of every other folder, only what lies on the way to what it needs (the interpreter, the
  venv, the repository's packages it imports, its modulecraft, its working folder): every other top-level folder
  (`/opt`, `/srv`, `/home`, `/root`, `/mnt`, most of `/var` and `/run`, ...) is hidden under an empty
  mount, and a folder on the way is rebuilt with only the entries on the way (which also opens one the
  unprivileged user could not enter, e.g. a 0700 home holding the interpreter). So no other copy of the
  reference (a JupyterHub's, another clone, another worktree, another chapter's stripped copy, a pip cache) is
  in sight.
  The libraries too (`libraries`, made once per base forkserver): the venv's site-packages shows only the
  distributions modulecraft requires (no torch, whose semantics the reference mirrors, nor anything else the
  tests install), and the base interpreter's site-packages nothing.
  Fresh `/tmp`, `/var/tmp`, `/run/lock` and `/dev/shm`; in the repository, every folder it does not import from
  (course sources with hidden tests, `.git`, tests, the probes' source) and the grading folder hidden; no new
  privileges (setuid programs grant nothing).

Time limits count the kernel's CPU time (its processes together), so a machine loaded by other work never times
honest work out: a cell is interrupted past `config.CELL_TIMEOUT` CPU seconds (`ConfinedExecute`), the kernel
killed past `config.NOTEBOOK_TIMEOUT` (RLIMIT_CPU). Wall-clock backstops, `config.WALL_CLOCK_BACKSTOP` times
longer, end what waits instead of computing: nbclient's timeout for a cell, a watchdog for the kernel.

Nothing of a kernel outlives it, however it ends (finished, `os._exit`, killed, timed out): as root its
working folder is a size-limited tmpfs of its own (its disk quota, mounted under STATE_DIR, a shared mount
point so that the server's namespace sees it) and its private folders are unmounted after it. Clean-up does
not depend on jupyter_client calling our manager's clean-up (for a dead kernel, nbclient calls the base
class's): `ConfinedExecute` closes every sandbox of its notebook once the notebook is done. A slot (its user)
is an `flock`ed file held by the grading process that runs its kernel: a grader that dies frees its slots, the
next kernel in that slot removes what it left, and a grader that finds every slot taken waits for one.
"""
from __future__ import annotations

import copy
import ctypes
import fcntl
import functools
import grp
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty

import nbformat
import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import default
from traitlets.config import Config

from .. import config as course_config
from . import answer_key, cgroups, forkserver, libraries
from ..filelock import exclusive

MEMORY_LIMIT_MB = int(os.environ.get("MODULECRAFT_KERNEL_MEMORY_MB", 2048))
FILE_SIZE_LIMIT_MB = 64
DISK_LIMIT_MB = 256  # the kernel's working folder (as root: a tmpfs of this size)
OPEN_FILES_LIMIT = 512
PROCESS_LIMIT = 96  # per slot user; ipykernel's own threads count too
MAX_SLOTS = 16
SLOT_WAIT_MARGIN = 60  # a kernel waits for a slot up to the notebook time limit plus this (seconds)
STATE_DIR = Path("/run/modulecraft-grader")  # root only: slot locks and kernels' working folders
USER_PREFIX = "modulecraft-grader-"
# Writable by all users: every kernel gets empty ones of its own.
PRIVATE = tuple(p for p in map(Path, ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")) if p.is_dir())
# The top-level folders a kernel sees whole (as root with namespaces): what an interpreter and the programs it
# starts need. Of every other one it sees only what lies on the way to what it needs (`folders_to_rebuild`).
SYSTEM = frozenset(("bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "sys", "usr"))

# What happened to the kernels of this process that the grader should report (the watchdog's kills).
events: list[str] = []
# The sandboxes of this process not closed yet (closed by `ConfinedExecute` whatever the kernel did).
_open: list["Sandbox"] = []
# What kernels started by this process must not see: set by the grader for the course it grades.
hidden: list[Path] = []
# The folder whose `modulecraft` the next kernels import (`answer_key.build`: the chapter's answer key removed), set
# by the grader for the submission it grades.
kernel_modulecraft: Path | None = None


def hide_from_kernels(*paths: Path) -> None:
    hidden[:] = sorted({Path(p).resolve() for p in paths})


def autograde_config() -> Config:
    c = Config()
    c.Execute.kernel_manager_class = "autograder.judging.sandbox.SandboxedKernelManager"
    # Once the last cell has run, a graceful shutdown only makes the kernel save its history and wait: kill it.
    c.Execute.shutdown_kernel = "immediate"
    return c


def running_as_root() -> bool:
    return os.geteuid() == 0


def kernel_needs() -> list[Path]:
    """What a kernel must be able to read: the interpreter, the venv, the repository (editable installs),
    $PYTHONPATH and the modulecraft it imports. Its working folder is its user's own."""
    extra = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).exists()]
    if kernel_modulecraft is not None:
        extra.append(kernel_modulecraft)
    return [Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).parent, course_config.REPO_ROOT, *extra]


KERNEL_PACKAGES = ("reference", "autograder")  # what a kernel imports from the repository


def kernel_packages() -> tuple[str, ...]:
    """The repository's folders a kernel may see: not the reference when it imports a copy with the answer key
    removed (the whole reference is that answer key)."""
    if kernel_modulecraft is None or kernel_modulecraft.resolve() == course_config.REPO_ROOT / "reference":
        return KERNEL_PACKAGES
    return tuple(name for name in KERNEL_PACKAGES if name != "reference")


def repository_secrets() -> list[Path]:
    """Every folder of the repository a kernel does not import from: the course sources with hidden tests, but
    also `.git` (their history), tests, built demos and workspaces; and the probes' source (kernels get the probes
    already imported by their forkserver); in a git worktree, its `.git` file (where the main checkout is). And the
    whole reference wherever this process imports it from (e.g. a copy installed in the venv) when kernels import
    a copy without the answer key."""
    repo = course_config.REPO_ROOT
    secrets = [course_config.COURSE_SOURCE, repo / "autograder" / "probes", repo / ".git"]
    keep = {repo / name for name in kernel_packages()}
    keep |= {repo / path.resolve().relative_to(repo).parts[0] for path in kernel_needs()
             if path.resolve().is_relative_to(repo) and path.resolve() != repo}
    secrets += (p for p in repo.iterdir() if p.is_dir() and p not in keep and p.name != ".git")
    if "reference" not in kernel_packages() and not any(answer_key.REFERENCE.is_relative_to(s) for s in secrets):
        secrets.append(answer_key.REFERENCE)
    return secrets


@functools.cache
def namespaces_available() -> bool:
    """Whether this machine lets root create PID, mount and network namespaces (some containers forbid it)."""
    probe = subprocess.run([*forkserver.NAMESPACES, *forkserver.NO_NEW_PRIVILEGES, "true"], capture_output=True)
    return probe.returncode == 0


def prepare(workers: int) -> None:
    """Create the slot users a pool of `workers` kernels needs (when root), before any worker starts, and make
    sure kernels will be able to start as them."""
    if not running_as_root():
        return
    for slot in range(min(workers, MAX_SLOTS)):
        slot_user(slot)
    if not namespaces_available():
        blocked = blocked_ancestors(kernel_needs())
        if blocked:
            folders = ", ".join(f"{folder} (mode {folder.stat().st_mode & 0o777:o})" for folder in blocked)
            raise PermissionError(
                f"grading kernels run as an unprivileged user, which cannot enter {folders}, and this machine "
                "does not allow the mount namespaces that would expose just what they need. Grade as a regular "
                "user, or put the repository and Python where others can read them (e.g. chmod o+x on the "
                "folders above)")


def slot_user(slot: int) -> pwd.struct_passwd:
    """The unprivileged system user of slot `slot`, created on first use."""
    name = f"{USER_PREFIX}{slot}"
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    with exclusive(_state_dir() / "users.lock"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            try:  # a group of the name left behind (useradd --user-group refuses to make it again)
                group = ["--gid", str(grp.getgrnam(name).gr_gid)]
            except KeyError:
                group = ["--user-group"]
            subprocess.run(["useradd", "--system", *group, "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", "--comment", "modulecraft grading kernel", name],
                           check=True, capture_output=True)
            return pwd.getpwnam(name)


def slot_users() -> set[str]:
    """The slot users this machine has."""
    return {entry.pw_name for entry in pwd.getpwall() if entry.pw_name.startswith(USER_PREFIX)}


def remove_slot_users(names) -> list[str]:
    """Remove the slot users `names` (and their groups), each while holding its slot's lock: a grading run that
    claims the slot meanwhile waits, then makes the user again. The names left: their slot was busy (another
    grading run on this machine), or the user still had processes."""
    left = []
    for name in sorted(names):
        slot = int(name.removeprefix(USER_PREFIX))
        with open(_state_dir() / f"slot-{slot}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                left.append(name)
                continue
            with exclusive(_state_dir() / "users.lock"):
                if subprocess.run(["userdel", name], capture_output=True).returncode != 0:
                    left.append(name)
                else:  # userdel keeps a group useradd did not make (one left by an earlier user of the name)
                    subprocess.run(["groupdel", name], capture_output=True)
    return left


def _state_dir() -> Path:
    STATE_DIR.mkdir(mode=0o711, exist_ok=True)
    STATE_DIR.chmod(0o711)  # kernels must traverse it to reach their working folder, not list it
    return STATE_DIR


def _unreadable_file() -> Path:
    path = _state_dir() / "unreadable"
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o000))
    return path


class Sandbox:
    """The confinement of one kernel: working folder, slot user, limits, namespace set-up, watchdog."""

    def __init__(self, hidden: list[Path], data_dir: str | None):
        self.hidden = sorted({p.resolve() for p in hidden if p.exists()})
        self.as_root = running_as_root()
        self.slot_lock = self.watchdog = self.pid = self.group = self.server_pid = None
        self.closed = False
        self.slot, self.user = self._claim_slot() if self.as_root else (None, None)
        _open.append(self)
        if self.as_root:
            prefix = f"slot{self.slot}-"
            kernel_server()  # started (and STATE_DIR shared with it) before this kernel's folder is mounted
            for stale in STATE_DIR.glob(f"{prefix}*"):  # what a dead grader left in this slot: nobody uses it now
                _remove(stale)
            self.workdir = Path(tempfile.mkdtemp(prefix=prefix + "kernel-", dir=STATE_DIR))
            _mount_tmpfs(self.workdir, f"mode=0700,size={DISK_LIMIT_MB}m")
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="modulecraft-kernel-"))
        if data_dir:  # the chapter's data files that nbgrader copied next to the notebook
            for item in Path(data_dir).iterdir():
                if item.is_file() and item.suffix != ".ipynb":
                    shutil.copy(item, self.workdir / item.name)
        if self.user:
            for path in [self.workdir, *self.workdir.rglob("*")]:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def _claim_slot(self) -> tuple[int, pwd.struct_passwd]:
        """The first free slot, locked for this kernel's lifetime (across all grading processes); when all are
        taken, wait for one (every kernel ends by the notebook time limit)."""
        patience = course_config.notebook_wall_timeout() + SLOT_WAIT_MARGIN
        deadline = time.monotonic() + patience
        while True:
            for slot in range(MAX_SLOTS):
                lock = open(_state_dir() / f"slot-{slot}.lock", "a")
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    lock.close()
                    continue
                self.slot_lock = lock
                return slot, slot_user(slot)
            if time.monotonic() > deadline:
                shortage = SlotShortage(
                    f"all {MAX_SLOTS} grading slots stayed busy for {patience} s (other grading runs on this "
                    "machine, or a stuck one): grade with fewer workers or wait for the other runs to finish")
                shortages.append(shortage)
                raise shortage
            time.sleep(0.2)

    def give(self, path: str) -> None:
        """Hand a file (the connection file) to the kernel's user."""
        if self.user:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def env(self, base) -> dict[str, str]:
        """The kernel's environment: of `base` (the grader's) only what `forkserver.inherited` lets through."""
        env = forkserver.inherited(base)
        home = str(self.workdir)
        env.update(HOME=home, TMPDIR=home, IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib",
                   JUPYTER_RUNTIME_DIR=home, JUPYTER_DATA_DIR=f"{home}/.jupyter",
                   PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if self.user:
            env.update(USER=self.user.pw_name, LOGNAME=self.user.pw_name)
        return env

    def wrap(self, kernel_cmd: list[str]) -> list[str]:
        """The command that starts `kernel_cmd`'s kernel, forked from this process's forkserver, confined."""
        limits = {"RLIMIT_AS": MEMORY_LIMIT_MB * 2**20, "RLIMIT_FSIZE": FILE_SIZE_LIMIT_MB * 2**20,
                  "RLIMIT_NOFILE": OPEN_FILES_LIMIT, "RLIMIT_CPU": course_config.NOTEBOOK_TIMEOUT, "RLIMIT_CORE": 0}
        spec = {"limits": limits, "user": None, "mounts": []}
        if self.as_root:
            limits["RLIMIT_NPROC"] = PROCESS_LIMIT
            spec["user"] = [self.user.pw_uid, self.user.pw_gid]
            self.group = cgroups.Group.for_slot(self.slot, MEMORY_LIMIT_MB * 2**20, PROCESS_LIMIT)
            spec["cgroups"] = self.group.procs_files() if self.group else []
            if namespaces_available():
                spec["mounts"] = self._mounts()
                spec["isolated"] = True  # IPC namespace and keyrings of its own (`kernel.confine.become_kernel`)
        server = kernel_server()
        self.server_pid = server.process.pid  # under it, only this kernel runs (its keeper and the servers wait)
        return server.kernel_command(spec, kernel_cmd)

    def cpu_seconds(self) -> float:
        """The CPU time the kernel and the processes it started have used so far (its server's and keeper's, which
        wait meanwhile, included)."""
        return tree_cpu_seconds(self.server_pid) if self.server_pid else 0.0

    def _mounts(self) -> list[list[str]]:
        """The operations that make the kernel's view of the file system (see the module's docstring), in the
        forkserver's mount namespace. What it must not see is covered first: a folder rebuilt after brings its
        entries back with what covers parts of them."""
        needed = kernel_needs()
        rebuilt = folders_to_rebuild(needed, own=[self.workdir])
        operations = [["hide", folder] for folder in folders_out_of_sight([*needed, self.workdir])]
        for path in self.hidden:
            if path.is_dir():
                operations.append(["hide", path])
            elif path.exists():  # a file: covered by an empty one only root may read
                operations.append(["bind", _unreadable_file(), path])
        for folder, children in rebuilt:
            options = f"mode=1777,size={FILE_SIZE_LIMIT_MB}m" if folder in PRIVATE else "mode=0755,size=64k"
            operations.append(["rebuild", folder, options, *sorted(children)])
        return [[operation, *map(str, args)] for operation, *args in operations]

    def start_watchdog(self, pid: int) -> None:
        """Kill the kernel's process group once the notebook's wall-clock backstop has passed."""
        self.pid = pid

        def expire():
            if self.closed:
                return
            events.append(f"the notebook ran over its {course_config.notebook_wall_timeout()} s time limit "
                          "(wall-clock)")
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.watchdog = threading.Timer(course_config.notebook_wall_timeout(), expire)
        self.watchdog.daemon = True
        self.watchdog.start()

    def close(self) -> None:
        """End the kernel and every process of its slot user, remove all it wrote, then free the slot."""
        if self.closed:
            return
        self.closed = True
        if self.watchdog:
            self.watchdog.cancel()
        if self.pid:
            _kill_group(self.pid)
        if self.user:
            _kill_user(self.user.pw_uid)
        if self.group:
            self.group.close()
        _remove(self.workdir)
        if self.slot_lock:
            self.slot_lock.close()
        _open.remove(self)


class SlotShortage(RuntimeError):
    """No grading slot came free in time: the submission was not graded (and must not be scored)."""


shortages: list[SlotShortage] = []  # raised while nbgrader ran (which reports errors as a failed run)


def raise_shortage() -> None:
    """Raise the slot shortage that stopped the last notebook, if one did: the grader must not score it."""
    if shortages:
        shortage = shortages.pop()
        shortages.clear()
        raise shortage


def close_all() -> None:
    """Close every sandbox this process opened and has not closed (the kernel is gone or must go)."""
    for sandbox in list(_open):
        sandbox.close()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used by process `root` and every process under it, with the children each has reaped (one
    read of every process's /proc stat: this kernel has no /proc/<pid>/task/<tid>/children to walk)."""
    parent, used = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as stat_file:
                    fields = stat_file.read().rsplit(b")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            parent[int(name)], used[int(name)] = int(fields[1]), sum(map(int, fields[11:15]))  # utime..cstime
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0)
        todo += children.get(pid, [])
    return total / CLOCK_TICKS


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the stub's group: its keeper then kills the kernel
    except (ProcessLookupError, PermissionError):
        pass


def _kill_user(uid: int, patience: float = 5.0) -> None:
    """SIGKILL every process of `uid` (a slot user: only its kernel and what that started) until none is left.
    A killed kernel is gone within a few milliseconds: looking again after 1 ms, then twice as long each time up
    to 20 ms (a fixed 20 ms pause kept every notebook's worker idle about 20 ms; now 7-9 ms, measured loaded)."""
    deadline, pause = time.monotonic() + patience, 0.001
    while time.monotonic() < deadline:
        found = False
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        found = True
                        os.kill(int(entry.name), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError):
                    pass
        if not found:
            return
        time.sleep(pause)
        pause = min(2 * pause, 0.02)


_libc = ctypes.CDLL(None, use_errno=True)
MS_SHARED = 1 << 20


def _mount(what: str, source, target: Path, fstype, flags: int, options) -> None:
    """mount(2), raising OSError that says `what` failed."""
    if _libc.mount(source, str(target).encode(), fstype, flags, options) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount_tmpfs(folder: Path, options: str) -> None:
    _mount(f"mount tmpfs on {folder}", b"modulecraft-kernel", folder, b"tmpfs", 0, options.encode())


def _remove(path: Path) -> None:
    """Remove a kernel's folder, unmounting it first if it is a tmpfs (its files go with it)."""
    _libc.umount2(str(path).encode(), forkserver.MNT_DETACH)  # fails (EINVAL) when it is no mount point: fine
    shutil.rmtree(path, ignore_errors=True)


# The indices of the cells of this process's last notebook that ran over the per-cell time limit (nbclient
# interrupted them). Only the grader can tell: a cell's outputs cannot (the interrupt raises KeyboardInterrupt in
# the cell, which a learner's code can raise too, as it can raise an error of any name).
timed_out: list[int] = []
# The outputs of each cell of that notebook that finished, as they were when it finished: a later cell can still
# change a cell's outputs (`update_display`, or a display with the same `display_id`), never these.
finished: dict[int, list] = {}


CPU_POLL = 0.5  # seconds between two looks at a running cell's CPU time
on_cell = None  # called with (cell index, number of cells) as each cell starts: the self-check's progress line


class ConfinedExecute(Execute):
    """nbgrader's Execute, whose kernels' sandboxes are closed however the notebook ends, whose cells are limited in
    the kernel's CPU time (and a wall-clock backstop), and which records the cells it interrupts at the per-cell
    time limit (`timed_out`) and each cell's outputs when it finished (`finished`).

    A kernel that exits or is killed mid-notebook costs only the cells it did not run: the cells that ran keep
    their outputs (and scores), the others get an error output saying why, and the grader reports it."""

    _cell_started = 0.0
    _cell_cpu: float | None = None

    def preprocess_cell(self, cell, resources, index):
        if on_cell is not None:
            on_cell(index, len(self.nb.cells))
        return super().preprocess_cell(cell, resources, index)

    def _get_timeout(self, cell):
        """How long nbclient waits for a cell's reply before asking `_async_handle_timeout`: CPU_POLL at a time."""
        if cell is None:
            return super()._get_timeout(cell)
        self._cell_started, self._cell_cpu = time.monotonic(), None
        return CPU_POLL

    async def _async_handle_timeout(self, timeout, cell=None):
        """A cell still running: interrupt it once it has used `config.CELL_TIMEOUT` seconds of the kernel's CPU
        time, counted from the first look (a cell that ends within CPU_POLL costs no look at /proc), or waited
        out the wall-clock backstop."""
        if cell is not None:
            sandbox = getattr(self.km, "sandbox", None)
            cpu = sandbox.cpu_seconds() if sandbox else 0.0
            self._cell_cpu = cpu if self._cell_cpu is None else self._cell_cpu
            if (cpu - self._cell_cpu < course_config.CELL_TIMEOUT
                    and time.monotonic() - self._cell_started < course_config.cell_wall_timeout()):
                return None  # nbclient waits another CPU_POLL
            timed_out.append(next(index for index, other in enumerate(self.nb.cells) if other is cell))
        return await super()._async_handle_timeout(timeout, cell)

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        finished[kwargs["cell_index"]] = copy.deepcopy(kwargs["cell"].outputs)

    def preprocess(self, nb, resources, km=None):
        timed_out.clear()
        finished.clear()
        try:
            return super().preprocess(nb, resources, km=km)
        except DeadKernelError:
            events.append(kernel_exit_reason())
            _mark_unrun(nb)
            return nb, resources
        finally:
            close_all()


def kernel_exit_reason() -> str:
    watchdog = [event for event in events if "time limit" in event]
    if watchdog:
        return watchdog[0]
    return "the kernel exited or died while running the notebook (sys.exit/os._exit, a crash, or a resource limit)"


KERNEL_GONE = "KernelGone"  # the ename of the error output given to cells the kernel did not finish


def _mark_unrun(nb) -> None:
    """Give the cell the kernel ended in, and every code cell after it, an error output: nbgrader must not
    score them as passed. (nbclient numbers a cell as soon as the kernel starts running it.)"""
    started = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.get("execution_count")]
    first_unfinished = started[-1] if started else 0
    for index, cell in enumerate(nb.cells[first_unfinished:], first_unfinished):
        if cell.cell_type == "code":
            why = ("the kernel ended while this cell ran" if index == first_unfinished
                   else "not run: the kernel had ended")
            cell.setdefault("outputs", []).append(nbformat.v4.new_output(
                "error", ename=KERNEL_GONE, evalue=why, traceback=[f"{KERNEL_GONE}: {why}"]))


_servers: dict[Path | None, forkserver.Server] = {}  # this process's forkservers, by the modulecraft they preload
SERVERS_KEPT = 3  # chapters graded in turn keep their servers; the least recently used beyond this one is stopped


def kernel_server() -> forkserver.Server:
    """This process's forkserver for the kernels' modulecraft (`kernel_modulecraft`), started on first call (a forked
    grading worker starts its own: a server serves one kernel at a time). A worker calls it as it is prepared:
    the server imports while the worker gets on."""
    server = _servers.pop(kernel_modulecraft, None)
    if server is None or not server.alive():
        namespaces = running_as_root() and namespaces_available()
        if namespaces:
            share_state_dir()  # before the server's mount namespace is made: it must receive the kernels' folders
        server = forkserver.Server(namespaces, kernel_modulecraft, libraries.mounts() if namespaces else [])
    _servers[kernel_modulecraft] = server  # the most recently used last
    mine = [key for key, other in _servers.items() if other.pid == os.getpid()]
    for key in mine[:-SERVERS_KEPT]:
        _servers.pop(key).stop()
    return server


def share_state_dir() -> None:
    """Make STATE_DIR a shared mount point (once per machine), so that the kernels' folders mounted under it
    appear in the forkservers' mount namespaces too, made earlier. Before any kernel folder is mounted: one
    mounted before would be hidden under the new mount point."""
    state = _state_dir()
    with exclusive(state / "users.lock"):
        entries = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        mine = [fields for fields in entries if fields[4] == str(state)]
        if mine and any(tag.startswith("shared:") for tag in mine[-1][6:mine[-1].index("-")]):
            return
        if not mine:
            _mount(f"bind {state} onto itself", str(state).encode(), state, None, forkserver.MS_BIND, None)
        _mount(f"make {state} shared", None, state, None, MS_SHARED, None)


def blocked_ancestors(needed: list[Path]) -> dict[Path, set[str]]:
    """Folders others cannot traverse (or read, for a needed folder itself) on the way to `needed`,
    each with the names of the entries the kernel needs from it."""
    blocked: dict[Path, set[str]] = {}
    for path in needed:
        path = path.resolve()
        chain = [*reversed(path.parents), path]
        for folder, child in zip(chain, chain[1:] + [None]):
            mode = folder.stat().st_mode
            if child is not None and not mode & stat.S_IXOTH:
                blocked.setdefault(folder, set()).add(child.name)
            elif child is None and folder.is_dir() and (mode & 0o005) != 0o005:
                blocked.setdefault(folder, set()).update(os.listdir(folder))
    return blocked


def folders_to_rebuild(needed: list[Path], own: list[Path] = ()) -> list[tuple[Path, set[str]]]:
    """The folders a kernel gets rebuilt with only some of their entries, top-down, each with those entries:
    every folder outside the system's (`SYSTEM`) on the way to what it needs and to its `own` folders (its
    working folder), so that it sees nothing else there (other clones, worktrees, grading folders, kernels);
    folders others cannot traverse on the way to what it needs, even system ones; and the shared /tmp-like
    folders, which every kernel gets empty (but for what it needs in them)."""
    folders = blocked_ancestors(needed)
    whole = [path.resolve() for path in [*needed, *own]]  # seen whole (a venv inside the repository too)
    for path in [*whole, *PRIVATE]:
        chain = [*reversed(path.resolve().parents), path.resolve()]
        for folder, child in zip(chain[1:], chain[2:]):  # below the root
            if any(folder.is_relative_to(seen) for seen in whole):
                break
            if folder.parts[1] not in SYSTEM or folder in PRIVATE:
                folders.setdefault(folder, set()).add(child.name)
    for private in PRIVATE:
        folders.setdefault(private, set())
    return sorted(folders.items(), key=lambda item: len(item[0].parts))


def folders_out_of_sight(needed: list[Path]) -> list[Path]:
    """The top-level folders a kernel does not see at all: neither the system's nor on the way to what it needs
    (nor a shared /tmp-like folder, which it gets empty)."""
    in_view = SYSTEM | {path.resolve().parts[1] for path in [*needed, *PRIVATE] if len(path.resolve().parts) > 1}
    return sorted(entry for entry in Path("/").iterdir()
                  if entry.name not in in_view and entry.is_dir() and not entry.is_symlink())


class PromptKernelClient(AsyncKernelClient):
    """jupyter_client's client, ready as soon as its kernel is.

    Its sockets connect before the kernel has bound its own, and ZeroMQ tries again every 100 ms by default:
    here every 5 ms. And jupyter_client's `wait_for_ready` ends by reading IOPub until no message came for
    0.2 s. nbclient needs no such flush: it reads only the messages whose parent is the request it sent.
    Ready here means what jupyter_client checks first: the kernel answered `kernel_info` and IOPub is
    connected (a message arrived on it, e.g. the kernel's welcome to a new subscriber)."""

    def start_channels(self, *args, **kwargs) -> None:
        self.context.setsockopt(zmq.RECONNECT_IVL, 5)  # the default of the sockets made next (the manager's own)
        super().start_channels(*args, **kwargs)

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
                if reply["msg_type"] == "kernel_info_reply":
                    await self.iopub_channel.get_msg(timeout=0.2)
                    self._handle_kernel_info_reply(reply)
                    return
            except Empty:
                pass
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")

    wait_for_ready = _async_wait_for_ready


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager that starts every kernel inside a `Sandbox`."""

    sandbox: Sandbox | None = None

    @default("client_factory")
    def _client_factory_default(self) -> type:
        return PromptKernelClient

    async def _async_pre_start_kernel(self, **kw):
        self.sandbox = Sandbox(hidden=[*repository_secrets(), *hidden], data_dir=kw.get("cwd"))
        self.connection_file = str(self.sandbox.workdir / "kernel.json")
        # Unix sockets in the kernel's own folder, not TCP ports: a port one grading process picked for its
        # kernel can be taken by another's before its kernel binds it ("Address already in use").
        self.transport, self.ip = "ipc", str(self.sandbox.workdir / "kernel")
        kw["cwd"] = str(self.sandbox.workdir)
        kw["env"] = self.sandbox.env(kw.get("env") or os.environ)
        kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
        # No input history file (nothing of a kernel outlives it). And no
        # sleep before each cell's reply (ipykernel's stopgap for output arriving late: 0.5 ms a cell; nbclient
        # waits for the cell's idle status on IOPub, sent after all its output, anyway).
        kernel_cmd = [*kernel_cmd, "--HistoryManager.enabled=False", "--Kernel._execute_sleep=0"]
        self.sandbox.give(self.connection_file)
        return self.sandbox.wrap(kernel_cmd), kw

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        await super()._async_launch_kernel(kernel_cmd, **kw)
        self.sandbox.start_watchdog(self.provisioner.process.pid)

    async def _async_wait(self, pollinterval: float = 0.005) -> None:
        """Wait for the killed kernel's stub to exit, looking every 5 ms (jupyter_client: 100 ms, per notebook)."""
        await super()._async_wait(pollinterval)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None

    # AsyncKernelManager binds `cleanup_resources` to the base class's coroutine (what nbclient calls for a dead
    # kernel): bind it to ours. `ConfinedExecute` closes the sandbox anyway; this only closes it sooner.
    cleanup_resources = _async_cleanup_resources

