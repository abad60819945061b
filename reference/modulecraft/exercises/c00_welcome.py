"""Chapter 0's exercises in using the reference: what the learner's `count_parameters`, `TinyMLP`, prediction and
`FixedStack` are compared with (built from the reference's own layers)."""
from collections import OrderedDict

from modulecraft import nn


def count_parameters(module):
    return sum(p.size for p in module.parameters())


def TinyMLP(inputs, hidden, outputs):
    return nn.Sequential(OrderedDict(hidden=nn.Linear(inputs, hidden), activation=nn.ReLU(),
                                     output=nn.Linear(hidden, outputs)))


def FixedStack(sizes):
    return nn.Sequential(OrderedDict(layers=nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])))


def built(layers):
    """An nn.Sequential of the layer kinds the prediction exercise names."""
    make = {"Linear": lambda: nn.Linear(2, 2), "Linear(bias=False)": lambda: nn.Linear(2, 2, bias=False),
            "ReLU": nn.ReLU, "Dropout": lambda: nn.Dropout(0.1)}
    return nn.Sequential(*[make[kind]() for kind in layers])


def prediction(layers):
    """The prediction's scenario run for real."""
    return [name for name, _ in built(layers).named_parameters()]
