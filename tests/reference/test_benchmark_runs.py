"""The benchmark's operations still run on modulecraft (timings are not tested: run the script for those)."""

import importlib.util
from pathlib import Path

import numpy as np

from modulecraft import nn

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_reference.py"


def test_every_benchmark_operation_runs_on_modulecraft():
    spec = importlib.util.spec_from_file_location("bench_reference", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    operations = bench.cases(nn, lambda *shape: np.zeros(shape, dtype=np.float32))
    assert len(operations) == 9
    for name, (operation, _number) in operations.items():
        operation()
    assert len(list(bench.tree(nn).modules())) == 1001
