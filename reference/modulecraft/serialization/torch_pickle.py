"""Unpickling what ``torch.save`` pickles, with nothing run but our own numpy-side stand-ins.

Unpickling runs whatever callable the pickle names, so a plain ``pickle.load`` of a file someone sent you can
run ``os.system``. :class:`StateDictUnpickler` answers every global from an allow list of what
``torch.load(weights_only=True)`` accepts in a state_dict or training checkpoint (``OrderedDict``, the tensor
rebuild functions, storage types, dtypes, ``torch.Size``, ``torch.device``, ``set``, ``complex``, ``bytearray``,
``_codecs.encode`` for bytes), each mapped to *our* code, never to the real object; anything else raises
:class:`~modulecraft.serialization.errors.UnpicklingError` naming the global. The stand-ins only record what was
asked (:class:`TensorSpec`, :class:`DType`, ...); :func:`materialise` makes the final objects once every storage
is read. The allowed callables are immutable named tuples, so a BUILD opcode cannot change them (BUILD can set
attributes only on an ``OrderedDict``, where a state_dict keeps its ``_metadata``; :func:`materialise` rebuilds
every dict and keeps only a checked ``_metadata``).

Before unpickling, :func:`~modulecraft.serialization.pickle_scan.check_opcodes` walks the opcodes without running
them and bounds what C's unpickler would do blindly (allocations, objects, hashing). Sizes, strides, offsets and
element counts must be ints below 2**63 before any arithmetic is done on them: products of megabyte-long ints take
seconds.
"""

from __future__ import annotations

import io
import pickle
import reprlib
from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import numpy as np

from modulecraft.serialization import dtypes, limits
from modulecraft.serialization.errors import CheckpointError, UnpicklingError

__all__ = ["StateDictUnpickler", "StorageRef", "TensorSpec", "materialise"]


class _ShortRepr(reprlib.Repr):
    """Error messages quote a hostile value's start: it may be megabytes long, or an int too long to print."""

    def repr_int(self, value: int, level: int) -> str:
        return repr(value) if value.bit_length() <= 64 else f"<an int of {value.bit_length()} bits>"


_REPR = _ShortRepr()
_REPR.maxstring = _REPR.maxother = 60
short = _REPR.repr


class StorageRef(NamedTuple):
    """A storage named by a persistent id; its bytes (``nbytes`` of them) are read from ``data/<key>``."""
    key: str
    nbytes: int
    kind: dtypes.ElementType | None  # None for torch's UntypedStorage: each tensor gives its own type


class TensorSpec(NamedTuple):
    """A tensor the pickle asked for: a view of a storage, in elements of ``kind``."""
    storage: StorageRef
    kind: dtypes.ElementType
    offset: int
    size: tuple
    stride: tuple


class DType(NamedTuple):
    """``torch.float32`` and its siblings: loaded as the numpy dtype its arrays load with."""
    kind: dtypes.ElementType


class Device(NamedTuple):
    """``torch.device('cpu')``: loaded as its name, a string."""
    name: str


class _StorageType(NamedTuple):
    """``torch.FloatStorage`` and its siblings (``kind`` None: ``torch.storage.UntypedStorage``)."""
    name: str
    kind: dtypes.ElementType | None


class _Allowed(NamedTuple):
    """An allowed callable: immutable, so a BUILD opcode aimed at it fails instead of changing our code."""
    function: Callable
    builds_tensor: bool = False

    def __call__(self, *args):
        return self.function(*args)


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value < limits.INT64


def _is_shape(value: Any) -> bool:
    return type(value) is tuple and len(value) <= limits.DIMENSIONS and all(map(_is_count, value))


