"""Small models that exercise the steppers' corner cases, built from either ``torch.nn`` or ``modulecraft.nn``."""

import pytest
import torch


LAYERS = ("Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "LazyLinear", "ReLU", "Identity", "BatchNorm1d")


def backends():
    """``torch.nn`` and ``modulecraft.nn`` as test parameters (the latter skipped, loudly, until it imports)."""
    try:
        from modulecraft import nn as modulecraft_nn
        missing = [name for name in LAYERS if not hasattr(modulecraft_nn, name)]
    except ImportError as error:
        modulecraft_nn, missing = None, [str(error)]
    modulecraft = pytest.param(modulecraft_nn, id="modulecraft", marks=[
        pytest.mark.skip(reason=f"modulecraft.nn is not complete yet, lacks {missing}")] if missing else [])
    return [pytest.param(torch.nn, id="torch"), modulecraft]


def nested(nn):
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2), nn.ReLU()))


def shared(nn):
    """One Linear registered three times, once inside a child: named_modules meets it at '0' first."""
    layer = nn.Linear(2, 2)
    return nn.Sequential(layer, nn.Sequential(layer, nn.ReLU()), layer)


def shared_subtree(nn):
    """A shared block with children of its own: the memo skips the whole subtree on the second path."""
    block = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
    return nn.Sequential(nn.ModuleDict({"encoder": block, "head": nn.Linear(2, 1)}), block)


def holes(nn):
    """Containers with a ``None`` child, which named_modules and load_state_dict pass over."""
    model = nn.Sequential(nn.ModuleList([nn.ReLU(), nn.Linear(1, 1)]), nn.ModuleDict({"act": nn.ReLU()}))
    model.register_module("gap", None)
    model[0].append(nn.Identity())
    return model


def buffers(nn):
    """A persistent and a non-persistent buffer, and a ``None`` parameter (bias=False)."""
    norm = nn.BatchNorm1d(3)
    norm.register_buffer("scratch", norm.running_mean * 0, persistent=False)
    return nn.Sequential(nn.Linear(3, 3), norm, nn.Linear(3, 3, bias=False))


def extra_state(nn):
    class Counter(nn.Module):
        """Keeps a plain-Python count in the state_dict through the extra-state protocol."""

        def __init__(self):
            super().__init__()
            self.count = 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    return nn.Sequential(Counter(), nn.Linear(2, 2))


def lazy(nn):
    """A layer whose parameters have no shape yet: a load takes the checkpoint's shapes."""
    return nn.Sequential(nn.LazyLinear(3), nn.Linear(3, 3))


MODELS = {builder.__name__: builder for builder in (nested, shared, shared_subtree, holes, buffers, extra_state, lazy)}
