"""Small models built identically on either backend, with known values so outputs can be compared."""

import numpy as np


def set_values(lib, module, seed=0):
    """Give every floating parameter and buffer of `module` the same reproducible values on both backends.

    Buffers get positive values, so running variances stay meaningful.
    """
    rng = np.random.default_rng(seed)
    members = [(tensor, -1) for tensor in module.parameters()] + [(tensor, 0.1) for tensor in module.buffers()]
    for tensor, low in members:
        if tensor.dtype in (lib.float16, lib.float32, lib.float64):
            lib.copy_into(tensor, rng.uniform(low, 1, tuple(tensor.shape)).astype(np.float32))
    return module


def net(lib):
    """A model with every kind of member and both kinds of sharing.

    a: Linear(2, 3); seq: Sequential(Linear(3, 3), ReLU(), BatchNorm1d(3)); alias: the module `a` again;
    head: Linear(3, 3, bias=False) whose weight is seq[0].weight; scale: a parameter of the root;
    steps: a persistent buffer; cache: a non-persistent buffer.
    """
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 3)
            self.seq = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.ReLU(), lib.nn.BatchNorm1d(3))
            self.alias = self.a
            self.head = lib.nn.Linear(3, 3, bias=False)
            self.head.weight = self.seq[0].weight
            self.scale = lib.Parameter(lib.ones(1))
            self.register_buffer("steps", lib.zeros(1))
            self.register_buffer("cache", lib.zeros(2), persistent=False)

        def forward(self, x):
            return self.head(self.seq(self.a(x))) * self.scale

    return set_values(lib, Net())
