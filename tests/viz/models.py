"""The trees the viz tests draw, built with either framework (see ``frameworks.py``)."""

from __future__ import annotations


def mlp(fw):
    nn = fw.nn
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def shared(fw):
    """A module registered under two names and a parameter tied between two layers."""
    nn = fw.nn
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
    model.add_module("again", model[0])
    model.add_module("tied", nn.Linear(3, 3))
    model.tied.weight = model[2].weight
    return model


def deep(fw, blocks=3):
    """Nested repeated blocks: a stem, ``blocks`` identical blocks, a head in eval mode."""
    nn = fw.nn

    def block():
        return nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU())

    model = nn.ModuleDict({
        "stem": nn.Linear(3, 6),
        "blocks": nn.Sequential(*[block() for _ in range(blocks)]),
        "head": nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6)),
    })
    model["head"].eval()
    return model


def stateful(fw):
    """A lazy layer, a non-persistent buffer, a frozen parameter and a local hook of each kind."""
    nn = fw.nn
    model = nn.Sequential(nn.LazyLinear(4), nn.Linear(4, 4))
    model[1].register_buffer("mask", fw.zeros(4), persistent=False)
    model[1].bias.requires_grad_(False)
    model[1].register_forward_pre_hook(lambda module, args: None)
    model[1].register_forward_hook(lambda module, args, output: None)
    return model


TREES = [mlp, shared, deep, stateful]
