"""Helpers shared by the autograd tests: the same graph built on modulecraft and on torch."""

import numpy as np
import pytest
import torch

import modulecraft


@pytest.fixture(autouse=True)
def _grad_mode_is_restored():
    yield
    assert modulecraft.is_grad_enabled() and torch.is_grad_enabled(), "a test left grad mode off"


def leaves(*arrays):
    """The same float64 values as (modulecraft leaves, torch leaves), both requiring grad."""
    ours = [modulecraft.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays]
    return ours, theirs


def lib_leaf(lib, values):
    """A float32 leaf that requires grad, on ``lib`` (the torch or the modulecraft module)."""
    return lib.tensor(np.asarray(values, dtype=np.float32), requires_grad=True)


def _plain(value):
    """Tensors and arrays as nested lists, containers walked: what the two libraries' traces are compared as."""
    if isinstance(value, torch.Tensor):
        return ("array", value.detach().numpy().tolist())
    if isinstance(value, np.ndarray):
        return ("array", np.asarray(value).tolist())
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def on_both(scenario):
    """Run ``scenario(lib)`` on torch, then on modulecraft; assert the traces are equal and return it."""
    theirs, ours = _plain(scenario(torch)), _plain(scenario(modulecraft))
    assert ours == theirs
    return ours


def outcome(call, *phrases):
    """``call()``'s value, or its exception type and which of the key ``phrases`` its message contains."""
    try:
        return ("returned", call())
    except Exception as error:  # noqa: BLE001  (the type is what is compared)
        return (type(error).__name__, [phrase for phrase in phrases if phrase in str(error)])
