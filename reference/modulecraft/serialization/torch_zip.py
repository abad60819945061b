"""Reading what ``torch.save`` writes (the zip format of torch >= 1.6), with numpy only and nothing executed.

A torch checkpoint is a zip archive with one folder, ``<name>/``, holding ``data.pkl`` (a pickle of the
object saved, e.g. a state_dict), ``byteorder`` (``little`` or ``big``), ``version`` files and one member
``data/<key>`` per storage: the raw bytes of every element of that storage. In the pickle, each tensor is
a call ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` whose storage is a
*persistent id* ``('storage', torch.FloatStorage, key, location, numel)``; tensors that share memory (tied
weights, a transposed view) name the same storage key.

Why reading one is safe here. Unpickling runs whatever callable the pickle names, so a plain
``pickle.load`` of a file someone sent you can run ``os.system``. :class:`_StateDictUnpickler` answers every
global the pickle asks for from a short allow list (``collections.OrderedDict``, the two tensor rebuild
functions, the storage types, ``_codecs.encode`` for bytes), each mapped to *our* numpy code, never to the
real object; anything else raises :class:`~modulecraft.serialization.errors.UnpicklingError` naming the
global. The rebuild functions only record what was asked (:class:`_TensorSpec`); arrays are made once the
whole pickle has been read and every storage, size, stride and offset has been checked against the bytes
really in the archive, so a hostile or truncated file gives one clear
:class:`~modulecraft.serialization.errors.CheckpointError` and never a partial result, a crash or a giant
allocation. This is what ``torch.load(weights_only=True)`` does, for the subset of globals a state_dict
needs.

Differences from ``torch.load``: tensors come back as numpy arrays (views of one array per storage, so
shared storages still share memory), bfloat16 comes back as float32 (numpy has no bfloat16; the widening is
exact), and only tensors, containers and plain Python values are read (no quantized, sparse or subclassed
tensors, no pickled modules).
"""

from __future__ import annotations

import io
import pickle
import pickletools
import reprlib
import zipfile
from collections import OrderedDict
from typing import IO, Any, NamedTuple

import numpy as np

from modulecraft.serialization.errors import ZIP_DAMAGE, CheckpointError, UnpicklingError

__all__ = ["load", "is_torch_archive"]

_PICKLE = "data.pkl"
# A state_dict's pickle holds names and shapes, never values: about 120 bytes per tensor (2.4 MB for 20,000
# tensors, checked in 0.5 s). The limit bounds the time the opcode check (pure Python) can be made to take.
_PICKLE_LIMIT = 32 * 1024 * 1024
_BFLOAT16 = "bfloat16"  # read as its upper 16 bits of a float32

_STORAGE_DTYPES = {
    "FloatStorage": "f4", "DoubleStorage": "f8", "HalfStorage": "f2", "BFloat16Storage": _BFLOAT16,
    "LongStorage": "i8", "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?", "ComplexFloatStorage": "c8", "ComplexDoubleStorage": "c16",
}


class _StorageType(NamedTuple):
    """What ``torch.FloatStorage`` and its siblings stand for in a persistent id: a dtype and a name."""
    name: str
    dtype: str


class _StorageRef(NamedTuple):
    """A storage named by a persistent id; its bytes are read from ``data/<key>`` after unpickling."""
    key: str
    dtype: str
    numel: int


class _TensorSpec(NamedTuple):
    """A tensor the pickle asked for: a view of a storage. Named tuples refuse pickle's BUILD."""
    storage: _StorageRef
    offset: int
    size: tuple
    stride: tuple


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_short = _REPR.repr  # a hostile value may be megabytes long: error messages quote its start


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                    metadata=None) -> _TensorSpec:
    """Our ``torch._utils._rebuild_tensor_v2``: check the view's geometry against its storage, record it."""
    if not isinstance(storage, _StorageRef):
        raise CheckpointError(f"a tensor's storage must come from a storage persistent id, got {_short(storage)}")
    if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
            and all(map(_is_count, size + stride)) and _is_count(storage_offset)):
        raise CheckpointError(f"a tensor has an invalid size {_short(size)}, stride {_short(stride)} or offset "
                              f"{_short(storage_offset)}: expected tuples of non-negative ints of the same length")
    if storage_offset > storage.numel or (
            0 not in size and storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) >= storage.numel):
        raise CheckpointError(f"a tensor of size {_short(size)} and stride {_short(stride)} at offset "
                              f"{storage_offset} reads past the end of storage {_short(storage.key)} "
                              f"({storage.numel} elements)")
    return _TensorSpec(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad, backward_hooks) -> _TensorSpec:
    """Our ``torch._utils._rebuild_parameter``: a saved Parameter loads as its array, as a state_dict's do."""
    if not isinstance(data, _TensorSpec):
        raise CheckpointError(f"a parameter's data must be a tensor, got {_short(data)}")
    return data


