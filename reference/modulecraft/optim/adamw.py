"""AdamW: Adam whose weight decay shrinks the parameters directly instead of entering the averages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from modulecraft.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """``Adam`` with ``decoupled_weight_decay=True`` and a default ``weight_decay`` of 0.01, as torch's.

    Each step first multiplies the parameters by ``1 - lr * weight_decay``, then takes Adam's step
    from averages of the plain gradient (see ``Adam``).
    """

    def __init__(self, params: Iterable, lr: float | np.ndarray = 1e-3,
                 betas: tuple[float | np.ndarray, float | np.ndarray] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # a loaded Adam state_dict cannot turn the decay back into L2
            group["decoupled_weight_decay"] = True
