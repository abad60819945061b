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
