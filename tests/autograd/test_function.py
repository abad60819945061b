"""Custom Functions against torch.autograd.Function: nodes, saved tensors, several outputs, hooks, errors."""

import numpy as np
import pytest
import torch
from torch.nn.modules._functions import BackwardHookFunction

import modulecraft
from modulecraft import autograd
from modulecraft.nn.modules._functions import BackwardHookFunction as OurBackwardHookFunction


def _scale_function(base):
    class Scale(base):
        """Two outputs: x * k and x + 1; backward sees zeros for the output that got no gradient."""

        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * k, x + 1

        @staticmethod
        def backward(ctx, grad_scaled, grad_shifted):
            ctx.seen = (np.asarray(grad_scaled).tolist(), np.asarray(grad_shifted).tolist())
            return grad_scaled * ctx.k + grad_shifted, None

    return Scale


def test_a_function_with_two_outputs_records_one_node_and_fills_in_zeros():
    results = []
    for lib, base in ((modulecraft, autograd.Function), (torch, torch.autograd.Function)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        scaled, shifted = _scale_function(base).apply(x, 3.0)
        node = scaled.grad_fn
        assert node is shifted.grad_fn and node.name() == "ScaleBackward"
        assert len(node.next_functions) == 1, "non-tensor arguments get no edge"
        scaled.sum().backward()
        results.append((np.asarray(x.grad).tolist(), node.seen))
    assert results[0] == results[1] == ([3.0, 3.0], ([1.0, 1.0], [0.0, 0.0]))



def _mixed_outputs(base):
    class Mixed(base):
        """Outputs that are not tensors (a number, None, a flag, a string) between two that are."""

        @staticmethod
        def forward(ctx, x, scale):
            return scale, x * scale, None, True, x + 1, "bar"

        @staticmethod
        def backward(ctx, *grads):
            ctx.seen = [None if g is None else np.asarray(g).tolist() for g in grads]
            return grads[1] * 2 + grads[4], None

    return Mixed


def test_outputs_that_are_not_tensors_get_none_where_tensors_get_zeros():
    """torch's materialize_grads fills in zeros for tensor outputs only: the others always give backward None."""
    results = []
    for lib, base in ((modulecraft, autograd.Function), (torch, torch.autograd.Function)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        scale, scaled, nothing, flag, shifted, text = outputs = _mixed_outputs(base).apply(x, 3)
        scaled.sum().backward()
        results.append(([type(o).__name__ for o in (scale, nothing, flag, text)], scaled.grad_fn.seen,
                        np.asarray(x.grad).tolist()))
    assert results[0] == results[1] == (["int", "NoneType", "bool", "str"],
                                        [None, [1.0, 1.0], None, None, [0.0, 0.0], None], [2.0, 2.0])

def _identity(base):
    class Identity(base):
        @staticmethod
        def forward(ctx, *args):
            ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
            return args

        @staticmethod
        def backward(ctx, *grads):
            return grads

    return Identity


def _node_hooks_on_an_identity(lib, apply):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    u = lib.tensor([5.0, 5.0])
    out, passive = apply(x, u)
    assert out is not x and passive is not u and not passive.requires_grad and passive.grad_fn is None
    calls = []
    out.grad_fn.register_prehook(lambda grad_outputs: calls.append(("pre", _listed(grad_outputs))))
    out.grad_fn.register_hook(lambda grad_inputs, grad_outputs: calls.append(
        ("post", _listed(grad_inputs), _listed(grad_outputs))))
    (out * 2).sum().backward()
    return calls, np.asarray(x.grad).tolist(), out.grad_fn.name(), len(out.grad_fn.next_functions)


def _listed(grads):
    return [None if g is None else np.asarray(g).tolist() for g in grads]


def test_node_hooks_on_an_identity_function_see_what_torchs_see():
    """Pre-hooks get the raw gradients (None for an output without one), hooks get backward's results
    (materialized zeros) and the raw gradients; module backward hooks rely on this (next test)."""
    ours = _node_hooks_on_an_identity(modulecraft, _identity(autograd.Function).apply)
    theirs = _node_hooks_on_an_identity(torch, _identity(torch.autograd.Function).apply)
    assert ours == theirs


def test_the_identity_node_of_module_backward_hooks_behaves_as_torchs_function():
    """modulecraft's BackwardHookFunction, a Function as torch's: the same node name, edges, hooks' view and
    gradients; with one tensor and no hook it runs on the engine's plain path."""
    ours = _node_hooks_on_an_identity(modulecraft, OurBackwardHookFunction.apply)
    theirs = _node_hooks_on_an_identity(torch, BackwardHookFunction.apply)
    assert ours == theirs
    assert ours[2] == "BackwardHookFunctionBackward"
    gradients = []
    for lib, apply in ((modulecraft, OurBackwardHookFunction.apply),
                       (torch, BackwardHookFunction.apply)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (out,) = apply(x * 1)
        (out * 3).sum().backward()
        gradients.append(np.asarray(x.grad).tolist())
    assert gradients[0] == gradients[1] == [3.0, 3.0]


def _recorded_through(apply) -> list:
    """What ``apply`` records and returns for a tensor that requires grad, its view, one that does not and a plain
    array, and what backward then gives: every attribute the node and the outputs carry, and the gradients."""
    x = modulecraft.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x * 2)[0]
    arguments = (x, y, modulecraft.tensor([5.0]), np.array([6.0]))
    outputs = apply(*arguments)
    node = outputs[0].grad_fn
    seen = []
    node.register_hook(lambda grad_inputs, grad_outputs: seen.append((_listed(grad_inputs), _listed(grad_outputs))))
    described = [(type(node).__name__, [(edge and edge.name(), nr) for edge, nr in node.next_functions],
                  node.next_functions[0][0] is x._grad_accumulator(), node.needs_input_grad,
                  [[t is argument for argument in arguments] for t in node.non_differentiable], node._input_meta,
                  node._output_meta, node.num_outputs, node._saved, node._versions, node.materialize_grads)]
    for argument, out in zip(arguments, outputs):
        described.append((type(out).__name__, np.asarray(out).tolist(), getattr(out, "requires_grad", None),
                          getattr(out, "_output_nr", None), getattr(out, "_function_output", None),
                          out is argument, getattr(out, "_vc", None) is getattr(argument, "_vc", 0),
                          getattr(out, "grad_fn", None) is node))
    (outputs[0] * 3).sum().backward(retain_graph=True)  # the second output gets no gradient: zeros
    (outputs[0].sum() + outputs[1].sum()).backward()
    with pytest.raises(RuntimeError, match="view was created inside a custom Function"):
        outputs[0] *= 2
    return described, seen, np.asarray(x.grad).tolist()


def test_backward_hook_functions_short_path_records_and_returns_what_the_general_one_does():
    """BackwardHookFunction itself records its node without the general ``Function.apply`` and returns its
    gradients without calling ``backward`` (every call of a module with full backward hooks): the same node, the
    same outputs, the same gradients as a subclass of it, which goes the general way, as a learner's does."""
    general = type("BackwardHookFunction", (OurBackwardHookFunction,), {})  # named alike, so the names compare
    assert _recorded_through(OurBackwardHookFunction.apply) == _recorded_through(general.apply)


def _saving(base):
    class Square(base):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    return Square


def test_saved_tensors_are_checked_for_in_place_changes_and_freed():
    for lib, base, no_grad in ((modulecraft, autograd.Function, modulecraft.no_grad),
                               (torch, torch.autograd.Function, torch.no_grad)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        hidden = x * 1
        out = _saving(base).apply(hidden)
        with no_grad():
            hidden += 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
        out = _saving(base).apply(x)
        loss = out.sum()
        loss.backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            loss.backward()
        assert np.asarray(x.grad).tolist() == [2.0, 4.0]


def test_a_wrong_number_of_gradients_raises_torchs_error():
    messages = []
    for lib, base in ((modulecraft, autograd.Function), (torch, torch.autograd.Function)):
        class Bad(base):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad, grad

        with pytest.raises(RuntimeError) as raised:
            Bad.apply(lib.tensor([1.0], requires_grad=True)).sum().backward()
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == "function BadBackward returned an incorrect number of gradients " \
                                         "(expected 1, got 2)"


def test_without_grad_apply_records_nothing():
    x = modulecraft.tensor([1.0], requires_grad=True)
    with modulecraft.no_grad():
        out = _saving(autograd.Function).apply(x)
    assert getattr(out, "grad_fn", None) is None


def test_forward_without_ctx_and_setup_context():
    results = []
    for lib, base in ((modulecraft, autograd.Function), (torch, torch.autograd.Function)):
        class Scaled(base):
            @staticmethod
            def forward(x, k):
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.k, None

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = Scaled.apply(x, 3.0)
        out.sum().backward()
        results.append((out.grad_fn.name(), np.asarray(x.grad).tolist()))
    assert results[0] == results[1] == ("ScaledBackward", [3.0, 3.0])
