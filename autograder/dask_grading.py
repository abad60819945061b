"""Grading on a Dask cluster: the same worker code as the local pool, on as many machines as the class needs.

`grade(scheduler, bundle, tasks)` connects to the scheduler at `scheduler` (`tcp://host:8786`, or a cluster object
of dask-jobqueue, which brings its TLS settings), or starts a `LocalCluster` for "local", registers a worker plugin
of this run (`dask_plugin.PrepareCourse`, named after the course's fingerprint and the run) that prepares every
worker, also those that join later, and submits one task per submission. Several runs and several courses share a
cluster: each run has its own plugin, Dask resource and task keys, each course its own scratch folder on a worker. Results come back as they finish; the
coordinator (`grading.grade_class`) imports each once, so every submission is graded exactly once in the
gradebook whatever happens on the workers:

- a worker that dies mid-notebook: the scheduler gives its tasks to other workers (up to Dask's
  `distributed.scheduler.allowed-failures` deaths per task, then the submission is reported as not graded);
- a task that raises (e.g. the scratch disk filled up): retried `RETRIES` times, anywhere;
- a worker that cannot grade (the project not installed, another grader version, no sandbox): named, and left
  out of the run (its tasks need a resource only prepared workers offer).

- every worker able to grade gone (killed, a Slurm job's time up): the run says that it waits for workers, and
  goes on as soon as new ones join and are prepared (`dask_plugin.RunOnScheduler` hands them the waiting tasks);
  after `WORKER_TIMEOUT` seconds without one it ends, saying so;
- the connection to the scheduler broken: Dask's client reconnects within `CONNECT_TIMEOUT` seconds and the
  submissions it was waiting for are sent again (Dask cancels them on a break); a longer break ends the run with
  one line and the command that grades what is left (the submissions graded so far are kept).

At the end of the run (also on Ctrl-C) the plugin is unregistered: the scheduler no longer holds the course,
and each worker removes the course's scratch folder unless another run still grades it. Should the coordinator
die first, the run's scheduler plugin (`dask_plugin.RunOnScheduler`) does it once its client has been gone for
`FORGET_AFTER` seconds.

Workers need the same repository checkout and virtualenv as the coordinator (the kernels import
`modulecraft` and `autograder` from it); the chapters' source files and the course's gradebook structure
travel in the plugin. Run workers with one thread each (`--nthreads 1`): a worker process grades one
notebook at a time (more would wait on a lock), so use `--nworkers` for more notebooks per machine.

Dask is not a sandbox: anyone who can reach the scheduler or a worker can run code on the workers. Keep them
on loopback or a private network, or use TLS (`tls://` addresses with Dask's security settings); the
submissions themselves are always run inside our sandbox on the workers.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import pickle
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Iterator

import cloudpickle
import dask.config
from distributed import Client, LocalCluster, as_completed
from distributed.comm.addressing import parse_address, parse_host_port
from distributed.core import rpc

from . import dask_plugin
from .workers import CourseBundle, GradedSubmission, Task, grade_task, grader_version

SCHEDULER_ENV_VAR = "MODULECRAFT_DASK_SCHEDULER"
RETRIES = 2  # a task that raised runs again, on any worker
IN_FLIGHT = 1000  # tasks on the cluster at once: enough for hundreds of workers, a bounded memory on the scheduler
GREETING_WAIT = 5  # seconds a port that accepts connections may take to greet as Dask does (at once)
CONNECT_TIMEOUT = 20  # seconds for a scheduler to answer; also how long a broken connection may take to come back
FORGET_AFTER = CONNECT_TIMEOUT + 10  # seconds the scheduler keeps a run whose coordinator left (it may reconnect)
WORKER_TIMEOUT = 600  # seconds to wait for a worker able to grade (Slurm jobs may queue a while)
CHECK_WORKERS_EVERY = 5.0  # seconds between looks at the workers (joined and cannot grade, lost)
QUIET_SAY_AFTER = 60  # seconds without a result after which the run says so (and again every as many seconds)
PRELOAD = "autograder.dask_preload"  # no HTTP server on our schedulers and workers (see that module)

cloudpickle.register_pickle_by_value(dask_plugin)  # a worker without the project can still load the plugin


class ClusterError(ConnectionError):
    """A problem with the cluster the instructor can fix, in one line."""


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise `ClusterError` unless a Dask scheduler answers at `address` within `timeout` seconds, saying what is
    there instead: Dask's own client waits forever on a port that accepts connections but never speaks Dask (the
    dashboard's HTTP, a TLS scheduler), and fails with a cryptic `identity()` error at a worker's or nanny's."""
    protocol, location = parse_address(address)
    if protocol == "tls":
        if not (dask.config.get("distributed.comm.tls.ca-file", None)
                and dask.config.get("distributed.comm.tls.client.cert", None)):
            raise ClusterError(f"{address} is a TLS address, and this machine has no Dask TLS settings: set "
                               "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
                               "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (see INSTRUCTORS.md, TLS)")
        return  # the TLS handshake itself fails fast on a port that is not the scheduler's
    if protocol != "tcp":
        return
    host, port = parse_host_port(location)
    deadline, last_error = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic())) as probe:
                probe.settimeout(GREETING_WAIT)
                greeted = bool(probe.recv(1))  # a Dask server greets first
        except TimeoutError:
            raise ClusterError(f"{address} accepts connections but is not a Dask scheduler: "
                               f"{_what_listens(host, port)}") from None
        except OSError as error:  # refused (not started yet?), unreachable, unknown host
            last_error, greeted = error.strerror or str(error), False
        else:
            last_error = "it closed the connection"
        if greeted:
            return _check_is_scheduler(address)
        time.sleep(0.5)
    raise ClusterError(f"no Dask scheduler answered at {address} within {timeout:g} s ({last_error}): is it "
                       "running, and are its host and port these?")


