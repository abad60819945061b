"""Checkpoints written by torch 2.13's ``torch.save`` load with ``modulecraft.load``, with no torch needed to read
them: values, dtypes, shapes, views and shared memory, ``_metadata``, and the loaded modules' outputs equal torch's."""

import io
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import modulecraft
from modulecraft import nn

from .archives import members, replaced, torch_saved


def load_bytes(data: bytes):
    return modulecraft.load(io.BytesIO(data))


def seeded_mlp(torch_nn, seed=0):
    torch.manual_seed(seed)
    return torch_nn.Sequential(torch_nn.Linear(4, 5), torch_nn.ReLU(), torch_nn.Linear(5, 3))


def test_an_mlp_state_dict_loads_into_our_mlp_with_torchs_outputs(tmp_path):
    source = seeded_mlp(torch.nn)
    path = tmp_path / "mlp.pt"
    torch.save(source.state_dict(), path)
    state = modulecraft.load(path)
    assert type(state) is OrderedDict and list(state) == list(source.state_dict())
    assert all(type(value) is np.ndarray for value in state.values()), "arrays, as torch gives plain tensors"
    assert state._metadata == source.state_dict()._metadata
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
    assert str(model.load_state_dict(state)) == "<All keys matched successfully>"
    for key, value in source.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[key], value.numpy(), err_msg=key)
    inputs = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    with torch.no_grad():
        expected = source(torch.from_numpy(inputs)).numpy()
    # equal weights; the matmul may sum in another order than torch's: float32 rounding apart
    np.testing.assert_allclose(np.asarray(model(inputs)), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_torch_save_can_use_loads(protocol):
    state = seeded_mlp(torch.nn).state_dict()
    state["raw"] = b"\x00\xff"
    buffer = io.BytesIO()
    torch.save(state, buffer, pickle_protocol=protocol)
    loaded = load_bytes(buffer.getvalue())
    assert list(loaded) == list(state) and loaded["raw"] == b"\x00\xff"
    for key in list(state)[:-1]:
        np.testing.assert_array_equal(loaded[key], state[key].numpy(), err_msg=key)


def test_loaded_arrays_are_writable_as_torch_load_tensors_are():
    state = load_bytes(torch_saved({"w": torch.zeros(3)}))
    state["w"][0] = 1.0
    assert state["w"].tolist() == [1.0, 0.0, 0.0]


def test_tied_weights_share_memory_and_load_into_a_tied_module():
    source = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    source[1].weight = source[0].weight
    state = load_bytes(torch_saved(source.state_dict()))
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert np.shares_memory(state["0.weight"], state["1.weight"])
    assert not np.shares_memory(state["0.bias"], state["1.bias"])
    state["0.weight"][0, 0] = 42.0
    assert state["1.weight"][0, 0] == 42.0, "one storage, as after torch.load"
    target = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    target[1].weight = target[0].weight
    target.load_state_dict(state)
    assert target[1].weight is target[0].weight and target[0].weight[0, 0] == 42.0


def test_the_same_tensor_saved_twice_is_one_array():
    tensor = torch.arange(4.0)
    state = load_bytes(torch_saved({"a": tensor, "b": tensor}))
    assert state["a"] is state["b"]


def test_non_contiguous_views_keep_values_shape_strides_and_storage():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    saved = {"base": base, "transposed": base.t(), "sliced": base[1:, ::2], "column": base[:, 3],
             "offset": base[2], "scalar": base[3, 5], "empty": base[4:]}
    state = load_bytes(torch_saved(saved))
    for key, tensor in saved.items():
        assert state[key].shape == tuple(tensor.shape), key
        np.testing.assert_array_equal(state[key], tensor.numpy(), err_msg=key)
        if tensor.numel():
            assert state[key].strides == tuple(s * 4 for s in tensor.stride()), key
            assert np.shares_memory(state[key], state["base"]), key


DTYPES = [torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.uint8, torch.bool, torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_common_dtype_loads_with_its_numpy_dtype_and_values(dtype):
    tensor = (torch.arange(-3, 9).reshape(3, 4) * 1.25).to(dtype)
    loaded = load_bytes(torch_saved({"t": tensor}))["t"]
    assert loaded.dtype == tensor.numpy().dtype and loaded.dtype.isnative
    np.testing.assert_array_equal(loaded, tensor.numpy())


def test_bfloat16_loads_as_float32_exactly():
    """numpy has no bfloat16: its values widen to float32 exactly (documented in torch_zip)."""
    tensor = torch.tensor([1.0, -2.5, 3.140625, 1e30, float("inf"), float("nan")], dtype=torch.bfloat16)
    loaded = load_bytes(torch_saved({"t": tensor}))["t"]
    assert loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, tensor.float().numpy())


def test_a_big_endian_checkpoint_loads_in_native_order():
    """torch on a big-endian machine writes ``byteorder: big`` and big-endian storages; made here by hand."""
    saved = {"x": torch.tensor([1.5, -2.0, 3.25]), "n": torch.tensor([1, 2**40])}
    archive = torch_saved(saved)
    entries = members(archive)
    changes = {"byteorder": b"big"}
    for key, dtype in (("0", ">f4"), ("1", ">i8")):
        little = np.frombuffer(entries[f"archive/data/{key}"], dtype=dtype.replace(">", "<"))
        changes[f"data/{key}"] = little.astype(dtype).tobytes()
    state = load_bytes(replaced(archive, changes))
    assert state["x"].tolist() == [1.5, -2.0, 3.25] and state["n"].tolist() == [1, 2**40]
    assert state["x"].dtype.isnative and state["n"].dtype.isnative


def test_batchnorm_version_metadata_is_kept_and_drives_load_state_dict():
    source = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    source.train()(torch.randn(8, 2))
    state = load_bytes(torch_saved(source.state_dict()))
    assert dict(state._metadata) == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 2}}
    target = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    assert str(target.load_state_dict(state)) == "<All keys matched successfully>"
    assert int(target[1].num_batches_tracked) == 1
    np.testing.assert_array_equal(target[1].running_mean, source[1].running_mean.numpy())


