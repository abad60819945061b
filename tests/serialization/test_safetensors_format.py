"""safetensors, the default format: files we write load in torch through ``safetensors.torch`` and back, and the
format is chosen by suffix, ``format=`` or (on load) the file's first bytes."""

import io
import json
import struct
from collections import OrderedDict

import numpy as np
import pytest
import safetensors.torch
import torch

import modulecraft
from modulecraft import nn
from modulecraft.serialization import CheckpointError


def trained_like(model):
    """Distinct, reproducible values in every float parameter and buffer (running statistics included)."""
    rng = np.random.default_rng(1)
    for key, value in model.state_dict().items():
        if value.dtype.kind == "f":
            value[...] = rng.uniform(0.1, 1.0, value.shape)
    return model


def test_our_file_loads_in_torch_into_the_same_model_with_the_same_outputs(tmp_path):
    model = trained_like(nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))).eval()
    path = tmp_path / "model.safetensors"
    modulecraft.save(model.state_dict(), path)
    tensors = safetensors.torch.load_file(path)
    assert sorted(tensors) == sorted(model.state_dict())
    twin = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5), torch.nn.ReLU(),
                               torch.nn.Linear(5, 2)).eval()
    assert str(twin.load_state_dict(tensors)) == "<All keys matched successfully>"
    assert tensors["1.num_batches_tracked"].dtype == torch.int64
    inputs = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with torch.no_grad():
        expected = twin(torch.from_numpy(inputs)).numpy()
    np.testing.assert_allclose(np.asarray(model(inputs)), expected, rtol=1e-6, atol=1e-7)


def test_torchs_safetensors_file_loads_here_as_a_plain_ordered_dict(tmp_path):
    path = tmp_path / "torch.safetensors"
    saved = {"b": torch.arange(3.0), "a": torch.ones(2, 2, dtype=torch.float16), "flag": torch.tensor(True)}
    safetensors.torch.save_file(saved, path)
    loaded = modulecraft.load(path)
    assert type(loaded) is OrderedDict and not hasattr(loaded, "_metadata")
    assert sorted(loaded) == sorted(saved)
    for key, tensor in saved.items():
        assert loaded[key].dtype == tensor.numpy().dtype
        np.testing.assert_array_equal(loaded[key], tensor.numpy())
    loaded["b"][0] = 5.0  # writable, as torch.load's tensors are


def test_order_metadata_lazy_placeholders_and_values_survive_the_round_trip():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2), nn.LazyLinear(4))
    state = model.state_dict()
    state["step"] = {"epoch": 2, "history": [0.5, 0.25]}
    buffer = io.BytesIO()
    modulecraft.save(state, buffer)
    loaded = modulecraft.load(io.BytesIO(buffer.getvalue()))
    assert list(loaded) == list(state) and loaded._metadata == state._metadata
    assert loaded["step"] == {"epoch": 2, "history": [0.5, 0.25]}
    assert type(loaded["2.weight"]) is nn.UninitializedParameter
    assert torch.tensor(0).numpy().dtype == loaded["1.num_batches_tracked"].dtype


def test_shared_memory_is_stored_as_copies_every_key_present():
    """safetensors cannot say "this tensor is that one"; each key gets its own bytes (see safetensors_format)."""
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    model[1].weight = model[0].weight
    buffer = io.BytesIO()
    modulecraft.save(model.state_dict(), buffer)
    tensors = safetensors.torch.load(buffer.getvalue())
    assert sorted(tensors) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    torch.testing.assert_close(tensors["0.weight"], tensors["1.weight"])
    twin = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    twin[1].weight = twin[0].weight
    twin.load_state_dict(modulecraft.load(io.BytesIO(buffer.getvalue())))
    assert twin[1].weight is twin[0].weight
    np.testing.assert_array_equal(twin[0].weight, model[0].weight)


def test_views_big_endian_and_zero_dimensional_arrays_are_stored_by_value():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    state = {"transposed": base.T, "strided": base[:, ::2], "big": np.array([1, 2**40], dtype=">i8"),
             "scalar": np.array(3.5, dtype=np.float32), "empty": np.zeros((0, 2), dtype=np.int32)}
    buffer = io.BytesIO()
    modulecraft.save(state, buffer)
    loaded = modulecraft.load(io.BytesIO(buffer.getvalue()))
    for key, value in state.items():
        assert loaded[key].shape == value.shape and loaded[key].dtype == value.dtype.newbyteorder("="), key
        np.testing.assert_array_equal(loaded[key], value, err_msg=key)
    assert safetensors.torch.load(buffer.getvalue())["big"].tolist() == [1, 2**40]


