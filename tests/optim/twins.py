"""The same parameters and gradients on torch and modulecraft, so optimizers can be compared step by step.

A `Twin` holds one torch parameter and one modulecraft parameter with equal values; gradients are fed by hand
(no autograd needed), from one seeded sequence, so both optimizers see exactly the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import modulecraft.optim
from modulecraft import nn

# float32 tolerance over a 100-step trajectory: each step rounds once or twice per value (torch fuses a
# multiply-add where numpy rounds twice), and momentum carries the differences forward.
RTOL, ATOL = 2e-5, 2e-6


@dataclass
class Twin:
    torch: torch.nn.Parameter
    ours: nn.Parameter


def twins(shapes, seed: int = 0, dtype=np.float32) -> list[Twin]:
    rng = np.random.default_rng(seed)
    pairs = []
    for shape in shapes:
        values = rng.standard_normal(shape).astype(dtype)
        pairs.append(Twin(torch.nn.Parameter(torch.tensor(values)), nn.Parameter(values.copy())))
    return pairs


def optimizers(name: str, pairs: list[Twin], groups=None, **options):
    """The torch and modulecraft optimizers ``name`` over ``pairs``; ``groups`` lists index lists, one per group."""

    def params(side):
        if groups is None:
            return [getattr(pair, side) for pair in pairs]
        return [{"params": [getattr(pairs[i], side) for i in indices], **extra} for indices, extra in groups]

    return (getattr(torch.optim, name)(params("torch"), **options),
            getattr(modulecraft.optim, name)(params("ours"), **options))


def feed(pairs: list[Twin], rng: np.random.Generator, missing: float = 0.0) -> None:
    """Give both sides of every pair the same random gradient (None with probability ``missing``)."""
    for pair in pairs:
        if rng.random() < missing:
            pair.torch.grad, pair.ours.grad = None, None
        else:
            grad = rng.standard_normal(pair.ours.shape).astype(pair.ours.dtype)
            pair.torch.grad, pair.ours.grad = torch.tensor(grad), grad.copy()


def to_numpy(value):
    """A torch state value (tensors nested in dicts, lists, tuples) with numpy arrays for tensors."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy().copy()
    if isinstance(value, dict):
        return {key: to_numpy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_numpy(item) for item in value)
    return value


def to_torch(value):
    """The reverse of `to_numpy`: numpy arrays become tensors."""
    if isinstance(value, np.ndarray):
        return torch.tensor(value)
    if isinstance(value, dict):
        return {key: to_torch(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(item) for item in value)
    return value


def assert_same_params(pairs: list[Twin], context: str = "", rtol: float = RTOL, atol: float = ATOL) -> None:
    for index, pair in enumerate(pairs):
        assert type(pair.ours) is nn.Parameter
        np.testing.assert_allclose(pair.ours, pair.torch.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"parameter {index} {context}")


def assert_same_state_dict(ours: dict, theirs: dict, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Equal structure (keys, key order, types: arrays where torch has tensors) and values within tolerance."""
    theirs = to_numpy(theirs)
    assert list(ours) == list(theirs) == ["state", "param_groups"]
    assert ours["param_groups"] == theirs["param_groups"]
    assert [list(group) for group in ours["param_groups"]] == [list(group) for group in theirs["param_groups"]]
    assert list(ours["state"]) == list(theirs["state"])
    for index, state in theirs["state"].items():
        assert list(ours["state"][index]) == list(state), f"state {index}"
        for key, value in state.items():
            mine = ours["state"][index][key]
            assert type(mine) is type(value), f"state {index} {key}"
            if isinstance(value, np.ndarray):
                assert (mine.dtype, mine.shape) == (value.dtype, value.shape), f"state {index} {key}"
                np.testing.assert_allclose(mine, value, rtol=rtol, atol=atol, err_msg=f"state {index} {key}")
            else:
                assert mine == value, f"state {index} {key}"