def _encode_bytes(text, encoding) -> bytes:
    """Our ``_codecs.encode``, which pickle protocol 2 (torch's default) uses to write a ``bytes`` value."""
    if not (isinstance(text, str) and encoding == "latin1"):
        raise CheckpointError("_codecs.encode is allowed only to rebuild bytes from latin1 text, "
                              f"got {_short(encoding)}")
    return text.encode("latin1")


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): OrderedDict,
    ("_codecs", "encode"): _encode_bytes,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(name, dtype) for name, dtype in _STORAGE_DTYPES.items()},
}


class _StateDictUnpickler(pickle.Unpickler):
    """An unpickler that can build nothing but containers, plain values and tensor specs."""

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.storages: dict[str, _StorageRef] = {}

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[module, name]
        except (KeyError, TypeError):
            raise UnpicklingError(
                f"the checkpoint's pickle asks for the global {module}.{name}, which is not allowed: a state_dict "
                "needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter, torch's "
                "storage types and _codecs.encode (for bytes). Nothing from the file was run; if you trust the "
                "file, load it with torch.load and save its state_dict() again") from None

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"unknown persistent id {_short(pid)}: only ('storage', type, key, location, numel)")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _StorageType) and isinstance(key, str) and _is_count(numel)):
            raise CheckpointError(f"invalid storage persistent id {_short(pid)}")
        ref = _StorageRef(key, storage_type.dtype, numel)
        if self.storages.setdefault(key, ref) != ref:
            raise CheckpointError(f"storage {_short(key)} is declared twice with different types or sizes")
        return ref


_MEMO_PUTS = ("PUT", "BINPUT", "LONG_BINPUT")


def _check_opcodes(data: bytes) -> None:
    """Walk the pickle's opcodes without running them, refusing what would make C's unpickler allocate big.

    C's unpickler allocates a ``bytes`` of the size an opcode declares *before* reading it, and grows its memo
    array to the index a PUT names: a 20-byte pickle could make it allocate gigabytes. Here every declared
    length must fit in the data (``genops`` reads each argument), and memo indices must come in order, as
    every pickler writes them.
    """
    puts = 0
    try:
        for opcode, argument, position in pickletools.genops(data):
            if opcode.name in _MEMO_PUTS:
                if argument > puts:
                    raise CheckpointError(f"the checkpoint's pickle stores memo entry {argument} at byte {position} "
                                          f"after only {puts} entries: picklers number them in order")
                puts += 1
            elif opcode.name == "MEMOIZE":
                puts += 1
    except CheckpointError:
        raise
    except Exception as error:  # genops raises ValueError or others for any malformed pickle
        raise CheckpointError(f"the checkpoint's pickle is damaged ({error})") from None


class _Archive:
    """The torch zip archive: its member names, one folder, and members read only after their sizes check out."""

    def __init__(self, file: IO[bytes]):
        file.seek(0, io.SEEK_END)
        self.file_size = file.tell()
        file.seek(0)
        self.zip = zipfile.ZipFile(file)
        names = self.zip.namelist()
        if len(set(names)) != len(names):
            raise CheckpointError("the archive lists a member twice; torch.save never does")
        pickles = [name for name in names if name.rsplit("/", 1)[-1] == _PICKLE]
        if len(pickles) != 1 or pickles[0].count("/") != 1:
            raise CheckpointError(f"a zip archive but not a torch checkpoint: expected one '<folder>/{_PICKLE}', "
                                  f"found {pickles}")
        self.folder = pickles[0][:-len(_PICKLE)]

    def has(self, name: str) -> bool:
        return self.folder + name in self.zip.NameToInfo

    def read(self, name: str, expected_size: int | None = None, limit: int | None = None) -> bytes:
        """The member ``<folder>/<name>``, read only if its declared sizes are possible for this file."""
        member = self.folder + name
        try:
            info = self.zip.getinfo(member)
        except KeyError:
            raise CheckpointError(f"no member {_short(member)}: the archive is incomplete") from None
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise CheckpointError(f"member {_short(member)} is compressed; torch.save stores members uncompressed")
        if info.file_size > self.file_size:
            raise CheckpointError(f"member {_short(member)} declares {info.file_size} bytes, more than the file holds")
        if limit is not None and info.file_size > limit:
            raise CheckpointError(f"member {_short(member)} has {info.file_size} bytes, more than the {limit} it "
                                  "can need in a checkpoint")
        if expected_size is not None and info.file_size != expected_size:
            raise CheckpointError(f"storage member {_short(member)} has {info.file_size} bytes but the pickle "
                                  f"declares {expected_size}")
        return self.zip.read(info)  # checks the CRC: a flipped or missing byte is a BadZipFile


