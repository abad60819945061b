"""Every operation's gradient against central finite differences in float64, shapes chosen by Hypothesis.

Each case is a function that works on plain arrays (numpy) and on modulecraft tensors (recording): backward
of ``sum(f(inputs) * weights)`` must equal the finite-difference derivative of the same expression.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import modulecraft
from modulecraft.nn import functional as F

SETTINGS = settings(max_examples=12, deadline=None)
STEP = 1e-6


def _numerical_gradient(function, arrays, weights, index):
    array = arrays[index]
    gradient = np.zeros_like(array)
    for position in np.ndindex(array.shape):
        original = array[position]
        values = []
        for shift in (STEP, -STEP):
            array[position] = original + shift
            values.append(float(np.sum(np.asarray(function(*arrays)) * weights)))
        array[position] = original
        gradient[position] = (values[0] - values[1]) / (2 * STEP)
    return gradient


def check_gradients(function, *arrays, differentiable=None):
    """backward of sum(function(*tensors) * weights) equals finite differences, for each input."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    leaves = [modulecraft.tensor(a, requires_grad=True) for a in arrays]
    out = function(*leaves)
    assert isinstance(out, modulecraft.Tensor) and out.grad_fn is not None
    weights = np.random.default_rng(1).standard_normal(np.shape(out))
    (out * weights).sum().backward()
    for index, leaf in enumerate(leaves):
        if differentiable is not None and index not in differentiable:
            continue
        expected = _numerical_gradient(function, arrays, weights, index)
        assert leaf.grad is not None and leaf.grad.shape == arrays[index].shape
        np.testing.assert_allclose(leaf.grad, expected, rtol=1e-5, atol=1e-6)


def _values(seed, shape, low=None):
    """Distinct random values (no ties, so max/min/relu are differentiable everywhere they are evaluated)."""
    values = np.random.default_rng(seed).standard_normal(shape)
    return values if low is None else np.abs(values) + low


