"""Loading checkpoints: ``modulecraft.load`` beside ``torch.load(weights_only=True)`` (.pt) and
``safetensors.numpy.load_file`` (.safetensors), side by side in one run.

Run: ``.venv/bin/python benchmarks/bench_checkpoints.py [--megabytes 256] [--repeats 5]``. Two state_dicts
(float32 matrices and vectors, int64 counters, as a model's): ``large``, ``--megabytes`` of 4 MiB matrices, where
reading the data dominates, and ``many``, 5,000 small tensors, where the per-tensor work (the pickle, the header)
does. Each is written once in each format to a private temporary folder; every load then reads it from the page
cache, so the time is the loader's, not the disk's.

- Time: best of ``--repeats`` loads per loader, the loaders taking turns, so background load hits both alike;
  the ratio is modulecraft / the reference (goal: at most 1.2).
- Memory: each loader once in a fresh process; its peak resident memory (VmHWM) during the load, above what it
  had before, divided by the file's size (goal: at most 1.1). Pages of a memory-mapped file count while mapped.
"""

from __future__ import annotations

import argparse
import os
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


def child(loader: str, path: str) -> None:
    """Print the peak resident memory (bytes) the load added, in this fresh process."""
    load = _loaders()[loader]
    before = _peak_kib()
    loaded = load(path)
    print((_peak_kib() - before) * 1024)
    del loaded


def peak_memory(loader: str, path: Path) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, __file__, "--child", loader, str(path)], capture_output=True,
                            text=True, env=env, check=True)
    return int(result.stdout.split()[-1])


def best_times(folder: Path, repeats: int) -> dict[str, float]:
    loaders = _loaders()
    best = {name: float("inf") for name in loaders}
    for _ in range(repeats):
        for ours, reference, file in PAIRS:
            for name in (ours, reference):
                start = time.perf_counter()
                loaded = loaders[name](folder / file)
                best[name] = min(best[name], time.perf_counter() - start)
                del loaded
    return best


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
        print(f"{'state_dict':10s} {'loader':32s} {'file MB':>8s} {'best s':>8s} {'time ratio':>10s} {'peak/file':>10s}")
        for scenario, state in scenarios.items():
            folder = Path(scratch) / scenario
            write_files(folder, state)
            times = best_times(folder, args.repeats)
            for ours, reference, file in PAIRS:
                size = (folder / file).stat().st_size
                for name in (ours, reference):
                    ratio = f"{times[ours] / times[reference]:10.2f}" if name == ours else ""
                    memory = peak_memory(name, folder / file) / size
                    print(f"{scenario:10s} {name:32s} {size / 1e6:8.1f} {times[name]:8.3f} {ratio:>10s} {memory:10.2f}")


if __name__ == "__main__":
    main()
