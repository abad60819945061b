"""Loading checkpoints: ``modulecraft.load`` beside ``torch.load(weights_only=True)`` (.pt) and
``safetensors.numpy.load_file`` (.safetensors), side by side in one run.

Run: ``.venv/bin/python benchmarks/bench_checkpoints.py [--megabytes 256] [--repeats 5]``. Two state_dicts
(float32 matrices and vectors, int64 counters, as a model's): ``large``, ``--megabytes`` of 4 MiB matrices, where
reading the data dominates, and ``many``, 5,000 small tensors, where the per-tensor work (the pickle, the header)
does. Each is written once in each format to a private temporary folder; every load then reads it from the page
cache, so the time is the loader's, not the disk's.

- Time: each load runs in a fresh process (a program loads its checkpoint once), the loaders taking turns over
  ``--repeats`` rounds so that background load hits them alike. ``cold``: the median of the first load in each
  process; ``warm``: the best of three more loads in the same process, once the allocator holds freed memory.
  Timing loaders one after another in one process measures instead which loader inherits whose freed memory
  (measured here: either can come out twice as fast as the other, depending on the order). The ratios are
  modulecraft / the reference (goal: at most 1.2).
- Memory: the first load's peak resident memory (VmHWM) above what the process had before, divided by the
  file's size (goal: at most 1.1, for files large enough that the interpreter's own allocations do not count).
  Pages of a memory-mapped file count while mapped.
- Page faults: the minor faults of the first load and of the last, per MB of file. They do not depend on how
  loaded the machine is, and explain the cold ratio: a first load touches memory the process never had (a
  fault per page: 4 kB for torch's storages, 2 MB huge pages for modulecraft's one buffer), a later one reuses
  what the allocator kept from the load before.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MiB = 2**20


def _loaders():
    import safetensors.numpy
    import torch

    import modulecraft

    return {
        "modulecraft .pt": lambda path: modulecraft.load(path),
        "torch.load(weights_only=True)": lambda path: torch.load(path, weights_only=True),
        "modulecraft .safetensors": lambda path: modulecraft.load(path),
        "safetensors.numpy.load_file": lambda path: safetensors.numpy.load_file(path),
    }


PAIRS = [("modulecraft .pt", "torch.load(weights_only=True)", "model.pt"),
         ("modulecraft .safetensors", "safetensors.numpy.load_file", "model.safetensors")]


def state_dict(blocks: int, width: int) -> dict[str, np.ndarray]:
    """``blocks`` blocks of a ``width`` x ``width`` float32 weight, a bias and an int64 counter."""
    rng = np.random.default_rng(0)
    state = {}
    for block in range(blocks):
        state[f"{block}.weight"] = rng.standard_normal((width, width), dtype=np.float32)
        state[f"{block}.bias"] = rng.standard_normal(width, dtype=np.float32)
        state[f"{block}.num_batches_tracked"] = np.array(block, dtype=np.int64)
    return state


def write_files(folder: Path, state: dict[str, np.ndarray]) -> None:
    import safetensors.numpy
    import torch

    folder.mkdir()
    torch.save({key: torch.from_numpy(value) for key, value in state.items()}, folder / "model.pt")
    safetensors.numpy.save_file(state, folder / "model.safetensors")


def _peak_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


_KERNEL_COUNTERS = ("compact_stall", "thp_fault_alloc")


def _vmstat() -> dict[str, int]:
    """The kernel's counts (machine-wide) of direct compactions (a fault waiting while the kernel moves pages to
    free a 2 MB block) and of huge pages given on a fault."""
    with open("/proc/vmstat") as vmstat:
        found = dict(line.split() for line in vmstat)
    return {name: int(found.get(name, 0)) for name in _KERNEL_COUNTERS}


def child(loader: str, path: str) -> None:
    """In this fresh process: the first load's time, the peak memory, the page faults and the kernel's time and
    compactions it added, then the best time of three more and the faults of the last."""
    load = _loaders()[loader]
    before = _peak_kib()
    usage, counters = resource.getrusage(resource.RUSAGE_SELF), _vmstat()
    start = time.perf_counter()
    loaded = load(path)
    cold = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cold_faults = after.ru_minflt - usage.ru_minflt
    kernel = {"cold_system": after.ru_stime - usage.ru_stime,
              **{name: count - counters[name] for name, count in _vmstat().items()}}
    peak = (_peak_kib() - before) * 1024
    del loaded
    warm = float("inf")
    for _ in range(3):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        loaded = load(path)
        warm = min(warm, time.perf_counter() - start)
        warm_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        del loaded
    print(json.dumps({"cold": cold, "warm": warm, "peak": peak, "cold_faults": cold_faults,
                      "warm_faults": warm_faults, **kernel}))


def measure(loader: str, path: Path) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, __file__, "--child", loader, str(path)], capture_output=True,
                            text=True, env=env, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def measurements(folder: Path, repeats: int) -> dict[str, dict[str, float]]:
    """Per loader: the median cold time and faults, the best warm time, the median peak memory and warm faults,
    over ``repeats`` processes."""
    runs = {name: [] for pair in PAIRS for name in pair[:2]}
    for _ in range(repeats):
        for ours, reference, file in PAIRS:
            for name in (ours, reference):
                runs[name].append(measure(name, folder / file))
    return {name: {"cold": statistics.median(run["cold"] for run in found),
                   "warm": min(run["warm"] for run in found),
                   **{key: statistics.median(run[key] for run in found)
                      for key in ("peak", "cold_faults", "warm_faults", "cold_system", *_KERNEL_COUNTERS)}}
            for name, found in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    scenarios = {"large": state_dict(max(1, args.megabytes // 4), 1024), "many": state_dict(1667, 16)}
    with tempfile.TemporaryDirectory(prefix="bench_checkpoints_") as scratch:
        print(f"{'state_dict':10s} {'loader':30s} {'file MB':>7s} {'cold s':>7s} {'ratio':>6s} {'warm s':>7s} "
              f"{'ratio':>6s} {'peak/file':>9s} {'faults/MB cold':>14s} {'warm':>5s} {'kernel s':>8s} "
              f"{'compactions':>11s} {'huge pages':>10s}")
        for scenario, state in scenarios.items():
            folder = Path(scratch) / scenario
            write_files(folder, state)
            found = measurements(folder, args.repeats)
            for ours, reference, file in PAIRS:
                size = (folder / file).stat().st_size
                for name in (ours, reference):
                    times = found[name]
                    ratios = [f"{times[kind] / found[reference][kind]:6.2f}" if name == ours else "" for kind in
                              ("cold", "warm")]
                    print(f"{scenario:10s} {name:30s} {size / 1e6:7.1f} {times['cold']:7.3f} {ratios[0]:>6s} "
                          f"{times['warm']:7.3f} {ratios[1]:>6s} {times['peak'] / size:9.2f} "
                          f"{times['cold_faults'] * 1e6 / size:14.0f} {times['warm_faults'] * 1e6 / size:5.0f} "
                          f"{times['cold_system']:8.3f} {times['compact_stall']:11.0f} "
                          f"{times['thp_fault_alloc']:10.0f}")


if __name__ == "__main__":
    main()
