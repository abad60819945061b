"""`--preload autograder.dask_preload` for `dask scheduler` and `dask worker`: no HTTP server, and no course left
on a worker's disk by a predecessor that was killed.

Dask starts an HTTP server in every scheduler and worker even with `--no-dashboard` (the scheduler's on all
interfaces, port 8787, by default); grading needs none, and each is a way in. This closes it as the server
starts (pass `--dashboard-address 127.0.0.1:0` too, so that it only ever listened on loopback). A worker also
removes the scratch folders of dead workers under `$MODULECRAFT_WORKER_SCRATCH` as it starts (those under its
`--local-directory` Dask removes itself).
"""
from __future__ import annotations

import os

from distributed import Worker


def dask_setup(server) -> None:
    server.http_server.stop()  # closes the listening sockets
    scratch = os.environ.get("MODULECRAFT_WORKER_SCRATCH")
    if scratch and os.path.isdir(scratch) and isinstance(server, Worker):
        from autograder.workers import remove_dead_scratch
        remove_dead_scratch(scratch)
