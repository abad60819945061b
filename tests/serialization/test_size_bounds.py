"""Hostile files a few hundred bytes to 100 MB long, each refused with our error (or loaded) within the bound the
README states, in a child process under an address-space and CPU-time limit (``limits.py``): one test per way a
file could make a load cost more than its size (issue 41's B1-B8), and every dtype torch 2.13 and safetensors
write either loads or is refused saying what it is and what to do. Big files are generated once per module."""

import io
import json
import re
import struct
import tracemalloc
from collections import OrderedDict

import numpy as np
import pytest
import safetensors.torch
import torch

import modulecraft
from modulecraft.serialization import CheckpointError, limits
from modulecraft.serialization.pickle_scan import check_opcodes

from .archives import members, torch_saved, zipped
from .hostile import Call, Storage, Tensor, checkpoint
from .limits import MiB, load_limited
from .test_resource_bounds import safetensors_file, with_tree

_MEMORY = 400 * MiB  # the interpreter, numpy and modulecraft take about 150 MB of address space


def refused(path, message: str, memory: int = _MEMORY, cpu_seconds: int = 10) -> None:
    outcome = load_limited(path, memory=memory, cpu_seconds=cpu_seconds)
    assert outcome.returncode == 0 and outcome.output.startswith("CheckpointError"), outcome
    assert message in outcome.output, outcome.output


