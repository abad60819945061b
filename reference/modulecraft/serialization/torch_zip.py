"""Reading what ``torch.save`` writes (the zip format of torch >= 1.6), with numpy only and nothing executed.

A torch checkpoint is a zip archive with one folder, ``<name>/``, holding ``data.pkl`` (a pickle of the
object saved, e.g. a state_dict or a training checkpoint), ``byteorder`` (``little`` or ``big``), ``version``
files and one member ``data/<key>`` per storage: the raw bytes of every element of that storage. In the pickle,
each tensor is a call ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` (``_v3`` with a
dtype for types that have no legacy storage class, e.g. uint16 or float8) whose storage is a *persistent id*
``('storage', torch.FloatStorage, key, location, numel)``; tensors that share memory (tied weights, a
transposed view) name the same storage key.

Reading one safely: the archive's members are checked before anything is read
(:mod:`~modulecraft.serialization.zip_members`), the pickle is unpickled with our allow list
(:mod:`~modulecraft.serialization.torch_pickle`), and every storage is read straight into the array it becomes
once its size matches what the pickle declares. A hostile or truncated file gives one clear
:class:`~modulecraft.serialization.errors.CheckpointError` and never a partial result, a crash or a giant
allocation. The small members (the pickle, byteorder) are checked against their CRCs; storages are not, as
``torch.load`` does not check them either: a flipped bit there changes a number, never what is built or how
much is allocated, and CRC-32 runs at about a third of the speed of reading (1.4 against 4 GB/s), so checking
would make loading several times slower.

Differences from ``torch.load``: tensors come back as numpy arrays (views of one array per storage, so shared
storages still share memory), bfloat16/float8 as float32 and complex32 as complex64 (exactly: numpy has no such
types; each such tensor an array of its own, sharing no memory), torch's bit types as unsigned ints, dtypes as
numpy dtypes, ``torch.Size`` as a tuple and ``torch.device`` as its name; float4, quantized, sparse and subclassed
tensors and pickled modules are refused.
"""

from __future__ import annotations

import math
import zipfile
from typing import IO, Any

import numpy as np

from modulecraft.serialization import limits
from modulecraft.serialization.errors import ZIP_DAMAGE, CheckpointError
from modulecraft.serialization.pickle_scan import check_opcodes
from modulecraft.serialization.torch_pickle import StateDictUnpickler, TensorSpec, materialise, short
from modulecraft.serialization.zip_members import Member, ZipMembers

__all__ = ["load", "is_torch_archive", "PICKLE"]

PICKLE = "data.pkl"
# A state_dict's pickle holds names and shapes, never values: about 120 bytes per tensor (2.4 MB for 20,000
# tensors). The limit bounds the time the opcode check (pure Python) can be made to take.
_PICKLE_LIMIT = 32 * 1024 * 1024
_ALIGNMENT = 64  # bytes: torch.save aligns each storage so in its file; vector instructions like it too


def is_torch_archive(archive: zipfile.ZipFile) -> bool:
    """Whether a zip archive looks like what ``torch.save`` writes (a member ``<folder>/data.pkl``)."""
    return any(name.rsplit("/", 1)[-1] == PICKLE for name in archive.namelist())


def _folder(archive: ZipMembers) -> str:
    pickles = [name for name in archive.members if name.rsplit("/", 1)[-1] == PICKLE]
    if len(pickles) != 1 or pickles[0].count("/") != 1:
        raise CheckpointError(f"a zip archive but not a torch checkpoint: expected one '<folder>/{PICKLE}', "
                              f"found {pickles}")
    return pickles[0][:-len(PICKLE)]


def _member(archive: ZipMembers, name: str):
    try:
        return archive.members[name]
    except KeyError:
        raise CheckpointError(f"no member {short(name)}: the archive is incomplete") from None