def test_a_dtype_safetensors_cannot_store_says_which_format_can():
    with pytest.raises(TypeError, match="complex128.*format='npz'"):
        modulecraft.save({"z": np.zeros(2, dtype=np.complex128)}, io.BytesIO())
    buffer = io.BytesIO()
    modulecraft.save({"z": np.array([1 + 2j], dtype=np.complex128)}, buffer, format="npz")
    assert modulecraft.load(io.BytesIO(buffer.getvalue()))["z"].tolist() == [1 + 2j]


@pytest.mark.parametrize("name, format, written", [
    ("model.safetensors", None, "safetensors"), ("model.npz", None, "npz"), ("model.ckpt", None, "safetensors"),
    ("model", None, "safetensors"), ("model.npz", "safetensors", "safetensors"), ("model.bin", "npz", "npz"),
])
def test_the_format_is_chosen_by_format_then_suffix_then_safetensors(tmp_path, name, format, written):
    path = tmp_path / name
    modulecraft.save({"w": np.ones(2, dtype=np.float32)}, path, format=format)
    assert path.exists(), "the path is used as given"
    starts_like_zip = path.read_bytes()[:2] == b"PK"
    assert starts_like_zip == (written == "npz")
    assert modulecraft.load(path, format=written)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(CheckpointError, match=f"is a {written} checkpoint, not"):
        modulecraft.load(path, format="npz" if written == "safetensors" else "safetensors")


def test_an_unknown_format_is_refused_before_touching_the_file(tmp_path):
    with pytest.raises(ValueError, match="unknown checkpoint format 'pickle'"):
        modulecraft.save({"w": np.ones(1)}, tmp_path / "model.x", format="pickle")
    assert not (tmp_path / "model.x").exists()
    with pytest.raises(ValueError, match="unknown checkpoint format"):
        modulecraft.load(io.BytesIO(b""), format="pickle")


def test_a_failed_save_leaves_an_existing_file_untouched(tmp_path):
    path = tmp_path / "model.safetensors"
    modulecraft.save({"w": np.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        modulecraft.save({"w": np.ones(2), "bad": object()}, path)
    assert path.read_bytes() == before


def safetensors_bytes(header: dict, data_size: int) -> bytes:
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + bytes(data_size)


@pytest.mark.parametrize("content, message", [
    (b"", "is not a checkpoint modulecraft reads"),
    (b"hello world, not a checkpoint", "is not a checkpoint modulecraft reads"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": 1}", "not a valid safetensors file"),
    (b"\x80\x02\x8a\x0alegacy torch", "legacy format"),
    (safetensors_bytes({"w": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 8]}}, 8), "invalid shape"),
    (safetensors_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 2**42]}}, 8), "invalid shape"),
    (safetensors_bytes({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 4), "invalid shape"),
    (safetensors_bytes({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 8), "not fully covered"),
])
def test_what_is_not_a_checkpoint_is_refused_clearly(content, message):
    with pytest.raises(CheckpointError, match=message):
        modulecraft.load(io.BytesIO(content))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_downloaded_weights_in_bfloat16_or_float8_load_widened_exactly(tmp_path, dtype):
    every_code = torch.arange(256, dtype=torch.uint8) if dtype.itemsize == 1 else \
        torch.arange(0, 2**16, 7, dtype=torch.int32).to(torch.uint16)
    safetensors.torch.save_file({"w": every_code.view(dtype)}, tmp_path / "w.safetensors")
    loaded = modulecraft.load(tmp_path / "w.safetensors")["w"]
    assert loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, every_code.view(dtype).float().numpy())


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.bool], ids=str)
def test_every_integer_type_loads(tmp_path, dtype):
    tensor = torch.tensor([0, 1, 1, 0]).to(dtype)
    safetensors.torch.save_file({"w": tensor}, tmp_path / "w.safetensors")
    loaded = modulecraft.load(tmp_path / "w.safetensors")["w"]
    assert loaded.dtype == tensor.numpy().dtype and loaded.tolist() == tensor.tolist()
