"""The identity Function the Module machinery records for full backward hooks (torch keeps its
``BackwardHookFunction`` in ``nn/modules/_functions.py`` too)."""

from __future__ import annotations

import sys

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.function import BackwardCFunction, Function
from modulecraft.autograd.grad_mode import is_grad_enabled  # noqa: F401  (read by BackwardHook)
from modulecraft.autograd.tensor import Tensor, edges, mark_function_view, result, version_counter
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

    @classmethod
    def apply(cls, *args):
        """``Function.apply``, with the same node and outputs, in a few steps when it is this very class with
        arrays to record (every call of a module with full backward hooks); a subclass goes the general way."""
        if cls is not BackwardHookFunction or not grad_mode.state.enabled:
            return super().apply(*args)
        needs = []
        for arg in args:
            if not isinstance(arg, np.ndarray):
                return super().apply(*args)
            needs.append(isinstance(arg, Tensor) and arg._requires_grad)
        if True not in needs:
            return super().apply(*args)
        ctx = BackwardHookFunctionBackward()
        ctx.needs_input_grad = tuple(needs)
        ctx.next_functions = edges(args)
        ctx.num_outputs = len(args)
        ctx._saved = ()
        input_meta, output_meta, passive, outputs = [], [], [], []
        for output_nr, arg in enumerate(args):
            input_meta.append(arg.shape)
            output_meta.append((arg.shape, arg.dtype))
            if not needs[output_nr]:
                passive.append(arg)
                outputs.append(arg.detach() if isinstance(arg, Tensor) else arg)
                continue
            recorded = result(arg.view(np.ndarray), ctx, output_nr=output_nr)
            recorded._vc = version_counter(arg)  # a view of its input, as every output here
            mark_function_view(recorded, output_nr, "BackwardHookFunction")
            outputs.append(recorded)
        ctx._input_meta, ctx._output_meta = tuple(input_meta), tuple(output_meta)
        ctx.non_differentiable = tuple(passive)
        return tuple(outputs)


class BackwardHookFunctionBackward(BackwardCFunction):
    """The node ``BackwardHookFunction`` records (the class the general ``apply`` would make for it): when every
    gradient is an array of its input's shape, it returns them as they are, which is what the general ``apply``
    would return after calling the identity ``backward``; otherwise it goes the general way."""

    _forward_cls = BackwardHookFunction

    def apply(self, grads: list) -> tuple:
        for grad, shape in zip(grads, self._input_meta):
            if type(grad) is not np.ndarray or grad.shape != shape:
                return super().apply(grads)
        return tuple(grads)


BackwardHookFunction._backward_cls = BackwardHookFunctionBackward
BackwardHook.functions = sys.modules[__name__]  # BackwardHook reads BackwardHookFunction here, at each call
