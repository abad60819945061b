"""Reductions over axes (``sum``, ``mean``, ``var``, ``std``, ``max``, ``min``), with ``keepdims``.

Names follow torch: a full reduction is ``SumBackward0``/``MeanBackward0``/``MaxBackward1``, one over axes
``SumBackward1``/``MeanBackward1``/``AmaxBackward0`` (numpy's ``max(axis)`` is torch's ``amax``: where
several elements share the maximum, they share its gradient equally, as ``amax`` and full ``max`` do).
``var``/``std`` keep numpy's ``ddof=0`` default (torch's default correction is 1).
"""

from __future__ import annotations

import numpy as np

from modulecraft.autograd.graph import Node
from modulecraft.autograd.ops.registry import implements
from modulecraft.autograd.tensor import edges, plain, result, save

__all__ = []


def _axes(axis, ndim: int):
    """``axis`` as a sorted tuple of non-negative axes, or None for all of them."""
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim if ndim else a for a in axes))


class _Reduction(Node):
    """Holds what backward needs to spread a reduced gradient back over the input's shape."""

    __slots__ = ("shape", "axes", "keepdims")

    def expand(self, grad):
        """``grad`` with the reduced axes put back, broadcast to the input's shape (read-only view)."""
        if self.axes is not None and not self.keepdims:
            grad = np.expand_dims(grad, self.axes)
        return np.broadcast_to(grad, self.shape)

    def count(self) -> int:
        if self.axes is None:
            return int(np.prod(self.shape))
        return int(np.prod([self.shape[a] for a in self.axes]))


class SumBackward0(_Reduction):
    __slots__ = ()

    def backward(self, grad):
        return (self.expand(grad),)


class SumBackward1(SumBackward0):
    __slots__ = ()


class MeanBackward0(_Reduction):
    __slots__ = ()

    def backward(self, grad):
        return (self.expand(grad / self.count()),)


class MeanBackward1(MeanBackward0):
    __slots__ = ()


class VarBackward0(_Reduction):
    __slots__ = ("ddof",)

    def backward(self, grad):
        (a,) = self.saved_values()
        mean = a.mean(axis=self.axes, keepdims=True)
        return (self.expand(grad) * (2.0 / (self.count() - self.ddof)) * (a - mean),)


class StdBackward0(_Reduction):
    __slots__ = ("ddof",)

    def backward(self, grad):
        a, out = self.saved_values()
        mean = a.mean(axis=self.axes, keepdims=True)
        return (self.expand(grad / out) * (a - mean) / (self.count() - self.ddof),)


class AmaxBackward0(_Reduction):
    """Also full ``max`` (``MaxBackward1``) and the ``min`` variants: ties share the gradient equally."""

    __slots__ = ()

    def backward(self, grad):
        a, out = self.saved_values()
        if self.axes is not None and not self.keepdims:
            out = np.expand_dims(out, self.axes)
        chosen = a == out
        ties = chosen.sum(axis=self.axes, keepdims=True)
        return (self.expand(grad) * chosen / ties,)


class MaxBackward1(AmaxBackward0):
    __slots__ = ()


class AminBackward0(AmaxBackward0):
    __slots__ = ()


class MinBackward1(AmaxBackward0):
    __slots__ = ()


def _refuse(name: str, **arguments) -> None:
    given = [key for key, value in arguments.items() if value is not None]
    if given:
        raise NotImplementedError(f"numpy.{name} with {', '.join(given)}= is not differentiable in modulecraft")


def _reduce(full_node, axes_node, function, a, axis, keepdims, saves, **kwargs):
    raw = plain(a)
    axes = _axes(axis, raw.ndim)
    node = (full_node if axes is None and not keepdims else axes_node)(edges((a,)))
    node.shape = raw.shape
    node.axes = axes
    node.keepdims = keepdims
    out = function(raw, axis=axes, keepdims=keepdims, **kwargs)
    if saves == "input":
        save(node, (a,), (raw,))
    elif saves == "input and output":
        save(node, (a,), (raw, out))
    return result(out, node)


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _refuse("sum", out=out, initial=initial, where=where)
    return _reduce(SumBackward0, SumBackward1, np.sum, a, axis, keepdims, None, dtype=dtype)


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _refuse("mean", out=out, where=where)
    return _reduce(MeanBackward0, MeanBackward1, np.mean, a, axis, keepdims, None, dtype=dtype)


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    _refuse("var", out=out, where=where, mean=mean, correction=correction)
    out = _reduce(VarBackward0, VarBackward0, np.var, a, axis, keepdims, "input", dtype=dtype, ddof=ddof)
    out._grad_fn.ddof = ddof
    return out


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    _refuse("std", out=out, where=where, mean=mean, correction=correction)
    out = _reduce(StdBackward0, StdBackward0, np.std, a, axis, keepdims, "input and output", dtype=dtype,
                  ddof=ddof)
    out._grad_fn.ddof = ddof
    return out


@implements(np.max, np.amax)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _refuse("max", out=out, initial=initial, where=where)
    return _reduce(MaxBackward1, AmaxBackward0, np.max, a, axis, keepdims, "input and output")


@implements(np.min, np.amin)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _refuse("min", out=out, initial=initial, where=where)
    return _reduce(MinBackward1, AminBackward0, np.min, a, axis, keepdims, "input and output")
