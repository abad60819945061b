"""Details of torch's autograd that PyTorch's own tests rely on, against torch: calling a node, custom Function
classes (instances, once_differentiable, output_nr), the gradient AccumulateGrad's hooks see, hooks on a view
changed in place, and two error messages."""

import warnings

import numpy as np
import pytest
import torch
from torch.autograd.function import once_differentiable as torch_once_differentiable

import modulecraft

from .conftest import lib_leaf, on_both, outcome


def _function_base(lib):
    return torch.autograd.Function if lib is torch else modulecraft.autograd.Function


def _ones(lib, shape):
    return torch.ones(shape) if lib is torch else np.ones(shape, dtype=np.float32)


def _values(grads):
    """A node's gradients as lists rounded to float32's precision: torch's are tensors that may record a graph, ours
    plain arrays."""
    if isinstance(grads, tuple):
        return tuple(_values(grad) for grad in grads)
    if grads is None:
        return None
    return np.round(np.asarray(grads.detach() if isinstance(grads, torch.Tensor) else grads), 5).tolist()


def test_calling_a_node_runs_it_alone_and_checks_its_arguments():
    def scenario(lib):
        x, w = lib_leaf(lib, [1.0, 2.0]), lib_leaf(lib, [3.0, 4.0])
        product = x * w
        log = []
        product.grad_fn.register_hook(lambda grad_inputs, grad_outputs: log.append("post"))
        product.grad_fn.register_prehook(lambda grad_outputs: log.append("pre"))
        accumulate = product.grad_fn.next_functions[0][0]
        return (_values(product.grad_fn(_ones(lib, 2))), log,                   # two inputs: a tuple, no hooks
                _values((torch.exp(x) if lib is torch else np.exp(x)).grad_fn(_ones(lib, 2))),  # one input: unwrapped
                _values((x * 2).grad_fn(_ones(lib, 2))),                         # a constant: None
                _values(product.grad_fn(None)),
                _values(accumulate(_ones(lib, 2))), _values(x.grad),             # AccumulateGrad: (), accumulated
                outcome(lambda: product.grad_fn(), "expected 1 arguments, got 0 instead"),
                outcome(lambda: product.grad_fn(_ones(lib, 2), _ones(lib, 2)), "expected 1 arguments, got 2 instead"),
                outcome(lambda: product.grad_fn(grad=_ones(lib, 2)), "keyword arguments are not supported"),
                outcome(lambda: product.grad_fn([1.0, 1.0]), "argument 0 is not a Variable"))

    on_both(scenario)


def test_a_custom_functions_node_is_not_callable_and_its_outputs_are_numbered():
    def scenario(lib):
        class Split(_function_base(lib)):
            @staticmethod
            def forward(ctx, x):
                return x * 1, x * 2

            @staticmethod
            def backward(ctx, grad_first, grad_second):
                return grad_first + 2 * grad_second

        leaf = lib_leaf(lib, [1.0])
        first, second = Split.apply(leaf)
        return ([first.output_nr, second.output_nr, leaf.output_nr, (leaf * 1).output_nr],
                outcome(lambda: first.grad_fn(_ones(lib, 1), _ones(lib, 1)), "'SplitBackward' object is not callable"))

    on_both(scenario)


def test_an_instance_of_a_function_warns_and_refuses_to_be_called():
    def scenario(lib):
        class Legacy(_function_base(lib)):
            def forward(self, x):
                return x

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            instance = Legacy()
        return ([(w.category.__name__, "should not be instantiated. Methods on autograd functions are all static"
                  in str(w.message)) for w in caught],
                outcome(lambda: instance(lib_leaf(lib, [1.0])),
                        "Legacy autograd function with non-static forward method is deprecated. Please use "
                        "new-style autograd function with static forward method."))

    on_both(scenario)