@pytest.mark.parametrize("version, missing", [(1, []), (2, ["num_batches_tracked"])])
def test_a_batchnorm_checkpoint_without_num_batches_tracked_loads_as_in_torch(version, missing):
    """Version 1 BatchNorm had no num_batches_tracked: torch (and we) keep the module's own instead of reporting it
    missing. The same file marked version 2 reports it: only the kept ``_metadata`` tells the two apart."""
    source = torch.nn.BatchNorm1d(3)
    old = source.state_dict()
    del old["num_batches_tracked"]
    old._metadata[""]["version"] = version
    data = torch_saved(old)

    reference = torch.nn.BatchNorm1d(3)
    reference.num_batches_tracked.fill_(7)
    torch_result = reference.load_state_dict(torch.load(io.BytesIO(data), weights_only=True), strict=False)
    target = nn.BatchNorm1d(3)
    target.num_batches_tracked[...] = 7
    ours = target.load_state_dict(load_bytes(data), strict=False)
    assert (ours.missing_keys, ours.unexpected_keys) == (torch_result.missing_keys, torch_result.unexpected_keys)
    assert ours.missing_keys == missing
    assert int(target.num_batches_tracked) == int(reference.num_batches_tracked) == 7


def test_a_training_checkpoint_of_nested_containers_and_plain_values_loads():
    """The common ``{'model': ..., 'optimizer': ..., 'epoch': ...}`` layout, with an Adam state_dict inside."""
    model = seeded_mlp(torch.nn)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    saved = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "note": "best",
             "loss": 0.25, "flags": (True, None), "raw": b"\x00\x01"}
    loaded = load_bytes(torch_saved(saved))
    assert loaded["epoch"] == 3 and loaded["note"] == "best" and loaded["loss"] == 0.25
    assert loaded["flags"] == (True, None) and loaded["raw"] == b"\x00\x01"
    assert loaded["model"]._metadata == model.state_dict()._metadata
    assert loaded["optimizer"]["param_groups"] == optimizer.state_dict()["param_groups"]
    for index, slots in optimizer.state_dict()["state"].items():
        for name, value in slots.items():
            np.testing.assert_array_equal(loaded["optimizer"]["state"][index][name], value.numpy())


