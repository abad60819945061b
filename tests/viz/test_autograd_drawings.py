"""The backward half drawn: the recorded graph, and the walk stepped through as the walk it is given runs it."""
from __future__ import annotations

import heapq
import itertools
import re

import numpy as np
import torch

from modulecraft import Tensor
from modulecraft.autograd import engine
from modulecraft.viz import WalkStepper, draw_graph, text
from modulecraft.viz.autograd import FREED
from tests.autograd.node_order import node_order

from .test_without_dot import NOTICE, no_dot  # noqa: F401 - the fixture


def exercise_3(lib):
    """Chapter 10's exercise 3: loss = (exp(a) + a * b).sum(), its leaves."""
    a = lib.tensor([1.0, 2.0], requires_grad=True) if lib is torch else Tensor(np.array([1.0, 2.0]), requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True) if lib is torch else Tensor(np.array([3.0, 4.0]), requires_grad=True)
    exp = torch.exp if lib is torch else np.exp
    return (exp(a) + a * b).sum(), a, b


def torch_order():
    loss, a, b = exercise_3(torch)
    labels = {id(a): "AccumulateGrad(a)", id(b): "AccumulateGrad(b)"}
    order = node_order(loss, lambda node: labels.get(id(getattr(node, "variable", None)), node.name()))
    return order, a.grad.numpy(), b.grad.numpy()


def test_the_stepper_shows_the_engines_walk_in_torchs_order_and_runs_a_real_backward():
    loss, a, b = exercise_3(np)
    stepper = WalkStepper(loss, names={"a": a, "b": b})
    order, a_grad, b_grad = torch_order()
    assert [step.label for step in stepper.steps[:-1]] == order
    np.testing.assert_allclose(a.grad, a_grad)
    np.testing.assert_allclose(b.grad, b_grad)
    summed = next(step for step in stepper.steps if step.label == "AccumulateGrad(a)")
    np.testing.assert_allclose(summed.received[0], a_grad)  # both of a's gradients, summed by the walk
    assert [len(step.freed) for step in stepper.steps] == [0, 0, 0, 1, 1, 2, 2]  # Mul's then Exp's saved values


def oldest_first(roots, root_grads, dependencies, retain_graph, run_node):
    """A walk with a slip (the oldest ready node first): the stepper must show its order, not the engine's."""
    buffers, ready, tickets = {}, [], itertools.count()
    for (node, output_nr), grad in zip(roots, root_grads):
        buffers.setdefault(node, [None] * node.num_outputs)[output_nr] = grad
        heapq.heappush(ready, (node._sequence_nr, next(tickets), node))
    while ready:
        node = heapq.heappop(ready)[2]
        sent = run_node(node, buffers.pop(node))
        for (following, output_nr), grad in zip(node.next_functions, sent):
            if following is None:
                continue
            buffer = buffers.setdefault(following, [None] * following.num_outputs)
            buffer[output_nr] = grad if buffer[output_nr] is None else buffer[output_nr] + grad
            dependencies[following] -= 1
            if dependencies[following] == 0:
                heapq.heappush(ready, (following._sequence_nr, next(tickets), following))


def test_the_stepper_observes_the_walk_it_is_given_and_the_counts_that_walk_leaves():
    loss, a, b = exercise_3(np)
    stepper = WalkStepper(loss, walk=oldest_first, names={"a": a, "b": b})
    order = [step.label for step in stepper.steps[:-1]]
    assert order == ["SumBackward0", "AddBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad(a)",
                     "AccumulateGrad(b)"]
    assert order != torch_order()[0]
    assert all(step.freed == () for step in stepper.steps)  # this walk never frees: the stepper says so
    waiting = {step.label: dict(step.counts) for step in stepper.steps}
    accumulate_a = next(node for node in stepper.nodes if getattr(node, "variable", None) is a)
    assert waiting["MulBackward0"][accumulate_a] == 1  # Exp has delivered its part; Mul's is still to come


def test_the_graph_drawing_names_nodes_leaves_saved_values_and_edges():
    loss, a, b = exercise_3(np)
    rendering = text.render(draw_graph(loss, {"a": a, "b": b}).source)
    for expected in ("SumBackward0", "AddBackward0", "ExpBackward0", "MulBackward0", "leaf a: (2,)",
                     "leaf b: (2,)", "saved: (2,), (2,)", "[1] MulBackward0"):
        assert expected in rendering
    loss.backward()
    assert FREED in text.render(draw_graph(loss, {"a": a, "b": b}).source)


def test_a_torch_graph_draws_the_same_nodes_and_edges():
    def shape_of(rendering):
        """The drawing's nodes and edges (torch keeps its saved values and numbers elsewhere, and prefixes a name)."""
        lines = [re.sub(r"sequence number \d+|saved: .*|torch::autograd::", "", line)
                 for line in rendering.splitlines()]
        return [line for line in lines if line.strip(" │")]

    loss, a, b = exercise_3(np)
    t_loss, t_a, t_b = exercise_3(torch)
    ours = text.render(draw_graph(loss, {"a": a, "b": b}).source)
    theirs = text.render(draw_graph(t_loss, {"a": t_a, "b": t_b}).source)
    assert shape_of(ours) == shape_of(theirs)


def test_the_stepper_frames_show_what_was_true_at_each_step():
    loss, a, b = exercise_3(np)
    stepper = WalkStepper(loss, names={"a": a, "b": b})
    first = text.render(stepper.drawing(0).source)
    assert FREED not in first and "running on 1." in first and "0 of 2 gradients in" in first
    assert FREED in text.render(stepper.drawing(len(stepper.steps) - 1).source)
    assert "run_node(AccumulateGrad(a)) on [[ 5.718, 11.389]]" in str(stepper)


def test_without_dot_the_stepper_and_the_graph_show_as_text(no_dot):  # noqa: F811
    loss, a, b = exercise_3(np)
    bundle = draw_graph(loss, {"a": a})._repr_mimebundle_()
    assert NOTICE in bundle["text/plain"] and "leaf a: (2,)" in bundle["text/plain"]
    assert "MulBackward0" in WalkStepper(loss)._repr_html_()