def _tensor(storage, storage_offset, size, stride, kind: dtypes.ElementType | None) -> TensorSpec:
    """A view of ``storage``, its geometry checked against the storage's size (bounded ints, then arithmetic)."""
    if not isinstance(storage, StorageRef):
        raise CheckpointError(f"a tensor's storage must come from a storage persistent id, got {short(storage)}")
    if not (_is_shape(size) and _is_shape(stride) and len(size) == len(stride) and _is_count(storage_offset)):
        raise CheckpointError(f"a tensor has an invalid size {short(size)}, stride {short(stride)} or offset "
                              f"{short(storage_offset)}: expected tuples of non-negative ints of the same length")
    kind = kind or storage.kind
    if kind is None or (storage.kind is not None and storage.kind != kind):
        raise CheckpointError(f"a tensor of storage {short(storage.key)} has no element type or another one")
    numel, remainder = divmod(storage.nbytes, kind.raw.itemsize)
    if remainder:
        raise CheckpointError(f"storage {short(storage.key)} of {storage.nbytes} bytes holds no whole number of "
                              f"{kind.torch_name} elements")
    if storage_offset > numel or (
            0 not in size and storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) >= numel):
        raise CheckpointError(f"a tensor of size {size} and stride {stride} at offset {storage_offset} reads past "
                              f"the end of storage {short(storage.key)} ({numel} elements)")
    return TensorSpec(storage, kind, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None) -> TensorSpec:
    """Our ``torch._utils._rebuild_tensor_v2``: a view of a typed storage."""
    return _tensor(storage, storage_offset, size, stride, None)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                       metadata=None) -> TensorSpec:
    """Our ``torch._utils._rebuild_tensor_v3``: a view of an untyped storage, in elements of ``dtype``."""
    if not isinstance(dtype, DType):
        raise CheckpointError(f"a tensor's dtype must be a torch dtype, got {short(dtype)}")
    return _tensor(storage, storage_offset, size, stride, dtype.kind)


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None) -> TensorSpec:
    """Our ``torch._utils._rebuild_parameter``: a saved Parameter loads as its array, as a state_dict's do."""
    if not isinstance(data, TensorSpec):
        raise CheckpointError(f"a parameter's data must be a tensor, got {short(data)}")
    return data


def _size(dimensions=()) -> tuple:
    """Our ``torch.Size``: a tuple of ints, as modulecraft's shapes are."""
    if not (type(dimensions) in (tuple, list) and _is_shape(tuple(dimensions))):
        raise CheckpointError(f"torch.Size takes non-negative ints, got {short(dimensions)}")
    return tuple(dimensions)


def _device(name, index=None) -> Device:
    if not (type(name) is str and (index is None or _is_count(index))):
        raise CheckpointError(f"torch.device takes a name and an index, got {short(name)}, {short(index)}")
    return Device(name if index is None else f"{name}:{index}")


def _encode_bytes(text, encoding) -> bytes:
    """Our ``_codecs.encode``, which pickle protocol 2 (torch's default) uses to write a ``bytes`` value."""
    if not (type(text) is str and encoding == "latin1"):
        raise CheckpointError("_codecs.encode is allowed only to rebuild bytes from latin1 text, "
                              f"got {short(encoding)}")
    return text.encode("latin1")


def _of_plain(kind: type, plain: tuple[type, ...] = (list, tuple, int, float, bytes, str)) -> Callable:
    """``set``, ``complex`` or ``bytearray`` called on ``plain`` arguments only (no object of ours inside)."""
    def make(*args):
        if not all(type(arg) in plain for arg in args):
            raise CheckpointError(f"{kind.__name__} called on {short(args)}")
        return kind(*args)
    return make


def _allowed_globals() -> dict[tuple[str, str], Any]:
    allowed: dict[tuple[str, str], Any] = {
        ("collections", "OrderedDict"): OrderedDict,  # a type: immutable, BUILD cannot change it
        ("_codecs", "encode"): _Allowed(_encode_bytes),
        ("torch._utils", "_rebuild_tensor_v2"): _Allowed(_rebuild_tensor_v2, builds_tensor=True),
        ("torch._utils", "_rebuild_tensor_v3"): _Allowed(_rebuild_tensor_v3, builds_tensor=True),
        ("torch._utils", "_rebuild_parameter"): _Allowed(_rebuild_parameter),
        ("torch._utils", "_rebuild_parameter_with_state"): _Allowed(_rebuild_parameter),
        ("torch", "Size"): _Allowed(_size),
        ("torch", "device"): _Allowed(_device),
        ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage", None),
    }
    for builtins in ("builtins", "__builtin__"):  # protocol 2 names the module as Python 2 did
        for kind in (set, complex):
            allowed[builtins, kind.__name__] = _Allowed(_of_plain(kind))
        # pickle writes bytearray(bytes), or bytearray(text, "latin-1") in protocol 2; bytearray(n) would allocate
        # n zero bytes, whatever the pickle's size
        allowed[builtins, "bytearray"] = _Allowed(_of_plain(bytearray, (bytes, str)))
    for kind in dtypes.ALL:
        allowed["torch", kind.torch_name] = DType(kind)
        if kind.storage:
            allowed["torch", kind.storage] = _StorageType(kind.storage, kind)
    return allowed


_ALLOWED_GLOBALS = _allowed_globals()