def _check_is_scheduler(address: str) -> None:
    """`ClusterError` when the Dask server at `address` is a worker or a nanny."""
    async def identity():
        async with rpc(address) as server:
            return await server.identity()

    with concurrent.futures.ThreadPoolExecutor(1) as thread:  # also under a running event loop (a notebook's)
        found = thread.submit(asyncio.run, identity()).result(timeout=CONNECT_TIMEOUT)
    kind = found.get("type", "server")
    if kind == "Worker":
        raise ClusterError(f"{address} is a Dask worker, not the scheduler: its scheduler is "
                           f"{found.get('scheduler', 'the address it was started with')}")
    if kind != "Scheduler":
        raise ClusterError(f"{address} is a Dask {kind.lower()}, not the scheduler: give the address the workers "
                           "were started with (`dask worker ADDRESS`)")


def _what_listens(host: str, port: int) -> str:
    """What a port that does not greet as Dask does is, as far as one HTTP request and one TLS handshake tell."""
    with socket.create_connection((host, port), timeout=GREETING_WAIT) as probe:
        probe.settimeout(GREETING_WAIT)
        probe.sendall(b"GET / HTTP/1.0\r\n\r\n")
        try:
            if probe.recv(5) == b"HTTP/":
                return "an HTTP server answers there (a dashboard? The scheduler's port is 8786 by default)"
        except OSError:
            pass
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=GREETING_WAIT) as raw, context.wrap_socket(raw):
            speaks_tls = True
    except ssl.SSLError as error:  # a Dask TLS server wants our certificate: an alert, not a wrong record
        speaks_tls = "ALERT" in str(error.reason or "").upper()
    except OSError:
        speaks_tls = False
    if speaks_tls:
        return f"it speaks TLS: use tls://{host}:{port} with Dask's TLS settings (see INSTRUCTORS.md, TLS)"
    return f"it sends no Dask greeting within {GREETING_WAIT:g} s (another program?)"


