"""Whole training checkpoints, ``{"model": ..., "optimizer": ..., "epoch": ...}``: saved and loaded exactly in every
format, and carried between torch and modulecraft through torch's format, training continuing where it stopped."""

import io
from collections import OrderedDict, defaultdict

import numpy as np
import pytest
import safetensors.torch
import torch

import modulecraft
import modulecraft.optim
from modulecraft import nn
from modulecraft.serialization import CheckpointError

OPTIMIZERS = [("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
              ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01})]
RTOL, ATOL = 2e-5, 2e-6  # float32: the two libraries round some sums in another order


def batches(count=6, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32))
            for _ in range(count)]


def our_training(name, options, seed=0):
    modulecraft.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    return model, getattr(modulecraft.optim, name)(model.parameters(), **options)


def torch_training(name, options, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    return model, getattr(torch.optim, name)(model.parameters(), **options)


def train_ours(model, optimizer, data):
    for inputs, targets in data:
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train_torch(model, optimizer, data):
    for inputs, targets in data:
        loss = torch.nn.functional.mse_loss(model(torch.tensor(inputs)), torch.tensor(targets))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def checkpoint_of(model, optimizer, epoch):
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}


def assert_same_values(ours, theirs, path="checkpoint"):
    """Equal structure, types and values; arrays equal to the float32 tolerance."""
    if isinstance(theirs, torch.Tensor):
        theirs = theirs.detach().numpy()
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.shape == theirs.shape, path
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=path)
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), path
        for key in theirs:
            assert_same_values(ours[key], theirs[key], f"{path}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), path
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            assert_same_values(mine, other, f"{path}[{index}]")
    else:
        assert ours == theirs and type(ours) is type(theirs), path


def assert_identical(loaded, saved, path="checkpoint"):
    """What load gave back is exactly what was saved: types, keys, dtypes, values, _metadata."""
    assert type(loaded) is type(saved) or (isinstance(saved, np.ndarray) and type(loaded) is np.ndarray), path
    if isinstance(saved, np.ndarray):
        assert loaded.dtype == saved.dtype and np.array_equal(loaded, saved), path
    elif isinstance(saved, dict):
        assert list(loaded) == list(saved), path
        assert getattr(loaded, "_metadata", None) == getattr(saved, "_metadata", None), path
        for key in saved:
            assert_identical(loaded[key], saved[key], f"{path}[{key!r}]")
    elif isinstance(saved, (list, tuple)):
        for index, (mine, other) in enumerate(zip(loaded, saved)):
            assert_identical(mine, other, f"{path}[{index}]")
        assert len(loaded) == len(saved), path
    else:
        assert loaded == saved or (loaded != loaded and saved != saved), path


@pytest.mark.parametrize("format", ["safetensors", "torch", "npz"])
@pytest.mark.parametrize(("name", "options"), OPTIMIZERS)
def test_a_training_checkpoint_round_trips_exactly_and_training_resumes_identically(format, name, options):
    model, optimizer = our_training(name, options)
    data = batches()
    train_ours(model, optimizer, data[:3])
    saved = checkpoint_of(model, optimizer, 3)
    buffer = io.BytesIO()
    modulecraft.save(saved, buffer, format=format)
    loaded = modulecraft.load(io.BytesIO(buffer.getvalue()))
    assert_identical(loaded, saved)

    resumed, resumed_optimizer = our_training(name, options, seed=7)
    resumed.load_state_dict(loaded["model"])
    resumed_optimizer.load_state_dict(loaded["optimizer"])
    train_ours(model, optimizer, data[3:])
    train_ours(resumed, resumed_optimizer, data[3:])
    for (key, value), resumed_value in zip(model.state_dict().items(), resumed.state_dict().values()):
        np.testing.assert_array_equal(resumed_value, value, err_msg=key)


@pytest.mark.parametrize(("name", "options"), OPTIMIZERS)
def test_our_checkpoint_continues_training_in_torch_as_if_uninterrupted(tmp_path, name, options):
    model, optimizer = our_training(name, options)
    data = batches()
    train_ours(model, optimizer, data[:3])
    modulecraft.save(checkpoint_of(model, optimizer, 3), tmp_path / "checkpoint.pt")
    train_ours(model, optimizer, data[3:])  # the uninterrupted run

    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert checkpoint["epoch"] == 3
    twin, twin_optimizer = torch_training(name, options, seed=7)
    assert str(twin.load_state_dict(checkpoint["model"])) == "<All keys matched successfully>"
    twin_optimizer.load_state_dict(checkpoint["optimizer"])
    train_torch(twin, twin_optimizer, data[3:])
    assert_same_values(model.state_dict(), twin.state_dict())
    assert_same_values(optimizer.state_dict(), twin_optimizer.state_dict())


@pytest.mark.parametrize(("name", "options"), OPTIMIZERS)
def test_a_torch_checkpoint_continues_training_here_as_if_uninterrupted(tmp_path, name, options):
    model, optimizer = torch_training(name, options)
    data = batches()
    train_torch(model, optimizer, data[:3])
    torch.save(checkpoint_of(model, optimizer, 3), tmp_path / "checkpoint.pt")
    train_torch(model, optimizer, data[3:])

    checkpoint = modulecraft.load(tmp_path / "checkpoint.pt")
    assert checkpoint["epoch"] == 3
    twin, twin_optimizer = our_training(name, options, seed=7)
    assert str(twin.load_state_dict(checkpoint["model"])) == "<All keys matched successfully>"
    twin_optimizer.load_state_dict(checkpoint["optimizer"])
    train_ours(twin, twin_optimizer, data[3:])
    assert_same_values(twin.state_dict(), model.state_dict())
    assert_same_values(twin_optimizer.state_dict(), optimizer.state_dict())


def test_the_torch_file_we_write_reads_in_torch_with_every_value_type(tmp_path):
    state = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).state_dict()
    saved = {"model": state, "step": 2**40, "big": -2**70, "loss": 0.25, "nan": float("nan"), "name": "best",
             "flags": (True, None), "raw": b"\x00\xff", "z": 1 - 2j, "ids": {3, 1}, "dtype": np.dtype(np.float16),
             "masks": [np.array([True, False]), np.arange(3, dtype=np.uint16)], 7: "int key",
             "tied": [state["0.weight"], state["0.weight"]], "view": np.arange(6.0).reshape(2, 3).T}
    modulecraft.save(saved, tmp_path / "all.pt")
    loaded = torch.load(tmp_path / "all.pt", weights_only=True)
    assert list(loaded) == list(saved) and loaded["model"]._metadata == state._metadata
    assert (loaded["step"], loaded["big"], loaded["loss"], loaded["name"]) == (2**40, -2**70, 0.25, "best")
    assert loaded["flags"] == (True, None) and loaded["raw"] == b"\x00\xff" and loaded["z"] == 1 - 2j
    assert loaded["ids"] == {3, 1} and loaded["dtype"] is torch.float16 and loaded[7] == "int key"
    assert loaded["masks"][1].dtype == torch.uint16 and loaded["masks"][1].tolist() == [0, 1, 2]
    assert loaded["tied"][0] is loaded["tied"][1], "one array saved twice is one tensor"
    assert loaded["view"].tolist() == saved["view"].tolist()
    assert_identical(modulecraft.load(tmp_path / "all.pt"), saved)


