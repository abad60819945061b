"""Hostile and damaged torch checkpoints are refused with our one clear error: nothing runs, nothing is half loaded,
nothing big is allocated. Each attack is also shown to be live where that can be shown (torch's unrestricted
``torch.load`` runs it), so a passing test means the defence held, not that the attack was a dud."""

import _codecs
import io
import os
import pickle
import struct
import subprocess
import tracemalloc
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import modulecraft
from modulecraft.serialization import CheckpointError, UnpicklingError

from .archives import members, replaced, torch_saved, zipped
from .hostile import Call, Dict, Storage, Tensor, checkpoint, floats, pickled


def load_bytes(data: bytes):
    return modulecraft.load(io.BytesIO(data))


def good_tensor(key="0"):
    return Tensor(Storage(key, 3), 0, (3,), (1,))


# --- code execution -------------------------------------------------------------------------------------------

def touch_payloads(marker):
    command = f"touch {marker}"
    return {
        "os.system": Call(os.system, command),
        "builtins.eval": Call(eval, f"open({str(marker)!r}, 'w')"),
        "subprocess.Popen": Call(subprocess.Popen, ["touch", str(marker)]),
        "builtins.exec": Call(exec, f"open({str(marker)!r}, 'w')"),
    }


@pytest.mark.parametrize("name", ["os.system", "builtins.eval", "subprocess.Popen", "builtins.exec"])
@pytest.mark.parametrize("protocol", [2, 4])  # GLOBAL, and STACK_GLOBAL (torch.save(pickle_protocol=4))
def test_a_pickle_naming_a_dangerous_global_is_refused_and_nothing_runs(tmp_path, name, protocol):
    marker = tmp_path / "ran"
    payload = touch_payloads(marker)[name]
    state = OrderedDict(weight=good_tensor(), evil=payload)
    data = checkpoint(pickle_bytes=pickled(state, protocol), storages={"0": floats(1, 2, 3)})
    with pytest.raises(UnpicklingError, match="global .*(system|eval|exec|Popen), which is not allowed") as raised:
        load_bytes(data)
    assert isinstance(raised.value, pickle.UnpicklingError) and isinstance(raised.value, CheckpointError)
    assert not marker.exists(), "the payload ran"


def test_the_os_system_payload_is_live_with_torchs_unrestricted_load(tmp_path):
    """The control for the test above: the same file does run its payload when loaded without restriction."""
    marker = tmp_path / "ran"
    data = torch_saved({"weight": torch.ones(3), "evil": touch_payloads(marker)["os.system"]})
    with pytest.raises(UnpicklingError, match="posix.system"):
        load_bytes(data)
    assert not marker.exists()
    torch.load(io.BytesIO(data), weights_only=False)
    assert marker.exists()


def test_old_style_instance_opcodes_are_refused_too(tmp_path):
    """Protocol 0's INST opcode names a class and calls it: ``(S'touch x'\\nios\\nsystem\\n.``"""
    marker = tmp_path / "ran"
    data = checkpoint(pickle_bytes=f"(S'touch {marker}'\nios\nsystem\n.".encode())
    with pytest.raises(UnpicklingError, match="os.system, which is not allowed"):
        load_bytes(data)
    assert not marker.exists()


def test_an_extension_code_registered_in_copyreg_still_goes_through_the_allow_list():
    import copyreg
    copyreg.add_extension("os", "system", 0xBEEF)
    try:
        with pytest.raises(UnpicklingError, match="os.system, which is not allowed"):
            load_bytes(checkpoint(pickle_bytes=b"\x80\x02\x83\xef\xbe."))
    finally:
        copyreg.remove_extension("os", "system", 0xBEEF)


# --- the allowed callables, abused --------------------------------------------------------------------------

