"""Small random expression graphs, built the same way on modulecraft and torch: values, gradients, node names.

Hypothesis picks the shapes, the operations and which earlier results they combine, so values are reused
(several paths into one node: gradients must be summed before it runs) and broadcast (a row vector, a
column): the graph structure, every leaf's gradient and retain_grad on an intermediate must match torch.
"""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import modulecraft

def _reversed_axes(x):
    """torch's spelling of numpy's ``.T`` for any number of axes (torch's ``.T`` is meant for 2-D only)."""
    return x.permute(*range(x.ndim)[::-1])


UNARY = {
    "tanh": (np.tanh, torch.tanh),
    "neg": (lambda x: -x, lambda x: -x),
    "square": (lambda x: x ** 2, lambda x: x ** 2),
    "soft log": (lambda x: np.log(1 + x * x), lambda x: torch.log(1 + x * x)),
    "bounded exp": (lambda x: np.exp(np.tanh(x)), lambda x: torch.exp(torch.tanh(x))),
    "scale": (lambda x: 0.5 * x - 1, lambda x: 0.5 * x - 1),
    "transpose twice": (lambda x: x.T.T, lambda x: _reversed_axes(_reversed_axes(x))),
}
BINARY = {
    "add": (np.add, torch.add),
    "sub": (np.subtract, torch.sub),
    "mul": (np.multiply, torch.mul),
    "soft div": (lambda x, y: x / (1 + y * y), lambda x, y: x / (1 + y * y)),
    "maximum": (np.maximum, torch.maximum),
}

operation = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 100)),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 100), st.integers(0, 100)),
)


def _build(lib_index, leaves, program, reduction_axis):
    """Run ``program`` (operations over earlier values) and reduce to a scalar; also return a middle value."""
    values = list(leaves)
    for step in program:
        if step[0] == "unary":
            function = UNARY[step[1]][lib_index]
            values.append(function(values[step[2] % len(values)]))
        else:
            function = BINARY[step[1]][lib_index]
            values.append(function(values[step[2] % len(values)], values[step[3] % len(values)]))
    middle = values[len(leaves) + len(program) // 2] if program else values[0]
    last = values[-1]
    reduction_axis = min(reduction_axis, last.ndim - 1)  # the last value may be the vector leaf's descendant
    reduced = last.sum(axis=reduction_axis) if lib_index == 0 else last.sum(dim=reduction_axis)
    return (reduced * reduced).sum(), middle


def _record_execution_order(root):
    """A pre-hook on every node of the graph but the leaves' (whose order among themselves torch leaves open)
    that notes the node's position in a depth-first listing: the list shows the order nodes ran in."""
    order, seen, stack = [], set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen or "AccumulateGrad" in node.name():
            continue
        seen.add(node)
        position = len(seen)
        node.register_prehook(lambda grad_outputs, position=position: order.append(position))
        stack.extend(next_node for next_node, _ in node.next_functions)
    return order


def _names(node):
    if node is None:
        return None
    return node.name().replace("torch::autograd::", ""), tuple(_names(n) for n, _ in node.next_functions)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 3), columns=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
       program=st.lists(operation, min_size=1, max_size=6), reduction_axis=st.sampled_from([0, 1]))
def test_random_graphs_match_torch(rows, columns, seed, program, reduction_axis):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((rows, columns)), rng.standard_normal((rows, columns)),
              rng.standard_normal(columns), rng.standard_normal((rows, 1))]
    ours = [modulecraft.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    loss, middle = _build(0, ours, program, reduction_axis)
    tloss, tmiddle = _build(1, theirs, program, reduction_axis)
    if middle.grad_fn is not None:
        middle.retain_grad()
        tmiddle.retain_grad()
    assert _names(loss.grad_fn) == _names(tloss.grad_fn)
    order, torch_order = _record_execution_order(loss), _record_execution_order(tloss)
    loss.backward()
    tloss.backward()
    assert order == torch_order, "nodes run in torch's order (dependencies first, then the newest)"
    np.testing.assert_allclose(float(loss), tloss.item(), rtol=1e-10)
    for leaf, tleaf in zip(ours, theirs):
        assert (leaf.grad is None) == (tleaf.grad is None)
        if leaf.grad is not None:
            np.testing.assert_allclose(leaf.grad, tleaf.grad.numpy(), rtol=1e-9, atol=1e-12)
    if middle.grad_fn is not None:
        assert (middle.grad is None) == (tmiddle.grad is None), "retained only when on a path to the loss"
        if middle.grad is not None:
            np.testing.assert_allclose(middle.grad, tmiddle.grad.numpy(), rtol=1e-9, atol=1e-12)
