"""modulecraft's first checkpoint format, ``.npz`` + JSON: still written on request and always read.

One ``.npy`` entry per array, named by its state_dict key, plus one entry ``__modulecraft__`` holding the
JSON header of :mod:`modulecraft.serialization.header`. Any numpy can inspect it (``np.load(path).files``),
and reading it never unpickles (``allow_pickle=False``). Learners' checkpoints saved before safetensors
became the default are in this format, so :func:`load` must keep reading it.
"""

from __future__ import annotations

import json
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from modulecraft.serialization.errors import CheckpointError
from modulecraft.serialization.header import assemble, split

__all__ = ["save", "load", "HEADER_MEMBER"]

_HEADER = "__modulecraft__"
HEADER_MEMBER = _HEADER + ".npy"  # how load() recognises this format inside a zip archive


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the state_dict ``obj`` to the binary file object ``file`` as ``.npz`` + JSON."""
    arrays, header = split(obj, reserved=_HEADER)
    payload = {_HEADER: np.array(json.dumps(header))}
    payload.update(arrays)
    np.savez(file, **payload)


def load(file: IO[bytes], source: str) -> OrderedDict:
    """Read a state_dict written by :func:`save` from the binary file object ``file``."""
    try:
        with np.load(file, allow_pickle=False) as archive:
            if _HEADER not in archive.files:
                raise CheckpointError(f"{source} is not a modulecraft checkpoint (no {_HEADER} entry); "
                                      "write checkpoints with modulecraft.save")
            header_json = str(archive[_HEADER][()])
            arrays = {name: archive[name] for name in archive.files if name != _HEADER}
    except CheckpointError:
        raise
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as error:  # numpy's own refusals included
        raise CheckpointError(f"{source} is a damaged .npz checkpoint ({type(error).__name__}: {error})") from None
    return assemble(header_json, arrays, source)
