"""The members of a zip archive (torch's format, ``.npz``), located and checked before a byte of them is read.

``zipfile`` trusts an archive's directory: two members may claim the same bytes (a 52 MB file then reads as
1 GB), a member may be DEFLATE-compressed (1 MB inflating to 1 GiB), a size may exceed the file. Neither
``torch.save`` nor ``numpy.savez`` writes any of that, so :class:`ZipMembers` refuses it: every member stored
uncompressed, inside the file and apart from every other. The members' sizes then add up to at most the file's
size, so reading all of them costs at most the file's size in time and memory. Before ``zipfile`` reads the
directory (tens of microseconds a member, and a directory may hold millions), :func:`check_member_count` counts
its records.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import IO, NamedTuple

import numpy as np

from modulecraft.serialization import limits
from modulecraft.serialization.errors import CheckpointError
from modulecraft.serialization.file_bytes import read_pieces

__all__ = ["Member", "ZipMembers", "check_member_count"]

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... file name length, extra field length
_LOCAL_SIGNATURE = b"PK\x03\x04"


def _local_fields_agree(fields: bytes, name_length: int, name: str) -> bool:
    """Whether a local header's name is the directory's and its extra field a whole number of records (id, size,
    data): storages carry no checked CRC, so a flipped length here must not shift where their bytes are read."""
    if fields[:name_length].decode("utf-8", "replace") != name and fields[:name_length] != name.encode("cp437", "replace"):
        return False
    extra, position = fields[name_length:], 0
    while position + 4 <= len(extra):
        position += 4 + struct.unpack_from("<H", extra, position + 2)[0]
    return position == len(extra)


_DIRECTORY_SIGNATURE = b"PK\x01\x02"
_ZIP64_RECORDS = 76  # the zip64 end record and locator, which may sit between the directory and its end record


def check_member_count(file: IO[bytes]) -> None:
    """Refuse an archive whose directory has more records than the members limit, counted before ``zipfile``
    parses it: ``zipfile`` reads records until the directory's declared size is used up, whatever count the
    archive declares, and each record starts with its signature, so the signatures in those bytes bound them."""
    end = zipfile._EndRecData(file)  # zipfile's own reader of the end record (None: not a zip, zipfile says so)
    if end is None:
        return
    location, size = end[zipfile._ECD_LOCATION], end[zipfile._ECD_SIZE]
    start = max(0, location - size - _ZIP64_RECORDS)
    file.seek(start)
    records = file.read(location - start).count(_DIRECTORY_SIGNATURE)
    file.seek(0)
    if records > limits.MEMBERS:
        raise CheckpointError(f"its zip directory lists {records} members, more than the {limits.MEMBERS} of the "
                              "members limit (one per tensor, and a few)")


class Member(NamedTuple):
    """One member: where its bytes start in the file, how many there are, and their CRC (0: none recorded)."""
    name: str
    start: int
    size: int
    crc: int


class ZipMembers:
    """The stored members of the zip archive ``file`` whose directory ``zipfile`` read as ``infos``, by name;
    ``writer`` names what writes such archives."""

    def __init__(self, file: IO[bytes], writer: str, infos: list[zipfile.ZipInfo]):
        self.file = file
        file.seek(0, io.SEEK_END)
        file_size = file.tell()
        file.seek(0)
        self.members: dict[str, Member] = {}
        spans = []
        for info in infos:
            if info.filename in self.members:
                raise CheckpointError(f"the archive lists a member twice ({info.filename!r}); {writer} never does")
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                raise CheckpointError(f"member {info.filename!r} is compressed; {writer} stores members uncompressed")
            file.seek(info.header_offset)
            header = file.read(_LOCAL_HEADER.size)
            if len(header) != _LOCAL_HEADER.size or not header.startswith(_LOCAL_SIGNATURE):
                raise CheckpointError(f"member {info.filename!r} has no local header where the directory says")
            _, name_length, extra_length = _LOCAL_HEADER.unpack(header)
            if not _local_fields_agree(file.read(name_length + extra_length), name_length, info.orig_filename):
                raise CheckpointError(f"member {info.filename!r} has a local header that disagrees with the "
                                      "directory: the file is damaged")
            start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
            if start + info.file_size > file_size:
                raise CheckpointError(f"member {info.filename!r} declares {info.file_size} bytes, more than the "
                                      "file holds")
            self.members[info.filename] = Member(info.filename, start, info.file_size, info.CRC)
            spans.append((info.header_offset, start + info.file_size, info.filename))
        spans.sort()
        for (_, end, name), (begin, _, other) in zip(spans, spans[1:]):
            if begin < end:
                raise CheckpointError(f"members {name!r} and {other!r} overlap in the file; {writer} never "
                                      "writes one byte for two members")

    def read(self, member: Member) -> bytes:
        """The member's bytes, checked against its CRC when one was recorded."""
        self.file.seek(member.start)
        data = self.file.read(member.size)
        if len(data) != member.size:
            raise CheckpointError(f"member {member.name!r} is truncated")
        if member.crc and zlib.crc32(data) != member.crc:
            raise CheckpointError(f"member {member.name!r} fails its CRC check: the file is damaged")
        return data

    def read_into(self, outs: dict[Member, np.ndarray]) -> None:
        """Fill each flat uint8 array (of exactly its member's size) with its member's bytes, in one pass over the
        file, with no CRC check."""
        pieces = sorted(((member.start, out) for member, out in outs.items()), key=lambda piece: piece[0])
        read_pieces(self.file, 0, pieces, "a storage member")
