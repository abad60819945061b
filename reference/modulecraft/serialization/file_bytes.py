"""Reading a run of a file's bytes straight into the array that keeps them, with no copy in between.

A file with a descriptor is read through read-only memory maps of 8 MiB at a time, copied by numpy: measured
here about twice as fast as ``readinto`` (which the kernel serves page by page), while the memory the maps add
to the process stays at 8 MiB whatever the file's size. Other file objects (``io.BytesIO``) use ``readinto``.
"""

from __future__ import annotations

import io
import mmap
import os
from typing import IO

import numpy as np

from modulecraft.serialization.errors import CheckpointError

__all__ = ["read_into"]

_CHUNK = 8 * 2**20


def read_into(file: IO[bytes], start: int, out: np.ndarray, what: str) -> None:
    """Fill ``out`` (a flat uint8 array) with the file's bytes from offset ``start``; ``what`` names them in the
    error raised if the file ends first."""
    try:
        descriptor = file.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        descriptor = None
    if descriptor is None:
        file.seek(start)
        if file.readinto(memoryview(out)) != out.size:
            raise CheckpointError(f"{what} is truncated")
        return
    if start + out.size > os.fstat(descriptor).st_size:
        raise CheckpointError(f"{what} is truncated")
    for begin in range(0, out.size, _CHUNK):
        length = min(_CHUNK, out.size - begin)
        skip = (start + begin) % mmap.ALLOCATIONGRANULARITY  # maps start at a multiple of the granularity
        with mmap.mmap(descriptor, skip + length, offset=start + begin - skip, access=mmap.ACCESS_READ) as view:
            out[begin:begin + length] = np.frombuffer(view, np.uint8, length, skip)
