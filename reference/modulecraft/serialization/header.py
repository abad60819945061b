"""What a checkpoint stores besides arrays, shared by the ``.npz`` and safetensors formats.

A state_dict holds more than arrays: the key order, ``_metadata`` (each module's ``_version``, which
``load_state_dict`` passes to ``_load_from_state_dict`` for backward-compatible loading), lazy modules'
uninitialised placeholders (no shape, so no values to store) and non-array values such as extra state.
Both formats store the arrays natively and all the rest as one JSON header, built and read here.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from modulecraft.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from modulecraft.serialization.errors import CheckpointError

__all__ = ["split", "assemble", "FORMAT", "FORMAT_VERSION"]

FORMAT = "modulecraft.state_dict"
FORMAT_VERSION = 1


def split(obj: Mapping[str, Any], reserved: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split the state_dict ``obj`` into plain arrays and the JSON-serialisable header describing the rest.

    ``reserved`` is the name the format keeps for its own header: a state_dict key with that name is
    refused rather than silently overwritten.
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
        if key == reserved:
            raise ValueError(f"the key {reserved!r} is reserved for the checkpoint's own metadata")
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
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "keys": list(obj.keys()),
        "values": values,
        "uninitialized": lazy,
        "metadata": None if metadata is None else dict(metadata),
    }
    return arrays, header


def _placeholder(kind: str, dtype: str):
    """The shape-less parameter or buffer of a lazy module that had not run yet when it was saved."""
    cls = UninitializedParameter if kind == "parameter" else UninitializedBuffer
    return cls(dtype=np.dtype(dtype))


def assemble(header_json: str, arrays: Mapping[str, np.ndarray], source: str) -> OrderedDict:
    """The state_dict that :func:`split` described: an ``OrderedDict`` in the saved order, with ``_metadata``.

    ``arrays`` maps keys to the arrays the format read; ``source`` names the file in error messages. A header
    that does not match the arrays (a key with no value, an array no key names) is a damaged file.
    """
    try:
        header = json.loads(header_json)
        if header.get("format") != FORMAT or header.get("version", 0) > FORMAT_VERSION:
            raise CheckpointError(f"{source} has an unknown checkpoint format {header.get('format')!r} "
                                  f"version {header.get('version')!r}; upgrade modulecraft to read it")
        keys, values, lazy = header["keys"], header["values"], header.get("uninitialized", {})
        state_dict = OrderedDict()
        for key in keys:
            if key in lazy:
                state_dict[key] = _placeholder(**lazy[key])
            elif key in values:
                state_dict[key] = values[key]
            else:
                state_dict[key] = arrays[key]
        if set(arrays) - set(keys):
            raise CheckpointError(f"{source} holds arrays its header does not list: "
                                  f"{sorted(set(arrays) - set(keys))}")
        if header["metadata"] is not None:
            state_dict._metadata = OrderedDict(header["metadata"])
    except CheckpointError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise CheckpointError(f"{source} has a damaged modulecraft header ({type(error).__name__}: {error})") \
            from None
    return state_dict
