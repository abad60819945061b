"""Training with modulecraft and with torch, side by side: step times, backward-hook overhead, backward memory.

Run: ``.venv/bin/python benchmarks/bench_training.py [--quick] [--cpu-time] [--against REVISION ...]``. Each library
runs in a worker process of its own, single-threaded (the BLAS thread variables are set before numpy loads;
``torch.set_num_threads(1)``); the libraries take turns within each repeat, and each time is the best of the repeats:
many short ones (a few ms each), so that on a shared machine the best of them is likely to have run undisturbed, for
all libraries alike. On a machine loaded beyond its cores, none is: ``--cpu-time`` then times with each worker's CPU
time, which leaves out the waits for a core. ``--against`` adds the reference as of an older commit (extracted with
``git archive``, imported in its own worker only), timed in the same rounds, so that a ratio is compared with the
older tree's measured at the same moment rather than with a figure from another day.

Printed: the time per operation for each library and the ratio modulecraft / torch, with the targets of issue 42 (a
training step of a 784-256-10 MLP at batch 128 ≤ 0.74×; of a 50-layer width-16 MLP at batch 8, where Python overhead
dominates, ≤ 0.81×; the extra cost of a full backward hook ≤ 0.45×; one epoch of the capstone's model on its digits,
as learners train it in chapter 13, ≤ 1.0×, also with 13.6's statistics hooks). Measured with ``--against`` (CPU
time, 2026-12-04), the tree on which issue 42 was filed (48a99c6) gives 0.89-1.01×, 0.90-0.96× and 1.07-1.19× for
the first three, and the best of any tree since 2026-11-25 is 0.86×, 0.81× and 0.63×. Then the memory a backward pass
allocates above what was live before it (its peak): for modulecraft ``tracemalloc``'s peak (numpy reports its array
buffers to it), for torch the running total of the allocations and frees ``torch.profiler`` records on the CPU
during ``backward()``.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # before numpy (and its BLAS) is first imported; not when a test imports this file
    for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_variable] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark, also when a test loads this file
from bench_reference import _format_seconds  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]


class Library:
    """One library's spelling of what a training step needs."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "torch":
            import torch

            self.nn, self.optim, self.cross_entropy = torch.nn, torch.optim, torch.nn.functional.cross_entropy
            self.tensor = torch.tensor
        else:
            import modulecraft.optim
            from modulecraft import nn

            self.nn, self.optim, self.cross_entropy = nn, modulecraft.optim, nn.functional.cross_entropy
            self.tensor = modulecraft.tensor

    def mlp(self, sizes: list[int]):
        layers = []
        for fan_in, fan_out in zip(sizes, sizes[1:]):
            layers += [self.nn.Linear(fan_in, fan_out), self.nn.ReLU()]
        return self.nn.Sequential(*layers[:-1])

    def training_step(self, sizes: list[int], batch: int) -> Callable[[], None]:
        """One step (forward, loss, zero_grad, backward, SGD step) on a fixed random batch."""
        rng = np.random.default_rng(0)
        model = self.mlp(sizes)
        optimizer = self.optim.SGD(model.parameters(), lr=0.01)
        images = self.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
        labels = self.tensor(rng.integers(0, sizes[-1], batch))

        def step() -> None:
            loss = self.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return step

    def capstone_epoch(self, statistics: bool) -> Callable[[], None]:
        """One epoch of chapter 13's training: its digits model, SGD with momentum, cross-entropy, 22 batches of 64
        (``train_epoch`` of this checkout's capstone exercises, which runs on either library, also beside an older
        tree); with ``statistics``, 13.6's hooks on every layer (forward: output mean and std; Linear's full
        backward hook: gradient norm)."""
        spec = importlib.util.spec_from_file_location(
            "_bench_capstone", REPOSITORY / "reference" / "modulecraft" / "exercises" / "c13_capstone.py")
        capstone = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(capstone)
        train_epoch = capstone.train_epoch
        features, labels = _digits()
        if self.name == "torch":
            import torch

            features, labels = torch.from_numpy(features), torch.from_numpy(labels)
        nn = self.nn
        model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
        optimizer = self.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()
        if statistics:
            record: list[float] = []
            for layer in model:
                layer.register_forward_hook(lambda module, args, output: record.extend(
                    (float(output.mean()), float(output.std()))))
                if isinstance(layer, nn.Linear):
                    layer.register_full_backward_hook(lambda module, grad_input, grad_output: record.append(
                        float(np.linalg.norm(np.asarray(grad_output[0])))))

        def epoch() -> None:
            with warnings.catch_warnings():  # layer 0's input needs no gradient: both libraries say so (13.5)
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
                train_epoch(model, optimizer, loss_fn, features, labels)

        return epoch

    def hooked_call(self, hooked: bool) -> Callable[[], None]:
        """Call a small Linear (with or without a full backward hook) and backpropagate through it.

        The input requires grad, so the hook receives a real ``grad_input`` (and torch does not warn).
        """
        layer = self.nn.Linear(4, 4)
        if hooked:
            layer.register_full_backward_hook(lambda module, grad_input, grad_output: None)
        x = self.tensor(np.ones((2, 4), dtype=np.float32), requires_grad=True)

        def call() -> None:
            layer(x).sum().backward()

        return call

    def backward_peak_bytes(self, sizes: list[int], batch: int) -> int:
        rng = np.random.default_rng(0)
        model = self.mlp(sizes)
        images = self.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
        labels = self.tensor(rng.integers(0, sizes[-1], batch))
        loss = self.cross_entropy(model(images), labels)
        if self.name == "torch":
            return _torch_peak(loss.backward)
        tracemalloc.start()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1] - start
        tracemalloc.stop()
        return peak


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """The capstone's training set: the first 1400 of scikit-learn's 1797 digits in its seeded order (13.2)."""
    path = Path(importlib.util.find_spec("sklearn").origin).parent / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)
    order = np.random.default_rng(0).permutation(len(table))[:1400]
    return table[order, :64] / 16, table[order, 64].astype(np.int64)


