"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay (torch's ``SGD``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from modulecraft.optim.optimizer import Optimizer, _check_kernel_flags, _loss_of, _one_element, _parameter_values

__all__ = ["SGD"]


class SGD(Optimizer):
    """``p -= lr * g``, where ``g`` is the gradient, plus ``weight_decay * p``, through a momentum buffer.

    Per step and parameter with a gradient, as torch 2.13 computes it (float32 stays float32)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                        (when weight_decay != 0)
        b = g (first step) or momentum * b + (1 - dampening) * g     (when momentum != 0)
        g = g + momentum * b if nesterov else b
        p -= lr * g

    The momentum buffer lives in ``state[p]["momentum_buffer"]``. ``foreach`` and ``fused`` are kept for
    the ``state_dict`` and change nothing (one numpy implementation); ``differentiable=True`` is refused.
    """

    def __init__(self, params: Iterable, lr: float | np.ndarray = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        if isinstance(lr, np.ndarray) and lr.size != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                    "nesterov": nesterov, "maximize": maximize, "foreach": foreach,
                    "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        _check_kernel_flags(foreach, fused)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # groups saved before these options existed
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = _loss_of(closure)
        for group in self.param_groups:
            lr, momentum, dampening = _one_element(group["lr"]), group["momentum"], group["dampening"]
            weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                values = _parameter_values(param)
                grad = -grad if maximize else grad
                if weight_decay != 0:
                    grad = grad + weight_decay * values
                if momentum != 0:
                    state = self.state[param]
                    buffer = state.get("momentum_buffer")
                    if buffer is None:
                        buffer = state["momentum_buffer"] = np.array(grad, copy=True)
                    else:
                        buffer *= momentum
                        buffer += (1 - dampening) * grad
                    grad = grad + momentum * buffer if nesterov else buffer
                values -= lr * grad
        return loss
