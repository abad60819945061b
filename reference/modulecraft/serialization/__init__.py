"""Saving a state_dict or a whole training checkpoint to disk and reading it back, never running code from a file.

A checkpoint is a state_dict or any nesting of dicts, lists, tuples and sets around numpy arrays and plain
values, e.g. ``{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}``. Formats,
chosen on save by ``format=`` or the file's suffix, and on load by the file's first bytes:

- safetensors (``.safetensors``, and any other suffix): written by default; read, also what
  ``safetensors.torch.load_file`` reads. Arrays under flattened names, the rest as JSON in its metadata
  (:mod:`~modulecraft.serialization.header`).
- torch's zip format (``.pt``/``.pth``, or ``format="torch"`` or ``"pt"``): what ``torch.save`` writes (torch >= 1.6) is
  read; what modulecraft writes in it, ``torch.load(weights_only=True)`` reads
  (:mod:`~modulecraft.serialization.torch_writer`).
- ``.npz`` + JSON (``.npz``): modulecraft's format before safetensors; written on request, always read so
  no saved work is lost.

Why loading is safe: safetensors and ``.npz`` hold raw array bytes plus JSON, and are read without pickle;
torch's format holds a pickle, read by an unpickler that refuses every global a checkpoint does not need
(:mod:`~modulecraft.serialization.torch_pickle`). Every size, offset and count in a file is checked, before any
arithmetic or allocation, against the bytes really there, and the work a file can ask for is counted against
:mod:`~modulecraft.serialization.limits` before it is done, so a hostile file costs time and memory bounded by
its size. A
damaged, truncated or hostile file raises :class:`CheckpointError` (a ``ValueError``; :class:`UnpicklingError`
for a refused global), never a partial result.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Mapping
from typing import IO, Any, Union

from modulecraft.serialization import npz_format, safetensors_format, torch_writer, torch_zip
from modulecraft.serialization.errors import ZIP_DAMAGE, CheckpointError, UnpicklingError
from modulecraft.serialization.zip_members import check_member_count

__all__ = ["save", "load", "CheckpointError", "UnpicklingError", "FORMATS"]

PathOrFile = Union[str, os.PathLike, IO[bytes]]

FORMATS = ("safetensors", "npz", "torch")
_ALIASES = {"pt": "torch"}  # the suffix everyone uses, accepted as the format's name
_SUFFIXES = {".safetensors": "safetensors", ".npz": "npz", ".pt": "torch", ".pth": "torch"}
_WRITERS = {"safetensors": safetensors_format.save, "npz": npz_format.save, "torch": torch_writer.save}


def _checked_format(format: str | None) -> str | None:
    format = _ALIASES.get(format, format)
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown checkpoint format {format!r}; expected one of {FORMATS} (or 'pt' for 'torch')")
    return format


def _format_to_write(f: PathOrFile, format: str | None) -> str:
    if format is not None:
        return _checked_format(format)
    if isinstance(f, (str, os.PathLike)):
        return _SUFFIXES.get(os.path.splitext(os.fspath(f))[1].lower(), "safetensors")
    return "safetensors"


def save(obj: Mapping[str, Any], f: PathOrFile, format: str | None = None) -> None:
    """Write the checkpoint ``obj`` (a state_dict, or a dict of state_dicts and values) to ``f``.

    ``f`` is a path or a binary file object. The format is ``format`` (``"safetensors"``, ``"torch"`` (or
    ``"pt"``) or ``"npz"``), else the path's suffix (``.pt``/``.pth`` for torch's, ``.npz``), else safetensors.
    Values may be numpy arrays, str, int, float, bool, None, bytes, complex, numpy dtypes (of arrays), and dicts,
    lists, tuples and sets of them; also, except in torch's format (torch has no such values), numpy scalars,
    frozensets and lazy modules' uninitialised placeholders. Anything else is refused, so ``load`` gives back exactly what was
    saved. A path is used as given, suffix and all.
    """
    chosen = _format_to_write(f, format)
    if isinstance(f, (str, os.PathLike)):
        buffer = io.BytesIO()  # nothing is written to the path unless the whole checkpoint could be made
        _WRITERS[chosen](obj, buffer)
        with open(f, "wb") as file:
            file.write(buffer.getbuffer())
    else:
        _WRITERS[chosen](obj, f)


def _sniff(file: IO[bytes], source: str) -> tuple[str, list[zipfile.ZipInfo] | None]:
    """The format a file is really in, from its first bytes (and member names for a zip archive), and a zip
    archive's directory, read once."""
    start = file.read(16)
    file.seek(0)
    if start.startswith(b"PK\x03\x04") or start.startswith(b"PK\x05\x06"):
        try:
            check_member_count(file)
            with zipfile.ZipFile(file) as archive:
                infos = archive.infolist()
                if torch_zip.is_torch_archive(archive):
                    return "torch", infos
                if npz_format.HEADER_MEMBER in archive.namelist():
                    return "npz", infos
        except CheckpointError as error:
            raise CheckpointError(f"{source}: {error}") from None
        except ZIP_DAMAGE as error:
            raise CheckpointError(f"{source} is a damaged zip archive ({error})") from None
        finally:
            file.seek(0)
        raise CheckpointError(f"{source} is not a modulecraft checkpoint: a zip archive that is neither a torch "
                              "checkpoint (no data.pkl) nor a modulecraft .npz (no __modulecraft__ entry); "
                              "write checkpoints with modulecraft.save")
    if safetensors_format.looks_like_safetensors(start):
        return "safetensors", None
    if start.startswith(b"\x80") and start[2:3] == b"\x8a":
        raise CheckpointError(f"{source} is in torch's legacy format (torch < 1.6), which is read only by "
                              "unpickling; re-save it with a current torch.save")
    raise CheckpointError(f"{source} is not a checkpoint modulecraft reads (safetensors, torch's .pt zip or "
                          "modulecraft's .npz); write checkpoints with modulecraft.save")


def load(f: PathOrFile, format: str | None = None) -> Any:
    """Read a checkpoint: what was saved, dicts in their order, a state_dict with its ``_metadata``.

    The format comes from the file's first bytes, whatever its name; ``format``, when given, must agree.
    A torch checkpoint comes back as ``torch.load(weights_only=True)`` would give it, with numpy arrays for
    tensors (Parameters included, as a state_dict holds them). A path is read straight into the arrays; a file
    object is read whole into memory first.
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb", buffering=0) as file:  # unbuffered: reads are few, small or straight into arrays
            return _load(file, repr(os.fspath(f)), format)
    # from where the caller's file object stands, in memory: seekable from 0 whatever the object
    return _load(io.BytesIO(f.read()), "the checkpoint", format)


def _load(file: IO[bytes], source: str, format: str | None) -> Any:
    format = _checked_format(format)
    found, infos = _sniff(file, source)
    if format is not None and format != found:
        raise CheckpointError(f"{source} is a {found} checkpoint, not {format!r}")
    try:
        return _READERS[found](file, source) if infos is None else _READERS[found](file, source, infos)
    except MemoryError:
        raise CheckpointError(f"{source} needs more memory than is available to load; nothing was run") from None


_READERS = {"torch": torch_zip.load, "npz": npz_format.load, "safetensors": safetensors_format.load}
