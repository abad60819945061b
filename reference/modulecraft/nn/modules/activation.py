"""``ReLU``."""

from __future__ import annotations

from modulecraft.nn import functional as F
from modulecraft.nn.modules.module import Module

__all__ = ["ReLU"]


class ReLU(Module):
    """``max(0, x)`` elementwise; ``inplace=True`` overwrites the input array."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""