def test_a_saved_parameter_loads_as_a_plain_array():
    parameter = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    loaded = load_bytes(torch_saved({"p": parameter}))["p"]
    assert type(loaded) is np.ndarray and loaded.tolist() == [1.0, 2.0]


def test_a_misnamed_torch_checkpoint_still_loads_and_format_must_agree(tmp_path):
    path = tmp_path / "weights.safetensors"
    path.write_bytes(torch_saved({"w": torch.ones(2)}))
    assert modulecraft.load(path)["w"].tolist() == [1.0, 1.0]
    assert modulecraft.load(path, format="torch")["w"].tolist() == [1.0, 1.0]
    with pytest.raises(modulecraft.serialization.CheckpointError, match="is a torch checkpoint, not 'safetensors'"):
        modulecraft.load(path, format="safetensors")


WIDENED = [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
           torch.float8_e8m0fnu]


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_unsigned_types_saved_through_untyped_storages_load(dtype):
    tensor = torch.tensor([0, 1, 2**15, 2**16 - 1]).to(dtype).reshape(2, 2).t()
    loaded = load_bytes(torch_saved({"t": tensor}))["t"]
    assert loaded.dtype == np.dtype(str(dtype).removeprefix("torch."))
    assert loaded.tolist() == tensor.tolist()


@pytest.mark.parametrize("dtype", WIDENED, ids=str)
def test_types_numpy_lacks_load_widened_exactly_to_float32(dtype):
    every_code = torch.arange(256, dtype=torch.uint8) if dtype.itemsize == 1 else \
        torch.arange(0, 2**16, 7, dtype=torch.int32).to(torch.uint16)
    tensor = every_code.view(dtype)
    loaded = load_bytes(torch_saved({"t": tensor, "dtype": dtype}))
    assert loaded["t"].dtype == np.float32 and loaded["dtype"] == np.float32
    np.testing.assert_array_equal(loaded["t"], tensor.float().numpy())  # NaNs included


def test_complex32_loads_widened_to_complex64():
    tensor = torch.tensor([1 + 2j, -0.5 + 1e-3j], dtype=torch.complex64).to(torch.complex32)
    loaded = load_bytes(torch_saved({"t": tensor}))["t"]
    assert loaded.dtype == np.complex64 and loaded.tolist() == tensor.to(torch.complex64).tolist()


def test_every_value_weights_only_accepts_loads():
    saved = {"size": torch.Size([2, 3]), "dtype": torch.int16, "device": torch.device("cpu"),
             "indexed": torch.device("cpu", 0), "ids": {1, 2}, "z": 1 + 2j, "buffer": bytearray(b"ab"),
             "raw": b"\x00\xff", "big": 2**100}
    assert torch.load(io.BytesIO(torch_saved(saved)), weights_only=True)  # the oracle takes them all
    loaded = load_bytes(torch_saved(saved))
    assert loaded == {"size": (2, 3), "dtype": np.dtype(np.int16), "device": "cpu", "indexed": "cpu:0",
                      "ids": {1, 2}, "z": 1 + 2j, "buffer": bytearray(b"ab"), "raw": b"\x00\xff", "big": 2**100}
    assert type(loaded["size"]) is tuple


def test_a_file_saved_without_crcs_loads():
    torch.serialization.set_crc32_options(False)
    try:
        data = torch_saved(seeded_mlp(torch.nn).state_dict())
    finally:
        torch.serialization.set_crc32_options(True)
    assert all(info.CRC == 0 for info in zipfile.ZipFile(io.BytesIO(data)).infolist())
    state = load_bytes(data)
    for key, value in seeded_mlp(torch.nn).state_dict().items():
        np.testing.assert_array_equal(state[key], value.numpy(), err_msg=key)
