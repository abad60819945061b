"""safetensors, the default checkpoint format: raw little-endian arrays after a JSON header, no code at all.

Files are written by the ``safetensors`` package's numpy API, so what we write loads in
``safetensors.torch.load_file`` (and any other safetensors reader) with every array under its flattened name
(``"0.weight"``, ``"model.0.weight"``, ``"optimizer.state.0.exp_avg"``). What is not an array (the structure of
a training checkpoint, key order, ``_metadata``, lazy placeholders, plain values) is one JSON string under the
key ``modulecraft`` of the header's ``__metadata__`` (see :mod:`~modulecraft.serialization.header`); other
readers ignore it.

Files are read here, not by the package: the header is checked whole first (every dtype known, every shape and
offset a bounded non-negative int, the tensors covering the data exactly once), then every tensor is read
straight into the array it becomes (:mod:`~modulecraft.serialization.file_bytes`): one copy of the data in
memory, no more. bfloat16 and float8 tensors load widened to float32 (see
:mod:`~modulecraft.serialization.dtypes`).

Shared memory (tied weights) is **copied**: each key gets its own bytes. safetensors has no way to say
"this tensor is that one" (``safetensors.torch`` refuses shared tensors for that reason), and recording an
alias in our metadata would leave the alias key missing for every other reader, so strict loading into a
torch module would fail. Loading copies values into a module's own parameters anyway, so tying survives a
round trip; only the file is larger.
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import IO, Any

import numpy as np
import safetensors.numpy

from modulecraft.serialization import dtypes, limits
from modulecraft.serialization.errors import CheckpointError
from modulecraft.serialization.file_bytes import read_pieces
from modulecraft.serialization.header import assemble, parse_json, split

__all__ = ["save", "load", "looks_like_safetensors"]

_METADATA_KEY = "modulecraft"


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the checkpoint ``obj`` to the binary file object ``file`` in safetensors format."""
    arrays, header = split(obj, reserved="__metadata__")
    # safetensors stores dense little-endian bytes: give it contiguous plain arrays (views and
    # Parameters included), and refuse what it has no dtype for with our own words.
    contiguous = {}
    for name, array in arrays.items():
        kind = dtypes.for_numpy(array.dtype)
        if kind is None or kind.safetensors_name is None:
            raise TypeError(f"cannot save {name!r}: safetensors stores bool, integer, float and complex64 "
                            f"arrays, not {array.dtype}; use format='npz' for it")
        contiguous[name] = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
    file.write(safetensors.numpy.save(contiguous, metadata={_METADATA_KEY: json.dumps(header)}))


def looks_like_safetensors(start: bytes) -> bool:
    """Whether the first bytes of a file are a safetensors header: an 8-byte little-endian size, then ``{``."""
    return len(start) >= 9 and start[8:9] == b"{" and struct.unpack("<Q", start[:8])[0] <= limits.HEADER_BYTES


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value < limits.INT64


def _checked_entry(name: str, entry: Any, data_size: int) -> tuple[dtypes.ElementType, list, int, int]:
    """One tensor's type, shape and data offsets, each checked before any arithmetic on them (inlined: this runs
    once per tensor, thousands of times for a large model)."""
    try:
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    except (TypeError, KeyError, ValueError):
        raise CheckpointError(f"tensor {name!r} is not described by a dtype, a shape and two data offsets") from None
    kind = dtypes.by_safetensors_name(dtype) if type(dtype) is str else None
    if kind is None:
        what = f": {dtypes.UNREAD[dtype]}" if dtype in dtypes.UNREAD else \
            " (it reads BOOL, U8-U64, I8-I64, F16, BF16, F32, F64, C64 and the F8 types)"
        raise CheckpointError(f"tensor {name!r} has the dtype {str(dtype)[:20]!r}, which modulecraft does not read"
                              + what)
    if not (type(shape) is list and len(shape) <= limits.DIMENSIONS and all(map(_is_count, shape))
            and _is_count(begin) and _is_count(end) and begin <= end <= data_size):
        raise CheckpointError(f"tensor {name!r} has an invalid shape {str(shape)[:60]} or data offsets "
                              f"{str(entry['data_offsets'])[:60]} for {data_size} bytes of data")
    if math.prod(shape) * kind.raw.itemsize != end - begin:  # at most 64 ints below 2**63: a cheap product
        raise CheckpointError(f"tensor {name!r} has an invalid shape {shape} for its {end - begin} bytes of data")
    return kind, shape, begin, end


def load(file: IO[bytes], source: str) -> Any:
    """Read a safetensors file; one another tool wrote gives a plain ``OrderedDict`` of its arrays."""
    try:
        file.seek(0, io.SEEK_END)
        file_size = file.tell()
        file.seek(0)
        (header_size,) = struct.unpack("<Q", file.read(8))
        if header_size > min(limits.HEADER_BYTES, file_size - 8):
            raise CheckpointError(f"its header declares {header_size} bytes, more than the file holds")
        header = parse_json(file.read(header_size), "its header")
        if type(header) is not dict:
            raise CheckpointError("its header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        if type(metadata) is not dict or not all(type(value) is str for value in metadata.values()):
            raise CheckpointError("its __metadata__ is not a mapping of strings to strings")
        if len(header) > limits.TENSORS:
            raise CheckpointError(f"its header lists more than {limits.TENSORS} tensors (the tensors limit), more "
                                  "than any checkpoint modulecraft reads holds")
        data_start = 8 + header_size
        entries = {name: _checked_entry(name, entry, file_size - data_start) for name, entry in header.items()}
        covered = 0
        for _, _, begin, end in sorted(entries.values(), key=lambda entry: entry[2:]):
            covered = end if begin == covered else -1
        if covered != file_size - data_start:
            raise CheckpointError("its data is not fully covered by its tensors exactly once (a gap, an overlap "
                                  "or bytes past the last tensor)")
        # The tensors tile the data exactly: one read fills one buffer, and each tensor is a view of its bytes
        # (thousands of small tensors cost one read, not thousands; memory stays the file's size). A tensor whose
        # offset does not suit its type's alignment gets a copy of its own, so arithmetic on it stays fast.
        data = np.empty(covered, np.uint8)
        read_pieces(file, data_start, [(0, data)], "its data")
        arrays = OrderedDict()
        for name, (kind, shape, begin, end) in entries.items():
            raw = data[begin:end].view(kind.raw).reshape(shape)
            if begin % kind.raw.itemsize:
                raw = raw.copy()
            if sys.byteorder == "big" and kind.raw.itemsize > 1:
                raw = raw.byteswap().view(kind.raw.newbyteorder("="))
            arrays[name] = kind.load(raw)
    except CheckpointError as error:
        raise CheckpointError(f"{source} is not a valid safetensors file: {error}") from None
    except (ValueError, TypeError, RecursionError, struct.error, OSError) as error:
        raise CheckpointError(f"{source} is not a valid safetensors file ({type(error).__name__}: {error})") \
            from None
    if _METADATA_KEY not in metadata:
        return arrays
    return assemble(metadata[_METADATA_KEY], arrays, source)
