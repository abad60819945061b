"""Grading on a Dask cluster: the same worker code as the local pool, on as many machines as the class needs.

`grade(scheduler, bundle, tasks)` connects to the scheduler at `scheduler` (`tcp://host:8786`), or starts a
`LocalCluster` for "local", registers a worker plugin that prepares every worker (also those that join
later) from the course bundle once, and submits one task per submission. Results come back as they finish;
the coordinator (`grading.grade_class`) imports each once, so every submission is graded exactly once in
the gradebook whatever happens on the workers:

- a worker that dies mid-notebook: the scheduler gives its tasks to other workers (up to Dask's
  `distributed.scheduler.allowed-failures` deaths per task, then the submission is reported as not graded);
- a task that raises (e.g. the scratch disk filled up): retried `RETRIES` times, anywhere.

Workers need the same repository checkout and virtualenv as the coordinator (the kernels import
`modulecraft` and `autograder` from it); the chapters' source files and the course's gradebook structure
travel in the plugin. Run workers with one thread each (`--nthreads 1`): a worker process grades one
notebook at a time (more would wait on a lock), so use `--nworkers` for more notebooks per machine.

Dask is not a sandbox: anyone who can reach the scheduler can run code on the workers. Keep scheduler and
workers on a private network or use TLS (`tls://` addresses with Dask's security settings); the
submissions themselves are always run inside our sandbox on the workers.
"""
from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

from distributed import Client, LocalCluster, as_completed
from distributed.diagnostics.plugin import WorkerPlugin

from .workers import SCRATCH_ENV_VAR, CourseBundle, GradedSubmission, Task, grade_task, prepare_worker

SCHEDULER_ENV_VAR = "MODULECRAFT_DASK_SCHEDULER"
RETRIES = 2  # a task that raised runs again, on any worker
PLUGIN_NAME = "modulecraft-course"
IN_FLIGHT = 1000  # tasks on the cluster at once: enough for hundreds of workers, a bounded memory on the scheduler


class PrepareCourse(WorkerPlugin):
    """Makes each worker's scratch grading folder from the course bundle, once per worker process."""

    def __init__(self, bundle: CourseBundle):
        self.bundle = bundle

    def setup(self, worker) -> None:
        prepare_worker(self.bundle, os.environ.get(SCRATCH_ENV_VAR) or os.path.join(worker.local_directory,
                                                                                      "modulecraft"))


@contextlib.contextmanager
def connect(scheduler: str, workers: int | None = None) -> Iterator[Client]:
    """A client of the cluster at `scheduler`, or of a new LocalCluster of `workers` one-thread processes."""
    if scheduler != "local":
        with Client(scheduler) as client:
            yield client
        return
    with LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def grade(scheduler: str, bundle: CourseBundle, tasks: Iterator[Task], workers: int | None = None
          ) -> Iterator[tuple[Task, GradedSubmission | BaseException]]:
    """(task, result or exception) for each task, as they complete on the cluster; at most `IN_FLIGHT` tasks
    (each carrying one submission's files) are on the cluster at a time."""
    with connect(scheduler, workers) as client:
        client.register_plugin(PrepareCourse(bundle), name=PLUGIN_NAME)
        running = {}

        def send(task: Task):
            future = client.submit(grade_task, task, key=task.key, retries=RETRIES)
            running[future] = task
            return future

        completed = as_completed([send(task) for task in itertools.islice(tasks, IN_FLIGHT)])
        for future in completed:
            upcoming = next(tasks, None)
            if upcoming is not None:
                completed.add(send(upcoming))
            try:
                result = future.result()
            except Exception as error:  # KilledWorker, or what the task raised on its last retry
                result = error
            yield running.pop(future), result