def _storage_array(raw: bytes, dtype: str, byteorder: str) -> np.ndarray:
    """One storage's bytes as a writable native-order array (bfloat16 widened exactly to float32)."""
    order = "<" if byteorder == "little" else ">"
    if dtype == _BFLOAT16:
        upper = np.frombuffer(raw, dtype=order + "u2").astype(np.uint32)
        return (upper << 16).view(np.float32)
    return np.frombuffer(raw, dtype=order + dtype).astype(np.dtype(dtype).newbyteorder("="))


def _materialise(obj: Any, storages: dict[str, np.ndarray], made: dict[int, Any]) -> Any:
    """The unpickled object with tensor specs replaced by views, containers rebuilt as fresh plain ones.

    Rebuilding (rather than editing in place) drops any attribute a hostile BUILD opcode set on a dict,
    except a state_dict's ``_metadata``, which is checked to be what torch writes.
    """
    if id(obj) in made:
        return made[id(obj)]
    if isinstance(obj, _TensorSpec):
        storage = storages[obj.storage.key]
        result = np.lib.stride_tricks.as_strided(
            storage[obj.offset:], shape=obj.size, strides=[s * storage.itemsize for s in obj.stride])
    elif isinstance(obj, dict):
        result = type(obj)() if type(obj) in (dict, OrderedDict) else None
        if result is None:
            raise CheckpointError(f"unexpected mapping type {type(obj).__name__}")
        made[id(obj)] = result
        for key, value in type(obj).items(obj):  # the class's method: the pickle may have shadowed obj.items
            result[_materialise(key, storages, made)] = _materialise(value, storages, made)
        metadata = getattr(obj, "_metadata", None)
        if metadata is not None:
            result._metadata = _checked_metadata(metadata)
        return result
    elif isinstance(obj, (list, tuple)):
        if type(obj) not in (list, tuple):
            raise CheckpointError(f"unexpected value of type {type(obj).__name__}")
        result = [_materialise(item, storages, made) for item in obj]
        result = tuple(result) if isinstance(obj, tuple) else result
    elif obj is None or type(obj) in (bool, int, float, complex, str, bytes):
        result = obj
    else:
        raise CheckpointError(f"unexpected value of type {type(obj).__name__} in the checkpoint")
    made[id(obj)] = result
    return result


def _checked_metadata(metadata: Any) -> OrderedDict:
    """A state_dict's ``_metadata``: module prefixes mapped to dicts of plain values (e.g. ``{'version': 2}``)."""
    if not isinstance(metadata, dict) or not all(
            isinstance(prefix, str) and isinstance(entry, dict)
            and all(isinstance(k, str) and (v is None or type(v) in (bool, int, float, str)) for k, v in entry.items())
            for prefix, entry in metadata.items()):
        raise CheckpointError("the state_dict's _metadata is not a mapping of module names to version dicts")
    return OrderedDict((prefix, dict(entry)) for prefix, entry in metadata.items())


def is_torch_archive(archive: zipfile.ZipFile) -> bool:
    """Whether a zip archive looks like what ``torch.save`` writes (a member ``<folder>/data.pkl``)."""
    return any(name.rsplit("/", 1)[-1] == _PICKLE for name in archive.namelist())


def load(file: IO[bytes], source: str) -> Any:
    """Read the object ``torch.save`` wrote (a state_dict, or containers of tensors and plain values).

    ``file`` is a seekable binary file object; ``source`` names it in error messages.
    """
    try:
        archive = _Archive(file)
        byteorder = archive.read("byteorder", limit=16).decode("ascii") if archive.has("byteorder") else "little"
        if byteorder not in ("little", "big"):
            raise CheckpointError(f"unknown byte order {byteorder!r} (torch writes 'little' or 'big')")
        data = archive.read(_PICKLE, limit=_PICKLE_LIMIT)
        _check_opcodes(data)
        unpickler = _StateDictUnpickler(data)
        try:
            obj = unpickler.load()
        except CheckpointError:
            raise
        except Exception as error:  # only allowed callables ran: any failure is a malformed pickle
            raise CheckpointError(f"the checkpoint's pickle is damaged ({type(error).__name__}: {error})") from None
        storages = {}
        for key, ref in unpickler.storages.items():
            itemsize = 2 if ref.dtype == _BFLOAT16 else np.dtype(ref.dtype).itemsize
            raw = archive.read(f"data/{key}", expected_size=ref.numel * itemsize)
            storages[key] = _storage_array(raw, ref.dtype, byteorder)
        return _materialise(obj, storages, {})
    except CheckpointError as error:  # raised without the file's name, which is added here
        raise type(error)(f"{source}: {error}") from None
    except (*ZIP_DAMAGE, TypeError, RecursionError, RuntimeError) as error:  # and unhashable or cyclic values
        raise CheckpointError(f"{source}: a damaged torch checkpoint ({type(error).__name__}: {error})") from None
