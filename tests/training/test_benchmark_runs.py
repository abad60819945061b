"""The training benchmark's operations run on both libraries (timings are not tested: run the script for those)."""

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_training.py"


def test_every_benchmark_operation_runs_and_memory_is_measured():
    spec = importlib.util.spec_from_file_location("bench_training", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name in ("torch", "modulecraft"):
        library = bench.Library(name)
        for build, _number, _target in bench.TIMED.values():
            build(library)()
        assert library.backward_peak_bytes([64, 32, 10], 16) > 64 * 32 * 4, name  # at least the weight's gradient
