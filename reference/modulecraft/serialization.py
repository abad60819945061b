"""Saving a state_dict to disk and reading it back, without pickle.

``torch.save`` pickles, and unpickling a file someone sent you can run arbitrary code. A modulecraft
checkpoint is a plain ``.npz`` archive instead: one ``.npy`` entry per array, named by its state_dict key,
plus one entry ``__modulecraft__`` holding JSON with the key order, the ``_metadata`` (each module's
``_version``), the keys of lazy modules' uninitialised placeholders (which have no values to store) and
any non-array values (e.g. extra state) as JSON. Any numpy can inspect it:
``np.load(path).files``. Loading never unpickles (``allow_pickle=False``).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import IO, Any, Union

import numpy as np

from modulecraft.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["save", "load"]

_HEADER = "__modulecraft__"
_FORMAT = "modulecraft.state_dict"
_FORMAT_VERSION = 1

PathOrFile = Union[str, os.PathLike, IO[bytes]]


def save(obj: Mapping[str, Any], f: PathOrFile) -> None:
    """Write the state_dict ``obj`` to ``f`` (a path or a binary file object) as ``.npz`` + JSON.

    Values must be numpy arrays (uninitialised placeholders included), or JSON-serialisable values
    (numbers, strings, lists, dicts, None).
    A path is used as given (numpy adds ``.npz`` only when we let it, so we do not).
    """
    if not isinstance(obj, Mapping):
        hint = "; pass module.state_dict() to save a module's state" if hasattr(obj, "state_dict") else ""
        raise TypeError("modulecraft.save stores a state_dict (a mapping of names to arrays), "
                        f"got {type(obj).__name__}{hint}")
    arrays: dict[str, np.ndarray] = {}
    values: dict[str, Any] = {}
    lazy: dict[str, dict[str, str]] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"state_dict keys must be strings, got {key!r}")
        if key == _HEADER:
            raise ValueError(f"the key {_HEADER!r} is reserved for the checkpoint's own metadata")
        if is_lazy(value):
            lazy[key] = {"kind": "parameter" if isinstance(value, UninitializedParameter) else "buffer",
                         "dtype": value.dtype.str}
        elif isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise TypeError(f"cannot save {key!r}: arrays of Python objects would need pickle")
            arrays[key] = np.asarray(value)
        else:
            try:
                json.dumps(value)
            except TypeError:
                raise TypeError(f"cannot save {key!r} of type {type(value).__name__}: only numpy arrays and "
                                "JSON values (numbers, strings, lists, dicts, None) are stored safely") from None
            values[key] = value
    metadata = getattr(obj, "_metadata", None)
    header = {
        "format": _FORMAT,
        "version": _FORMAT_VERSION,
        "keys": list(obj.keys()),
        "values": values,
        "uninitialized": lazy,
        "metadata": None if metadata is None else dict(metadata),
    }
    payload = {_HEADER: np.array(json.dumps(header))}
    payload.update(arrays)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            np.savez(file, **payload)
    else:
        np.savez(f, **payload)


def _placeholder(kind: str, dtype: str):
    """The shape-less parameter or buffer of a lazy module that had not run yet when it was saved."""
    cls = UninitializedParameter if kind == "parameter" else UninitializedBuffer
    return cls(dtype=np.dtype(dtype))


def load(f: PathOrFile) -> OrderedDict:
    """Read a state_dict written by :func:`save`: an ``OrderedDict`` in the saved order, with ``_metadata``."""
    with np.load(f, allow_pickle=False) as archive:
        if _HEADER not in archive.files:
            raise ValueError(f"{f!r} is not a modulecraft checkpoint (no {_HEADER} entry); "
                             "write checkpoints with modulecraft.save")
        header = json.loads(str(archive[_HEADER][()]))
        if header.get("format") != _FORMAT or header.get("version", 0) > _FORMAT_VERSION:
            raise ValueError(f"{f!r} has an unknown checkpoint format {header.get('format')!r} "
                             f"version {header.get('version')!r}; upgrade modulecraft to read it")
        state_dict = OrderedDict()
        lazy = header.get("uninitialized", {})
        for key in header["keys"]:
            if key in lazy:
                state_dict[key] = _placeholder(**lazy[key])
            elif key in header["values"]:
                state_dict[key] = header["values"][key]
            else:
                state_dict[key] = archive[key]
    if header["metadata"] is not None:
        state_dict._metadata = OrderedDict(header["metadata"])
    return state_dict