def test_the_safetensors_layout_is_flattened_names_plus_the_structure_in_the_metadata(tmp_path):
    model, optimizer = our_training("Adam", {"lr": 0.01})
    train_ours(model, optimizer, batches()[:1])
    modulecraft.save(checkpoint_of(model, optimizer, 1), tmp_path / "checkpoint.safetensors")
    tensors = safetensors.torch.load_file(tmp_path / "checkpoint.safetensors")
    assert sorted(tensors) == sorted([f"model.{key}" for key in model.state_dict()]
                                     + [f"optimizer.state.{index}.{slot}" for index in range(4)
                                        for slot in ("step", "exp_avg", "exp_avg_sq")])
    np.testing.assert_array_equal(tensors["model.0.weight"].numpy(), model[0].weight)


def nested_lists(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("format", ["safetensors", "torch", "npz"])
def test_what_would_not_come_back_as_it_was_is_refused_on_save(format):
    refusals = [({"obj": object()}, TypeError, "of type object"),
                ({"counts": defaultdict(int)}, TypeError, "of type defaultdict"),
                ({"a.b": np.ones(1), "a": {"b": np.ones(1)}}, ValueError, "same flattened name 'a.b'"),
                ({"deep": nested_lists(120)}, ValueError, "more than 100 deep")]
    if format == "torch":
        refusals = [refusal for refusal in refusals if "flattened" not in refusal[2]] + [
            ({"scalar": np.float32(1.5)}, TypeError, "of type float32 in torch's format"),
            ({"lazy": nn.LazyLinear(2).weight}, TypeError, "lazy module's uninitialised parameter")]
    for obj, error, message in refusals:
        with pytest.raises(error, match=message):
            modulecraft.save(obj, io.BytesIO(), format=format)


def test_numpy_scalars_and_lazy_placeholders_round_trip_in_our_formats():
    saved = OrderedDict(loss=np.float32(0.5), count=np.int64(3), lazy=nn.LazyLinear(2).weight)
    for format in ("safetensors", "npz"):
        buffer = io.BytesIO()
        modulecraft.save(saved, buffer, format=format)
        loaded = modulecraft.load(io.BytesIO(buffer.getvalue()))
        assert type(loaded["loss"]) is np.float32 and loaded["loss"] == 0.5 and type(loaded["count"]) is np.int64
        assert type(loaded["lazy"]) is nn.UninitializedParameter


def test_a_damaged_structure_is_our_error():
    buffer = io.BytesIO()
    modulecraft.save({"a": [np.ones(2)]}, buffer)
    data = buffer.getvalue().replace(b'\\"array\\": \\"a.0\\"', b'\\"array\\": \\"a.9\\"')
    with pytest.raises(CheckpointError, match="damaged modulecraft header \\(KeyError: 'a.9'"):
        modulecraft.load(io.BytesIO(data))
