"""Models and values built identically on either backend (known values, so outputs can be compared), and probes."""

import numpy as np


def make_value(lib, kind):
    """A fresh value of one of the kinds an attribute can be given."""
    return {
        "Parameter": lambda: lib.Parameter(lib.zeros(1)),
        "Module": lambda: lib.nn.ReLU(),
        "Buffer": lambda: lib.Buffer(lib.zeros(1)),
        "non-persistent Buffer": lambda: lib.Buffer(lib.zeros(1), persistent=False),
        "tensor": lambda: lib.zeros(1),
        "None": lambda: None,
        "int": lambda: 3,
    }[kind]()


def where(module, name):
    """Which of the module's stores hold `name`, whether it is a non-persistent buffer, and the stored type."""
    stores = [store for store in ("_parameters", "_buffers", "_modules") if name in vars(module)[store]]
    if name in vars(module):
        stores.append("__dict__")
    return stores, name in module._non_persistent_buffers_set, type(getattr(module, name, None))


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
