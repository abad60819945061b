"""Benchmark (not a test): draw a 1,000-module torch model to SVG with modulecraft.viz and with torchview.

    .venv/bin/python benchmarks/bench_viz.py [--repeat 5]

Each produces an SVG of the whole model with Graphviz's dot. They draw different things (modulecraft.viz: the
registration tree, each module with its parameters and buffers; torchview: the execution graph of one forward),
so the numbers say what an instructor waits for, not which layout is harder. ``draw_tree`` lists state as
one-line summaries on a tree this big (its default, ``state="auto"``); the ``state="table"`` line shows what a
row per parameter and buffer costs. The drawers take turns within each repetition, so a busy machine slows them
alike. CPU times include dot's layout: torchview's dot is a child that ends, modulecraft.viz's a shared one read
from /proc (Linux). torchview is optional: install it with ``pip install --no-deps torchview`` (``--no-deps`` so
it cannot pull another torch).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import time


def thousand_module_model():
    """Root + 111 blocks of 9 modules (block + 8 layers) = 1,000 modules."""
    from torch import nn

    def block():
        return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(),
                             nn.Dropout(0.1), nn.Linear(16, 16), nn.Identity())

    model = nn.Sequential(*[block() for _ in range(111)])
    assert len(list(model.modules())) == 1000
    return model.eval()


def cpu_seconds() -> float:
    """CPU time of this process, its finished children (torchview's dot) and modulecraft.viz's shared dot: what
    the drawing costs on a busy machine."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime + shared_dot_cpu_seconds()


def shared_dot_cpu_seconds() -> float:
    """CPU time so far of the ``dot`` that modulecraft.viz keeps running between drawings: a child that has not
    ended, so RUSAGE_CHILDREN does not count it. Read from Linux's /proc (0 elsewhere, or before it starts)."""
    from modulecraft.viz.render import _dot

    process = _dot.process
    try:
        with open(f"/proc/{process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name: field 3 (state) onwards
    except (AttributeError, OSError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # fields 14 and 15: utime, stime


def timed(drawers: dict, repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per drawer: median wall seconds, median CPU seconds over ``repeat`` turns, and the SVG size in characters."""
    walls, cpus = {what: [] for what in drawers}, {what: [] for what in drawers}
    sizes = {}
    for _ in range(repeat):
        for what, draw in drawers.items():
            wall, cpu = time.perf_counter(), cpu_seconds()
            sizes[what] = len(draw())
            walls[what].append(time.perf_counter() - wall)
            cpus[what].append(cpu_seconds() - cpu)
    return {what: (statistics.median(walls[what]), statistics.median(cpus[what]), sizes[what]) for what in drawers}


def draw_with_modulecraft(model, **options):
    from modulecraft.viz import draw_tree
    return draw_tree(model, **options).svg()


def draw_with_torchview(model):
    import torch
    from torchview import draw_graph
    graph = draw_graph(model, input_data=torch.zeros(2, 16), depth=float("inf"), expand_nested=True,
                       save_graph=False)
    return graph.visual_graph.pipe(format="svg", encoding="utf-8")


def dot_version() -> str:
    return subprocess.run(["dot", "-V"], capture_output=True, text=True).stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    model = thousand_module_model()
    drawers = {
        "modulecraft.viz draw_tree -> SVG": lambda: draw_with_modulecraft(model),
        'draw_tree(state="table") -> SVG': lambda: draw_with_modulecraft(model, state="table"),
    }
    try:
        import torchview  # noqa: F401
    except ImportError:
        print("torchview: not installed (pip install --no-deps torchview)")
    else:
        drawers["torchview draw_graph -> SVG"] = lambda: draw_with_torchview(model)
    load_before = os.getloadavg()[0]
    results = timed(drawers, repeat)
    print(f"1,000-module torch model, median of {repeat}; {platform.python_implementation()} "
          f"{platform.python_version()}, {dot_version()}, {os.cpu_count()} cores, "
          f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    for what, (wall, cpu, size) in results.items():
        print(f"{what:34} {wall:6.2f} s wall, {cpu:6.2f} s CPU (incl. dot)  {size / 1e6:.1f} MB SVG")
    ours, theirs = results["modulecraft.viz draw_tree -> SVG"], results.get("torchview draw_graph -> SVG")
    if theirs:
        print(f"draw_tree vs torchview: {theirs[0] / ours[0]:.1f}x faster in wall time, "
              f"{theirs[1] / ours[1]:.1f}x in CPU time")


if __name__ == "__main__":
    main()
