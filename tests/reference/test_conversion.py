"""``_apply`` / ``float`` / ``double`` / ``to``: numpy cannot change an array's dtype in place."""

import numpy as np
import pytest

from modulecraft import nn


def tied_model():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    model.head = nn.Linear(3, 2)
    model.head.weight = model[2].weight
    return model


def test_dtype_change_makes_new_parameters_and_keeps_shared_ones_shared():
    model = tied_model()
    old = model[0].weight
    old.grad = np.ones((3, 2), dtype=np.float32)
    model.double()
    assert model[0].weight is not old and type(model[0].weight) is nn.Parameter
    assert model[0].weight.dtype == np.float64 and model[0].weight.grad.dtype == np.float64
    assert model.head.weight is model[2].weight
    assert model[1].running_mean.dtype == np.float64
    assert model[1].num_batches_tracked.dtype == np.int64  # not floating: left alone
    assert np.array_equal(model[0].weight, old.astype(np.float64))


def test_same_dtype_keeps_every_object():
    model = tied_model()
    before = [id(p) for p in model.parameters()] + [id(b) for b in model.buffers()]
    model.float()
    model.to(np.float32)
    assert [id(p) for p in model.parameters()] + [id(b) for b in model.buffers()] == before


def test_value_preserving_apply_writes_back_into_the_same_objects():
    model = tied_model()
    weight = model[0].weight
    expected = np.array(weight) * 2
    model._apply(lambda t: t * 2)
    assert model[0].weight is weight and np.array_equal(weight, expected)
    assert isinstance(model[1].num_batches_tracked, np.ndarray)  # 0-d results stay arrays


def test_to_refuses_devices_and_non_floating_dtypes():
    model = tied_model()
    assert model.to("cpu") is model and model.cpu() is model
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        model.to("cuda")
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        model.to(np.int32)
    model.to(np.zeros(1, dtype=np.float16))
    assert model[0].weight.dtype == np.float16


def test_lazy_placeholders_change_dtype_without_materialising():
    model = nn.LazyLinear(3)
    model.double()
    assert nn.parameter.is_lazy(model.weight) and model.weight.dtype == np.float64
    assert model(np.ones((1, 4))).dtype == np.float64
