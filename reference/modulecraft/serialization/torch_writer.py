"""Writing torch's zip format, so that ``torch.load(path, weights_only=True)`` reads what modulecraft saved.

The archive is what ``torch.save`` writes (see :mod:`~modulecraft.serialization.torch_zip`): ``archive/data.pkl``,
``byteorder``, ``version`` and one ``data/<key>`` member per array. The pickle is written opcode by opcode here
(protocol 2, as torch's default), naming only globals ``weights_only`` allows: ``collections.OrderedDict``,
``torch._utils._rebuild_tensor_v2`` (``_v3`` for uint16/32/64, which have no legacy storage class), storage
classes, ``torch.<dtype>``, ``__builtin__.set``/``complex`` and ``_codecs.encode`` for bytes. Arrays become
tensors (a numpy scalar cannot: numpy objects are no torch values, so it is refused), the same array object
saved twice becomes one tensor, dicts keep their order and a state_dict its ``_metadata``.
"""

from __future__ import annotations

import struct
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from modulecraft.nn.parameter import is_lazy
from modulecraft.serialization import dtypes, limits
from modulecraft.serialization.header import flattened_name

__all__ = ["save"]

_BATCH = 1000  # items per APPENDS/SETITEMS, as pickle batches them


class _PickleWriter:
    """Protocol 2 opcodes for a checkpoint, with tensors as torch's rebuild calls on numbered storages."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo: dict[int, int] = {}
        self.kept: list[Any] = []  # memoised objects stay alive, so their ids stay theirs
        self.storages: list[np.ndarray] = []

    def _put(self, obj: Any) -> None:
        index = len(self.memo)
        self.memo[id(obj)] = index
        self.kept.append(obj)
        self.out += b"q" + bytes([index]) if index < 256 else b"r" + struct.pack("<I", index)

    def _get(self, index: int) -> None:
        self.out += b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)

    def _global(self, module: str, name: str) -> None:
        self.out += f"c{module}\n{name}\n".encode()

    def _string(self, text: str) -> None:
        encoded = text.encode("utf-8", "surrogatepass")
        self.out += b"X" + struct.pack("<I", len(encoded)) + encoded

    def _int(self, value: int) -> None:
        if 0 <= value < 256:
            self.out += b"K" + bytes([value])
        elif 0 <= value < 65536:
            self.out += b"M" + struct.pack("<H", value)
        elif -2**31 <= value < 2**31:
            self.out += b"J" + struct.pack("<i", value)
        else:
            encoded = value.to_bytes((value + (value < 0)).bit_length() // 8 + 1, "little", signed=True)
            if len(encoded) > 255:
                raise ValueError(f"cannot save the integer {value:.3e}: longer than 2040 bits")
            self.out += b"\x8a" + bytes([len(encoded)]) + encoded

    def _call(self, module: str, name: str, *args: Any, depth: int, path: str) -> None:
        self._global(module, name)
        self._tuple(args, depth, path)
        self.out += b"R"

    def _tuple(self, items: Any, depth: int, path: str) -> None:
        self.out += b"("
        for item in items:
            self.value(item, depth + 1, path)
        self.out += b"t"

    def _appends(self, items: list, depth: int, path: str | None) -> None:
        for start in range(0, len(items), _BATCH):
            self.out += b"("
            for index, item in enumerate(items[start:start + _BATCH], start):
                self.value(item, depth + 1, flattened_name(path, index))
            self.out += b"e"

    def _setitems(self, pairs: list, depth: int, path: str | None) -> None:
        for start in range(0, len(pairs), _BATCH):
            self.out += b"("
            for key, item in pairs[start:start + _BATCH]:
                self.value(key, depth + 1, None)
                self.value(item, depth + 1, flattened_name(path, key))
            self.out += b"u"

    def _tensor(self, array: np.ndarray, path: str) -> None:
        kind = dtypes.for_numpy(array.dtype)
        if kind is None or kind.widen is not None:
            raise TypeError(f"cannot save {path!r}: torch has no dtype for numpy's {array.dtype}")
        key = str(len(self.storages))
        self.storages.append(np.ascontiguousarray(array).astype(kind.raw, copy=False))
        strides = tuple(int(np.prod(array.shape[i + 1:])) for i in range(array.ndim))  # of the contiguous copy
        self._global("torch._utils", "_rebuild_tensor_v2" if kind.storage else "_rebuild_tensor_v3")
        self.out += b"(("
        self._string("storage")
        if kind.storage:
            self._global("torch", kind.storage)
        else:
            self._global("torch.storage", "UntypedStorage")
        self._string(key)
        self._string("cpu")
        self._int(array.size if kind.storage else array.size * array.itemsize)
        self.out += b"tQ"  # the persistent id: ('storage', type, key, 'cpu', numel)
        self._int(0)
        for dimensions in (array.shape, strides):
            self.out += b"("
            for dimension in dimensions:
                self._int(dimension)
            self.out += b"t"
        self.out += b"\x89"  # requires_grad False
        self._global("collections", "OrderedDict")
        self.out += b")R"
        if not kind.storage:
            self._global("torch", kind.torch_name)
        self.out += b"tR"

    def value(self, obj: Any, depth: int, path: str | None) -> None:
        """Append the opcodes that rebuild ``obj``; ``path`` names it in errors."""
        if depth > limits.NESTING:
            raise ValueError(f"cannot save {path!r}: containers nested more than {limits.NESTING} deep")
        if id(obj) in self.memo:
            self._get(self.memo[id(obj)])
            return
        if obj is None:
            self.out += b"N"
        elif type(obj) is bool:
            self.out += b"\x88" if obj else b"\x89"
        elif type(obj) is int:
            self._int(obj)
        elif type(obj) is float:
            self.out += b"G" + struct.pack(">d", obj)
        elif type(obj) is str:
            self._string(obj)
            self._put(obj)
        elif type(obj) is bytes:
            self._call("_codecs", "encode", obj.decode("latin1"), "latin1", depth=depth, path=path)
            self._put(obj)
        elif type(obj) is complex:
            self._call("__builtin__", "complex", obj.real, obj.imag, depth=depth, path=path)
        elif is_lazy(obj):
            raise TypeError(f"cannot save {path!r} in torch's format: a lazy module's uninitialised parameter has no "
                            "values yet; run the model once, or save as safetensors")
        elif isinstance(obj, np.ndarray):
            self._tensor(obj, path)
            self._put(obj)
        elif isinstance(obj, np.dtype):
            kind = dtypes.for_numpy(obj)
            if kind is None:
                raise TypeError(f"cannot save {path!r}: torch has no dtype for numpy's {obj}")
            self._global("torch", kind.torch_name)
        elif type(obj) in (dict, OrderedDict):
            if type(obj) is dict:
                self.out += b"}"
            else:
                self._global("collections", "OrderedDict")
                self.out += b")R"
            self._put(obj)
            self._setitems(list(obj.items()), depth, path)
            metadata = getattr(obj, "_metadata", None)
            if metadata is not None:  # what OrderedDict's __reduce__ gives pickle: BUILD with its __dict__
                self.out += b"}"
                self._string("_metadata")
                self.value(OrderedDict((prefix, dict(entry)) for prefix, entry in metadata.items()), depth + 1, path)
                self.out += b"sb"
        elif type(obj) is list:
            self.out += b"]"
            self._put(obj)
            self._appends(obj, depth, path)
        elif type(obj) is tuple:
            self._tuple(obj, depth, path)
        elif type(obj) is set:
            self._global("__builtin__", "set")  # called on a list of the items
            self.out += b"(]"
            self._appends(list(obj), depth, path)
            self.out += b"tR"
        else:
            raise TypeError(f"cannot save {path!r} of type {type(obj).__name__} in torch's format: torch.load("
                            "weights_only=True) reads tensors (numpy arrays), str, int, float, bool, None, bytes, "
                            "complex, dtypes, and dicts, lists, tuples and sets of them")


def save(obj: Mapping[str, Any], file: IO[bytes]) -> None:
    """Write the checkpoint ``obj`` to the binary file object ``file`` in torch's zip format."""
    if not isinstance(obj, Mapping):
        hint = "; pass module.state_dict() to save a module's state" if hasattr(obj, "state_dict") else ""
        raise TypeError(f"modulecraft.save stores a state_dict or a dict of them, got {type(obj).__name__}{hint}")
    writer = _PickleWriter()
    writer.value(obj, 0, None)
    writer.out += b"."
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", bytes(writer.out))
        archive.writestr("archive/byteorder", b"little")
        for key, storage in enumerate(writer.storages):
            info = zipfile.ZipInfo(f"archive/data/{key}", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=storage.nbytes >= 2**31) as member:
                member.write(memoryview(storage.reshape(-1).view(np.uint8)))
        archive.writestr("archive/version", b"3\n")
