"""modulecraft's first checkpoint format, ``.npz`` + JSON: still written on request and always read.

One ``.npy`` entry per array, named by its state_dict key, plus one entry ``__modulecraft__`` holding the
JSON header of :mod:`modulecraft.serialization.header`. Any numpy can inspect it (``np.load(path).files``),
and reading it never unpickles (``allow_pickle=False``). Learners' checkpoints saved before safetensors
became the default are in this format, so :func:`load` must keep reading it.

Reading one: the archive's members are checked as for torch's format (stored uncompressed, inside the file, apart
from one another: :mod:`~modulecraft.serialization.zip_members`), then every member's ``.npy`` header is parsed
here (a plain dtype, no Python objects, a shape whose size is the bytes the member really has) before any array is
allocated, and the arrays' data is read straight into them, as for torch's format, then checked against each
member's CRC, as ``numpy.load`` did.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from modulecraft.serialization import limits
from modulecraft.serialization.errors import ZIP_DAMAGE, CheckpointError
from modulecraft.serialization.file_bytes import read_pieces
from modulecraft.serialization.header import assemble, split
from modulecraft.serialization.zip_members import Member, ZipMembers

__all__ = ["save", "load", "HEADER_MEMBER"]

_HEADER = "__modulecraft__"
HEADER_MEMBER = _HEADER + ".npy"  # how load() recognises this format inside a zip archive


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the checkpoint ``obj`` to the binary file object ``file`` as ``.npz`` + JSON."""
    arrays, header = split(obj, reserved=_HEADER)
    payload = {_HEADER: np.array(json.dumps(header))}
    payload.update(arrays)
    np.savez(file, **payload)


_MAGIC = b"\x93NUMPY"
_LENGTHS = {(1, 0): "<H", (2, 0): "<I"}  # .npy format versions numpy.savez writes, and how their header length is
# What numpy writes as a .npy header (a dict's repr, keys sorted, padded with spaces), for a plain dtype: anything
# else (structured or subarray dtypes) modulecraft.save never wrote. Parsed here, not by numpy's literal_eval,
# which costs 50 microseconds a member.
_NPY_HEADER = re.compile(rb"\{'descr': '([<>|=]?[a-zA-Z]\d*(?:\[\w+\])?)', 'fortran_order': (True|False), "
                         rb"'shape': \(((?:\d+, ?)*\d*)\), \} *\n")
_HEAD = 256  # bytes read first from each member: numpy's headers are 128 bytes long


def _array_header(file: IO[bytes], member: Member) -> tuple[np.dtype, tuple, bool, bytes]:
    """A member's dtype, shape and order, and its header's bytes (its data follows), from its .npy header alone."""
    file.seek(member.start)
    head = file.read(min(member.size, _HEAD))
    version = tuple(head[6:8])
    if not head.startswith(_MAGIC) or version not in _LENGTHS:
        raise CheckpointError(f"member {member.name!r} is not an .npy array of a format version numpy.savez writes")
    width = struct.calcsize(_LENGTHS[version])
    data_start = 8 + width + struct.unpack_from(_LENGTHS[version], head + bytes(width), 8)[0]
    if data_start > member.size:
        raise CheckpointError(f"member {member.name!r} declares a header longer than itself")
    if data_start > len(head):
        head += file.read(data_start - len(head))
    match = _NPY_HEADER.fullmatch(head[8 + width:data_start])
    if match is None:
        raise CheckpointError(f"member {member.name!r} has an .npy header modulecraft.save never wrote")
    descr, fortran, shape_text = match.groups()
    dtype = np.dtype(descr.decode("ascii"))
    if dtype.hasobject:
        raise CheckpointError(f"member {member.name!r} holds Python objects, which only pickle could read: refused, "
                              "as numpy.load(allow_pickle=False) refuses them")
    shape = tuple(int(size) for size in shape_text.replace(b" ", b"").split(b",") if size)
    if len(shape) > limits.DIMENSIONS or math.prod(shape) * dtype.itemsize != member.size - data_start:
        raise CheckpointError(f"member {member.name!r} declares {math.prod(shape) * dtype.itemsize} bytes of data for "
                              f"shape {shape} but has {member.size - data_start}")
    return dtype, shape, fortran == b"True", head[:data_start]


def load(file: IO[bytes], source: str, infos: list[zipfile.ZipInfo]) -> Any:
    """Read a checkpoint written by :func:`save` from the binary file object ``file`` (``infos``: its zip
    directory): every member's header first, then every array's data in one pass over the file."""
    try:
        archive = ZipMembers(file, "numpy.savez", infos)
        if HEADER_MEMBER not in archive.members:
            raise CheckpointError(f"not a modulecraft checkpoint (no {_HEADER} entry); "
                                  "write checkpoints with modulecraft.save")
        arrays, pieces, checks = {}, [], []
        for name, member in archive.members.items():
            dtype, shape, fortran, head = _array_header(file, member)
            array = np.empty(shape, dtype, order="F" if fortran else "C")
            arrays[name[:-len(".npy")] if name.endswith(".npy") else name] = array
            data = array.reshape(-1, order="A").view(np.uint8)
            pieces.append((member.start + len(head), data))
            checks.append((member, head, data))
        read_pieces(file, 0, sorted(pieces, key=lambda piece: piece[0]), "an .npz member")
        for member, head, data in checks:  # as numpy.load did through zipfile: savez records every CRC
            if zlib.crc32(data, zlib.crc32(head)) != member.crc:
                raise CheckpointError(f"member {member.name!r} fails its CRC check: the file is damaged")
        header = arrays.pop(_HEADER)
        if header.dtype.kind != "U" or header.shape != ():
            raise CheckpointError(f"its {_HEADER} entry is not a string")
        header_json = str(header[()])
    except CheckpointError as error:
        raise type(error)(f"{source}: {error}") from None
    except (*ZIP_DAMAGE, TypeError) as error:
        raise CheckpointError(f"{source} is a damaged .npz checkpoint ({type(error).__name__}: {error})") from None
    return assemble(header_json, arrays, source)