def _torch_peak(run: Callable[[], None]) -> int:
    """The highest running total of the CPU allocations minus frees that torch's profiler records during ``run``.

    Every allocation and free is a ``[memory]`` record of the profiler's raw (Kineto) results, with its time and
    signed size; the grouped ``events()`` attach most of them to the operations and lose their order.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        run()
    changes = sorted((record.start_ns(), record.nbytes()) for record in profiler.profiler.kineto_results.events()
                     if record.name() == "[memory]")
    total = peak = 0
    for _, change in changes:
        total += change
        peak = max(peak, total)
    return peak


DEEP = [16] * 51  # 50 Linear layers of width 16

TIMED = {  # name -> (what to build from a Library, operations per timing, target ratio)
    "training step, 784-256-10 MLP, batch 128": (lambda lib: lib.training_step([784, 256, 10], 128), 4, 0.74),
    "training step, 50-layer width-16 MLP, batch 8": (lambda lib: lib.training_step(DEEP, 8), 4, 0.81),
    "Linear(4, 4) call + backward": (lambda lib: lib.hooked_call(False), 100, None),
    "the same with a full backward hook": (lambda lib: lib.hooked_call(True), 100, None),
    "capstone epoch: digits, 64-32-BN-10, 22 batches": (lambda lib: lib.capstone_epoch(False), 1, 1.0),
    "the same with 13.6's statistics hooks": (lambda lib: lib.capstone_epoch(True), 1, 1.0),
}


def _extract(revision: str, into: Path) -> tuple[str, Path]:
    """The reference package as of ``revision`` of this repository, written under ``into``: (its label, its folder)."""
    commit = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "--short", f"{revision}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", commit, "reference/modulecraft"],
                             check=True, capture_output=True).stdout
    folder = into / commit
    folder.mkdir(exist_ok=True)  # two revisions naming one commit
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return f"modulecraft@{commit}", folder / "reference"


def _serve(library: str, timer: Callable[[], float]) -> None:
    """A worker: one library in this process (``torch``, or the folder holding a ``modulecraft`` package), timing
    what the coordinator asks on stdin, one JSON line per request and per answer. The first answer says which
    ``modulecraft`` was imported."""
    channel = os.fdopen(os.dup(1), "w")  # the answers; anything the libraries print goes to stderr
    os.dup2(2, 1)
    if library == "torch":
        import torch

        torch.set_num_threads(1)
        lib, imported = Library("torch"), None
    else:
        sys.path.insert(0, library)  # before the installed (editable) modulecraft, whose finder comes last
        lib = Library("modulecraft")
        imported = sys.modules["modulecraft"].__file__
    channel.write(json.dumps({"modulecraft": imported}) + "\n")
    channel.flush()
    prepared: dict[str, Callable[[], None]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "memory" in request:
                answer = {"bytes": lib.backward_peak_bytes([784, 256, 10], 128)}
            else:
                name, number = request["time"], request["number"]
                if name not in prepared:
                    prepared[name] = TIMED[name][0](lib)
                answer = {"seconds": timeit.timeit(prepared[name], timer=timer, number=number) / number}
        except Exception as error:  # an older tree without what this operation needs: shown as n/a
            answer = {"error": f"{type(error).__name__}: {error}"}
        channel.write(json.dumps(answer) + "\n")
        channel.flush()


class Worker:
    """The coordinator's end of a worker process (``_serve``)."""

    def __init__(self, label: str, library: str, cpu_time: bool) -> None:
        self.label = label
        command = [sys.executable, __file__, "--worker", library] + (["--cpu-time"] if cpu_time else [])
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.modulecraft = self._answer()["modulecraft"]
        if library != "torch" and not Path(self.modulecraft).is_relative_to(library):
            self.close()
            raise RuntimeError(f"{label}: the worker imported {self.modulecraft}, not the package under {library}")

    def ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: the worker ended (exit code {self.process.wait()}); see its stderr")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run, noisier numbers)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time instead of the wall clock: on a loaded machine, the "
                             "time spent waiting for a core is left out")
    parser.add_argument("--against", action="append", default=[], metavar="REVISION",
                        help="also time the reference as of this git revision (a commit, tag or branch of this "
                             "repository), in the same rounds; repeatable")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    timer = time.process_time if args.cpu_time else time.perf_counter
    if args.worker:
        _serve(args.worker, timer)
        return 0
    repeat = 2 if args.quick else 35

    with tempfile.TemporaryDirectory(prefix="bench-training-") as scratch:
        workers = [Worker("torch", "torch", args.cpu_time),
                   Worker("modulecraft", str(REPOSITORY / "reference"), args.cpu_time)]
        for label, folder in dict(_extract(rev, Path(scratch)) for rev in args.against).items():
            try:
                workers.append(Worker(label, str(folder), args.cpu_time))
            except RuntimeError as error:  # a tree whose package does not import (a commit fixed by the next one)
                print(f"left out: {error}", file=sys.stderr)
        load_before = os.getloadavg()
        try:
            times = {name: {worker.label: float("inf") for worker in workers} for name in TIMED}
            for _ in range(repeat):
                for name, (_, number, _) in TIMED.items():
                    for worker in workers:  # the libraries take turns, so a burst of load hits them alike
                        answer = worker.ask(time=name, number=number)
                        best = times[name][worker.label]
                        times[name][worker.label] = min(best, answer["seconds"]) if "seconds" in answer else math.nan
            peaks = {worker.label: worker.ask(memory=True).get("bytes", math.nan) for worker in workers}
        finally:
            for worker in workers:
                worker.close()
        load_after = os.getloadavg()

    plain, hooked = times["Linear(4, 4) call + backward"], times["the same with a full backward hook"]
    times["hook overhead (difference of the two above)"] = {label: hooked[label] - plain[label] for label in plain}
    targets = {name: target for name, (_, _, target) in TIMED.items()}
    targets["hook overhead (difference of the two above)"] = 0.45
    _print_table(times, targets, peaks)
    print(f"\nratio = modulecraft / torch, best of {repeat} repeats, one thread each, "
          f"{'CPU' if args.cpu_time else 'wall-clock'} time; numpy {np.__version__}, Python {sys.version.split()[0]}; "
          f"load average {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end")
    return 0