class StateDictUnpickler(pickle.Unpickler):
    """An unpickler that can build nothing but containers, plain values and our stand-ins."""

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.storages: dict[str, StorageRef] = {}
        self.tensors = 0
        self.builders: dict[tuple[str, str], _Allowed] = {}  # one counted builder per global, however often named

    def find_class(self, module: str, name: str) -> Any:
        try:
            found = _ALLOWED_GLOBALS[module, name]
        except (KeyError, TypeError):
            if module == "torch" and name in dtypes.UNREAD:
                raise CheckpointError(f"the checkpoint holds tensors of dtype torch.{name}, which modulecraft does "
                                      f"not read: {dtypes.UNREAD[name]}") from None
            if (module, name) == ("torch._utils", "_rebuild_qtensor"):
                raise CheckpointError("the checkpoint holds quantized tensors, which modulecraft does not read: "
                                      "save tensor.dequantize() instead") from None
            raise UnpicklingError(
                f"the checkpoint's pickle asks for the global {module}.{name}, which is not allowed: a checkpoint "
                "needs only containers, tensors, dtypes, torch.Size/device, set, complex and bytes. Nothing from "
                "the file was run; if you trust the file, load it with torch.load and save its state again") from None
        if isinstance(found, _Allowed) and found.builds_tensor:
            if (module, name) not in self.builders:
                self.builders[module, name] = _Allowed(self._counted(found.function))
            return self.builders[module, name]
        return found

    def _counted(self, rebuild: Callable) -> Callable:
        def rebuild_counted(*args):
            self.tensors += 1
            if self.tensors > limits.TENSORS:
                raise CheckpointError(f"the pickle builds more than {limits.TENSORS} tensors (the tensors limit), "
                                      "more than any checkpoint modulecraft reads holds")
            return rebuild(*args)
        return rebuild_counted

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"unknown persistent id {short(pid)}: only ('storage', type, key, location, numel)")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _StorageType) and type(key) is str and _is_count(numel)):
            raise CheckpointError(f"invalid storage persistent id {short(pid)}")
        kind = storage_type.kind
        ref = StorageRef(key, numel * kind.raw.itemsize if kind else numel, kind)
        if self.storages.setdefault(key, ref) != ref:
            raise CheckpointError(f"storage {short(key)} is declared twice with different types or sizes")
        return ref


_PLAIN = frozenset((bool, int, float, complex, str, bytes))


def materialise(obj: Any, tensor: Callable[[TensorSpec], np.ndarray]) -> Any:
    """The unpickled object with our stand-ins replaced by arrays, dtypes and strings, containers rebuilt fresh.

    ``tensor`` makes the array a :class:`TensorSpec` asks for. Rebuilding (rather than editing in place) drops any
    attribute a BUILD opcode set on a dict, except a state_dict's ``_metadata``, which is checked to be what torch
    writes. Objects shared in the pickle stay shared (tied weights are one array).
    """
    made: dict[int, Any] = {}

    def make(obj: Any, depth: int) -> Any:
        if obj is None or type(obj) in _PLAIN:  # returned as they are, so not recorded: most of a checkpoint
            return obj
        if id(obj) in made:
            return made[id(obj)]
        if depth > limits.NESTING:
            raise CheckpointError(f"the checkpoint nests containers more than {limits.NESTING} deep")
        if isinstance(obj, TensorSpec):
            result = tensor(obj)
        elif type(obj) in (dict, OrderedDict):
            result = type(obj)()
            made[id(obj)] = result
            for key, value in dict.items(obj):  # dict's method: the pickle may have shadowed obj.items
                result[make(key, depth + 1)] = make(value, depth + 1)
            metadata = vars(obj).get("_metadata") if type(obj) is OrderedDict else None
            if metadata is not None:
                result._metadata = _checked_metadata(metadata)
            return result
        elif type(obj) is list:
            result = []
            made[id(obj)] = result
            result.extend(make(item, depth + 1) for item in obj)
            return result
        elif type(obj) in (tuple, set, frozenset):
            result = type(obj)(make(item, depth + 1) for item in obj)
        elif isinstance(obj, DType):
            result = obj.kind.loaded_dtype
        elif isinstance(obj, Device):
            result = obj.name
        elif type(obj) is bytearray:
            result = obj
        else:
            raise CheckpointError(f"unexpected value of type {type(obj).__name__} in the checkpoint")
        made[id(obj)] = result
        return result

    return make(obj, 0)


def _checked_metadata(metadata: Any) -> OrderedDict:
    """A state_dict's ``_metadata``: module prefixes mapped to dicts of plain values (e.g. ``{'version': 2}``)."""
    if not isinstance(metadata, dict) or not all(
            isinstance(prefix, str) and isinstance(entry, dict)
            and all(isinstance(k, str) and (v is None or type(v) in (bool, int, float, str)) for k, v in entry.items())
            for prefix, entry in metadata.items()):
        raise CheckpointError("the state_dict's _metadata is not a mapping of module names to version dicts")
    return OrderedDict((prefix, dict(entry)) for prefix, entry in metadata.items())
