"""What a grading run installs on each Dask worker, sent by value: a worker that cannot import the project still
loads it, and tells the coordinator why it cannot grade instead of failing (a plugin that fails to load keeps a
worker from starting: it stayed "closing" in the scheduler and broke the next run).

`dask_grading` registers these with `cloudpickle.register_pickle_by_value`, so nothing here may import the
project at module level; what needs it is imported inside `setup`, under `try`.
"""
from __future__ import annotations

import asyncio
import os
import pickle

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

SCRATCH_ENV_VAR = "MODULECRAFT_WORKER_SCRATCH"  # as autograder.workers.SCRATCH_ENV_VAR
UNFIT = "modulecraft_unfit"  # worker attribute: {plugin name: why this worker cannot grade that run's course}


class PrepareCourse(WorkerPlugin):
    """Prepares a worker for one grading run's course, then offers its one-notebook capacity as the Dask resource
    `resource` that the run's tasks require: a worker that could not be prepared (project missing, another
    grader version, no sandbox) never gets them, and says why (`unfit_reasons`). Torn down at the end of the
    run (or when the worker closes): the course's scratch folder goes, unless another run still uses it."""

    def __init__(self, bundle: bytes, resource: str, grader_version: str):
        self.bundle, self.resource, self.grader_version = bundle, resource, grader_version
        self.bundle_sha256 = None

    async def setup(self, worker) -> None:
        try:
            from autograder import workers
            if workers.grader_version() != self.grader_version:
                raise RuntimeError(f"grader version {workers.grader_version()} here, the coordinator's is "
                                   f"{self.grader_version}: run the coordinator's commit and `make` on this "
                                   "worker's checkout, then restart it")
            bundle = pickle.loads(self.bundle)
            base = os.environ.get(SCRATCH_ENV_VAR) or os.path.join(worker.local_directory, "modulecraft")
            # in a thread: it waits for a notebook of another run this worker may be grading
            await asyncio.to_thread(workers.prepare_worker, bundle, base, holder=self.resource)
            self.bundle_sha256 = bundle.sha256
        except Exception as error:  # the worker stays in the cluster, for other work; this run leaves it out
            reasons = getattr(worker, UNFIT, {})
            reasons[self.resource] = f"{type(error).__name__}: {error}".splitlines()[0]
            setattr(worker, UNFIT, reasons)
            return
        await worker.set_resources(**{self.resource: 1})
        worker.log_event(self.resource, {"prepared": True})  # `RunOnScheduler` hands it the run's waiting tasks

    async def teardown(self, worker) -> None:
        getattr(worker, UNFIT, {}).pop(self.resource, None)
        if self.bundle_sha256 is None:
            return
        from autograder import workers
        await asyncio.to_thread(workers.release_worker, self.bundle_sha256, holder=self.resource)
        if worker.status.name not in ("closing", "closed"):
            await worker.set_resources(**{self.resource: 0})


class RunOnScheduler(SchedulerPlugin):
    """On the scheduler, for run `run` of the coordinator `client_id`:

    - gives the run's waiting tasks to a worker as soon as it is prepared. Dask looks for a worker for tasks that
      found none ("no-worker") when a worker joins, not when a worker already there gains a resource; a worker
      joins before the run prepares it, so a run that lost every prepared worker would wait forever for the new
      ones. `PrepareCourse` logs an event under the run's name once its worker offers the resource;
    - forgets the run when its coordinator is gone for good (killed with SIGKILL, a lost network): its worker
      plugin unregistered, so that the course leaves the scheduler and the workers' disks all the same. A client
      whose connection broke comes back under the same id within `grace` seconds (Dask's client tries for as
      long as its connect timeout): the run goes on."""

    def __init__(self, client_id: str, run: str, grace: float):
        self.client_id, self.run, self.grace, self.name = client_id, run, grace, f"{run}-scheduler"
        self._forget = None  # the pending forget of a coordinator that left

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def log_event(self, topic: str, msg) -> None:
        if topic != self.run or not isinstance(msg, dict):
            return
        worker = self.scheduler.workers.get(msg.get("worker"))
        if worker is not None and worker in self.scheduler.running:
            self.scheduler.transitions(self.scheduler.bulk_schedule_unrunnable_after_adding_worker(worker),
                                       stimulus_id=f"{self.run}-prepared-{worker.address}")

    def remove_client(self, scheduler, client: str) -> None:
        if client == self.client_id and self._forget is None:
            self._forget = asyncio.get_running_loop().call_later(self.grace, self._forget_run, scheduler)

    def add_client(self, scheduler, client: str) -> None:
        if client == self.client_id and self._forget is not None:
            self._forget.cancel()
            self._forget = None

    def _forget_run(self, scheduler) -> None:
        scheduler.remove_plugin(name=self.name)
        if self.run in scheduler.worker_plugins:
            asyncio.ensure_future(scheduler.unregister_worker_plugin(None, self.run))


def unfit_reasons(resource: str, dask_worker=None) -> str | None:
    """Run on each worker by the coordinator: why this worker cannot grade the run of `resource`, if so."""
    return getattr(dask_worker, UNFIT, {}).get(resource)
