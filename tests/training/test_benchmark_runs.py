"""The training benchmark's operations run on both libraries (timings are not tested: run the script for those)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from modulecraft import nn

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_training.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_training", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_operation_runs_and_memory_is_measured(bench):
    for name in ("torch", "modulecraft"):
        library = bench.Library(name)
        for build, _number, _target in bench.TIMED.values():
            build(library)()
        assert library.backward_peak_bytes([64, 32, 10], 16) > 64 * 32 * 4, name  # at least the weight's gradient


def test_an_older_tree_is_timed_in_a_worker_that_imports_that_tree(bench, tmp_path):
    """``--against REV``: the worker imports the package extracted from REV, not this checkout's (which the editable
    install gives any process that does not put the extracted folder first), and answers what it is asked."""
    label, folder = bench._extract("HEAD", tmp_path)
    worker = bench.Worker(label, str(folder), cpu_time=True)
    try:
        assert Path(worker.modulecraft).is_relative_to(tmp_path)
        assert worker.ask(time="Linear(4, 4) call + backward", number=1)["seconds"] > 0
        assert worker.ask(time="no such operation", number=1)["error"] == "KeyError: 'no such operation'"
    finally:
        worker.close()


def test_a_linear_layers_weight_gradient_has_the_weights_layout_as_in_torch():
    """torch stores a gradient in its parameter's layout; a transposed (Fortran-order) gradient makes every
    optimizer step stride across memory: SGD on a 256x784 weight took 0.95 ms instead of 0.17 ms."""
    layers = {"torch": torch.nn.Linear(784, 256), "modulecraft": nn.Linear(784, 256)}
    layers["torch"](torch.ones(128, 784)).sum().backward()
    layers["modulecraft"](np.ones((128, 784), dtype=np.float32)).sum().backward()
    assert layers["torch"].weight.grad.is_contiguous()
    assert layers["modulecraft"].weight.grad.flags["C_CONTIGUOUS"]
