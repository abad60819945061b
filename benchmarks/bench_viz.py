"""Benchmark (not a test): draw a 1,000-module torch model to SVG with modulecraft.viz and with torchview.

    .venv/bin/python benchmarks/bench_viz.py [--repeat 3]

Both produce an SVG of the whole model with Graphviz's dot. They draw different things (modulecraft.viz: the
registration tree with parameter tables; torchview: the execution graph of one forward), so the numbers say
what an instructor waits for, not which layout is harder. torchview is optional: install it with
``pip install --no-deps torchview`` (``--no-deps`` so it cannot pull another torch).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
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
    """CPU time of this process and its finished children (dot): what the drawing costs on a busy machine."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(draw, repeat: int) -> tuple[float, float, int]:
    """Median wall seconds and median CPU seconds over ``repeat`` runs, and the SVG size in characters."""
    walls, cpus, size = [], [], 0
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), cpu_seconds()
        size = len(draw())
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_seconds() - cpu)
    return statistics.median(walls), statistics.median(cpus), size


def draw_with_modulecraft(model):
    from modulecraft.viz import draw_tree
    return draw_tree(model).svg()


def draw_with_torchview(model):
    import torch
    from torchview import draw_graph
    graph = draw_graph(model, input_data=torch.zeros(2, 16), depth=float("inf"), expand_nested=True,
                       save_graph=False)
    return graph.visual_graph.pipe(format="svg", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    model = thousand_module_model()
    print(f"1,000-module torch model, median of {repeat}; {platform.python_implementation()} "
          f"{platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    report("modulecraft.viz draw_tree -> SVG", *timed(lambda: draw_with_modulecraft(model), repeat))
    try:
        import torchview  # noqa: F401
    except ImportError:
        print("torchview: not installed (pip install --no-deps torchview)")
        return
    report("torchview draw_graph -> SVG", *timed(lambda: draw_with_torchview(model), repeat))


def report(what: str, wall: float, cpu: float, size: int) -> None:
    print(f"{what:34} {wall:6.2f} s wall, {cpu:6.2f} s CPU (incl. dot)  {size / 1e6:.1f} MB SVG")

if __name__ == "__main__":
    main()
