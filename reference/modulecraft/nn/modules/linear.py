"""``Identity``, ``Linear`` and ``LazyLinear``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from modulecraft.nn import functional as F
from modulecraft.nn import init
from modulecraft.nn.modules.lazy import LazyModuleMixin
from modulecraft.nn.modules.module import Module
from modulecraft.nn.parameter import Parameter, UninitializedParameter

__all__ = ["Identity", "Linear", "LazyLinear"]


class Identity(Module):
    """Returns its input unchanged; accepts (and ignores) any constructor arguments, like torch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features), float32 by default."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        dtype = np.float32 if dtype is None else dtype
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default: weights and bias uniform in ±1/sqrt(in_features)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose ``in_features`` is read from the first input; it then becomes a plain ``Linear``."""

    cls_to_become = Linear
    weight: UninitializedParameter
    bias: UninitializedParameter

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        # Build a Linear with no inputs, then swap in shape-less parameters.
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        in_features = np.shape(input)[-1]
        if self.has_uninitialized_params():
            self.in_features = in_features
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:
            # Materialised by load_state_dict before the first call: take in_features from the input.
            if in_features != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {in_features} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = in_features
