"""Files that cost time, memory or a crash rather than running code: each is refused with our error in a child
process under an address-space and CPU-time limit (see ``limits.py``) that the attack, undefended, exceeds."""

import io
import json
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import modulecraft
from modulecraft.serialization import CheckpointError
from modulecraft.serialization import limits, torch_pickle

from .archives import members, nested_members, with_aliases, zipped
from .hostile import Storage, Tensor, checkpoint, pickled
from .limits import MiB, load_limited

FLOATS = 1_000_000  # a 4 MB storage


def refused(tmp_path, data: bytes, message: str, **limits) -> None:
    path = tmp_path / "hostile"
    path.write_bytes(data)
    outcome = load_limited(path, **limits)
    assert outcome.returncode == 0 and outcome.output.startswith("CheckpointError"), outcome
    assert message in outcome.output, outcome.output


# --- zip archives: every byte read once -----------------------------------------------------------------------

def test_torch_storages_sharing_bytes_are_refused(tmp_path):
    """100 storages, each a member inside the one before: 400 MB of arrays from a 4 MB file, undefended."""
    names = [f"archive/data/{i}" for i in range(100)]
    _, sizes = nested_members({}, names[0], names[1:], 4 * FLOATS)
    state = OrderedDict((f"w{i}", Tensor(Storage(str(i), sizes[name] // 4), 0, (sizes[name] // 4,), (1,)))
                        for i, name in enumerate(names))
    data, _ = nested_members({"archive/data.pkl": pickled(state), "archive/byteorder": b"little"}, names[0],
                             names[1:], 4 * FLOATS)
    refused(tmp_path, data, "overlap in the file; torch.save never writes one byte for two members", memory=300 * MiB)


def npz_entries(count: int, array: np.ndarray) -> dict[str, bytes]:
    """A modulecraft .npz's members for arrays w0...w{count-1}, each of them ``array``."""
    buffer = io.BytesIO()
    modulecraft.save({f"w{i}": np.zeros(1, array.dtype) for i in range(count)}, buffer, format="npz")
    entries = {"__modulecraft__.npy": members(buffer.getvalue())["__modulecraft__.npy"]}
    npy = io.BytesIO()
    np.save(npy, array)
    entries["w0.npy"] = npy.getvalue()
    return entries


def test_npz_directory_entries_naming_one_members_bytes_are_refused(tmp_path):
    """100 directory entries naming the same 4 MB member: refused as their local header names another member."""
    data = with_aliases(zipped(npz_entries(100, np.zeros(FLOATS, np.float32))), "w0.npy",
                        [f"w{i}.npy" for i in range(1, 100)])
    refused(tmp_path, data, "member 'w1.npy' has a local header that disagrees with the directory", memory=300 * MiB)


def test_a_deflated_npz_member_is_refused_uninflated(tmp_path):
    """256 MiB of zeros in a 250 kB file: modulecraft.save never compresses, so no member may be compressed."""
    entries = npz_entries(1, np.zeros(1, np.float32))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (64 * MiB,)})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__modulecraft__.npy", entries["__modulecraft__.npy"])
        with archive.open("w0.npy", "w") as member:
            member.write(header.getvalue())
            for _ in range(64):
                member.write(bytes(4 * MiB))
    refused(tmp_path, buffer.getvalue(), "is compressed; numpy.savez stores members uncompressed", memory=200 * MiB)


def test_an_npz_member_declaring_more_than_the_file_is_refused():
    data = bytearray(zipped(npz_entries(1, np.zeros(4, np.float32))))
    record = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 1)  # the directory record of w0.npy
    struct.pack_into("<II", data, record + 20, 2**31, 2**31)
    with pytest.raises(CheckpointError, match="member 'w0.npy' declares 2147483648 bytes, more than the file holds"):
        modulecraft.load(io.BytesIO(bytes(data)))


# --- the pickle: bounded arithmetic, objects and nesting -------------------------------------------------------

def test_megabyte_long_integers_as_sizes_are_refused_before_any_arithmetic(tmp_path):
    """Multiplying two 8-Mbit ints takes seconds: ten tensors would take half a minute, undefended."""
    huge = (2**(8 * MiB) - 1,)
    state = OrderedDict((f"w{i}", Tensor(Storage("0", 3), 0, huge, huge)) for i in range(10))
    refused(tmp_path, checkpoint(state, {"0": bytes(12)}), "invalid size", cpu_seconds=10)


def test_an_integer_beyond_int64_is_no_size():
    state = OrderedDict(w=Tensor(Storage("0", 3), 0, (2**64,), (0,)))
    with pytest.raises(CheckpointError, match="invalid size"):
        modulecraft.load(io.BytesIO(checkpoint(state, {"0": bytes(12)})))


def test_tensors_rebuilt_again_and_again_from_memoised_arguments_are_capped(tmp_path):
    """110,000 tensors in 4.2 MB, each padded with 32 bytes so that their objects stay within the object memory
    limit (a million took 141 s and 1.2 GB before the cap)."""
    first = pickled([Tensor(Storage("0", 3), 0, (3,), (1,))])
    assert first.endswith(b"tq\x0bRq\x0ca.")  # the rebuild function in memo 1, its arguments in memo 11
    again = b"h\x01h\x0bR" + b"C\x1e" + bytes(30) + b"0"  # the same call, then 30 bytes pushed and popped
    data = checkpoint(pickle_bytes=first[:-1] + b"(" + again * 110_000 + b"e.", storages={"0": bytes(12)})
    refused(tmp_path, data, f"builds more than {limits.TENSORS} tensors", memory=300 * MiB)


