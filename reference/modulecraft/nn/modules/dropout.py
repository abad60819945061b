"""``Dropout``."""

from __future__ import annotations

import numpy as np

from modulecraft.nn import init
from modulecraft.nn.modules.module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """In training mode zero each element with probability ``p`` and scale the rest by 1/(1-p); else identity."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        input = np.asarray(input)
        if not self.training or self.p == 0:
            return input
        keep = init.generator().random(input.shape) >= self.p
        scale = 0.0 if self.p == 1 else 1.0 / (1.0 - self.p)
        mask = (keep * scale).astype(input.dtype)
        return np.multiply(input, mask, out=input if self.inplace else None)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
