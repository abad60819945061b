"""The identity Function the Module machinery records for full backward hooks (torch keeps its
``BackwardHookFunction`` in ``nn/modules/_functions.py`` too)."""

from __future__ import annotations

import sys

from modulecraft.autograd.function import Function
from modulecraft.autograd.grad_mode import is_grad_enabled  # noqa: F401  (read by BackwardHook)
from modulecraft.utils.hooks import BackwardHook


class BackwardHookFunction(Function):
    """The identity, recorded as one ``BackwardHookFunctionBackward`` node for all the tensors it is given.

    ``BackwardHook`` sends a module's positional input tensors through it before forward, and its output
    tensors after, so that backward crosses one node where the module ends and one where it begins: the hooks
    registered on those two nodes call the module's backward pre-hooks and full backward hooks. Returning the
    inputs as they are makes each output a view of its input (changing it in place is refused, as torch
    refuses it); the tensors that do not require grad are marked non-differentiable, so they stay without a
    ``grad_fn`` and their gradient in backward is the zeros ``materialize_grads`` fills in, not None.
    """

    @staticmethod
    def forward(ctx, *args):
        # ctx.needs_input_grad rather than arg.requires_grad: a plain ndarray (a tensor that does not require
        # grad) has no requires_grad.
        ctx.mark_non_differentiable(*[arg for arg, needed in zip(args, ctx.needs_input_grad) if not needed])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads


BackwardHook.functions = sys.modules[__name__]  # BackwardHook reads BackwardHookFunction here, at each call