@contextlib.contextmanager
def connect(scheduler: str, workers: int | None = None, say: Callable[[str], None] = lambda _: None
            ) -> Iterator[Client]:
    """A client of the cluster at `scheduler`, or of a new LocalCluster of `workers` one-thread processes on
    loopback, without HTTP servers."""
    if not isinstance(scheduler, str):  # a cluster object (dask-jobqueue's), with its security
        say(f"connecting to the Dask scheduler at {scheduler.scheduler_address}")
        with Client(scheduler, timeout=CONNECT_TIMEOUT) as client:
            yield client
        return
    if scheduler != "local":
        say(f"connecting to the Dask scheduler at {scheduler}")
        check_scheduler(scheduler)
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TypeError, ValueError) as error:  # e.g. a TLS certificate the scheduler refuses
            raise ClusterError(f"could not connect to the Dask scheduler at {scheduler}: "
                               f"{str(error).splitlines()[0]}") from None
        with client:
            yield client
        return
    count = workers or os.cpu_count() or 1
    say(f"starting a local Dask cluster of {count} worker(s)")
    with LocalCluster(n_workers=count, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", scheduler_kwargs={"preload": [PRELOAD]},
                      preload=[PRELOAD]) as cluster, Client(cluster) as client:
        yield client


class Workers:
    """The workers of one run: which can grade it, and which were left out and why (said once each)."""

    def __init__(self, client: Client, run: str, say: Callable[[str], None]):
        self.client, self.run, self.say = client, run, say
        self.left_out: dict[str, str] = {}
        self.none_since: float | None = None  # when the last worker able to grade was lost
        self.grading: dict[str, str] = {}  # the workers able to grade at the last look: address -> name
        self.said_quiet = 0.0

    def fit(self) -> list[str]:
        """Addresses of the workers prepared for the run; names and leaves out those that cannot grade it."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        fit = [address for address, worker in info.items() if worker.get("resources", {}).get(self.run)]
        reasons = self.client.run(dask_plugin.unfit_reasons, self.run, on_error="return")
        for address, reason in reasons.items():
            if isinstance(reason, BaseException):
                reason = f"{type(reason).__name__}: {reason}"
            if reason and address not in fit and address not in self.left_out:
                self.left_out[address] = reason
                self.say(f"left out worker {_worker_name(address, info)}: {reason}")
        return fit

    def watch(self, left: int, quiet_for: float) -> None:
        """The periodic look while grading, `quiet_for` seconds after the last result: names the workers that
        joined and cannot grade, the workers lost, a run where nothing finished for a while, and when no worker
        able to grade is left (the run waits for new ones) and when grading goes on; `ClusterError` after
        `WORKER_TIMEOUT` seconds without one."""
        fit = self.fit()
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        for address in sorted(set(self.grading) - set(fit)):
            self.say(f"lost worker {self.grading[address]}: the notebook it was grading goes to another worker")
        self.grading = {address: _worker_name(address, info) for address in fit}
        if fit and self.none_since is not None:
            self.say(f"grading on {len(fit)} worker(s) again")
            self.none_since = None
        elif not fit and self.none_since is None:
            self.say(f"no worker able to grade is left ({left} submission(s) to go): waiting for workers to join")
            self.none_since = time.monotonic()
        elif not fit and time.monotonic() - self.none_since > WORKER_TIMEOUT:
            raise ClusterError(f"no worker able to grade for {WORKER_TIMEOUT} s, with {left} submission(s) not "
                               "graded yet: start workers, then run the same command again (without --force) to "
                               "grade just those")
        if fit and quiet_for > QUIET_SAY_AFTER and time.monotonic() - self.said_quiet > QUIET_SAY_AFTER:
            self.say(f"nothing finished for {int(quiet_for)} s: {left} submission(s) to go on {len(fit)} worker(s) "
                     "(a notebook that hangs is stopped at its time limit)")
            self.said_quiet = time.monotonic()

    def wait_for_one(self, timeout: float = WORKER_TIMEOUT) -> int:
        """The number of workers able to grade, once there is one; `ClusterError` if every worker that joined
        cannot grade, or none joined within `timeout` seconds."""
        deadline, waiting = time.monotonic() + timeout, False
        while True:
            fit = self.fit()
            if fit:
                info = self.client.scheduler_info(n_workers=-1)["workers"]
                self.grading = {address: _worker_name(address, info) for address in fit}
                return len(fit)
            joined = self.client.scheduler_info(n_workers=-1)["workers"]
            if joined and set(joined) <= set(self.left_out):
                raise ClusterError(f"no worker can grade this course: {len(joined)} left out (above)")
            if time.monotonic() > deadline:
                raise ClusterError(f"no worker able to grade joined the scheduler within {timeout:g} s")
            if not waiting:
                self.say("waiting for workers to join the scheduler")
                waiting = True
            time.sleep(1)


def _worker_name(address: str, info: dict) -> str:
    """`NAME (ADDRESS)`, or the address of a worker without a name of its own."""
    name = str(info.get(address, {}).get("name", address))
    return address if name == address else f"{name} ({address})"


def grade(scheduler: str, bundle: CourseBundle, tasks: Iterator[Task], workers: int | None = None,
          say: Callable[[str], None] | None = None) -> Iterator[tuple[Task, GradedSubmission | BaseException]]:
    """(task, result or exception) for each task, as they complete on the cluster; at most `IN_FLIGHT` tasks
    (each carrying one submission's files) are on the cluster at a time. `say` hears the start-up phases and
    the workers left out."""
    say = say or (lambda _: None)
    run = f"modulecraft-{bundle.sha256[:12]}-{uuid.uuid4().hex[:8]}"  # this run's plugin, resource and keys
    with connect(scheduler, workers, say) as client:
        say(f"preparing {len(client.scheduler_info(n_workers=-1)['workers'])} worker(s) for the course")
        on_scheduler = dask_plugin.RunOnScheduler(client.id, run, grace=FORGET_AFTER)
        client.register_plugin(on_scheduler, name=on_scheduler.name)
        try:
            client.register_plugin(dask_plugin.PrepareCourse(pickle.dumps(bundle), run, grader_version()),
                                   name=run)
        except Exception as error:  # a worker could not even load the plugin: it is left out below
            say(f"a worker could not load the grading plugin: {str(error).splitlines()[0]}")
        try:
            cluster = Workers(client, run, say)
            say(f"grading on {cluster.wait_for_one()} worker(s)")
            yield from _run(client, run, tasks, cluster, client.scheduler.address)
        finally:
            if client.status == "running":  # else the scheduler forgets the run by itself, FORGET_AFTER s later
                client.unregister_worker_plugin(run)  # the course leaves the scheduler and the workers' disks
                client.unregister_scheduler_plugin(on_scheduler.name)


def _run(client: Client, run: str, tasks: Iterator[Task], cluster: Workers, scheduler: str):
    running = {}

    def send(task: Task):
        future = client.submit(grade_task, task, key=f"{task.key}-{run[-8:]}", retries=RETRIES,
                               resources={run: 1})
        running[future] = task
        return future

    completed = as_completed([send(task) for task in itertools.islice(tasks, IN_FLIGHT)])
    checked = last_result = time.monotonic()
    while not completed.is_empty():
        if client.status == "running" and (time.monotonic() - checked > CHECK_WORKERS_EVERY
                                           or (cluster.none_since is not None and completed.has_ready())):
            try:
                cluster.watch(len(running), time.monotonic() - last_result)
            except OSError:  # the connection broke since the check (Dask's CommClosedError is an OSError)
                _reconnected(client, scheduler, len(running))
            checked = time.monotonic()
        if not completed.has_ready():
            time.sleep(0.05)
            continue
        future = next(completed)
        task = running.pop(future)
        if future.status == "cancelled":  # the connection to the scheduler broke: Dask cancels what it waited for
            _reconnected(client, scheduler, len(running) + 1)
            completed.add(send(task))
            continue
        last_result = time.monotonic()
        upcoming = next(tasks, None)
        if upcoming is not None:
            completed.add(send(upcoming))
        try:
            result = future.result()
        except Exception as error:  # KilledWorker, or what the task raised on its last retry
            result = error
        yield task, result


def _reconnected(client: Client, scheduler: str, left: int) -> None:
    """Return once Dask's client has its connection to the scheduler back; `ClusterError` if it gave up."""
    deadline = time.monotonic() + CONNECT_TIMEOUT + 5
    while client.status != "running":
        if client.status in ("closing", "closed") or time.monotonic() > deadline:
            raise ClusterError(f"lost the connection to the Dask scheduler at {scheduler} for over "
                               f"{CONNECT_TIMEOUT} s, with {left} submission(s) of this run not graded yet: run the "
                               "same command again (without --force) to grade just those; what was graded is kept")
        time.sleep(0.1)
