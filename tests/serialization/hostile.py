"""Hand-made torch checkpoints for attack tests: any pickle, any storages, any zip layout.

:func:`checkpoint` pickles stand-ins whose ``__reduce__`` names torch's real rebuild functions and storage types,
so the bytes are what ``torch.save`` would write for the same call, but every argument (offsets, sizes,
strides, declared element counts) is ours to make wrong.
"""

from __future__ import annotations

import io
import pickle
from collections import OrderedDict
from typing import Any, NamedTuple

import torch

from .archives import zipped


class Storage(NamedTuple):
    """A storage persistent id: ``('storage', kind, key, 'cpu', numel)``."""
    key: str
    numel: int
    kind: Any = torch.FloatStorage


class Tensor:
    """Pickles as ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())``,
    followed by a BUILD opcode setting the attributes ``state`` when given."""

    def __init__(self, storage: Any, offset: Any = 0, size: Any = (1,), stride: Any = (1,), state: Any = None):
        self.args = (storage, offset, size, stride, False, OrderedDict())
        self.state = state

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args, self.state


class Dict:
    """Pickles as an ``OrderedDict`` of ``items`` whose attributes ``attributes`` are set by a BUILD opcode."""

    def __init__(self, items: dict, attributes: dict):
        self.items, self.attributes = items, attributes

    def __reduce__(self):
        return OrderedDict, (), self.attributes, None, iter(self.items.items())


class Call:
    """Pickles as a call of ``function(*args)``: how a hostile file names a global and runs it."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.kind, obj.key, "cpu", obj.numel)
        return None


def pickled(obj: Any, protocol: int = 2) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=protocol).dump(obj)
    return buffer.getvalue()


def checkpoint(obj: Any = None, storages: dict[str, bytes] | None = None, pickle_bytes: bytes | None = None,
               extra: dict[str, bytes] | None = None) -> bytes:
    """A torch-layout zip: ``archive/data.pkl`` (``pickle_bytes`` or ``obj`` pickled), byteorder, storages."""
    entries = {"archive/data.pkl": pickled(obj) if pickle_bytes is None else pickle_bytes,
               "archive/byteorder": b"little"}
    entries.update({f"archive/data/{key}": content for key, content in (storages or {}).items()})
    entries.update(extra or {})
    return zipped(entries)


def floats(*values: float) -> bytes:
    return torch.tensor(values, dtype=torch.float32).numpy().tobytes()
