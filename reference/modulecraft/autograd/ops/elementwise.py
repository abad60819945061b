"""Elementwise operations (numpy ufuncs): arithmetic with broadcasting, ``exp``, ``log``, ``tanh``, ``maximum``...

``round``/``floor``/``ceil``/``trunc``/``sign`` record a node whose gradient is zero, as torch's do; ``clip`` with
number bounds records torch's ``ClampBackward1``.

Node names and edges follow torch: ``x + 1`` records ``AddBackward0`` with edges (x, None); a Python number
on the left of ``+`` or ``*`` is moved to the right as torch does; ``1 - x`` is ``RsubBackward1``, ``x ** 2``
is ``PowBackward0`` and ``2 ** x`` is ``PowBackward2`` (one edge each). ``2 / x`` records one
``DivBackward0`` with edges (None, x) where torch records ``ReciprocalBackward0`` then ``MulBackward0``.
Broadcasting is undone by the engine, as torch's: a node returns gradients of its output's shape and the engine sums
each over the axes its input was broadcast along (``engine.validate_outputs``).
"""

from __future__ import annotations

import numpy as np

from modulecraft.autograd.graph import Node
from modulecraft.autograd.ops.registry import UFUNCS, implements
from modulecraft.autograd.tensor import edges, plain, result, save, save_output

try:
    from numpy._core.umath import clip as _clip_ufunc
except ImportError:  # numpy 1.x
    from numpy.core.umath import clip as _clip_ufunc


def _is_number(value) -> bool:
    return not isinstance(value, np.ndarray)


class _BinaryNode(Node):
    """A node with two edges. As torch's, it returns gradients with the output's shape: the engine sums each to its
    input's shape (``engine.validate_outputs``), so a broadcast input gets the sum over what broadcasting stretched."""

    __slots__ = ()

    def backward(self, grad):
        (first, _), (second, _) = self.next_functions
        grad_first, grad_second = self.gradients(grad, first is not None, second is not None)
        # None for an input that needs no gradient (what a node hook sees there, as in torch).
        return (grad_first if first is not None else None), (grad_second if second is not None else None)


class AddBackward0(_BinaryNode):
    __slots__ = ()

    def gradients(self, grad, first, second):
        return grad, grad


class SubBackward0(_BinaryNode):
    __slots__ = ()

    def gradients(self, grad, first, second):
        return grad, (-grad if second else None)


class MulBackward0(_BinaryNode):
    __slots__ = ()

    def gradients(self, grad, first, second):
        a, b = self.saved_values()
        return (grad * b if first else None), (grad * a if second else None)


class DivBackward0(_BinaryNode):
    __slots__ = ()

    def gradients(self, grad, first, second):
        a, b = self.saved_values()
        return (grad / b if first else None), (-grad * a / (b * b) if second else None)


class PowBackward1(_BinaryNode):
    """Tensor ** tensor. The exponent's gradient is 0 where the base is 0 and the exponent >= 0 (as torch)."""

    __slots__ = ()

    def gradients(self, grad, first, second):
        a, b = self.saved_values()
        grad_base = grad * b * a ** (b - 1) if first else None
        grad_exponent = None
        if second:
            with np.errstate(divide="ignore", invalid="ignore"):
                grad_exponent = grad * np.where((a == 0) & (b >= 0), 0, a ** b * np.log(a))
        return grad_base, grad_exponent


class MaximumBackward0(_BinaryNode):
    """Where the inputs tie, each gets half of the gradient (as torch's ``maximum``)."""

    __slots__ = ()

    def gradients(self, grad, first, second):
        a, b = self.saved_values()
        share = np.where(a == b, grad / 2, grad)
        return (np.where(a < b, 0, share) if first else None), (np.where(a > b, 0, share) if second else None)


class MinimumBackward0(_BinaryNode):
    __slots__ = ()

    def gradients(self, grad, first, second):
        a, b = self.saved_values()
        share = np.where(a == b, grad / 2, grad)
        return (np.where(a > b, 0, share) if first else None), (np.where(a < b, 0, share) if second else None)


class RsubBackward1(Node):
    """``number - x``."""

    __slots__ = ()

    def backward(self, grad):
        return (-grad,)


class PowBackward0(Node):
    """``x ** number`` (also ``np.square``)."""

    __slots__ = ("exponent",)

    def backward(self, grad):
        (a,) = self.saved_values()
        exponent = self.exponent
        return (grad * exponent * a ** (exponent - 1) if exponent != 0 else np.zeros_like(grad * a),)


class PowBackward2(Node):
    """``number ** x``."""

    __slots__ = ("base",)

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad * out * np.log(self.base),)


class NegBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        return (-grad,)


class ExpBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad * out,)


class LogBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (a,) = self.saved_values()
        return (grad / a,)


class TanhBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad * (1 - out * out),)


class SqrtBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad / (2 * out),)


class AbsBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (a,) = self.saved_values()
        return (grad * np.sign(a),)


class ReciprocalBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        (out,) = self.saved_values()
        return (-grad * out * out,)


class _ZeroGradient(Node):
    """Piecewise-constant functions: their gradient is 0 wherever it exists (torch's rule)."""

    __slots__ = ()

    def backward(self, grad):
        return (np.zeros_like(grad),)


