"""Making and taking apart torch checkpoints in tests: real ones from ``torch.save``, altered ones by hand."""

from __future__ import annotations

import io
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