def _format_time(seconds: float) -> str:
    return f"{'n/a':>11}" if math.isnan(seconds) else _format_seconds(seconds)


def _print_table(times: dict[str, dict[str, float]], targets: dict[str, float | None],
                 peaks: dict[str, float]) -> None:
    """A row per operation: each library's time, then each modulecraft's ratio to torch, then the target (for the
    current tree's ratio)."""
    labels = list(peaks)
    references = labels[1:]
    width = max(map(len, times))
    columns = [max(11, len(label)) for label in labels]
    ratio_columns = [max(6, len(label) - len("modulecraft")) for label in references]
    print(f"{'operation':<{width}}  " + "  ".join(f"{label:>{column}}" for label, column in zip(labels, columns))
          + "  " + "  ".join(f"{'ratio' + label[len('modulecraft'):]:>{column}}"
                             for label, column in zip(references, ratio_columns)) + "  target")
    for name, pair in times.items():
        ratios = [pair[label] / pair["torch"] if pair["torch"] > 0 else math.nan for label in references]
        target = targets.get(name)
        verdict = "" if target is None else f"≤ {target:.2f}  {'met' if ratios[0] <= target else 'MISSED'}"
        print(f"{name:<{width}}  " + "  ".join(f"{_format_time(pair[label]):>{column}}"
                                                for label, column in zip(labels, columns))
              + "  " + "  ".join(f"{ratio:{column}.2f}" for ratio, column in zip(ratios, ratio_columns))
              + f"  {verdict}")

    print("\nmemory allocated by one backward pass above what was live before it (peak), 784-256-10 MLP, batch 128:")
    for label, peak in peaks.items():
        ratio = "" if label == "torch" else f"  ratio {peak / peaks['torch']:.2f}"
        print(f"  {label:<{max(map(len, labels))}} {peak / 2**20:8.2f} MiB{ratio}")


if __name__ == "__main__":
    sys.exit(main())
