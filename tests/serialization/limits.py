"""Loading a file in a child process under an address-space and a CPU-time limit: bounds asserted by limits, not
by timings. The child prints what ``modulecraft.load`` raised (or ``loaded``), then the resident memory the load
added at its peak and the CPU time it took; a crash or a killed child shows as its return code."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

MiB = 2**20

_CHILD = """
import sys, time
import modulecraft

def resident(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field))

before, start = resident("VmRSS:"), time.process_time()
try:
    modulecraft.load(sys.argv[1])
except Exception as error:
    print(type(error).__name__ + ": " + str(error))
else:
    print("loaded")
print(resident("VmHWM:") - before, time.process_time() - start, file=sys.stderr)
"""


class Outcome(NamedTuple):
    returncode: int  # negative: killed by that signal (SIGXCPU past the CPU limit, SIGSEGV for a crash)
    output: str
    peak: int | None = None  # bytes of resident memory the load added at its peak
    cpu: float | None = None  # seconds


def load_limited(path: Path, memory: int = 400 * MiB, cpu_seconds: int = 20) -> Outcome:
    """``modulecraft.load(path)`` in a fresh interpreter that may map at most ``memory`` bytes and use at most
    ``cpu_seconds`` of CPU (one BLAS thread, so that the address space is the interpreter's own)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                            preexec_fn=limit, timeout=20 * cpu_seconds)
    lines = result.stderr.strip().splitlines()
    measured = lines[-1].split() if result.returncode == 0 and lines else []
    if len(measured) == 2:
        output = "\n".join([result.stdout, *lines[:-1]]).strip()[-2000:]
        return Outcome(0, output, int(measured[0]), float(measured[1]))
    return Outcome(result.returncode, (result.stdout + result.stderr).strip()[-2000:])
