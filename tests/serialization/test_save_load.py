"""``modulecraft.save`` / ``load`` in any format: order, dtypes, metadata, lazy placeholders, JSON values, refusals."""

import io
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import modulecraft
from modulecraft import nn


def model():
    net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2), nn.LazyLinear(4))
    net[1].running_mean[:] = [0.5, -1.5]
    return net


def test_round_trip_keeps_order_values_dtypes_and_metadata(tmp_path):
    state = model().state_dict()
    path = tmp_path / "checkpoint.mc"
    modulecraft.save(state, path)
    loaded = modulecraft.load(path)
    assert type(loaded) is OrderedDict and list(loaded) == list(state)
    assert loaded._metadata == state._metadata
    for key, value in state.items():
        if nn.parameter.is_lazy(value):
            assert type(loaded[key]) is type(value) and loaded[key].dtype == value.dtype, key
        else:
            assert loaded[key].dtype == value.dtype and np.array_equal(loaded[key], value), key


def test_a_saved_lazy_module_loads_into_a_lazy_module_and_stays_lazy():
    buffer = io.BytesIO()
    modulecraft.save(nn.LazyLinear(4).state_dict(), buffer)
    buffer.seek(0)
    target = nn.LazyLinear(4)
    target.load_state_dict(modulecraft.load(buffer))
    assert target.has_uninitialized_params()


def test_the_file_is_a_plain_npz_readable_without_pickle(tmp_path):
    path = tmp_path / "checkpoint.npz"
    modulecraft.save(nn.Linear(2, 2).state_dict(), path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["__modulecraft__.npy", "bias.npy", "weight.npy"]
    with np.load(path, allow_pickle=False) as archive:
        assert archive["weight"].shape == (2, 2)


def test_checkpoint_loads_into_a_fresh_model():
    buffer = io.BytesIO()
    source = model()
    source(np.ones((2, 3)))
    modulecraft.save(source.state_dict(), buffer)
    buffer.seek(0)
    target = model()
    assert str(target.load_state_dict(modulecraft.load(buffer))) == "<All keys matched successfully>"
    assert np.array_equal(target[2].weight, source[2].weight)


def test_json_values_round_trip_and_objects_are_refused():
    buffer = io.BytesIO()
    modulecraft.save({"step": 3, "note": {"a": [1, 2]}}, buffer)
    buffer.seek(0)
    assert modulecraft.load(buffer) == {"step": 3, "note": {"a": [1, 2]}}
    with pytest.raises(TypeError, match="cannot save 'obj' of type object: a checkpoint holds numpy arrays"):
        modulecraft.save({"obj": object()}, io.BytesIO())
    with pytest.raises(TypeError, match="would need pickle"):
        modulecraft.save({"obj": np.array([object()])}, io.BytesIO())


def test_saving_a_module_itself_says_what_to_do():
    with pytest.raises(TypeError, match="pass module.state_dict\\(\\)"):
        modulecraft.save(nn.Linear(1, 1), io.BytesIO())


def test_foreign_npz_gets_a_clear_error(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weight=np.zeros(2))
    with pytest.raises(ValueError, match="not a modulecraft checkpoint"):
        modulecraft.load(path)
