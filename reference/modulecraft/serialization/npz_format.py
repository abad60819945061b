"""modulecraft's first checkpoint format, ``.npz`` + JSON: still written on request and always read.

One ``.npy`` entry per array, named by its state_dict key, plus one entry ``__modulecraft__`` holding the
JSON header of :mod:`modulecraft.serialization.header`. Any numpy can inspect it (``np.load(path).files``),
and reading it never unpickles (``allow_pickle=False``). Learners' checkpoints saved before safetensors
became the default are in this format, so :func:`load` must keep reading it.

Before numpy reads a byte, the archive's members are checked as for torch's format (stored uncompressed, inside
the file, apart from one another: :mod:`~modulecraft.serialization.zip_members`), and, since numpy allocates the
array an ``.npy`` header declares before reading its data, every member's declared shape against the bytes the
member really has (:func:`_check_declared_sizes`).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from modulecraft.serialization.errors import ZIP_DAMAGE, CheckpointError
from modulecraft.serialization.header import assemble, split
from modulecraft.serialization.zip_members import ZipMembers

__all__ = ["save", "load", "HEADER_MEMBER"]

_HEADER = "__modulecraft__"
HEADER_MEMBER = _HEADER + ".npy"  # how load() recognises this format inside a zip archive


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the checkpoint ``obj`` to the binary file object ``file`` as ``.npz`` + JSON."""
    arrays, header = split(obj, reserved=_HEADER)
    payload = {_HEADER: np.array(json.dumps(header))}
    payload.update(arrays)
    np.savez(file, **payload)


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _check_declared_sizes(file: IO[bytes]) -> None:
    """Refuse an archive whose ``.npy`` headers declare more (or less) data than their members hold."""
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version not in _HEADER_READERS:
                    raise CheckpointError(f"member {info.filename!r} has .npy format version {version}, which "
                                          "modulecraft.save never wrote")
                shape, _, dtype = _HEADER_READERS[version](member)
                if dtype.hasobject:  # pickled data: np.load refuses it below (allow_pickle=False)
                    continue
                declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if member.tell() + declared != info.file_size:
                    raise CheckpointError(f"member {info.filename!r} declares {declared} bytes of data for shape "
                                          f"{shape} but has {info.file_size - member.tell()}")


def load(file: IO[bytes], source: str) -> Any:
    """Read a checkpoint written by :func:`save` from the binary file object ``file``."""
    try:
        ZipMembers(file, "numpy.savez")
        _check_declared_sizes(file)
        file.seek(0)
        with np.load(file, allow_pickle=False) as archive:
            if _HEADER not in archive.files:
                raise CheckpointError(f"not a modulecraft checkpoint (no {_HEADER} entry); "
                                      "write checkpoints with modulecraft.save")
            header_json = str(archive[_HEADER][()])
            arrays = {name: archive[name] for name in archive.files if name != _HEADER}
    except CheckpointError as error:
        raise type(error)(f"{source}: {error}") from None
    except ZIP_DAMAGE as error:  # numpy's own refusals included
        raise CheckpointError(f"{source} is a damaged .npz checkpoint ({type(error).__name__}: {error})") from None
    return assemble(header_json, arrays, source)
