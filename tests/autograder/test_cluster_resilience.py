"""A run that finishes whatever happens to its cluster, with real `dask scheduler` and `dask worker` processes on
127.0.0.1: every worker lost mid-run and new ones started; the coordinator's connection to the scheduler cut for
a few seconds, and for longer than the run waits."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import dask.config
import pytest

from autograder import dask_grading, synthetic
from autograder.grading import load_outcome
from autograder.workers import Task

from test_dask import free_port, gradebook_rows, processes, wait_for_workers  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

SLOW_ADD = "import time\ntime.sleep(2)\ndef add(a, b):\n    return np.asarray(a) + np.asarray(b)"


def dask_command(which: str, *args: str) -> list[str]:
    """The guide's command for `dask scheduler` / `dask worker`: loopback only, no HTTP server."""
    return [sys.executable, "-m", f"distributed.cli.dask_{which}", *args, "--host", "127.0.0.1", "--no-dashboard",
            "--dashboard-address", "127.0.0.1:0", "--preload", "autograder.dask_preload"]


def slow_class(course, folder, count: int) -> list[str]:
    """`count` solved submissions that take over two seconds each."""
    students = [f"s{n}" for n in range(count)]
    for student in students:
        synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": SLOW_ADD}),
                        folder / "in.ipynb")
        course.submit(student, "90_toy", folder / "in.ipynb")
    return students


