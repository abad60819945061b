"""Loading a file in a child process under an address-space and a CPU-time limit: bounds asserted by limits, not
by timings. The child prints what ``modulecraft.load`` raised (or ``loaded``); a crash or a killed child shows as
its return code."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

MiB = 2**20

_CHILD = """
import sys
import modulecraft
try:
    modulecraft.load(sys.argv[1])
except Exception as error:
    print(type(error).__name__ + ": " + str(error))
else:
    print("loaded")
"""


class Outcome(NamedTuple):
    returncode: int  # negative: killed by that signal (SIGXCPU past the CPU limit, SIGSEGV for a crash)
    output: str


def load_limited(path: Path, memory: int = 400 * MiB, cpu_seconds: int = 20) -> Outcome:
    """``modulecraft.load(path)`` in a fresh interpreter that may map at most ``memory`` bytes and use at most
    ``cpu_seconds`` of CPU (one BLAS thread, so that the address space is the interpreter's own)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                            preexec_fn=limit, timeout=20 * cpu_seconds)
    return Outcome(result.returncode, (result.stdout + result.stderr).strip()[-2000:])
