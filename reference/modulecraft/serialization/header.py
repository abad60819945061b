"""What a checkpoint stores besides arrays, shared by the safetensors and ``.npz`` formats: its structure, as JSON.

A checkpoint is a state_dict, or any nesting of dicts, lists, tuples and sets around arrays and plain values,
such as a training checkpoint ``{"model": ..., "optimizer": {"state": {0: {...}}, "param_groups": [...]},
"epoch": 3}``. The formats store the arrays natively under *flattened names*, the keys on the way to each array
joined by dots (``"model.0.weight"``, ``"optimizer.state.0.exp_avg"``; a state_dict's arrays keep their own
keys, so other readers see the usual names), and everything else as one JSON *tree* mirroring the checkpoint:

- strings, ints, floats (NaN and infinities included), booleans and None stand for themselves;
- every other value is an object with one tag: ``{"array": name}``; ``{"scalar": name}`` (a numpy scalar, stored
  as a 0-d array); ``{"uninitialized": "parameter" | "buffer", "dtype": "<f4"}`` (a lazy module's shape-less
  placeholder); ``{"dict": [[key, value], ...]}`` and ``{"ordered_dict": [...], "metadata": tree}`` (a
  state_dict's ``_metadata``, each module's ``_version``); ``{"list": [...]}``, ``{"tuple": [...]}``,
  ``{"set": [...]}``, ``{"frozenset": [...]}``; ``{"bytes": latin-1 text}``; ``{"complex": [real, imag]}``;
  ``{"dtype": "<f4"}``.

Keys are values too, so int and tuple keys come back as they were. A value of any other type is refused on
save, so what loads is always what was saved. Version 1 of the header (flat state_dicts of arrays and JSON
values, written before training checkpoints could be saved) is still read.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from modulecraft.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from modulecraft.serialization import dtypes, limits
from modulecraft.serialization.errors import CheckpointError

__all__ = ["split", "assemble", "flattened_name", "parse_json", "FORMAT", "FORMAT_VERSION"]

FORMAT = "modulecraft.state_dict"
FORMAT_VERSION = 2
_PLAIN = (str, int, float, bool, type(None))
_CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
# numpy dtypes a header may name (a saved dtype, a lazy placeholder's): those of arrays a checkpoint holds, in either
# byte order, never an object, string, structured or subarray dtype
_DTYPES = {dtype.newbyteorder(order).str for kind in dtypes.ALL if kind.widen is None
           for dtype in [kind.raw] for order in "<>"}


def parse_json(text: str | bytes, what: str) -> Any:
    """``json.loads(text)``, once an upper bound of the values it holds (a value starts the text or follows one
    of ``[{,:``) is within the header nodes limit, a small allowance plus so many per byte up to a ceiling: each
    value costs Python 30 to 90 bytes, so junk like 100 MB of ``[]`` would take gigabytes."""
    marks = (b"[", b"{", b",", b":") if isinstance(text, bytes) else ("[", "{", ",", ":")
    nodes = 1 + sum(text.count(mark) for mark in marks)
    allowed = min(limits.HEADER_NODES_MOST, limits.HEADER_NODES + int(limits.HEADER_NODES_PER_BYTE * len(text)))
    if nodes > allowed:
        raise CheckpointError(f"{what} may hold {nodes} JSON values in {len(text)} bytes, more than the {allowed} "
                              f"of the header nodes limit ({limits.HEADER_NODES} plus "
                              f"{limits.HEADER_NODES_PER_BYTE} per byte, at most {limits.HEADER_NODES_MOST}, as "
                              "many as a header of 100,000 tensors has; headers written by safetensors and "
                              "modulecraft have at most 0.33 per byte)")
    return json.loads(text)


def _checked_dtype(text: Any) -> np.dtype:
    if text not in _DTYPES:
        raise CheckpointError(f"its header names the dtype {str(text)[:40]!r}, which is not one of an array's "
                              "(bool, int, uint, float or complex)")
    return np.dtype(text)


def split(obj: Mapping[str, Any], reserved: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split the checkpoint ``obj`` into arrays by flattened name and the JSON-serialisable header of the rest.

    ``reserved`` is the name the format keeps for its own header: an array of that name is refused rather than
    silently overwritten.
    """
    if not isinstance(obj, Mapping):
        hint = "; pass module.state_dict() to save a module's state" if hasattr(obj, "state_dict") else ""
        raise TypeError("modulecraft.save stores a state_dict or a dict of them (a mapping of names to arrays and "
                        f"values), got {type(obj).__name__}{hint}")
    arrays: dict[str, np.ndarray] = {}

    def array(name: str, value: np.ndarray) -> str:
        if name == reserved:
            raise ValueError(f"the name {reserved!r} is reserved for the checkpoint's own metadata")
        if name in arrays:
            raise ValueError(f"two arrays would be stored under the same flattened name {name!r}; rename a key")
        if value.dtype.hasobject:
            raise TypeError(f"cannot save {name!r}: arrays of Python objects would need pickle")
        arrays[name] = value
        return name

    def encode(value: Any, name: str | None, depth: int) -> Any:
        if depth > limits.NESTING:
            raise ValueError(f"cannot save {name!r}: containers nested more than {limits.NESTING} deep")
        if type(value) in _PLAIN:
            return value
        if is_lazy(value):
            kind = "parameter" if isinstance(value, UninitializedParameter) else "buffer"
            return {"uninitialized": kind, "dtype": value.dtype.str}
        if isinstance(value, np.ndarray):
            return {"array": array(name or "", np.asarray(value))}
        if isinstance(value, np.generic):
            return {"scalar": array(name or "", np.asarray(value))}
        if type(value) in (dict, OrderedDict):  # not subclasses: they would load as what they derive from
            node = {"ordered_dict" if type(value) is OrderedDict else "dict": [
                [encode(key, None, depth + 1), encode(item, flattened_name(name, key), depth + 1)]
                for key, item in value.items()]}
            metadata = getattr(value, "_metadata", None)
            if metadata is not None:
                node["metadata"] = encode(dict(metadata), None, depth + 1)
            return node
        if type(value) in _CONTAINERS:
            return {_CONTAINERS[type(value)]: [encode(item, flattened_name(name, index), depth + 1)
                                               for index, item in enumerate(value)]}
        if type(value) is bytes:
            return {"bytes": value.decode("latin1")}
        if type(value) is complex:
            return {"complex": [value.real, value.imag]}
        if isinstance(value, np.dtype):
            if value.str not in _DTYPES:
                raise TypeError(f"cannot save the dtype {value} in {name!r}: a checkpoint holds bool, int, uint, "
                                "float and complex dtypes")
            return {"dtype": value.str}
        raise TypeError(f"cannot save {name!r} of type {type(value).__name__}: a checkpoint holds numpy arrays and "
                        "scalars, str, int, float, bool, None, bytes, complex, numpy dtypes, and dicts, lists, "
                        "tuples and sets of them; anything else would need pickle")

    tree = encode(obj, None, 0)
    return arrays, {"format": FORMAT, "version": FORMAT_VERSION, "tree": tree}


def flattened_name(prefix: str | None, key: Any) -> str | None:
    """The flattened name of ``key`` inside ``prefix``; None (no name) inside a dict's key."""
    return str(key) if prefix is None else f"{prefix}.{key}"


def _placeholder(kind: str, dtype: str):
    """The shape-less parameter or buffer of a lazy module that had not run yet when it was saved."""
    cls = UninitializedParameter if kind == "parameter" else UninitializedBuffer
    return cls(dtype=_checked_dtype(dtype))


def _nodes(node: Any) -> int:
    """How many JSON values ``node`` is (a key's, to count what comparing it costs)."""
    if type(node) is list:
        return 1 + sum(map(_nodes, node))
    if type(node) is dict:
        return 1 + sum(map(_nodes, node.values()))
    return 1


class _Decoding:
    """What decoding one header has met so far: the arrays its tree named, the key nodes whose hash it chose."""

    def __init__(self, arrays: Mapping[str, np.ndarray]):
        self.arrays, self.used, self.chosen = arrays, set(), 0

    def key(self, node: Any, depth: int) -> Any:
        """A dict key or set item, counted if a file can choose its hash (see limits.CHOSEN_HASH_NODES)."""
        key = _decode(node, self, depth)
        if limits.hash_is_chosen(key):
            self.chosen += _nodes(node)
            if self.chosen > limits.CHOSEN_HASH_NODES:
                raise CheckpointError(f"its header has more than {limits.CHOSEN_HASH_NODES} nodes in dict keys or "
                                      "set items whose hash a file can choose (tuples, complex numbers, ints of "
                                      "2**56 or more: the chosen hashes limit)")
        return key


def _decode(node: Any, decoding: _Decoding, depth: int) -> Any:
    if depth > limits.NESTING:
        raise CheckpointError(f"its header nests containers more than {limits.NESTING} deep")
    if type(node) in _PLAIN:
        return node
    if type(node) is not dict or len(node) not in (1, 2):
        raise CheckpointError(f"its header has an unknown node {str(node)[:60]!r}")
    (tag, content), *rest = node.items()
    if tag in ("array", "scalar"):
        if content in decoding.used:
            raise CheckpointError(f"its header names the array {content!r} twice")
        decoding.used.add(content)
        return decoding.arrays[content] if tag == "array" else decoding.arrays[content][()]
    if tag == "uninitialized":
        return _placeholder(content, node["dtype"])
    if tag in ("dict", "ordered_dict"):
        result = {} if tag == "dict" else OrderedDict()
        for key, value in content:
            result[decoding.key(key, depth + 1)] = _decode(value, decoding, depth + 1)
        if rest:
            metadata = _decode(node["metadata"], decoding, depth + 1)
            result._metadata = OrderedDict(metadata)
        return result
    kind = next((kind for kind, name in _CONTAINERS.items() if name == tag), None)
    if kind in (set, frozenset):
        return kind(decoding.key(item, depth + 1) for item in content)
    if kind is not None:
        return kind(_decode(item, decoding, depth + 1) for item in content)
    if tag == "bytes":
        return content.encode("latin1")
    if tag == "complex":
        if not (type(content) is list and len(content) == 2 and all(type(part) in (int, float) for part in content)):
            raise CheckpointError(f"its header has a complex number that is not two numbers: {str(content)[:60]}")
        return complex(*content)  # an int too large for a float raises OverflowError, refused below
    if tag == "dtype":
        return _checked_dtype(content)
    raise CheckpointError(f"its header has an unknown node {tag!r}")


def _assemble_version_1(header: dict, arrays: Mapping[str, np.ndarray]) -> OrderedDict:
    """A flat state_dict as version 1 stored it: key order, JSON values, lazy placeholders, ``_metadata``."""
    values, lazy = header["values"], header.get("uninitialized", {})
    state_dict = OrderedDict()
    for key in header["keys"]:
        if key in lazy:
            state_dict[key] = _placeholder(**lazy[key])
        elif key in values:
            state_dict[key] = values[key]
        else:
            state_dict[key] = arrays[key]
    if header["metadata"] is not None:
        state_dict._metadata = OrderedDict(header["metadata"])
    return state_dict


def assemble(header_json: str, arrays: Mapping[str, np.ndarray], source: str) -> Any:
    """The checkpoint :func:`split` described, from its header and the arrays the format read by name.

    ``source`` names the file in error messages. A header that does not match the arrays (a name with no array,
    an array no name refers to) is a damaged file.
    """
    try:
        header = parse_json(header_json, "its modulecraft header")
        if header.get("format") != FORMAT or header.get("version", 0) > FORMAT_VERSION:
            raise CheckpointError(f"an unknown checkpoint format {header.get('format')!r} version "
                                  f"{header.get('version')!r}; upgrade modulecraft to read it")
        if header["version"] == 1:
            checkpoint = _assemble_version_1(header, arrays)
            used = set(checkpoint)
        else:
            decoding = _Decoding(arrays)
            checkpoint = _decode(header["tree"], decoding, 0)
            used = decoding.used
        if set(arrays) - used:
            raise CheckpointError(f"it holds arrays its header does not list: {sorted(set(arrays) - used)[:5]}")
        return checkpoint
    except CheckpointError as error:
        raise CheckpointError(f"{source}: {error}") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as error:
        raise CheckpointError(f"{source} has a damaged modulecraft header ({type(error).__name__}: {error})") \
            from None