seeds = st.integers(0, 2**32 - 1)
small = st.integers(1, 4)
shapes = st.lists(small, min_size=0, max_size=3).map(tuple)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast together: the second drops leading axes and sets some sizes to 1."""
    shape = draw(st.lists(small, min_size=1, max_size=3).map(tuple))
    other = list(shape[draw(st.integers(0, len(shape))):])
    other = [1 if draw(st.booleans()) else size for size in other]
    pair = [shape, tuple(other)]
    return pair[::-1] if draw(st.booleans()) else pair


UNARY = {
    "neg": (lambda x: -x, None),
    "exp": (np.exp, None),
    "log": (np.log, 0.5),
    "tanh": (np.tanh, None),
    "sqrt": (np.sqrt, 0.5),
    "abs": (np.abs, 0.1),
    "reciprocal": (np.reciprocal, 0.5),
    "square": (np.square, None),
    "pow number": (lambda x: x ** 3, None),
    "pow half": (lambda x: x ** 0.5, 0.5),
    "number pow": (lambda x: 2.0 ** x, None),
    "number minus": (lambda x: 1 - x, None),
    "number divided": (lambda x: 2 / x, 0.5),
    "copy": (lambda x: x.copy(), None),
    "astype": (lambda x: x.astype(np.float64, copy=True), None),
    "relu": (F.relu, None),
    "round (zero gradient)": (lambda x: (x * 10).round(), None),
    "round decimals": (lambda x: np.round(x, 2), None),
    "floor": (np.floor, None),
    "sign": (np.sign, 0.1),
    "clip": (lambda x: np.clip(x, -0.5, 0.7), None),
    "clip method, one bound": (lambda x: x.clip(min=-0.2), None),
}


@pytest.mark.parametrize("name", list(UNARY))
@SETTINGS
@given(shape=shapes, seed=seeds)
def test_elementwise_unary(name, shape, seed):
    function, low = UNARY[name]
    # On a lattice of thousandths shifted by 0.0003, no value is within a step of a jump of round, floor, sign,
    # clip or relu (multiples of 0.05 or 0.005): seed 2078 once put x * 10 at -6.4999982.
    check_gradients(function, np.round(_values(seed, shape, low), 3) + 3e-4)


BINARY = {  # name: (function, lower bound of |first|, of |second|): keeps values where the function is smooth
    "add": (np.add, None, None),
    "subtract": (np.subtract, None, None),
    "multiply": (np.multiply, None, None),
    "divide": (np.divide, None, 0.5),
    "power": (np.power, 0.5, None),
    "maximum": (np.maximum, None, None),
    "minimum": (np.minimum, None, None),
}


@pytest.mark.parametrize("name", list(BINARY))
@SETTINGS
@given(pair=broadcast_pair(), seed=seeds)
def test_elementwise_binary_with_broadcasting(name, pair, seed):
    function, low_first, low_second = BINARY[name]
    check_gradients(function, _values(seed, pair[0], low_first), _values(seed + 1, pair[1], low_second))


@SETTINGS
@given(pair=broadcast_pair(), seed=seeds)
def test_where_with_broadcasting(pair, seed):
    condition = _values(seed + 2, pair[0]) > 0
    check_gradients(lambda x, y: np.where(condition, x, y), _values(seed, pair[0]), _values(seed + 1, pair[1]))


MATMUL_SHAPES = [((3, 4), (4, 2)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 3, 4), (4, 2)),
                 ((2, 3, 4), (1, 4, 5)), ((5, 1, 3, 4), (2, 4, 3))]


@pytest.mark.parametrize("shapes_pair", MATMUL_SHAPES, ids=str)
def test_matmul(shapes_pair):
    check_gradients(np.matmul, _values(0, shapes_pair[0]), _values(1, shapes_pair[1]))
    if all(len(s) <= 2 for s in shapes_pair):
        check_gradients(np.dot, _values(0, shapes_pair[0]), _values(1, shapes_pair[1]))


@st.composite
def shape_and_axis(draw):
    shape = draw(st.lists(small, min_size=1, max_size=3).map(tuple))
    axes = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                          st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)
                          .map(tuple)))
    return shape, axes, draw(st.booleans())


REDUCTIONS = {
    "sum": lambda x, axis, keepdims: x.sum(axis=axis, keepdims=keepdims),
    "np.sum": lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims),
    "var": lambda x, axis, keepdims: x.var(axis=axis, keepdims=keepdims),
    "var ddof": lambda x, axis, keepdims: np.var(x, axis=axis, keepdims=keepdims, ddof=1),
    "std": lambda x, axis, keepdims: x.std(axis=axis, keepdims=keepdims),
    "max": lambda x, axis, keepdims: x.max(axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@SETTINGS
@given(case=shape_and_axis(), seed=seeds)
def test_reductions_over_axes(name, case, seed):
    shape, axis, keepdims = case
    reduced = np.prod([shape[a] for a in ([axis] if isinstance(axis, int) else axis or range(len(shape)))])
    if name in ("var ddof", "std") and reduced < 2:
        return  # no spread: the gradient is undefined (torch's is nan too)
    check_gradients(lambda x: REDUCTIONS[name](x, axis, keepdims), _values(seed, shape))


def test_max_shares_the_gradient_between_ties_as_torch():
    x = modulecraft.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]]), requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]


SHAPING = {
    "reshape": ((2, 3, 2), lambda x: x.reshape(3, 4)),
    "reshape -1": ((2, 3, 2), lambda x: x.reshape(-1)),
    "reshape non-contiguous": ((3, 4), lambda x: x.T.reshape(12)),
    "np.reshape": ((2, 6), lambda x: np.reshape(x, (4, 3))),
    "ravel": ((2, 3), lambda x: x.ravel()),
    "flatten": ((2, 3), lambda x: x.flatten()),
    "squeeze": ((2, 1, 3), lambda x: x.squeeze()),
    "expand_dims": ((2, 3), lambda x: np.expand_dims(x, 1)),
    "T": ((2, 3, 4), lambda x: x.T),
    "transpose axes": ((2, 3, 4), lambda x: x.transpose(1, 2, 0)),
    "np.transpose": ((2, 3, 4), lambda x: np.transpose(x, (2, 0, 1))),
    "swapaxes": ((2, 3, 4), lambda x: x.swapaxes(0, 2)),
    "int index": ((3, 4), lambda x: x[1]),
    "slice": ((5, 4), lambda x: x[1:4:2]),
    "mixed": ((3, 4, 2), lambda x: x[..., 1:, 0]),
    "new axis": ((3, 4), lambda x: x[None, :, 2]),
    "negative": ((3, 4), lambda x: x[-1, ::-1]),
    "integer array with repeats": ((4, 3), lambda x: x[[0, 2, 0, 0]]),
    "two integer arrays": ((4, 3), lambda x: x[np.array([0, 3, 3]), np.array([1, 1, 2])]),
    "boolean mask": ((4, 3), lambda x: x[np.array([True, False, True, True])]),
    "tensor index": ((4, 3), lambda x: x[modulecraft.tensor([1, 1])]),
}


@pytest.mark.parametrize("name", list(SHAPING))
def test_views_and_indexing(name):
    shape, function = SHAPING[name]
    check_gradients(function, _values(3, shape))


@SETTINGS
@given(shape=st.lists(small, min_size=1, max_size=3).map(tuple), count=st.integers(1, 3), seed=seeds,
       data=st.data())
def test_concatenate_and_stack(shape, count, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = [data.draw(small) for _ in range(count)]
    parts = [_values(seed + i, shape[:axis % len(shape)] + (size,) + shape[axis % len(shape) + 1:])
             for i, size in enumerate(sizes)]
    check_gradients(lambda *xs: np.concatenate(xs, axis=axis), *parts)
    same = [_values(seed + i, shape) for i in range(count)]
    stack_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check_gradients(lambda *xs: np.stack(xs, axis=stack_axis), *same)


def test_setitem_records_on_a_tensor_in_a_graph():
    def write(x, v):
        y = x * 1
        y[1:3] = v * 2
        return y

    check_gradients(write, _values(0, (5, 2)), _values(1, (2,)))


def test_in_place_arithmetic_on_a_tensor_in_a_graph():
    def update(x, v):
        y = x * 1
        y *= v
        y += x
        return y

    check_gradients(update, _values(0, (3, 2)), _values(1, (2,)))


FUNCTIONAL = {
    "linear": (lambda x, w, b: F.linear(x, w, b), [(4, 3), (2, 3), (2,)]),
    "linear no bias": (lambda x, w: F.linear(x, w), [(4, 3), (2, 3)]),
    "linear 3-D": (lambda x, w, b: F.linear(x, w, b), [(2, 4, 3), (2, 3), (2,)]),
    "softmax": (lambda x: F.softmax(x, 1), [(3, 4)]),
    "log_softmax": (lambda x: F.log_softmax(x, 0), [(3, 4)]),
    "mse_loss": (lambda x, t: F.mse_loss(x, t), [(3, 4), (3, 4)]),
    "mse_loss sum": (lambda x, t: F.mse_loss(x, t, reduction="sum"), [(3, 4), (3, 4)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, np.array([0, 2, 1])), [(3, 4)]),
    "cross_entropy none": (lambda x: F.cross_entropy(x, np.array([0, 2, 1]), reduction="none"), [(3, 4)]),
    "batch_norm training": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(5, 3), (3,), (3,)]),
    "batch_norm 3-D": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(4, 3, 2), (3,), (3,)]),
    "batch_norm eval": (lambda x, w, b: F.batch_norm(x, np.full(3, 0.5), np.full(3, 2.0), w, b), [(5, 3), (3,), (3,)]),
}


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional(name):
    function, input_shapes = FUNCTIONAL[name]
    check_gradients(function, *[_values(i, shape) for i, shape in enumerate(input_shapes)])


def test_iterating_over_a_tensor_keeps_the_graph():
    check_gradients(lambda x: np.stack([row * (index + 1) for index, row in enumerate(x)]), _values(4, (3, 2)))


def test_copyto_records_like_setitem():
    def copy_into(x, v):
        y = x * 1
        np.copyto(y, v * 3)
        return y + x

    check_gradients(copy_into, _values(5, (2, 3)), _values(6, (3,)))
