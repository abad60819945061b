"""Matrix products: ``@`` / ``np.matmul`` / ``np.dot``, named as torch names them.

2-D @ 2-D records ``MmBackward0``, 1-D @ 1-D ``DotBackward0``, 2-D @ 1-D ``MvBackward0``. Other shapes
(batched, or a 1-D left operand) record one ``BmmBackward0`` node where torch records a view, an ``mm``/
``bmm`` and a view back; the gradients are the same (batch broadcasting undone).
"""

from __future__ import annotations

import numpy as np

from modulecraft.autograd.graph import Node
from modulecraft.autograd.engine import unbroadcast
from modulecraft.autograd.ops.registry import UFUNCS, implements
from modulecraft.autograd.tensor import edges, result, save

__all__ = ["mm_gradients"]


def _column_major(matrix: np.ndarray) -> bool:
    return matrix.flags.f_contiguous and not matrix.flags.c_contiguous


def mm_gradients(grad, a, b, first: bool, second: bool) -> tuple:
    """The gradients of ``a @ b`` (2-D) for the operands that need one (``first``, ``second``).

    As torch does, an operand stored column-major (such as ``weight.T`` in ``linear``) gets its gradient
    column-major too: ``(grad.T @ a).T`` rather than ``a.T @ grad``, the same values. Then the gradient of
    ``weight`` itself, one transpose further, is laid out like ``weight`` and can become its ``.grad`` as is.
    The products are written ``x.dot(y)``: for 2-D arrays the same as ``x @ y``, with a fraction of its
    per-call cost (which is most of the cost for small layers).
    """
    grad_a = grad_b = None
    if first:
        grad_a = b.dot(grad.T).T if _column_major(a) else grad.dot(b.T)
    if second:
        grad_b = grad.T.dot(a).T if _column_major(b) else a.T.dot(grad)
    return grad_a, grad_b


class MmBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        a, b = self.saved_values()
        (first, _), (second, _) = self.next_functions
        return mm_gradients(grad, a, b, first is not None, second is not None)


class DotBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        a, b = self.saved_values()
        (first, _), (second, _) = self.next_functions
        return (grad * b if first is not None else None), (grad * a if second is not None else None)


class MvBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        a, b = self.saved_values()
        (first, _), (second, _) = self.next_functions
        return (np.outer(grad, b) if first is not None else None), (a.T @ grad if second is not None else None)


class BmmBackward0(Node):
    """Any other ``matmul``: 1-D operands are promoted to matrices, then batch broadcasting is undone."""

    __slots__ = ()

    def backward(self, grad):
        a, b = self.saved_values()
        a2 = a[np.newaxis, :] if a.ndim == 1 else a
        b2 = b[:, np.newaxis] if b.ndim == 1 else b
        grad2 = grad
        if a.ndim == 1:
            grad2 = np.expand_dims(grad2, -2)
        if b.ndim == 1:
            grad2 = np.expand_dims(grad2, -1)
        (first, _), (second, _) = self.next_functions
        grad_a = grad_b = None
        if first is not None:
            grad_a = unbroadcast(grad2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if second is not None:
            grad_b = unbroadcast(np.swapaxes(a2, -1, -2) @ grad2, b2.shape).reshape(b.shape)
        return grad_a, grad_b


_NODE_BY_DIMS = {(2, 2): MmBackward0, (1, 1): DotBackward0, (2, 1): MvBackward0}


def _matmul(inputs, raw):
    a, b = raw = [np.asarray(raw[0]), np.asarray(raw[1])]
    node = _NODE_BY_DIMS.get((a.ndim, b.ndim), BmmBackward0)(edges(inputs))
    save(node, inputs, raw)
    return result(np.matmul(a, b), node)


UFUNCS[np.matmul] = _matmul


@implements(np.dot)
def dot(a, b, out=None):
    """``np.dot`` is ``matmul`` for the 1-D and 2-D operands it is used with."""
    if out is not None or np.ndim(a) > 2 or np.ndim(b) > 2 or np.ndim(a) == 0 or np.ndim(b) == 0:
        raise NotImplementedError("numpy.dot is differentiable in modulecraft only for 1-D and 2-D operands "
                                  "without out=; use the @ operator")
    return np.matmul(a, b)
