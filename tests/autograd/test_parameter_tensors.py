"""Parameter and Buffer as leaf Tensors, against torch (issue 16 item 8, issue 20 item 3)."""

import copy
import pickle

import numpy as np
import pytest
import torch

import modulecraft
from modulecraft import nn


@pytest.mark.parametrize("lib", ["torch", "modulecraft"])
def test_parameter_and_buffer_of_a_tensor_are_new_objects_sharing_memory(lib):
    if lib == "torch":
        data, Parameter, Buffer = torch.zeros(3), torch.nn.Parameter, torch.nn.Buffer
        shares = lambda a, b: a.data_ptr() == b.data_ptr()  # noqa: E731
    else:
        data, Parameter, Buffer = modulecraft.tensor(np.zeros(3)), nn.Parameter, nn.Buffer
        shares = np.shares_memory
    param = Parameter(data)
    buffer = Buffer(data)
    again = Parameter(param)
    assert param is not data and buffer is not data and again is not param
    assert shares(param, data) and shares(buffer, data) and shares(again, param)
    assert param.requires_grad and not buffer.requires_grad and type(again) is Parameter
    before = param._version
    data[0] += 1  # one version counter for all, as torch's detach() shares it
    assert data._version == param._version == buffer._version == again._version > before


@pytest.mark.parametrize("lib", ["torch", "modulecraft"])
def test_a_buffer_keeps_the_requires_grad_of_what_it_wraps(lib):
    mod = torch if lib == "torch" else modulecraft
    tracked = mod.tensor([1.0, 2.0], requires_grad=True)
    assert mod.nn.Buffer(tracked).requires_grad


def test_a_parameter_is_a_leaf_that_backward_fills():
    param = nn.Parameter(np.array([1.0, 2.0], dtype=np.float32))
    assert param.is_leaf and param.grad_fn is None and param.requires_grad
    (param * param).sum().backward()
    assert type(param.grad) is np.ndarray and param.grad.dtype == np.float32
    assert list(param.grad) == [2.0, 4.0]
    result = param * 2
    assert type(result) is modulecraft.Tensor and not isinstance(result, nn.Parameter)


def test_pickle_and_deepcopy_of_a_parameter_match_torch():
    for Parameter, values in ((nn.Parameter, np.arange(2.0)), (torch.nn.Parameter, torch.arange(2.0))):
        param = Parameter(values)
        param.grad = param * 0 + 1 if Parameter is torch.nn.Parameter else np.ones(2)
        for clone in (pickle.loads(pickle.dumps(param)), copy.deepcopy(param)):
            assert type(clone) is Parameter and clone.requires_grad and clone.grad is None


UNINITIALIZED_USES = {
    "empty_like": (lambda p: np.empty_like(p), lambda p: torch.empty_like(p)),
    "add": (lambda p: np.add(p, p), lambda p: torch.add(p, p)),
    "operator": (lambda p: p + p, lambda p: p + p),
    "multiply by a number": (lambda p: p * 2, lambda p: p * 2),
}


@pytest.mark.parametrize("use", list(UNINITIALIZED_USES))
def test_using_an_uninitialized_parameter_raises_torchs_value_error(use):
    ours, theirs = UNINITIALIZED_USES[use]
    phrase = "Attempted to use an uninitialized parameter in"
    with pytest.raises(ValueError, match=phrase):
        theirs(torch.nn.UninitializedParameter())
    with pytest.raises(ValueError, match=phrase) as raised:
        ours(nn.UninitializedParameter())
    assert "`LazyModule`" in str(raised.value) and "UninitializedParameter" in str(raised.value)
    with pytest.raises(ValueError, match=phrase):
        ours(nn.UninitializedBuffer())


def test_a_materialized_parameter_computes_again():
    param = nn.UninitializedParameter()
    param.materialize((2,))
    assert list(np.asarray(param + 1)) == [1.0, 1.0]
