"""The two libraries under comparison, behind one small interface.

A differential scenario is written once against a `Backend` (`lib.nn.Linear(2, 3)`, `lib.tensor(array)`, ...) and
run on torch (the oracle) and on modulecraft. Everything a scenario needs that is spelled differently in the two
libraries (making a tensor, copying values in place, setting a gradient, checking shared memory) lives here, so the
scenarios themselves contain no library-specific code.
"""

from __future__ import annotations

import importlib
from functools import cached_property

import numpy as np


class Backend:
    """What a scenario may use; subclasses fill in the library-specific parts.

    Set by each subclass: `nn`, `TensorBase` (torch.Tensor / numpy.ndarray), `RemovableHandle`,
    `UninitializedParameter`, the dtypes `float16`, `float32`, `float64`, `int64`.
    """

    name: str

    def __repr__(self) -> str:
        return self.name

    @cached_property
    def Parameter(self):
        return self.nn.Parameter

    @cached_property
    def Buffer(self):
        return self.nn.Buffer

    @cached_property
    def hooks(self):
        """`nn.modules.module`, where the global hook registries and their `register_module_*` functions live."""
        return self.nn.modules.module

    @cached_property
    def is_lazy(self):
        return self.nn.parameter.is_lazy

    def tensor(self, data, dtype=None):
        """A fresh float32 tensor/array (or of `dtype`, a backend dtype) holding `data`."""
        raise NotImplementedError

    def zeros(self, *shape):
        return self.tensor(np.zeros(shape, dtype=np.float32))

    def ones(self, *shape):
        return self.tensor(np.ones(shape, dtype=np.float32))

    def arange(self, *shape):
        """Distinct, reproducible values 0, 1, 2, ... in `shape` (float32): makes value comparisons meaningful."""
        return self.tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))

    def leaf(self, data):
        """A float32 leaf tensor holding `data` that requires grad: what backward scenarios differentiate."""
        raise NotImplementedError

    def no_grad(self):
        raise NotImplementedError

    def to_numpy(self, x) -> np.ndarray:
        raise NotImplementedError

    def clone(self, x):
        """A copy of `x` as a plain tensor/array: traces are observed after the scenario, so snapshot with this."""
        raise NotImplementedError

    def copy_into(self, target, values) -> None:
        """Overwrite `target`'s values in place (a parameter keeps its identity)."""
        raise NotImplementedError

    def set_grad(self, param, values) -> None:
        raise NotImplementedError

    def shares_memory(self, a, b) -> bool:
        raise NotImplementedError

    def as_subclass(self, x, cls):
        """View `x` as an instance of `cls`, a subclass of `TensorBase`."""
        raise NotImplementedError


class TorchBackend(Backend):
    name = "torch"

    def __init__(self):
        self.torch = importlib.import_module("torch")
        self.nn = importlib.import_module("torch.nn")
        self.TensorBase = self.torch.Tensor
        self.RemovableHandle = importlib.import_module("torch.utils.hooks").RemovableHandle
        self.UninitializedParameter = self.nn.UninitializedParameter
        self.float16, self.float32, self.float64 = self.torch.float16, self.torch.float32, self.torch.float64
        self.int64 = self.torch.int64

    def tensor(self, data, dtype=None):
        return self.torch.tensor(np.asarray(data, dtype=np.float32), dtype=dtype)

    def leaf(self, data):
        return self.torch.tensor(np.asarray(data, dtype=np.float32), requires_grad=True)

    def no_grad(self):
        return self.torch.no_grad()

    def to_numpy(self, x):
        return x.detach().cpu().numpy()

    def clone(self, x):
        return x.detach().clone()

    def copy_into(self, target, values):
        with self.torch.no_grad():
            target.copy_(self.torch.as_tensor(np.asarray(values)))

    def set_grad(self, param, values):
        param.grad = self.torch.as_tensor(np.asarray(values, dtype=np.float32))

    def shares_memory(self, a, b):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()

    def as_subclass(self, x, cls):
        return x.as_subclass(cls)


class ModulecraftBackend(Backend):
    name = "modulecraft"

    def __init__(self):
        self.modulecraft = importlib.import_module("modulecraft")
        self.nn = importlib.import_module("modulecraft.nn")
        self.TensorBase = np.ndarray
        self.RemovableHandle = importlib.import_module("modulecraft.utils.hooks").RemovableHandle
        self.UninitializedParameter = self.nn.UninitializedParameter
        self.float16, self.float32, self.float64 = np.float16, np.float32, np.float64
        self.int64 = np.int64

    def tensor(self, data, dtype=None):
        return np.array(data, dtype=np.float32 if dtype is None else dtype)

    def leaf(self, data):
        return self.modulecraft.tensor(np.asarray(data, dtype=np.float32), requires_grad=True)

    def no_grad(self):
        return self.modulecraft.no_grad()

    def to_numpy(self, x):
        return np.asarray(x)

    def clone(self, x):
        return np.array(x, copy=True)

    def copy_into(self, target, values):
        target[...] = values

    def set_grad(self, param, values):
        param.grad = np.asarray(values, dtype=np.float32)

    def shares_memory(self, a, b):
        return np.shares_memory(a, b)

    def as_subclass(self, x, cls):
        return x.view(cls)


_backends: dict[str, Backend] = {}


def backend(name: str) -> Backend:
    """The backend called `name` ("torch" or "modulecraft"), imported on first use."""
    if name not in _backends:
        _backends[name] = {"torch": TorchBackend, "modulecraft": ModulecraftBackend}[name]()
    return _backends[name]
