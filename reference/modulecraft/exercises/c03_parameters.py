"""Chapter 3's exercises that are not torch mechanisms: what the grader compares the learner's code with.

`Parameter` here is the course's own: a flagged `np.ndarray` subclass whose arithmetic results are plain arrays
(modulecraft's `nn.Parameter` is a leaf of its autograd instead, so its results are Tensors). The grading kernel's
copy of modulecraft has these removed, like every name the graded chapter asks for (`autograder.judging.answer_key`)."""
from __future__ import annotations

import numpy as np

from modulecraft.nn.modules.module import Module
from modulecraft.nn.parameter import Parameter as ModuleParameter


class Parameter(np.ndarray):
    """An array a Module registers as a parameter (its `_is_param` flag), sharing the memory of its data."""

    _is_param = True

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = np.empty(0, dtype=np.float32)
        param = np.asarray(data).view(cls)
        param.requires_grad = requires_grad
        return param

    def __array_finalize__(self, obj):
        self.requires_grad = getattr(obj, "requires_grad", True)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        if type(array) is not np.ndarray:  # an in-place operation wrote into this parameter
            return array
        return array[()] if return_scalar else array


def predicted_outcome(module: Module, name, value) -> str:
    """What `module.register_parameter(name, value)` does: "ok", or the name of the exception it raises."""
    error = None
    try:
        module.register_parameter(name, value)
    except (AttributeError, KeyError, TypeError) as raised:
        error = raised
    return "ok" if error is None else type(error).__name__


class Scale(Module):
    """x * weight (+ bias): a weight of ones and an optional bias of zeros, registered as None when absent."""

    def __init__(self, features, bias=True):
        super().__init__()
        self.weight = ModuleParameter(np.ones(features, dtype=np.float32))
        if bias:
            self.bias = ModuleParameter(np.zeros(features, dtype=np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        out = x * self.weight
        if self.bias is not None:
            out = out + self.bias
        return out


class FixedExperts(Module):
    """`count` scales (scale i filled with i + 1), each registered as parameter `scale_<i>`; forward multiplies."""

    def __init__(self, count, features):
        super().__init__()
        for i in range(count):
            self.register_parameter(f"scale_{i}", ModuleParameter(np.full(features, i + 1, dtype=np.float32)))

    def forward(self, x):
        for scale in self._parameters.values():
            x = x * scale
        return x