def test_once_differentiable_runs_backward_with_grad_mode_off():
    def scenario(lib):
        decorate = torch_once_differentiable if lib is torch else modulecraft.autograd.function.once_differentiable
        seen = []

        class Scale(_function_base(lib)):
            @staticmethod
            def forward(ctx, x, factor, y):
                ctx.factor = factor
                ctx.save_for_backward(x, y)
                return x * factor + x * y

            @staticmethod
            @decorate
            def backward(ctx, grad):
                seen.append(lib.is_grad_enabled())
                x, y = ctx.saved_tensors
                return grad * (ctx.factor + y), None, grad * x

        x, y = lib_leaf(lib, [1.0, 2.0]), lib_leaf(lib, [3.0, 4.0])
        Scale.apply(x, 2.0, y).sum().backward()
        return seen, x.grad, y.grad, Scale.backward.__name__

    on_both(scenario)


@pytest.mark.parametrize("grad_before", [False, True])
def test_accumulate_grads_post_hook_sees_the_stored_grad_when_it_took_the_gradient(grad_before):
    """A node pre-hook replaces the leaf's gradient (0.2) and a post-accumulate hook adds 0.5 to .grad in place: the
    node's post-hook sees .grad itself (0.7) when AccumulateGrad took the new gradient as .grad, as torch steals it;
    with a .grad there before, the gradient it added (0.2)."""
    def scenario(lib):
        p = lib_leaf(lib, [1.0])
        if grad_before:
            p.grad = _ones(lib, 1) * 0
        seen = []
        node = (p * 1).grad_fn.next_functions[0][0]
        node.register_prehook(lambda grad_outputs: (grad_outputs[0] * 0 + 0.2,))
        p.register_post_accumulate_grad_hook(lambda tensor: tensor.grad.__iadd__(0.5) and None)
        node.register_hook(lambda grad_inputs, grad_outputs: seen.append(
            (round(float(grad_outputs[0][0]), 4), round(float(p.grad[0]), 4))))
        (p * 3).sum().backward()
        (p * 3).sum().backward()
        return seen

    on_both(scenario)


@pytest.mark.parametrize("change", ["multiply", "add", "setitem", "relu", "view_of_a_view"])
def test_a_hook_on_a_view_does_not_fire_once_the_view_was_changed_in_place(change):
    """The view's old node is replaced by the base's CopySlices, which runs the in-place operation itself."""
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0, 3.0, 4.0])
        y = x * 1
        view = y[0:3]
        log = []
        y.register_hook(lambda grad: log.append(("base", grad.tolist())))
        view.register_hook(lambda grad: log.append(("view", grad.tolist())))
        if change == "multiply":
            view *= 2
        elif change == "add":
            view += x[1:4]
        elif change == "setitem":
            view[1] = x[0] * 5
        elif change == "relu":
            lib.nn.functional.relu(view - 2.5, inplace=False)  # recorded, not in place: the hook stays
            view.register_hook(lambda grad: log.append(("view again", grad.tolist())))
            lib.nn.functional.relu(view, inplace=True)
        else:
            inner = view[1:3]
            inner.register_hook(lambda grad: log.append(("inner", grad.tolist())))
            inner *= 3
        ((view * 5).sum() + y.sum()).backward()
        return log, x.grad, y.grad_fn.name().endswith("CopySlices")

    on_both(scenario)


def test_the_messages_of_a_post_accumulate_hook_that_returns_and_of_requires_grad_on_integers():
    def scenario(lib):
        def backward_with_post_hook_returning(value):
            p = lib_leaf(lib, [1.0])
            p.register_post_accumulate_grad_hook(lambda tensor: value)
            return outcome(lambda: (p * 2).sum().backward(), "expected Variable, but hook returned 'int'",
                           "Tensor post accumulate grad hooks should return None.")

        integers = lib.tensor([1, 2])
        return (backward_with_post_hook_returning(1), backward_with_post_hook_returning(_ones(lib, 1)),
                outcome(lambda: integers.requires_grad_(),
                        "only Tensors of floating point dtype can require gradients"),
                outcome(lambda: setattr(integers, "requires_grad", True),
                        "only Tensors of floating point and complex dtype can require gradients"))

    on_both(scenario)


@pytest.mark.parametrize("exponent", [-1, 0.5, 0, 1, 2, 3.0, -2])
def test_every_power_records_pow_backward(exponent):
    """numpy's `**` computes some exponents by other functions (-1: reciprocal, 0.5: sqrt); torch records a power."""
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0, 4.0])
        y = x ** exponent
        y.sum().backward()
        return y.grad_fn.name(), y, x.grad
    on_both(scenario)
