"""Custom autograd Functions that the Module machinery uses (torch keeps its own in ``nn/modules/_functions.py``)."""

from __future__ import annotations

from modulecraft.autograd.function import Function
from modulecraft.autograd.tensor import is_tracked


class BackwardHookFunction(Function):
    """The identity, recorded as one node (``BackwardHookFunctionBackward``) that ``BackwardHook`` hooks into.

    Arrays that do not require grad come back as they are, with no ``grad_fn``.
    """

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[arg for arg in args if not is_tracked(arg)])
        return args

    @staticmethod
    def backward(ctx, *args):
        return args