def written(tmp_path, data: bytes, name: str = "hostile"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def npz_with_tree(tree_json: str) -> bytes:
    """A modulecraft .npz whose JSON header has the tree ``tree_json``."""
    header = '{"format": "modulecraft.state_dict", "version": 2, "tree": ' + tree_json + "}"
    buffer = io.BytesIO()
    np.save(buffer, np.array(header))
    return zipped({"__modulecraft__.npy": buffer.getvalue()})


# --- B1: numbers too big for a float --------------------------------------------------------------------------

@pytest.mark.parametrize("make", [with_tree, npz_with_tree], ids=["safetensors", "npz"])
def test_a_complex_number_beyond_float_range_is_our_error(make):
    with pytest.raises(CheckpointError, match="damaged modulecraft header \\(OverflowError"):
        modulecraft.load(io.BytesIO(make('{"complex": [' + "1" + "0" * 400 + ", 0]}")))


# --- B2: a memoised tuple DAG as a key --------------------------------------------------------------------------

def dag_key_pickle(levels: int, as_set: bool) -> bytes:
    """A dict (or set) whose one key is ``t_levels`` with ``t_0 = (None,)``, ``t_i = (t_(i-1), t_(i-1))``: each
    level two memo gets, so the pickle grows by 8 bytes a level while the key's unfolded size doubles."""
    body = b"N\x85q\x00"
    for level in range(levels):  # pop the last level, push the next made of two of it
        body += b"0h" + bytes([level]) + b"h" + bytes([level]) + b"\x86q" + bytes([level + 1])
    if as_set:
        return b"\x80\x04\x8f(" + body + b"\x90."
    return b"\x80\x02}" + body + b"Ns."


@pytest.mark.parametrize("as_set", [False, True], ids=["dict key", "set item"])
def test_a_key_of_memoised_tuples_60_levels_deep_is_refused(tmp_path, as_set):
    """850 bytes whose key hashes 2**60 nodes: it never finished before the hashed nodes were counted."""
    data = checkpoint(pickle_bytes=dag_key_pickle(60, as_set))
    assert len(data) < 1000
    refused(written(tmp_path, data), "(the hashed nodes limit)")


def test_a_key_of_memoised_tuples_a_few_levels_deep_loads():
    key = modulecraft.load(io.BytesIO(checkpoint(pickle_bytes=dag_key_pickle(5, False))))
    assert len(key) == 1 and len(next(iter(key))) == 2


# --- B3: keys that all hash alike -------------------------------------------------------------------------------

COLLIDING = [i * (2**61 - 1) for i in range(1, 60_001)]  # every one hashes to 0


def colliding_pickle() -> bytes:
    body = b"".join(b"\x8a" + bytes([len(encoded)]) + encoded + b"N" for encoded in (
        key.to_bytes((key.bit_length() + 8) // 8, "little", signed=True) for key in COLLIDING))
    return b"\x80\x02}(" + body + b"u."


def colliding_tree() -> str:
    return json.dumps({"dict": [[key, None] for key in COLLIDING]})


@pytest.mark.parametrize("make", [lambda: checkpoint(pickle_bytes=colliding_pickle()),
                                  lambda: with_tree(colliding_tree()), lambda: npz_with_tree(colliding_tree())],
                         ids=["pt", "safetensors", "npz"])
def test_60000_keys_that_all_hash_alike_are_refused(tmp_path, make):
    """Each insertion compared the key with every earlier one: over 30 s before their nodes were counted."""
    assert len({hash(key) for key in COLLIDING}) == 1
    refused(written(tmp_path, make()), "the chosen hashes limit")


def test_many_small_int_and_string_keys_load():
    """An optimizer's state is keyed by small ints, a state_dict by names: neither is limited (5,000 of each, more
    than the chosen hashes limit; the values need no tensors)."""
    state = {i: {"step": i} for i in range(5_000)}
    state.update({f"name{i}": i for i in range(5_000)})
    loaded = modulecraft.load(io.BytesIO(torch_saved(state)))
    assert list(loaded) == list(state)


# --- B4: opcodes that build nothing ---------------------------------------------------------------------------

def safetensors_text(header: str, data: bytes = b"") -> bytes:
    """A safetensors file of a JSON header given as text (a dict of 99 MB of junk would take gigabytes here)."""
    encoded = header.encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


@pytest.fixture(scope="module")
def big_files(tmp_path_factory):
    """The large hostile files, made once: name -> path."""
    folder = tmp_path_factory.mktemp("big")
    pairs = (limits.PICKLE_BYTES - 16) // 3  # B4: the largest pickle allowed, 22 million opcodes building nothing
    junk = '{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "junk": [' + "[]," * (33 * MiB) + "[]]}}"
    zero_size = "{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'
                               for i in range(1_000_000)) + "}"
    return {"get-pop": written(folder, checkpoint(pickle_bytes=b"\x80\x02Nq\x00" + b"h\x000" * pairs + b"N."),
                               "get-pop"),
            "junk": written(folder, safetensors_text(junk, bytes(4)), "junk"),  # B6: 99 MB of [] in an entry
            "zero-size": written(folder, safetensors_text(zero_size), "zero-size")}  # B7


def test_32_mb_of_opcodes_that_build_nothing_are_refused_at_the_opcodes_limit(big_files):
    """2.5 s a MB (80 s) before opcodes were counted."""
    refused(big_files["get-pop"], "more than the opcodes limit")


# --- B5: one storage, many types --------------------------------------------------------------------------------

LOW_PRECISION = [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                 torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.complex32]


def views(storage: bytes, tensors: dict) -> bytes:
    """A torch checkpoint of views of one untyped storage: name -> (dtype, offset, size, stride), in elements of
    the dtype (torch.save refuses to write views of one storage in two types; torch.load reads them)."""
    state = {name: Call(torch._utils._rebuild_tensor_v3, Storage("0", len(storage), torch.storage.UntypedStorage),
                        offset, size, stride, False, OrderedDict(), dtype)
             for name, (dtype, offset, size, stride) in tensors.items()}
    return checkpoint(state, {"0": storage}, extra={"archive/version": b"3\n"})


@pytest.fixture(scope="module")
def one_storage_seven_types(tmp_path_factory):
    """Seven one-element views, of seven types numpy lacks, of one 64 MB storage, and what torch.load gives."""
    storage = bytes(range(256)) * (64 * MiB // 256)
    path = tmp_path_factory.mktemp("views") / "views.pt"
    path.write_bytes(views(storage, {str(dtype): (dtype, 3, (1,), (1,)) for dtype in LOW_PRECISION}))
    loaded = torch.load(path, weights_only=True)
    return path, {key: value.to(torch.complex64 if value.is_complex() else torch.float32).numpy()
                  for key, value in loaded.items()}


def test_views_of_one_storage_in_seven_types_numpy_lacks_load_in_bounded_memory(one_storage_seven_types):
    """Each type widened the whole storage: 1.6 GB and 26 s; now each tensor's one element is widened."""
    path, expected = one_storage_seven_types
    assert 64 * MiB < path.stat().st_size < 65 * MiB
    outcome = load_limited(path, memory=_MEMORY, cpu_seconds=10)
    assert outcome[:2] == (0, "loaded"), outcome
    loaded = modulecraft.load(path)
    for key, value in expected.items():
        np.testing.assert_array_equal(loaded[key], value, err_msg=key)


def test_a_widened_tensor_repeating_one_element_is_refused_before_it_is_made(tmp_path):
    """A stride-0 bfloat16 tensor of 2**30 elements over 2 bytes: 4 GiB once widened."""
    tensor = Tensor(Storage("0", 1, torch.BFloat16Storage), 0, (2**30,), (0,))
    refused(written(tmp_path, checkpoint({"w": tensor}, {"0": bytes(2)})), "(the converted elements limit)")


def test_views_of_every_type_share_their_storage():
    loaded = modulecraft.load(io.BytesIO(views(bytes(range(16)), {
        "bytes": (torch.uint8, 0, (16,), (1,)), "ints": (torch.int32, 1, (3,), (1,)),
        "halves": (torch.float16, 2, (2, 2), (1, 2))})))
    expected = torch.frombuffer(bytearray(range(16)), dtype=torch.uint8)
    assert loaded["ints"].tolist() == expected.view(torch.int32)[1:].tolist()
    assert loaded["halves"].tolist() == expected.view(torch.float16)[2:].as_strided((2, 2), (1, 2)).tolist()
    loaded["bytes"][4] = 255
    assert np.shares_memory(loaded["ints"], loaded["bytes"])
    assert loaded["ints"][0] == expected.view(torch.int32)[1] + 251
    assert np.shares_memory(loaded["halves"], loaded["bytes"])


def test_a_bytearray_of_a_count_is_refused_before_it_is_allocated(tmp_path):
    """bytearray(n) allocates n zero bytes: 57 bytes of pickle asked for 1.9 GB (refused only by the child's
    address-space limit). Pickle writes bytearray(bytes) or bytearray(text, 'latin-1'), which load."""
    data = b"\x80\x04\x8c\x08builtins\x94\x8c\tbytearray\x94\x93\x94J\x00\x00\x00\x70\x85R."
    refused(written(tmp_path, checkpoint(pickle_bytes=data)), "bytearray called on (1879048192,)")
    for protocol in (2, 4):
        torch.save({"b": bytearray(b"ab")}, buffer := io.BytesIO(), pickle_protocol=protocol)
        assert modulecraft.load(io.BytesIO(buffer.getvalue()))["b"] == bytearray(b"ab")


# --- B6, B7: JSON headers ---------------------------------------------------------------------------------------

def test_99_mb_of_junk_in_a_safetensors_header_is_refused_unparsed(big_files):
    """1.9 GB and 43 s, refused only by the memory limit, before header values were counted."""
    assert big_files["junk"].stat().st_size > 99 * 10**6
    refused(big_files["junk"], "of the header nodes limit", cpu_seconds=5)


def test_a_million_zero_size_tensors_are_refused_unparsed(big_files):
    """47 s and 886 MB before header values were counted."""
    refused(big_files["zero-size"], "of the header nodes limit", cpu_seconds=5)


def test_more_tensors_than_the_limit_are_refused_in_safetensors_as_in_torchs_format(tmp_path):
    header = {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(limits.TENSORS + 1)}
    refused(written(tmp_path, safetensors_file(header)), "(the tensors limit)")


# --- B8: zip members --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def many_members():
    """A torch checkpoint with one directory record more than the members limit, made fast by repeating the
    record of its ``version`` member (duplicate names: zipfile would refuse them only after reading them all)."""
    archive = zipped(members(torch_saved({"w": torch.zeros(1)})))
    end = archive.rindex(b"PK\x05\x06")
    count, size, offset = struct.unpack_from("<HII", archive, end + 10)
    directory = archive[offset:offset + size]
    start = directory.index(b"PK\x01\x02", directory.index(b"archive/version") - 46 - 20)
    record = directory[start:directory.index(b"archive/version") + len(b"archive/version")]
    extra = limits.MEMBERS + 1 - count
    trailer = bytearray(archive[end:])
    struct.pack_into("<HHI", trailer, 8, 0xFFFF, 0xFFFF, size + extra * len(record))
    return archive[:offset + size] + record * extra + bytes(trailer)


def test_more_zip_members_than_the_limit_are_refused_before_zipfile_reads_them(tmp_path, many_members):
    """300,000 members took 20-30 s before each was checked; their records are now counted first."""
    refused(written(tmp_path, many_members), f"more than the {limits.MEMBERS} of the members limit", cpu_seconds=5)


def test_a_directory_declaring_one_member_is_counted_by_its_records(tmp_path, many_members):
    """zipfile reads records until the directory's size is used up, whatever count the end record declares."""
    data = bytearray(many_members)
    struct.pack_into("<HH", data, data.rindex(b"PK\x05\x06") + 8, 1, 1)
    refused(written(tmp_path, bytes(data)), "of the members limit", cpu_seconds=5)


def test_20000_npz_members_load_within_the_stated_bound(tmp_path):
    """21 s before: numpy parsed each member's header with literal_eval and opened it through zipfile twice."""
    path = tmp_path / "many.npz"
    modulecraft.save({f"w{i}": np.full(2, i, np.float32) for i in range(20_000)}, path)
    outcome = load_limited(path, memory=_MEMORY, cpu_seconds=10)
    assert outcome[:2] == (0, "loaded"), outcome
    assert modulecraft.load(path)["w19999"].tolist() == [19999.0, 19999.0]


# --- every dtype torch 2.13 and safetensors write ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float8_e4m3fnuz, torch.float8_e5m2fnuz], ids=str)
def test_fnuz_float8_written_by_safetensors_torch_loads_widened_exactly(tmp_path, dtype):
    values = torch.tensor([0.0, 1.0, -2.5, 0.125, float("nan")]).to(dtype)
    path = tmp_path / "fnuz.safetensors"
    safetensors.torch.save_file({"w": values}, path)
    np.testing.assert_array_equal(modulecraft.load(path)["w"], values.float().numpy())


@pytest.mark.parametrize("dtype, numpy_dtype", [(torch.bits8, np.uint8), (torch.bits16, np.uint16),
                                                (torch.bits1x8, np.uint8), (torch.bits2x4, np.uint8),
                                                (torch.bits4x2, np.uint8)], ids=str)
def test_torchs_bit_types_load_as_their_raw_bits(dtype, numpy_dtype):
    bits = torch.arange(6, dtype=torch.int16 if numpy_dtype is np.uint16 else torch.uint8).view(dtype)
    loaded = modulecraft.load(io.BytesIO(torch_saved({"b": bits})))["b"]
    assert loaded.dtype == numpy_dtype and loaded.tolist() == list(range(6))


def test_float4_from_torch_save_is_refused_saying_what_it_is_and_what_to_do():
    packed = torch.tensor([0x21, 0x43], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(CheckpointError, match="dtype torch.float4_e2m1fn_x2, which modulecraft does not read: two "
                                              "4-bit floats .* save tensor.view\\(torch.uint8\\) instead"):
        modulecraft.load(io.BytesIO(torch_saved({"w": packed})))


def test_quantized_tensors_are_refused_saying_what_to_do():
    quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8)
    with pytest.raises(CheckpointError, match="quantized tensors.*save tensor.dequantize\\(\\) instead"):
        modulecraft.load(io.BytesIO(torch_saved({"q": quantized})))


def test_safetensors_f4_is_refused_saying_what_it_is():
    data = safetensors_file({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, bytes(1))
    with pytest.raises(CheckpointError, match="dtype 'F4', which modulecraft does not read: 4-bit floats"):
        modulecraft.load(io.BytesIO(data))


@pytest.mark.parametrize("dtype", ["O", "(2147483647,)f4", "[('a', '<f4')]", "<U10", "V8"])
def test_header_dtypes_outside_the_allow_list_are_refused(dtype):
    for tree in ({"dtype": dtype}, {"uninitialized": "parameter", "dtype": dtype}):
        with pytest.raises(CheckpointError, match="which is not one of an array's"):
            modulecraft.load(io.BytesIO(with_tree(json.dumps(tree))))


def test_a_dtype_outside_the_allow_list_is_refused_on_save():
    with pytest.raises(TypeError, match="cannot save the dtype object"):
        modulecraft.save({"kind": np.dtype("O")}, io.BytesIO())
    modulecraft.save({"kind": np.dtype(">f4")}, buffer := io.BytesIO())
    assert modulecraft.load(io.BytesIO(buffer.getvalue()))["kind"] == np.dtype(">f4")


def test_format_pt_is_torchs_format(tmp_path):
    path = tmp_path / "checkpoint.bin"
    modulecraft.save({"w": np.arange(3.0)}, path, format="pt")
    assert torch.load(path, weights_only=True)["w"].tolist() == [0.0, 1.0, 2.0]
    assert modulecraft.load(path, format="pt")["w"].tolist() == [0.0, 1.0, 2.0]


# --- objects built: memory and time bounded by the bytes that describe them --------------------------------------

@pytest.fixture(scope="module")
def real_checkpoints(tmp_path_factory):
    """What torch.save writes for large real checkpoints: a state_dict of 100,000 small tensors (the tensors limit;
    the fixed limits before, 3 million opcodes and a million objects, refused it), and a training checkpoint
    holding a 2,000-layer model's state_dict (and its _metadata), its Adam state (the most object memory a byte
    of pickle of the real checkpoints we know) and a loss history."""
    folder = tmp_path_factory.mktemp("real")
    torch.save({f"layers.{i}.weight": torch.full((2,), float(i)) for i in range(100_000)}, folder / "state.pt")
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(2_000)])
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3,
                "losses": [i / 7 for i in range(20_000)], "config": {"name": "run", "tags": ["a", "b"] * 1000}},
               folder / "training.pt")
    return folder / "state.pt", folder / "training.pt"


def within_bound(outcome, size: int) -> None:
    """What the README states a load of a file of ``size`` bytes costs at most: the memory the opcode check
    allows its pickle's objects, the file's bytes, and what the interpreter holds besides (16 MB); the CPU time
    (measured at most 1.1 s per MB on a quiet machine)."""
    assert outcome.peak <= limits.OBJECT_BYTES + (limits.OBJECT_BYTES_PER_BYTE + 1) * size + 16 * MiB, (outcome,
                                                                                                            size)
    assert outcome.cpu <= 1 + 2 * size / MiB, (outcome, size)


def test_real_checkpoints_of_100000_tensors_load_within_the_bound(real_checkpoints):
    for path in real_checkpoints:
        outcome = load_limited(path, memory=_MEMORY + 100 * MiB, cpu_seconds=60)
        assert outcome[:2] == (0, "loaded"), outcome
        within_bound(outcome, path.stat().st_size)


def test_a_real_training_checkpoint_loads_as_torch_loads_it(real_checkpoints):
    expected = torch.load(real_checkpoints[1], weights_only=True)
    loaded = modulecraft.load(real_checkpoints[1])
    assert loaded["model"]._metadata == expected["model"]._metadata
    assert list(loaded["model"]) == list(expected["model"])
    np.testing.assert_array_equal(loaded["model"]["1999.weight"], expected["model"]["1999.weight"].numpy())
    state, groups = loaded["optimizer"]["state"], loaded["optimizer"]["param_groups"]
    assert len(state) == 4_000 and groups[0]["params"] == expected["optimizer"]["param_groups"][0]["params"]
    np.testing.assert_array_equal(state[3_999]["exp_avg"], expected["optimizer"]["state"][3_999]["exp_avg"].numpy())
    assert loaded["losses"] == expected["losses"] and loaded["config"] == expected["config"]


def pickle_of(pattern: bytes, count: int, prefix: bytes = b"") -> bytes:
    """A protocol-4 pickle of a list of ``count`` objects, each built by ``pattern`` (after ``prefix``)."""
    return b"\x80\x04" + prefix + b"](" + pattern * count + b"e."


def just_within(pattern: bytes, prefix: bytes = b"") -> int:
    """The largest count of ``pattern`` our opcode check lets through (the check is monotone in the count): a
    pickle far past the limits is refused at a byte it names, and so is any pickle of the count that reaches that
    byte; bisection below it finds the largest let through."""
    def passes(count):
        try:
            check_opcodes(pickle_of(pattern, count, prefix))
            return True
        except CheckpointError:
            return False
    with pytest.raises(CheckpointError, match="in its first") as refusal:
        check_opcodes(pickle_of(pattern, 2 * MiB // len(pattern), prefix))
    refused_at = int(re.search(r"in its first (\d+) bytes", str(refusal.value))[1])
    high = (refused_at - len(pickle_of(b"", 0, prefix))) // len(pattern) + 1
    low = high - 16 if passes(high - 16) else 0  # the count is often just below (not for lists: APPENDS at the end)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if passes(middle) else (low, middle)
    return low


_SIZE = b"\x8c\x05torch\x94\x8c\x04Size\x94\x93\x94"  # torch.Size in memo 2
OBJECT_PATTERNS = {  # what a few bytes of pickle can make Python build, each in the costliest way we know of
    "empty dicts": (b"}", b""), "empty sets": (b"\x8f", b""), "empty lists": (b"]", b""),
    "one-tuples": (b"N\x85", b""), "torch.Size() calls": (b"h\x02)R", _SIZE),
    "opcodes building nothing": (b"h\x000", b"N\x94"),
}


_SET, _ORDERED_DICT = (b"\x8c\x08builtins\x94\x8c\x03set\x94\x93\x94",
                      b"\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94")  # in memo 2
COSTLIEST = {**OBJECT_PATTERNS, "set() calls": (b"h\x02)R", _SET), "OrderedDict() calls": (b"h\x02)R", _ORDERED_DICT),
             "OrderedDict.__new__ calls": (b"h\x02)\x81", _ORDERED_DICT), "empty tuples": (b")", b""),
             "memoised strings": (b"\x8c\x01x\x940", b""), "8-tuples of one object": (b"(" + b"h\x00" * 8 + b"t", b"N\x94"),
             "one-tuples of one-tuples": (b"N\x85\x85", b""), "one-byte bytes": (b"C\x01x", b""),
             "long ints": (b"\x8a\x08" + bytes(range(1, 9)), b"")}


def test_the_memory_estimate_covers_what_a_load_really_builds(monkeypatch):
    """The object memory limit holds a load's memory only if pickle_scan's estimate is at least what unpickling,
    materialising and the walk itself take: measured by tracemalloc (Python's and numpy's allocations) for each of
    the costliest patterns we know, the limits lifted so that 2,000 objects of each are built. Measured here:
    0.2-0.8 of the estimate. (Resident memory, 200,000 objects each, in a child: 0.1-0.89.)"""
    def peak(data: bytes) -> int:
        file = io.BytesIO(checkpoint(pickle_bytes=data))
        tracemalloc.start()
        try:
            modulecraft.load(file)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    for name in ("OBJECT_BYTES", "OBJECT_BYTES_MOST", "OPCODES"):
        monkeypatch.setattr(limits, name, 2**40)
    baseline = peak(pickle_of(b"", 0))  # reading the archive, the interpreter's caches
    for name, (pattern, prefix) in COSTLIEST.items():
        data = pickle_of(pattern, 2_000, prefix)
        used = peak(data) - baseline - 2 * len(data)  # the pickle is read, then held by the unpickler
        assert used <= 0.9 * check_opcodes(data), (name, used, check_opcodes(data))


def test_objects_past_56_bytes_a_byte_are_refused_once_past_the_allowance():
    """Empty sets, each after a popped 6-byte bytes: 70 bytes of objects a byte of pickle, which the limit of 80
    let through (200,000 of them: about 114 MB at 570 bytes a set, measured)."""
    with pytest.raises(CheckpointError, match="more than the object memory limit \\(8 MB plus 56 bytes per byte"):
        check_opcodes(pickle_of(b"C\x06abcdef0\x8f", 200_000))
    check_opcodes(pickle_of(b"C\x09abcdefghi0\x8f", 200_000))  # 13 bytes each: 54 a byte


@pytest.mark.parametrize("pattern, prefix", OBJECT_PATTERNS.values(), ids=OBJECT_PATTERNS)
def test_objects_at_the_limits_load_within_the_bound_and_one_more_is_refused(tmp_path, pattern, prefix):
    count = just_within(pattern, prefix)
    under = written(tmp_path, checkpoint(pickle_bytes=pickle_of(pattern, count, prefix)), "under")
    outcome = load_limited(under, memory=_MEMORY, cpu_seconds=30)
    assert outcome[:2] == (0, "loaded"), outcome
    within_bound(outcome, under.stat().st_size)
    refused(written(tmp_path, checkpoint(pickle_bytes=pickle_of(pattern, count + 1, prefix)), "over"),
            "limit (")


def junk_header_at_the_limit(lists: int, over: bool) -> bytes:
    """A safetensors file whose one tensor's entry holds ``lists`` empty lists, padded with spaces to just as many
    bytes as the header nodes limit needs for its values (one byte fewer: ``over``)."""
    header = '{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "junk": [' + "[]," * lists + "[]]}}"
    nodes = 1 + sum(header.count(mark) for mark in "[{,:")
    size = len(header)
    while limits.HEADER_NODES + int(limits.HEADER_NODES_PER_BYTE * size) < nodes:
        size += 1
    return safetensors_text(header + " " * (size - len(header) - over), bytes(4))


@pytest.mark.parametrize("over", [False, True], ids=["just within", "one byte short"])
def test_a_header_of_junk_at_the_header_nodes_limit_loads_within_the_bound_or_is_refused(tmp_path, over):
    """3 MB of [] took 78 MB (the limit on the header's values was fixed, 2 million)."""
    path = written(tmp_path, junk_header_at_the_limit(400_000, over))
    if over:
        refused(path, "of the header nodes limit", cpu_seconds=5)
        return
    outcome = load_limited(path, memory=_MEMORY, cpu_seconds=10)
    assert outcome[:2] == (0, "loaded"), outcome
    nodes = limits.HEADER_NODES + limits.HEADER_NODES_PER_BYTE * path.stat().st_size
    assert outcome.peak <= 16 * MiB + 100 * nodes, outcome  # at most 100 bytes a value
    assert outcome.cpu <= 1 + 2 * path.stat().st_size / MiB, outcome


def test_objects_within_the_per_byte_limit_stop_at_its_ceiling(tmp_path):
    """800,000 sets, each after 12 bytes pushed and popped: within the bytes and opcodes per byte, refused at
    the ceiling (else about 450 MB, more than fits in the child's address space)."""
    refused(written(tmp_path, checkpoint(pickle_bytes=pickle_of(b"C\x09abcdefghi0\x8f", 800_000))),
            f"at most {limits.OBJECT_BYTES_MOST // MiB} MB", cpu_seconds=30)
