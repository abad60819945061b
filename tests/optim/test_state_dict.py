"""Optimizer state_dicts: torch's format, and checkpoints that travel between torch and modulecraft."""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import modulecraft.optim

from .twins import (assert_same_params, assert_same_state_dict, feed, optimizers, to_numpy, to_torch, twins)

SHAPES = [(3, 4), (4,), (2, 3)]
CASES = [("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
         ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01}),
         ("AdamW", {"lr": 0.01})]
GROUPS = [([0, 2], {"lr": 0.02}), ([1], {})]


def trained(name, options, steps=10, seed=0):
    pairs = twins(SHAPES, seed=seed)
    theirs, ours = optimizers(name, pairs, groups=GROUPS, **options)
    rng = np.random.default_rng(seed + 1)
    for _ in range(steps):
        feed(pairs, rng, missing=0.2)
        theirs.step()
        ours.step()
    return pairs, theirs, ours


def continue_both(pairs, theirs, ours, steps=20, seed=99):
    rng = np.random.default_rng(seed)
    for step in range(steps):
        feed(pairs, rng)
        theirs.step()
        ours.step()
        assert_same_params(pairs, f"{step + 1} steps after loading")


@pytest.mark.parametrize(("name", "options"), CASES)
def test_state_dict_has_torchs_structure_and_values(name, options):
    pairs, theirs, ours = trained(name, options, steps=0)
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())  # nothing stepped yet: empty state
    pairs, theirs, ours = trained(name, options)
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())


@pytest.mark.parametrize(("name", "options"), CASES)
def test_torch_checkpoint_loads_into_ours_and_continues_identically(name, options):
    pairs, theirs, _ = trained(name, options)
    fresh = twins(SHAPES, seed=5)  # different values, overwritten with torch's below
    for pair, new in zip(pairs, fresh):
        new.ours[...] = pair.torch.detach().numpy()
        new.torch = pair.torch
    ours = getattr(modulecraft.optim, name)(
        [{"params": [fresh[i].ours for i in indices], **extra} for indices, extra in GROUPS], lr=123.0)
    ours.load_state_dict(to_numpy(theirs.state_dict()))
    assert [group["lr"] for group in ours.param_groups] == [group["lr"] for group in theirs.param_groups]
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())
    continue_both(fresh, theirs, ours)


@pytest.mark.parametrize(("name", "options"), CASES)
def test_our_checkpoint_loads_into_torch_and_continues_identically(name, options):
    pairs, _, ours = trained(name, options)
    fresh = twins(SHAPES, seed=5)
    for pair, new in zip(pairs, fresh):
        with torch.no_grad():
            new.torch.copy_(torch.tensor(np.asarray(pair.ours)))
        new.ours = pair.ours
    theirs = getattr(torch.optim, name)(
        [{"params": [fresh[i].torch for i in indices], **extra} for indices, extra in GROUPS], lr=123.0)
    theirs.load_state_dict(to_torch(ours.state_dict()))
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())
    continue_both(fresh, theirs, ours)


def test_state_dict_shares_the_optimizers_arrays_as_torchs_does():
    pairs, theirs, ours = trained("SGD", {"lr": 0.1, "momentum": 0.9})
    for optimizer, side in ((theirs, "torch"), (ours, "ours")):
        buffer = optimizer.state[getattr(pairs[0], side)]["momentum_buffer"]
        assert optimizer.state_dict()["state"][0]["momentum_buffer"] is buffer, side


def test_loading_casts_state_to_the_parameters_dtype_except_step():
    pairs, theirs, ours = trained("Adam", {"lr": 0.01}, steps=3)
    saved = to_numpy(theirs.state_dict())
    for state in saved["state"].values():
        for key in state:
            state[key] = state[key].astype(np.float64)
    theirs.load_state_dict(to_torch(saved))
    ours.load_state_dict(saved)
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())
    kept = ours.state_dict()["state"][0]
    assert kept["exp_avg"].dtype == np.float32 and kept["step"].dtype == np.float64
    continue_both(pairs, theirs, ours)


def test_loading_uses_arrays_of_the_right_dtype_as_they_are():
    pairs, theirs, ours = trained("SGD", {"lr": 0.1, "momentum": 0.9}, steps=2)
    saved = ours.state_dict()
    buffer = saved["state"][0]["momentum_buffer"]
    ours.load_state_dict(saved)
    torch_saved = theirs.state_dict()
    theirs.load_state_dict(torch_saved)
    assert theirs.state[pairs[0].torch]["momentum_buffer"] is torch_saved["state"][0]["momentum_buffer"]
    assert ours.state[pairs[0].ours]["momentum_buffer"] is buffer


def test_loading_keeps_state_that_belongs_to_no_parameter_and_names_from_the_optimizer():
    for library, side in ((torch.optim, "torch"), (modulecraft.optim, "ours")):
        pairs = twins(SHAPES)
        optimizer = library.SGD([(f"p{i}", getattr(pair, side)) for i, pair in enumerate(pairs)], lr=0.1)
        saved = copy.deepcopy(optimizer.state_dict())
        del saved["param_groups"][0]["param_names"]
        saved["state"]["extra"] = {"note": 1}
        optimizer.load_state_dict(saved)
        assert optimizer.state["extra"] == {"note": 1}, side
        assert optimizer.param_groups[0]["param_names"] == ["p0", "p1", "p2"], side


@pytest.mark.parametrize(("change", "message"), [
    (lambda saved: saved["param_groups"].pop(), "loaded state dict has a different number of parameter groups"),
    (lambda saved: saved["param_groups"][0]["params"].pop(),
     "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"),
])
def test_loading_a_state_dict_of_another_shape_is_refused(change, message):
    pairs, theirs, ours = trained("SGD", {"lr": 0.1, "momentum": 0.9}, steps=1)
    for optimizer in (theirs, ours):
        saved = copy.deepcopy(optimizer.state_dict())
        change(saved)
        with pytest.raises(ValueError, match=message):
            optimizer.load_state_dict(saved)


def test_adam_state_saved_with_a_number_for_step_gets_a_float32_array():
    pairs, theirs, ours = trained("Adam", {"lr": 0.01}, steps=2)
    saved = to_numpy(theirs.state_dict())
    for state in saved["state"].values():
        state["step"] = int(state["step"])
    theirs.load_state_dict(to_torch(saved))
    ours.load_state_dict(saved)
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())


@settings(max_examples=12, deadline=None)
@given(case=st.sampled_from(CASES + [("SGD", {"lr": 0.1}), ("Adam", {"lr": 0.01, "maximize": True})]),
       before=st.integers(0, 15), missing=st.floats(0.0, 0.6), seed=st.integers(0, 2**16))
def test_a_checkpoint_taken_at_any_step_continues_in_the_other_library(case, before, missing, seed):
    """torch runs without a break; ours starts from torch's state_dict at a random step (some gradients missing)."""
    name, options = case
    pairs = twins(SHAPES, seed=seed)
    theirs, _ = optimizers(name, pairs, groups=GROUPS, **options)
    rng = np.random.default_rng(seed)
    for _ in range(before):
        feed(pairs, rng, missing=missing)
        theirs.step()
    for pair in pairs:
        pair.ours[...] = pair.torch.detach().numpy()
    ours = getattr(modulecraft.optim, name)(
        [{"params": [pairs[i].ours for i in indices]} for indices, _ in GROUPS], lr=5.0)
    ours.load_state_dict(to_numpy(theirs.state_dict()))
    assert_same_state_dict(ours.state_dict(), theirs.state_dict())
    continue_both(pairs, theirs, ours, steps=10, seed=seed + 1)