class RoundBackward0(_ZeroGradient):
    __slots__ = ()


class RoundBackward1(_ZeroGradient):
    """``round`` with ``decimals``."""

    __slots__ = ()


class FloorBackward0(_ZeroGradient):
    __slots__ = ()


class CeilBackward0(_ZeroGradient):
    __slots__ = ()


class TruncBackward0(_ZeroGradient):
    __slots__ = ()


class SignBackward0(_ZeroGradient):
    __slots__ = ()


@implements(np.round, np.around)
def round(a, decimals=0, out=None):
    if out is not None:
        raise NotImplementedError("numpy.round with out= is not differentiable in modulecraft")
    node = (RoundBackward1 if decimals else RoundBackward0)(edges((a,)))
    return result(np.round(plain(a), decimals), node)


class ClampBackward1(Node):
    """``np.clip`` with number bounds: the gradient passes where the input is within them, bounds included."""

    __slots__ = ("low", "high")

    def backward(self, grad):
        (a,) = self.saved_values()
        inside = np.ones(a.shape, dtype=bool)
        if self.low is not None:
            inside &= a >= self.low
        if self.high is not None:
            inside &= a <= self.high
        return (grad * inside,)


def _clip(inputs, raw):
    a, low, high = raw
    if isinstance(low, np.ndarray) or isinstance(high, np.ndarray):
        raise NotImplementedError("numpy.clip is differentiable in modulecraft only with number bounds")
    node = ClampBackward1(edges(inputs[:1]))
    node.low, node.high = low, high
    save(node, inputs[:1], raw[:1])
    return result(np.clip(a, low, high), node)


@implements(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue, **kwargs):
    if out is not None or kwargs:
        raise NotImplementedError("numpy.clip with out= or ufunc options is not differentiable in modulecraft")
    low = a_min if a_min is not np._NoValue else (None if min is np._NoValue else min)
    high = a_max if a_max is not np._NoValue else (None if max is np._NoValue else max)
    return _clip((a, low, high), [plain(a), low, high])


def _binary(node_class, ufunc, saves_inputs: bool, commutative: bool = False):
    def rule(inputs, raw):
        if commutative and _is_number(raw[0]) and not _is_number(raw[1]):
            inputs, raw = inputs[::-1], raw[::-1]
        node = node_class(edges(inputs))
        if saves_inputs:
            save(node, inputs, raw)
        return result(ufunc(*raw), node)

    return rule


def _unary(node_class, ufunc, saves: str | None):
    def rule(inputs, raw):
        node = node_class(edges(inputs))
        out = result(ufunc(*raw), node)
        if saves == "input":
            save(node, inputs, raw)
        elif saves == "output":
            save_output(node, out)
        return out

    return rule


def _subtract(inputs, raw):
    if _is_number(raw[0]) and not _is_number(raw[1]):
        node = RsubBackward1(edges(inputs[1:]))
        return result(np.subtract(*raw), node)
    return _subtract_tensors(inputs, raw)


def _power(inputs, raw):
    base, exponent = raw
    if _is_number(exponent):
        node = PowBackward0(edges(inputs[:1]))
        node.exponent = exponent
        save(node, inputs[:1], raw[:1])
        return result(np.power(base, exponent), node)
    if _is_number(base):
        node = PowBackward2(edges(inputs[1:]))
        node.base = base
        out = result(np.power(base, exponent), node)
        save_output(node, out)
        return out
    return _power_tensors(inputs, raw)


def _square(inputs, raw):
    return _power(inputs + (2,), [raw[0], 2])


_subtract_tensors = _binary(SubBackward0, np.subtract, False)
_power_tensors = _binary(PowBackward1, np.power, True)

UFUNCS.update({
    np.add: _binary(AddBackward0, np.add, False, commutative=True),
    np.subtract: _subtract,
    np.multiply: _binary(MulBackward0, np.multiply, True, commutative=True),
    np.divide: _binary(DivBackward0, np.divide, True),
    np.power: _power,
    np.square: _square,
    np.maximum: _binary(MaximumBackward0, np.maximum, True),
    np.minimum: _binary(MinimumBackward0, np.minimum, True),
    np.negative: _unary(NegBackward0, np.negative, None),
    np.exp: _unary(ExpBackward0, np.exp, "output"),
    np.log: _unary(LogBackward0, np.log, "input"),
    np.tanh: _unary(TanhBackward0, np.tanh, "output"),
    np.sqrt: _unary(SqrtBackward0, np.sqrt, "output"),
    np.absolute: _unary(AbsBackward0, np.absolute, "input"),
    np.reciprocal: _unary(ReciprocalBackward0, np.reciprocal, "output"),
    np.rint: _unary(RoundBackward0, np.rint, None),
    np.floor: _unary(FloorBackward0, np.floor, None),
    np.ceil: _unary(CeilBackward0, np.ceil, None),
    np.trunc: _unary(TruncBackward0, np.trunc, None),
    np.sign: _unary(SignBackward0, np.sign, None),
    _clip_ufunc: _clip,  # what ndarray.clip calls
})
