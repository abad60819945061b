"""One share of the machine per grading kernel: memory and process count for the kernel and all it starts.

`RLIMIT_AS` bounds one process, and a kernel may start others (each with its own limit); as root, the
per-user process limit is not enforced either. A control group counts them together: the kernel joins its
slot's group as it starts (before dropping to the slot user, `kernel.confine.become_kernel`), its children are born
in it, and the kernel's memory (page cache of its tmpfs folder included) and task count are capped as a whole.

Linux's cgroup v1 memory and pids hierarchies, as this machine mounts them under /sys/fs/cgroup, and cgroup v2's
unified hierarchy, are both used when root may create groups there; elsewhere (not root, containers without
them) `Group.for_slot` returns None and the per-process limits remain.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "modulecraft-grader-slot"


class Group:
    """The control groups of one slot: made (or emptied) when a kernel starts in the slot, removed after it."""

    def __init__(self, folders: list[Path]):
        self.folders = folders

    @classmethod
    def for_slot(cls, slot: int, memory_bytes: int, tasks: int) -> "Group | None":
        try:
            folders = _make(f"{PREFIX}{slot}", memory_bytes, tasks)
        except OSError:
            return None
        return cls(folders) if folders else None

    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def close(self, patience: float = 5.0) -> None:
        """Kill whatever is left in the groups and remove them."""
        deadline = time.monotonic() + patience
        for folder in self.folders:
            while folder.exists() and time.monotonic() < deadline:
                for pid in _pids(folder):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    folder.rmdir()
                except OSError:  # still busy: processes are dying
                    time.sleep(0.01)


def _own(hierarchy: str) -> Path | None:
    """This process's group in a v1 hierarchy (`memory`, `pids`), or in the unified one (`""`)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (hierarchy and hierarchy in controllers.split(",")) or (not hierarchy and controllers == ""):
            return Path(path.lstrip("/"))
    return None


def _make(name: str, memory_bytes: int, tasks: int) -> list[Path]:
    if os.geteuid() != 0:
        return []
    memory, pids = ROOT / "memory", ROOT / "pids"
    if (memory / "memory.limit_in_bytes").exists() and (pids / "cgroup.procs").exists():  # cgroup v1
        folders = [memory / (_own("memory") or "") / name, pids / (_own("pids") or "") / name]
        settings = [{"memory.limit_in_bytes": memory_bytes}, {"pids.max": tasks}]
    elif (ROOT / "cgroup.controllers").exists():  # cgroup v2: a sibling of ours, so that ours keeps its processes
        parent = ROOT / (_own("") or "")
        parent = parent.parent if parent != ROOT else parent
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            return []
        folders = [parent / name]
        settings = [{"memory.max": memory_bytes, "memory.swap.max": 0, "pids.max": tasks}]
    else:
        return []
    for folder, values in zip(folders, settings):
        if folder.exists():
            Group([folder]).close()  # what a dead grader left in this slot
        folder.mkdir()
        for key, value in values.items():
            if (folder / key).exists():
                (folder / key).write_text(str(value))
    return folders


def _pids(folder: Path) -> list[int]:
    try:
        return [int(line) for line in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []
