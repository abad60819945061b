"""Adam: steps scaled by running averages of the gradient and of its square (torch's ``Adam``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from modulecraft.optim.optimizer import Optimizer, _check_kernel_flags, _loss_of, _one_element, _parameter_values

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam (and, with ``decoupled_weight_decay=True``, AdamW), computed as torch 2.13 does on the CPU.

    Per step and parameter with a gradient (``t`` counts the steps, from 1)::

        g = -grad if maximize else grad
        p *= 1 - lr * weight_decay     (decoupled)   or   g = g + weight_decay * p     (when weight_decay != 0)
        m = m + (1 - beta1) * (g - m)                  exp_avg
        v = beta2 * v + (1 - beta2) * g * g            exp_avg_sq   (v_max = max(v_max, v) with amsgrad)
        p -= lr / (1 - beta1**t) * m / (sqrt(v or v_max) / sqrt(1 - beta2**t) + eps)

    ``state[p]`` holds ``step`` (a 0-d float32 array, as torch's is a 0-d float32 tensor), ``exp_avg``,
    ``exp_avg_sq`` and, with ``amsgrad``, ``max_exp_avg_sq``. ``foreach``, ``fused`` and ``capturable``
    are kept for the ``state_dict`` and change nothing; ``differentiable=True`` is refused.
    """

    def __init__(self, params: Iterable, lr: float | np.ndarray = 1e-3,
                 betas: tuple[float | np.ndarray, float | np.ndarray] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, np.ndarray):
            if foreach and not capturable:
                raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
            if lr.size != 1:
                raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (all(isinstance(beta, float) for beta in betas) or all(isinstance(beta, np.ndarray) for beta in betas)):
            raise ValueError("betas must be either both floats or both Tensors")
        for index, beta in enumerate(betas):
            if isinstance(beta, np.ndarray):
                if not capturable and foreach:
                    raise ValueError(
                        f"betas[{index}] as a Tensor is not supported for capturable=False and foreach=True")
                if beta.size != 1:
                    raise ValueError(f"Tensor betas[{index}] must be 1-element")
        defaults = {"lr": lr, "betas": tuple(map(_one_element, betas)), "eps": eps,
                    "weight_decay": weight_decay, "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)
        _check_kernel_flags(foreach, fused)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # groups and states saved by older versions
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
            for param in group["params"]:
                param_state = self.state.get(param, {})
                if param_state and not isinstance(param_state["step"], np.ndarray):
                    param_state["step"] = np.array(float(param_state["step"]), dtype=np.float32)

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = _loss_of(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay, amsgrad = (_one_element(group["lr"]), group["eps"], group["weight_decay"],
                                              group["amsgrad"])
            maximize, decoupled = group["maximize"], group["decoupled_weight_decay"]
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                values = _parameter_values(param)
                state = self.state[param]
                if not state:
                    state["step"] = np.array(0.0, dtype=np.float32)
                    state["exp_avg"] = np.zeros_like(values)
                    state["exp_avg_sq"] = np.zeros_like(values)
                    if amsgrad:
                        state["max_exp_avg_sq"] = np.zeros_like(values)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

                grad = -grad if maximize else grad
                state["step"] += 1
                if weight_decay != 0:
                    if decoupled:
                        values *= 1 - lr * weight_decay
                    else:
                        grad = grad + weight_decay * values
                exp_avg += (1 - beta1) * (grad - exp_avg)  # torch's lerp_, to rounding
                exp_avg_sq *= beta2
                exp_avg_sq += (1 - beta2) * grad * grad

                step = float(state["step"])
                bias_correction2_sqrt = (1 - beta2**step) ** 0.5
                if amsgrad:
                    second_moment = np.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
                else:
                    second_moment = exp_avg_sq
                denominator = np.sqrt(second_moment) / bias_correction2_sqrt
                denominator += eps
                values -= lr / (1 - beta1**step) * exp_avg / denominator
        return loss