@pytest.mark.parametrize("obj, message", [
    (OrderedDict(w=Tensor("not a storage")), "storage must come from a storage persistent id"),
    (OrderedDict(w=Tensor(Storage("0", 3), -1, (3,), (1,))), "invalid size"),
    (OrderedDict(w=Tensor(Storage("0", 3), 0, (3,), (-1,))), "invalid size"),
    (OrderedDict(w=Tensor(Storage("0", 3), 0, (3, 1), (1,))), "invalid size"),
    (OrderedDict(w=Tensor(Storage("0", 3), 0, [3], [1])), "invalid size"),
    (OrderedDict(w=Tensor(Storage("0", 3), 0, (3.0,), (1,))), "invalid size"),
    (OrderedDict(w=Call(torch.FloatStorage, 3)), "damaged"),  # a storage type is no callable here
    (OrderedDict(w=Call(torch._utils._rebuild_parameter, "data", False, OrderedDict())), "must be a tensor"),
    (OrderedDict(w=Call(OrderedDict, 5)), "damaged"),
    (OrderedDict(w=Tensor(Storage("0", 3, kind="FloatStorage"))), "invalid storage persistent id"),
    (OrderedDict(w=Call(_codecs.encode, "text", "utf-16")), "only to rebuild bytes from latin1"),
    (OrderedDict(w=Call(torch._utils._rebuild_tensor_v3, Storage("0", 6, kind=torch.storage.UntypedStorage), 0, (1,),
                        (1,), False, OrderedDict(), torch.float32)), "6 bytes holds no whole number of float32"),
    (OrderedDict(w=Call(torch._utils._rebuild_tensor_v3, Storage("0", 3), 0, (1,), (1,), False, OrderedDict(),
                        torch.int32)), "has no element type or another one"),
    (OrderedDict(w=Tensor(Storage("0", 12, kind=torch.storage.UntypedStorage))), "has no element type"),
    (OrderedDict(w=Call(torch._utils._rebuild_tensor_v3, Storage("0", 3), 0, (1,), (1,), False, OrderedDict(),
                        "float32")), "dtype must be a torch dtype"),
    (OrderedDict(w=Call(torch.Size, [-1])), "torch.Size takes non-negative ints"),
    (OrderedDict(w=Call(set, torch.float32)), "set called on"),
    (OrderedDict(w=Call(set, [Storage("0", 3)])), "unexpected value of type StorageRef"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_allowed_callables_with_wrong_arguments_give_our_error(obj, message):
    with pytest.raises(CheckpointError, match=message):
        load_bytes(checkpoint(obj, {"0": floats(1, 2, 3)}))


def test_an_unknown_persistent_id_is_refused():
    # OrderedDict(w=1) with the 1 replaced by the persistent id ('module', 1)
    data = pickle.dumps(OrderedDict(w=1), protocol=2).replace(b"K\x01", b"(X\x06\x00\x00\x00moduleK\x01tQ")
    with pytest.raises(CheckpointError, match="unknown persistent id \\('module', 1\\)"):
        load_bytes(checkpoint(pickle_bytes=data))


def test_one_storage_declared_with_two_sizes_is_refused():
    state = OrderedDict(a=Tensor(Storage("0", 3), 0, (3,), (1,)), b=Tensor(Storage("0", 2), 0, (2,), (1,)))
    with pytest.raises(CheckpointError, match="storage '0' is declared twice"):
        load_bytes(checkpoint(state, {"0": floats(1, 2, 3)}))


def test_attributes_a_pickle_sets_on_the_state_dict_are_dropped_except_checked_metadata():
    hostile = Dict({"w": good_tensor()}, {"items": "shadowed", "_metadata": OrderedDict({"": {"version": 1}})})
    loaded = load_bytes(checkpoint(hostile, {"0": floats(1, 2, 3)}))
    assert list(loaded.items())[0][0] == "w" and "items" not in vars(loaded)
    assert loaded._metadata == {"": {"version": 1}}
    hostile = Dict({"w": good_tensor()}, {"_metadata": {"": "version 1"}})
    with pytest.raises(CheckpointError, match="_metadata is not a mapping of module names to version dicts"):
        load_bytes(checkpoint(hostile, {"0": floats(1, 2, 3)}))


def test_a_build_on_a_tensor_is_refused():
    tensor = Tensor(Storage("0", 3), 0, (3,), (1,), state={"__class__": "evil"})
    with pytest.raises(CheckpointError, match="damaged.*AttributeError"):
        load_bytes(checkpoint(OrderedDict(w=tensor), {"0": floats(1, 2, 3)}))


# --- storages, sizes and offsets that lie -------------------------------------------------------------------

@pytest.mark.parametrize("tensor, message", [
    (Tensor(Storage("0", 3), 1, (3,), (1,)), "reads past the end of storage '0'"),
    (Tensor(Storage("0", 3), 0, (4,), (1,)), "reads past the end"),
    (Tensor(Storage("0", 3), 0, (2, 2), (2, 1)), "reads past the end"),
    (Tensor(Storage("0", 3), 4, (0,), (1,)), "reads past the end"),
    (Tensor(Storage("0", 3), 2**62, (1,), (1,)), "reads past the end"),
    (Tensor(Storage("0", 3), 0, (2**40, 2**40), (1, 1)), "reads past the end"),
])
def test_views_reaching_outside_their_storage_are_refused(tensor, message):
    with pytest.raises(CheckpointError, match=message):
        load_bytes(checkpoint(OrderedDict(w=tensor), {"0": floats(1, 2, 3)}))


def test_views_inside_their_storage_are_fine_even_at_its_very_end():
    state = OrderedDict(last=Tensor(Storage("0", 3), 2, (1,), (1,)), empty=Tensor(Storage("0", 3), 3, (0,), (1,)),
                        repeated=Tensor(Storage("0", 3), 1, (2, 2), (0, 1)))
    loaded = load_bytes(checkpoint(state, {"0": floats(1, 2, 3)}))
    assert loaded["last"].tolist() == [3.0] and loaded["empty"].shape == (0,)
    assert loaded["repeated"].tolist() == [[2.0, 3.0], [2.0, 3.0]]


@pytest.mark.parametrize("content", [floats(1, 2), floats(1, 2, 3, 4), b""], ids=["short", "long", "empty"])
def test_a_storage_member_of_another_size_than_declared_is_refused(content):
    with pytest.raises(CheckpointError, match="member 'archive/data/0' has .* bytes but the pickle declares 12"):
        load_bytes(checkpoint(OrderedDict(w=good_tensor()), {"0": content}))


def test_a_huge_declared_storage_is_refused_before_anything_is_allocated():
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="declares 4611686018427387904"):
            load_bytes(checkpoint(OrderedDict(w=Tensor(Storage("0", 2**60), 0, (2**60,), (1,))), {"0": floats(1)}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20


def test_a_huge_length_declared_inside_the_pickle_is_refused_before_anything_is_allocated():
    """C's unpickler allocates what BINBYTES8 declares before reading it: 512 MiB for these 20 bytes."""
    data = b"\x80\x04\x8e" + struct.pack("<Q", 512 * 2**20) + b"abc."
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="pickle is damaged"):
            load_bytes(checkpoint(pickle_bytes=data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20


def test_a_memo_index_far_ahead_is_refused_before_anything_is_allocated():
    """C's unpickler grows its memo array to the index LONG_BINPUT names: 4 GiB for index 2**28."""
    data = b"\x80\x02Nr" + struct.pack("<I", 2**28) + b"."
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="memo entry 268435456 at byte 3 after only 0 entries"):
            load_bytes(checkpoint(pickle_bytes=data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20


def test_a_pickle_larger_than_any_state_dict_needs_is_refused_unread():
    data = b"\x80\x02" + b")0" * (16 * 2**20) + b"N."
    with pytest.raises(CheckpointError, match="has 33554436 bytes, more than the 33554432 it can need"):
        load_bytes(checkpoint(pickle_bytes=data))


# --- the archive itself -------------------------------------------------------------------------------------

def real_checkpoint():
    return torch_saved(OrderedDict(w=torch.arange(6.0).reshape(2, 3), b=torch.tensor([1, 2])))


def test_a_missing_storage_member_is_refused():
    with pytest.raises(CheckpointError, match="no member 'archive/data/1': the archive is incomplete"):
        load_bytes(replaced(real_checkpoint(), {"data/1": None}))


def test_a_zip_without_data_pkl_is_not_taken_for_a_checkpoint():
    with pytest.raises(CheckpointError, match="neither a torch checkpoint"):
        load_bytes(replaced(real_checkpoint(), {"data.pkl": None}))


def test_two_pickles_or_a_pickle_outside_one_folder_are_refused():
    entries = members(real_checkpoint())
    with pytest.raises(CheckpointError, match="expected one '<folder>/data.pkl'"):
        load_bytes(zipped({**entries, "other/data.pkl": entries["archive/data.pkl"]}))
    with pytest.raises(CheckpointError, match="expected one '<folder>/data.pkl'"):
        load_bytes(zipped({"a/b/data.pkl": entries["archive/data.pkl"]}))


def test_a_member_listed_twice_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members(real_checkpoint()).items():
            archive.writestr(name, content)
        with pytest.warns(UserWarning, match="Duplicate name"):
            archive.writestr("archive/data/0", floats(9, 9, 9, 9, 9, 9))
    with pytest.raises(CheckpointError, match="lists a member twice"):
        load_bytes(buffer.getvalue())


def test_compressed_members_are_refused():
    entries = members(real_checkpoint())
    with pytest.raises(CheckpointError, match="is compressed; torch.save stores members uncompressed"):
        load_bytes(zipped(entries, zipfile.ZIP_DEFLATED))


def test_an_unknown_byte_order_is_refused():
    with pytest.raises(CheckpointError, match="unknown byte order 'middle'"):
        load_bytes(replaced(real_checkpoint(), {"byteorder": b"middle"}))


def test_a_member_declaring_more_bytes_than_the_file_holds_is_refused():
    data = bytearray(real_checkpoint())
    first = data.index(b"PK\x01\x02")  # the central directory entry of archive/data.pkl
    struct.pack_into("<II", data, first + 20, 2**31, 2**31)  # its compressed and uncompressed sizes
    with pytest.raises(CheckpointError, match="declares 2147483648 bytes, more than the file holds"):
        load_bytes(bytes(data))


@pytest.mark.parametrize("offset", [2**31, 1], ids=["past the end", "inside another member"])
def test_a_directory_pointing_where_no_member_starts_is_refused(offset):
    data = bytearray(real_checkpoint())
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 42, offset)  # data.pkl's local header offset
    with pytest.raises(CheckpointError, match="member 'archive/data.pkl' has no local header where the directory"):
        load_bytes(bytes(data))


def test_a_flipped_local_extra_length_cannot_shift_where_a_storage_is_read():
    """Storages carry no checked CRC: a local header's lengths must agree with its fields, or the file is damaged."""
    data = bytearray(real_checkpoint())
    header = data.index(b"archive/data/0") - 30  # its first mention: the local header, 30 bytes before the name
    data[header + 28] ^= 0x04  # the extra field's length
    with pytest.raises(CheckpointError, match="member 'archive/data/0' has a local header that disagrees"):
        load_bytes(bytes(data))


def test_a_flipped_pickle_byte_fails_the_crc_check():
    data = bytearray(real_checkpoint())
    data[data.index(b"OrderedDict")] ^= 0x01
    with pytest.raises(CheckpointError, match="member 'archive/data.pkl' fails its CRC check"):
        load_bytes(bytes(data))


def test_a_flipped_storage_byte_changes_a_value_as_with_torch_load():
    """Storages are not CRC-checked (see torch_zip): torch.load does not check them either."""
    data = bytearray(real_checkpoint())
    data[data.index(np.arange(6.0, dtype=np.float32).tobytes()) + 7] ^= 0x80  # the sign of 1.0
    assert load_bytes(bytes(data))["w"].tolist() == [[0.0, -1.0, 2.0], [3.0, 4.0, 5.0]]
    assert torch.load(io.BytesIO(bytes(data)), weights_only=True)["w"].tolist() == [[0.0, -1.0, 2.0], [3.0, 4.0, 5.0]]
