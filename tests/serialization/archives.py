"""Making and taking apart torch checkpoints in tests: real ones from ``torch.save``, altered ones by hand."""

from __future__ import annotations

import io
import struct
import zipfile

import torch


def torch_saved(obj) -> bytes:
    """What ``torch.save(obj, f)`` writes to a file object (its members are in the folder ``archive/``)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def members(archive: bytes) -> dict[str, bytes]:
    """Every member of a zip archive, by name, in the archive's order."""
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        return {info.filename: opened.read(info) for info in opened.infolist()}


def zipped(entries: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A zip archive of ``entries`` (with correct CRCs and sizes: whatever is wrong is wrong on purpose)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def folder_of(entries: dict[str, bytes]) -> str:
    """The one folder torch.save puts every member in (``archive/`` for a file object)."""
    return next(name for name in entries if name.endswith("/data.pkl"))[: -len("data.pkl")]


def replaced(archive: bytes, changes: dict[str, bytes | None]) -> bytes:
    """``archive`` rebuilt with the members named in ``changes`` (relative to its folder) replaced or removed."""
    entries = members(archive)
    folder = folder_of(entries)
    for name, content in changes.items():
        member = folder + name
        if content is None:
            del entries[member]
        else:
            entries[member] = content
    return zipped(entries)


def with_aliases(archive: bytes, target: str, aliases: list[str]) -> bytes:
    """``archive`` with more directory entries, one per alias, all naming the bytes of the member ``target``:
    members that overlap, with valid sizes and CRCs (what no zip writer makes, and what zipfile accepts)."""
    end = archive.rindex(b"PK\x05\x06")
    count, size, offset = struct.unpack_from("<HII", archive, end + 10)
    directory = archive[offset:offset + size]
    position = 0
    while position < len(directory):  # find the directory record of target
        name_length, extra_length, comment_length = struct.unpack_from("<HHH", directory, position + 28)
        record_end = position + 46 + name_length + extra_length + comment_length
        if directory[position + 46:position + 46 + name_length] == target.encode():
            record = directory[position:record_end]
            break
        position = record_end
    else:
        raise KeyError(target)
    extra = b""
    for alias in aliases:
        copy = bytearray(record[:46]) + alias.encode() + record[46 + name_length:]
        struct.pack_into("<H", copy, 28, len(alias.encode()))
        extra += copy
    directory += extra
    trailer = bytearray(archive[end:])
    struct.pack_into("<HHI", trailer, 8, count + len(aliases), count + len(aliases), len(directory))
    return archive[:offset] + directory + bytes(trailer)
