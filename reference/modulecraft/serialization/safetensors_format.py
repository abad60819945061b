"""safetensors, the default checkpoint format: raw little-endian arrays after a JSON header, no code at all.

The arrays are written and read by the ``safetensors`` package's numpy API, so a file we write loads in
``safetensors.torch.load_file`` (and any other safetensors reader) with every state_dict key. What is not an
array (key order, ``_metadata``, lazy placeholders, JSON values) is kept as one JSON string under the key
``modulecraft`` of the header's ``__metadata__`` (safetensors allows only string values there); other readers
ignore it.

Shared memory (tied weights) is **copied**: each key gets its own bytes. safetensors has no way to say
"this tensor is that one" (``safetensors.torch`` refuses shared tensors for that reason), and recording an
alias in our metadata would leave the alias key missing for every other reader, so strict loading into a
torch module would fail. Loading copies values into a module's own parameters anyway, so tying survives a
round trip; only the file is larger.
"""

from __future__ import annotations

import json
import struct
from collections import OrderedDict
from collections.abc import Mapping
from typing import IO, Any

import numpy as np
import safetensors
import safetensors.numpy

from modulecraft.serialization.errors import CheckpointError
from modulecraft.serialization.header import assemble, split

__all__ = ["save", "load", "looks_like_safetensors"]

_METADATA_KEY = "modulecraft"
_HEADER_LIMIT = 100 * 1024 * 1024  # the limit safetensors itself enforces on the JSON header


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the state_dict ``obj`` to the binary file object ``file`` in safetensors format."""
    arrays, header = split(obj, reserved="__metadata__")
    # safetensors stores dense little-endian bytes: give it contiguous plain arrays (views and
    # Parameters included), and refuse what it has no dtype for with our own words.
    contiguous = {}
    for key, array in arrays.items():
        if array.dtype.kind not in "biufc" or array.dtype.itemsize > 8:
            raise TypeError(f"cannot save {key!r}: safetensors stores bool, integer, float and complex64 "
                            f"arrays, not {array.dtype}; use format='npz' for it")
        contiguous[key] = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
    file.write(safetensors.numpy.save(contiguous, metadata={_METADATA_KEY: json.dumps(header)}))


def looks_like_safetensors(start: bytes) -> bool:
    """Whether the first bytes of a file are a safetensors header: an 8-byte little-endian size, then ``{``."""
    return len(start) >= 9 and start[8:9] == b"{" and struct.unpack("<Q", start[:8])[0] <= _HEADER_LIMIT


def load(file: IO[bytes], source: str) -> OrderedDict:
    """Read a safetensors file; one another tool wrote gives a plain ``OrderedDict`` of its arrays."""
    data = file.read()
    try:
        arrays = safetensors.numpy.load(data)
        (header_size,) = struct.unpack("<Q", data[:8])
        metadata = json.loads(data[8:8 + header_size]).get("__metadata__") or {}
    except (safetensors.SafetensorError, ValueError, TypeError, AttributeError, struct.error) as error:
        raise CheckpointError(f"{source} is not a valid safetensors file ({error})") from None
    if _METADATA_KEY not in metadata:
        return OrderedDict(arrays)
    return assemble(metadata[_METADATA_KEY], arrays, source)
