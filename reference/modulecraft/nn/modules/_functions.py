"""The identity node the Module machinery records for full backward hooks (torch keeps its ``BackwardHookFunction``
in ``nn/modules/_functions.py``)."""

from __future__ import annotations

import numpy as np

from modulecraft.autograd.graph import Node
from modulecraft.autograd.tensor import Tensor, edges, mark_function_view, result, version_counter


class BackwardHookFunctionBackward(Node):
    """The node of torch's ``BackwardHookFunction``: the identity, recorded once for several tensors.

    torch records it through a custom ``autograd.Function``; here it is a node of its own, which behaves the
    same (name, ``next_functions``, one output per tensor, hooks, zeros for an output that received no
    gradient, as a Function's ``materialize_grads``) without the generic ``Function.apply`` and its ctx: a
    hooked module records two of these per call. Not mirrored: the ctx attributes torch's node also carries
    (``needs_input_grad``, ``saved_tensors``...).
    """

    __slots__ = ("num_outputs", "_output_meta")

    def backward(self, grad):
        """One tensor: the engine's plain path (no hook on the node)."""
        return (grad,)

    def apply(self, grads: list) -> tuple:
        """Several tensors, or hooks on the node: each gradient passed on, zeros for one that never came."""
        return tuple([np.zeros(shape, dtype) if grad is None else grad
                      for grad, (shape, dtype) in zip(grads, self._output_meta)])


def backward_hook_function(tensors: list) -> tuple[list, BackwardHookFunctionBackward]:
    """``tensors`` passed through one new identity node, as torch's ``BackwardHookFunction.apply`` returns them.

    Those that require grad come back as new tensors sharing their memory and version, with the node as
    ``grad_fn`` (like any input a Function returns as is, they may not be changed in place in grad mode);
    the others come back without a ``grad_fn`` (a Tensor detached, a plain array as it is).
    """
    node = BackwardHookFunctionBackward(edges(tensors))
    node.num_outputs = len(tensors)
    node._output_meta = [(tensor.shape, tensor.dtype) for tensor in tensors]
    outputs = []
    for output_nr, tensor in enumerate(tensors):
        if isinstance(tensor, Tensor):
            if tensor._requires_grad:
                out = result(tensor.view(np.ndarray), node, output_nr=output_nr)
                out._vc = version_counter(tensor)
                mark_function_view(out, output_nr, "BackwardHookFunction")
                tensor = out
            else:
                tensor = tensor.detach()
        outputs.append(tensor)
    return outputs, node