def test_a_pickle_building_more_objects_than_any_checkpoint_is_refused(tmp_path):
    """A dict a byte: 1.1 million dicts in 1.1 MB took 235 MB (the limit on their number was fixed, a million)."""
    data = checkpoint(pickle_bytes=b"\x80\x02](" + b"}" * 1_100_000 + b"e.")
    refused(tmp_path, data, "more than the object memory limit", memory=300 * MiB)


def test_tuples_nested_a_million_deep_are_refused_instead_of_crashing_the_interpreter(tmp_path):
    """Hashing a dict key nested a million tuples deep overflows C's stack: a segmentation fault, undefended."""
    data = checkpoint(pickle_bytes=b"\x80\x02}N" + b"\x85" * 1_000_000 + b"Ns.")
    refused(tmp_path, data, "nests tuples more than 100 deep")


def test_lists_nested_deeper_than_any_checkpoint_are_refused():
    data = checkpoint(pickle_bytes=b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".")
    with pytest.raises(CheckpointError, match="nests containers more than 100 deep"):
        modulecraft.load(io.BytesIO(data))


# --- safetensors ---------------------------------------------------------------------------------------------

def safetensors_file(header: dict, data: bytes = b"") -> bytes:
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def with_tree(tree_json: str) -> bytes:
    header = '{"format": "modulecraft.state_dict", "version": 2, "tree": ' + tree_json + "}"
    return safetensors_file({"__metadata__": {"modulecraft": header}})


def test_a_header_nested_too_deep_for_json_is_our_error():
    with pytest.raises(CheckpointError, match="damaged modulecraft header \\(RecursionError"):
        modulecraft.load(io.BytesIO(with_tree("[" * 100_000)))


def test_a_header_nested_deeper_than_any_checkpoint_is_refused():
    with pytest.raises(CheckpointError, match="nests containers more than 100 deep"):
        modulecraft.load(io.BytesIO(with_tree('{"list": [' * 400 + "]}" * 400)))


@pytest.mark.parametrize("header, data, message", [
    ({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, 1, "has the dtype 'F4', which modulecraft does "
                                                                      "not read"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 8, "covered by its tensors exactly once"),
    ({"w": {"dtype": "F32", "shape": [2**62, 2**62, 2], "data_offsets": [0, 8]}}, 8, "invalid shape"),
    ({"w": {"dtype": "F32", "shape": [2**64], "data_offsets": [0, 8]}}, 8, "invalid shape"),
    ({"w": {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]}}, 8, "invalid shape"),
], ids=["unknown dtype", "overlap", "huge product", "beyond int64", "bool"])
def test_safetensors_headers_that_lie_are_refused(header, data, message):
    content = safetensors_file(header, bytes(data))
    with pytest.raises(CheckpointError, match=message):
        modulecraft.load(io.BytesIO(content))


def test_a_safetensors_header_size_beyond_the_file_is_refused_unread():
    content = struct.pack("<Q", 50 * MiB) + b'{"w": 1}'
    with pytest.raises(CheckpointError, match=f"its header declares {50 * MiB} bytes, more than the file holds"):
        modulecraft.load(io.BytesIO(content))


def test_a_file_too_big_for_the_memory_available_is_our_error(tmp_path):
    """A valid 300 MB checkpoint under a 200 MB address-space limit: MemoryError becomes CheckpointError."""
    path = tmp_path / "big.safetensors"
    encoded = json.dumps({"w": {"dtype": "F32", "shape": [75 * MiB // 1], "data_offsets": [0, 300 * MiB]}}).encode()
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        file.truncate(8 + len(encoded) + 300 * MiB)  # sparse: zeros that take no disk
    outcome = load_limited(path, memory=200 * MiB)
    assert outcome.output.startswith("CheckpointError") and "needs more memory than is available" in outcome.output


# --- BUILD: only a state_dict's _metadata ---------------------------------------------------------------------

@pytest.mark.parametrize("state", [
    b"}X\x08\x00\x00\x00__name__X\x04\x00\x00\x00evils",             # BUILD with a dict: __dict__ update
    b"N}X\x0c\x00\x00\x00__defaults__(K\x07ts\x86",                      # BUILD with (None, slots): setattr
], ids=["dict state", "slot state"])
@pytest.mark.parametrize("target", [b"ctorch._utils\n_rebuild_tensor_v2\n", b"ctorch\nfloat32\n",
                                    b"ccollections\nOrderedDict\n", b"ctorch\nFloatStorage\n"],
                         ids=["rebuild function", "dtype", "OrderedDict", "storage type"])
def test_a_build_on_an_allowed_global_changes_nothing_and_is_refused(target, state):
    before = {key: (getattr(value, "__name__", None), getattr(value, "__defaults__", None))
              for key, value in vars(torch_pickle).items()}
    with pytest.raises(CheckpointError, match="pickle is damaged"):
        modulecraft.load(io.BytesIO(checkpoint(pickle_bytes=b"\x80\x02" + target + state + b"b.")))
    after = {key: (getattr(value, "__name__", None), getattr(value, "__defaults__", None))
             for key, value in vars(torch_pickle).items()}
    assert after == before
    assert modulecraft.load(io.BytesIO(checkpoint(OrderedDict(w=Tensor(Storage("0", 1))), {"0": bytes(4)})))