def coordinator(course, address: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--root", str(course.root), "--scheduler",
                             address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Said:
    """What a coordinator writes on stderr, read as it comes."""

    def __init__(self, process: subprocess.Popen):
        self.lines, self.process = [], process
        self.reader = threading.Thread(target=lambda: self.lines.extend(process.stderr), daemon=True)
        self.reader.start()

    def wait_for(self, pattern: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines):
            assert time.monotonic() < deadline and self.process.poll() is None, (pattern, "".join(self.lines))
            time.sleep(0.05)

    def end(self, timeout: float) -> tuple[int, str, str]:
        try:
            self.process.wait(timeout=timeout)  # not communicate(): it would take stderr lines from the reader
        finally:
            self.process.kill()  # a coordinator that did not end in time does not outlive the test
        self.reader.join(timeout=5)
        return self.process.returncode, self.process.stdout.read(), "".join(self.lines)


def test_a_run_that_loses_every_worker_says_so_and_goes_on_with_new_ones(make_toy_course, tmp_path, processes):
    """Dask offers tasks that found no worker to a worker that joins, not to one that gains the run's resource
    later: without `RunOnScheduler`'s hand-over, the new worker sits idle and the run waits forever."""
    course = make_toy_course(tmp_path / "grading")
    students = slow_class(course, tmp_path, 4)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes(dask_command("scheduler", "--port", str(port)))
    first = processes(dask_command("worker", address, "--name", "first", "--nthreads", "1",
                                   "--local-directory", str(tmp_path / "first")))
    wait_for_workers(address, 1)

    said = Said(coordinator(course, address))
    said.wait_for(r"grading on 1 worker\(s\)$")
    time.sleep(1)  # in the middle of the first notebook
    os.killpg(first.pid, signal.SIGKILL)  # the nanny and its worker process, as a machine that goes away
    said.wait_for("no worker able to grade is left", timeout=dask_grading.CHECK_WORKERS_EVERY * 6)
    processes(dask_command("worker", address, "--name", "second", "--nthreads", "1",
                           "--local-directory", str(tmp_path / "second")))
    code, stdout, stderr = said.end(timeout=300)

    assert code == 0, stderr + stdout
    assert re.search(r"lost worker first \(tcp://127.0.0.1:\d+\): the notebook it was grading goes to another "
                     "worker", stderr), stderr
    assert "grading on 1 worker(s) again" in stderr
    assert "not graded" not in stdout
    assert {student: load_outcome(course.root, student, "90_toy").score for student in students} == \
        dict.fromkeys(students, 5.0)
    assert gradebook_rows(course)["submissions"] == 4


class Relay:
    """A TCP relay on loopback between the coordinator and the scheduler whose connections can be cut: while cut,
    it closes every connection it has and each new one at once, as a network that drops the coordinator would."""

    def __init__(self, port: int):
        self.target, self.pairs, self.open = port, [], threading.Event()
        self.open.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                incoming, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            if not self.open.is_set():
                incoming.close()
                continue
            outgoing = socket.create_connection(("127.0.0.1", self.target))
            self.pairs.append((incoming, outgoing))
            for source, sink in ((incoming, outgoing), (outgoing, incoming)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, seconds: float) -> None:
        self.open.clear()
        for pair in self.pairs:
            for end in pair:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.pairs.clear()
        time.sleep(seconds)
        self.open.set()

    def close(self) -> None:
        """Stop listening and drop every connection: nothing of the relay outlives its test."""
        self.open.clear()
        self.listener.close()
        self.cut(0)


@pytest.fixture
def relayed_cluster(processes, tmp_path):
    port = free_port()
    processes(dask_command("scheduler", "--port", str(port)))
    processes(dask_command("worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                           "--local-directory", str(tmp_path / "worker")))
    wait_for_workers(f"tcp://127.0.0.1:{port}", 1)
    relay = Relay(port)
    yield relay
    relay.close()


def test_a_short_break_in_the_coordinator_s_connection_loses_nothing(make_toy_course, tmp_path, relayed_cluster):
    course = make_toy_course(tmp_path / "grading")
    students = slow_class(course, tmp_path, 4)
    said = Said(coordinator(course, relayed_cluster.address))
    said.wait_for(r"grading on 1 worker\(s\)$")
    time.sleep(1)
    relayed_cluster.cut(3)
    code, stdout, stderr = said.end(timeout=300)

    assert code == 0, stderr + stdout
    assert "not graded" not in stdout
    assert {student: load_outcome(course.root, student, "90_toy").score for student in students} == \
        dict.fromkeys(students, 5.0)
    assert gradebook_rows(course)["submissions"] == 4  # each imported once


def test_a_long_break_ends_the_run_in_one_line_and_the_rerun_grades_what_is_left(make_toy_course, tmp_path,
                                                                                 relayed_cluster):
    course = make_toy_course(tmp_path / "grading")
    students = slow_class(course, tmp_path, 4)
    said = Said(coordinator(course, relayed_cluster.address))
    said.wait_for(r"\b1/4\b")  # one graded and kept
    relayed_cluster.cut(dask_grading.CONNECT_TIMEOUT + 10)
    code, stdout, stderr = said.end(timeout=120)

    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1, stderr
    assert re.fullmatch(r"error: lost the connection to the Dask scheduler at tcp://127.0.0.1:\d+ for over 20 s, "
                        r"with \d submission\(s\) of this run not graded yet: run the same command again \(without "
                        r"--force\) to grade just those; what was graded is kept", errors[0]), errors[0]
    graded = [student for student in students if load_outcome(course.root, student, "90_toy") is not None]
    assert 1 <= len(graded) < 4

    again = subprocess.run([sys.executable, "-m", "autograder", "grade", "--root", str(course.root), "--scheduler",
                            relayed_cluster.address], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"graded {4 - len(graded)} submission(s)" in again.stdout
    assert f"{len(graded)} already graded and unchanged" in again.stdout
    assert {student: load_outcome(course.root, student, "90_toy").score for student in students} == \
        dict.fromkeys(students, 5.0)


def test_a_scheduler_stopped_between_the_check_and_the_look_ends_the_run_in_one_line(processes, monkeypatch):
    """The periodic look runs while the client says "running": a scheduler that stops just then breaks the look's
    own calls, which end the run with the same one-line error as any other long break, not a traceback."""
    port = free_port()
    scheduler = processes(dask_command("scheduler", "--port", str(port)))
    address = f"tcp://127.0.0.1:{port}"
    dask_grading.check_scheduler(address, timeout=120)  # started, before its time to answer is cut short
    look = dask_grading.Workers.watch

    def stopped_first(self, left, quiet_for):
        assert self.client.status == "running"  # past the check
        scheduler.kill()
        scheduler.wait()
        return look(self, left, quiet_for)

    monkeypatch.setattr(dask_grading.Workers, "watch", stopped_first)
    monkeypatch.setattr(dask_grading, "CHECK_WORKERS_EVERY", 0)
    monkeypatch.setattr(dask_grading, "CONNECT_TIMEOUT", 3)  # how long the client tries to reconnect
    task = Task("ada", "90_toy", "0" * 64, {}, "0" * 64)  # never runs: the cluster has no worker
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}), dask_grading.connect(address) as client:
        workers = dask_grading.Workers(client, "run", lambda _: None)
        with pytest.raises(dask_grading.ClusterError, match=r"^lost the connection to the Dask scheduler at "
                           rf"{address} for over 3 s, with 1 submission\(s\) of this run not graded yet"):
            list(dask_grading._run(client, "run", iter([task]), workers, address))


def test_a_run_where_nothing_finishes_for_a_minute_says_so_once_a_minute():
    """What the bar cannot show (it moves only when a notebook is back): a hang, said by the periodic look."""
    said = []

    class Cluster:  # the two calls the look makes, as a scheduler with one prepared worker answers them
        def scheduler_info(self, n_workers):
            return {"workers": {"tcp://10.0.0.7:4000": {"name": "node7", "resources": {"run": 1}}}}

        def run(self, function, *args, on_error):
            return {"tcp://10.0.0.7:4000": None}

    workers = dask_grading.Workers(Cluster(), "run", said.append)
    for quiet_for in (10, dask_grading.QUIET_SAY_AFTER + 1, dask_grading.QUIET_SAY_AFTER + 6):
        workers.watch(3, quiet_for)
    assert said == [f"nothing finished for {dask_grading.QUIET_SAY_AFTER + 1} s: 3 submission(s) to go on 1 "
                    "worker(s) (a notebook that hangs is stopped at its time limit)"]
