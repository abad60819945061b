"""``modulecraft.autograd``: reverse-mode automatic differentiation on numpy (torch.autograd's essentials).

* :mod:`~modulecraft.autograd.tensor`: ``Tensor`` (an ndarray that records operations) and ``tensor()``;
* :mod:`~modulecraft.autograd.grad_mode`: ``no_grad``, ``enable_grad``, ``set_grad_enabled``;
* :mod:`~modulecraft.autograd.graph`: the nodes (``grad_fn``), their hooks and saved values;
* :mod:`~modulecraft.autograd.engine`: ``backward`` and ``grad``, which run a graph;
* :mod:`~modulecraft.autograd.function`: ``Function`` for custom operations;
* :mod:`~modulecraft.autograd.ops`: the gradient rules, one file per family of operations.

Higher-order gradients (``create_graph=True``) are not supported: gradients are computed with plain numpy.
"""

from modulecraft.autograd import graph
from modulecraft.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from modulecraft.autograd.tensor import Tensor, tensor
from modulecraft.autograd.ops import elementwise, linalg, reductions, shaping  # noqa: F401  (register rules)
from modulecraft.autograd.engine import backward, grad
from modulecraft.autograd.function import Function, FunctionCtx

__all__ = ["Tensor", "tensor", "Function", "FunctionCtx", "backward", "grad", "graph", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled"]
