"""Making and taking apart torch checkpoints in tests: real ones from ``torch.save``, altered ones by hand."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

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


def nested_members(entries: dict[str, bytes], outer: str, inner: list[str], size: int) -> tuple[bytes, dict]:
    """A zip of ``entries`` plus ``outer``, whose bytes hold, one inside the other, complete members ``inner``
    (local header, then data running to the end of ``outer``, the last one ``size`` zero bytes): members that
    overlap, with valid headers, sizes and CRCs (what no zip writer makes, and what zipfile accepts). Returns the
    archive and every member's size."""
    datas, headers = [bytes(size)], []
    for name in reversed(inner):
        encoded = name.encode()
        padding = -(30 + len(encoded) + 4) % 4  # each member a whole number of float32s
        header = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, zlib.crc32(datas[0]), len(datas[0]),
                             len(datas[0]), len(encoded), 4 + padding) + encoded + struct.pack("<2H", 0xCAFE, padding)
        headers.insert(0, header + bytes(padding))
        datas.insert(0, headers[0] + datas[0])
    archive = zipped({**entries, outer: datas[0]})
    end = archive.rindex(b"PK\x05\x06")
    count, directory_size, directory_offset = struct.unpack_from("<HII", archive, end + 10)
    position = archive.index(datas[0][:256])  # where outer's data, so inner[0]'s local header, starts
    records = b""
    for name, header, data in zip(inner, headers, datas[1:]):
        encoded = name.encode()
        records += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, zlib.crc32(data), len(data),
                               len(data), len(encoded), 0, 0, 0, 0, 0, position) + encoded
        position += len(header)
    trailer = bytearray(archive[end:])
    struct.pack_into("<HHI", trailer, 8, count + len(inner), count + len(inner), directory_size + len(records))
    sizes = {outer: len(datas[0]), **{name: len(data) for name, data in zip(inner, datas[1:])}}
    return archive[:directory_offset + directory_size] + records + bytes(trailer), sizes


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
