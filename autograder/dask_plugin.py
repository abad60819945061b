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

    async def teardown(self, worker) -> None:
        getattr(worker, UNFIT, {}).pop(self.resource, None)
        if self.bundle_sha256 is None:
            return
        from autograder import workers
        await asyncio.to_thread(workers.release_worker, self.bundle_sha256, holder=self.resource)
        if worker.status.name not in ("closing", "closed"):
            await worker.set_resources(**{self.resource: 0})


class ForgetRunWithItsClient(SchedulerPlugin):
    """On the scheduler: when the coordinator of run `run` disconnects without having ended it (killed with
    SIGKILL, a lost network), unregisters the run's worker plugin, so that the course leaves the scheduler and
    the workers' disks all the same."""

    def __init__(self, client_id: str, run: str):
        self.client_id, self.run, self.name = client_id, run, f"{run}-forget"

    def remove_client(self, scheduler, client: str) -> None:
        if client != self.client_id:
            return
        scheduler.remove_plugin(name=self.name)
        if self.run in scheduler.worker_plugins:
            asyncio.ensure_future(scheduler.unregister_worker_plugin(None, self.run))


def unfit_reasons(resource: str, dask_worker=None) -> str | None:
    """Run on each worker by the coordinator: why this worker cannot grade the run of `resource`, if so."""
    return getattr(dask_worker, UNFIT, {}).get(resource)