class _Tensors:
    """Each tensor the pickle asks for, as an array: a view of its storage's bytes when numpy has its type in the
    file's byte order (views of one storage share memory, as in torch, whatever their types), else an array of
    its own, widened or byte-swapped from just its elements (never the whole storage: a one-element view of a
    64 MB storage costs one element). Those arrays' elements are counted first, within the converted elements
    limit."""

    def __init__(self, raws: dict[str, np.ndarray], big_endian: bool):
        self.raws, self.big_endian = raws, big_endian
        stored = sum(raw.size for raw in raws.values())
        self.budget = limits.CONVERTED_ELEMENTS_PER_BYTE * stored + limits.CONVERTED_ELEMENTS

    def __call__(self, spec: TensorSpec) -> np.ndarray:
        kind, raw = spec.kind, self.raws[spec.storage.key]
        swap = self.big_endian and kind.raw.itemsize > 1
        stored = kind.raw.newbyteorder(">") if swap else kind.raw
        if raw.size == 0:  # no bytes to view: a tensor of no elements (checked when it was rebuilt)
            return np.zeros(spec.size, kind.loaded_dtype)
        itemsize = stored.itemsize
        view = np.ndarray(spec.size, stored, buffer=raw, offset=spec.offset * itemsize,
                          strides=tuple(stride * itemsize for stride in spec.stride))
        if not (swap or kind.widen):
            return view
        self.budget -= math.prod(spec.size)
        if self.budget < 0:
            raise CheckpointError(f"its tensors of types numpy lacks (widened) or in big-endian order (swapped) "
                                  f"would hold more than {limits.CONVERTED_ELEMENTS_PER_BYTE} elements per byte of "
                                  f"storage plus {limits.CONVERTED_ELEMENTS} (the converted elements limit)")
        return kind.load(view.astype(kind.raw) if swap else view)


def _storage_buffers(members: dict[str, Member]) -> dict[str, np.ndarray]:
    """Each storage's bytes as a 64-byte-aligned slice of one buffer: one allocation, which the kernel backs with
    large pages, instead of one per storage, whose page faults cost more than reading the file (measured by
    benchmarks/bench_checkpoints.py). Storages stay apart: no two slices overlap."""
    starts, total = {}, 0
    for key, member in members.items():
        starts[key] = total
        total += -(-member.size // _ALIGNMENT) * _ALIGNMENT
    buffer = np.empty(total, np.uint8)
    return {key: buffer[starts[key]:starts[key] + member.size] for key, member in members.items()}


def load(file: IO[bytes], source: str, infos: list[zipfile.ZipInfo]) -> Any:
    """Read the object ``torch.save`` wrote (a state_dict, or containers of tensors and plain values).

    ``file`` is a seekable binary file object, ``infos`` its zip directory; ``source`` names it in error messages.
    """
    try:
        archive = ZipMembers(file, "torch.save", infos)
        folder = _folder(archive)
        byteorder = "little"
        if folder + "byteorder" in archive.members:
            byteorder = archive.read(archive.members[folder + "byteorder"]).decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            raise CheckpointError(f"unknown byte order {short(byteorder)} (torch writes 'little' or 'big')")
        pickle_member = archive.members[folder + PICKLE]
        if pickle_member.size > _PICKLE_LIMIT:
            raise CheckpointError(f"member {short(pickle_member.name)} has {pickle_member.size} bytes, more than "
                                  f"the {_PICKLE_LIMIT} it can need in a checkpoint")
        data = archive.read(pickle_member)
        check_opcodes(data)
        unpickler = StateDictUnpickler(data)
        try:
            obj = unpickler.load()
        except CheckpointError:
            raise
        except Exception as error:  # only allowed callables ran: any failure is a malformed pickle
            raise CheckpointError(f"the checkpoint's pickle is damaged ({type(error).__name__}: {error})") from None
        unpickler.memo.clear()  # what only the pickle named again (argument tuples, persistent ids) is freed
        members = {}
        for key, ref in unpickler.storages.items():
            member = members[key] = _member(archive, f"{folder}data/{key}")
            if member.size != ref.nbytes:
                raise CheckpointError(f"storage member {short(member.name)} has {member.size} bytes but the pickle "
                                      f"declares {ref.nbytes}")
        raws = _storage_buffers(members)
        archive.read_into({members[key]: raw for key, raw in raws.items()})  # one pass over the file, no copy
        return materialise(obj, _Tensors(raws, byteorder == "big"))
    except CheckpointError as error:  # raised without the file's name, which is added here
        raise type(error)(f"{source}: {error}") from None
    except (*ZIP_DAMAGE, TypeError) as error:  # and unhashable values
        raise CheckpointError(f"{source}: a damaged torch checkpoint ({type(error).__name__}: {error})") from None
