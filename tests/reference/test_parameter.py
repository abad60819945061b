"""Parameter and Buffer as ndarray subclasses: what numpy makes us do that torch gets for free."""

import copy
import pickle

import numpy as np
import pytest

import modulecraft
from modulecraft import Tensor, nn
from modulecraft.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter, is_lazy


def test_parameter_shares_memory_with_the_array_it_wraps():
    data = np.zeros(3, dtype=np.float32)
    param = Parameter(data)
    data[0] = 5
    assert param[0] == 5 and param.requires_grad and param.grad is None


@pytest.mark.parametrize("derive", [
    lambda p: p * 2, lambda p: p + p, lambda p: -p, lambda p: p[1:], lambda p: p.reshape(3, 1), lambda p: p.T,
    lambda p: p.copy(), lambda p: p.astype(np.float64), lambda p: np.concatenate([p, p]), lambda p: p.sum(),
    lambda p: np.maximum(p, 0), lambda p: p.detach(), lambda p: p.data,
], ids=["mul", "add", "neg", "slice", "reshape", "T", "copy", "astype", "concatenate", "sum", "maximum", "detach",
        "data"])
def test_anything_computed_from_a_parameter_is_a_tensor_never_a_parameter(derive):
    param = Parameter(np.arange(3, dtype=np.float32))
    result = derive(param)
    assert type(result) is Tensor and not isinstance(result, Parameter)
    assert result.requires_grad is (result.grad_fn is not None), "recorded, or detached (detach, data)"
    with modulecraft.no_grad():
        result = derive(param)
    assert type(result) in (np.ndarray, np.float32, Tensor) and not isinstance(result, Parameter)
    assert getattr(result, "grad_fn", None) is None


def test_in_place_arithmetic_keeps_the_parameter():
    param = Parameter(np.ones(2))
    alias = param
    with modulecraft.no_grad():
        param += 1
    assert param is alias and type(param) is Parameter and list(param) == [2, 2]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        param += 1


def test_parameters_hash_by_identity_like_tensors():
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    assert len({a, b, a}) == 2


def test_pickle_and_deepcopy_keep_requires_grad_but_not_grad():
    param = Parameter(np.arange(2.0), requires_grad=False)
    param.grad = np.ones(2)
    for clone in (pickle.loads(pickle.dumps(param)), copy.deepcopy(param)):
        assert type(clone) is Parameter and clone.requires_grad is False and clone.grad is None
        assert list(clone) == [0.0, 1.0] and not np.shares_memory(clone, param)


def test_flagged_array_class_counts_as_parameter_but_not_as_uninitialized():
    class LearnerParameter(np.ndarray):
        _is_param = True

    flagged = np.zeros(2).view(LearnerParameter)
    assert isinstance(flagged, Parameter)
    assert not isinstance(flagged, UninitializedParameter)
    assert not isinstance(np.zeros(2), Parameter) and not isinstance(3, Parameter)


def test_buffer_keeps_persistence_and_is_stored_as_itself():
    data = np.zeros(2)
    module = nn.Module()
    buffer = Buffer(data, persistent=False)
    module.running = buffer
    assert module.running is buffer and np.shares_memory(module.running, data)
    assert "running" in module._non_persistent_buffers_set


def test_uninitialized_parameter_materializes_in_place():
    param = UninitializedParameter(dtype=np.float64)
    alias = param
    assert is_lazy(param) and repr(param) == str(param) == "<UninitializedParameter>"
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        param.shape
    param.materialize((2, 3))
    assert alias is param and type(param) is Parameter and not is_lazy(param)
    assert param.shape == (2, 3) and param.dtype == np.float64 and param.requires_grad


def test_uninitialized_buffer_keeps_persistence_through_copies():
    buf = UninitializedBuffer(persistent=False)
    for clone in (copy.deepcopy(buf), pickle.loads(pickle.dumps(buf)), buf.astype(np.float16)):
        assert type(clone) is UninitializedBuffer and clone.persistent is False
    assert buf.astype(np.float16).dtype == np.float16 and buf.astype(np.float32) is buf
