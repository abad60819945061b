"""The same Module operations on torch.nn and modulecraft.nn, side by side.

Run: ``.venv/bin/python benchmarks/bench_reference.py [--quick]``. Each operation is timed with ``timeit``
(best of several repeats, the two libraries taking turns, so background load counts as little as
possible and hits both alike) and the table shows the time
per operation for each library and the ratio modulecraft / torch (below 1: modulecraft is faster). At
this level both are plain Python walking dictionaries, so the target is a ratio at or under 1.
"""

from __future__ import annotations

import argparse
import copy
import sys
import timeit
from collections.abc import Callable
from types import ModuleType

import numpy as np


def _libraries() -> dict[str, tuple[ModuleType, Callable]]:
    import torch

    import modulecraft

    return {
        "torch": (torch.nn, lambda *shape: torch.zeros(*shape)),
        "modulecraft": (modulecraft.nn, lambda *shape: np.zeros(shape, dtype=np.float32)),
    }


def tree(nn, branches: int = 100, leaves: int = 9):
    """A two-level tree of Linear layers: 1 + branches + branches * leaves modules (1,001 by default)."""
    return nn.Sequential(*[nn.Sequential(*[nn.Linear(4, 4) for _ in range(leaves)]) for _ in range(branches)])


def wide(nn, width: int = 1000):
    return nn.Sequential(*[nn.Linear(2, 2) for _ in range(width)])


def deep(nn, depth: int = 200):
    root = nn.Linear(2, 2)
    node = root
    for _ in range(depth - 1):
        node.child = nn.Linear(2, 2)
        node = node.child
    return root


def nested(nn):
    """``m.a.b.weight``: two attribute hops through ``_modules``, one through ``_parameters``."""
    m = nn.Module()
    m.a = nn.Module()
    m.a.b = nn.Linear(2, 2)
    return m


def with_forward_hooks(nn, count: int = 3):
    m = nn.Identity()
    for _ in range(count):
        m.register_forward_hook(lambda module, args, output: None)
    return m


def cases(nn, zeros) -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (one operation, how many operations one timing runs)."""
    reads = nested(nn)
    wide_model, deep_model, big = wide(nn), deep(nn), tree(nn)
    plain, hooked = nn.Identity(), with_forward_hooks(nn)
    x = zeros(2, 2)
    state = big.state_dict()

    def read_nested_100k():
        m = reads
        for _ in range(100_000):
            m.a.b.weight

    return {
        "build a 1,001-module tree": (lambda: tree(nn), 1),
        "100,000 reads of m.a.b.weight": (read_nested_100k, 1),
        "named_parameters, wide (1,000 children)": (lambda: list(wide_model.named_parameters()), 10),
        "named_parameters, deep (200 levels)": (lambda: list(deep_model.named_parameters()), 10),
        "call a hook-free module": (lambda: plain(x), 10_000),
        "call a module with 3 forward hooks": (lambda: hooked(x), 10_000),
        "deepcopy of the 1,001-module tree": (lambda: copy.deepcopy(big), 1),
        "state_dict() of the 1,001-module tree": (lambda: big.state_dict(), 5),
        "load_state_dict() into it": (lambda: big.load_state_dict(state), 5),
    }


def _format_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.1f} ns"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run, noisier numbers)")
    args = parser.parse_args(argv)
    repeat = 2 if args.quick else 5

    # The libraries take turns within each repeat, so a burst of load on a shared machine hits both alike.
    prepared = {library: cases(nn, zeros) for library, (nn, zeros) in _libraries().items()}
    results: dict[str, dict[str, float]] = {}
    for name in prepared["torch"]:
        times = results[name] = {library: float("inf") for library in prepared}
        for _ in range(repeat):
            for library, library_cases in prepared.items():
                operation, number = library_cases[name]
                times[library] = min(times[library], timeit.timeit(operation, number=number) / number)

    width = max(map(len, results))
    print(f"{'operation':<{width}}  {'torch':>11}  {'modulecraft':>11}  {'ratio':>6}")
    for name, times in results.items():
        ratio = times["modulecraft"] / times["torch"]
        print(f"{name:<{width}}  {_format_seconds(times['torch'])}  {_format_seconds(times['modulecraft'])}"
              f"  {ratio:6.2f}")
    print(f"\nratio = modulecraft / torch, best of {repeat} repeats; numpy {np.__version__}, Python "
          f"{sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
