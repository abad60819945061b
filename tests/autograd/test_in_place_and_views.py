"""In-place changes against torch: retain_grad follows the new value, views of activations changed in place,
in-place operations on plain arrays, and inputs a Function (or a full backward hook) returned as views."""

import numpy as np
import pytest
import torch

import modulecraft

from .conftest import lib_leaf, on_both, outcome


@pytest.mark.parametrize("change", ["imul", "setitem", "relu"])
def test_retain_grad_reports_the_gradient_of_the_value_after_an_in_place_change(change):
    def scenario(lib):
        x = lib_leaf(lib, [1.0, -2.0, 3.0])
        y = x * 2
        y.retain_grad()
        if change == "imul":
            y *= 3
        elif change == "setitem":
            y[0] = 5.0
        else:
            lib.nn.functional.relu(y, inplace=True)
        (y * y).sum().backward()
        return y.grad, x.grad, y.retains_grad

    on_both(scenario)


@pytest.mark.parametrize("case", ["iadd", "imul_by_tracked", "use_the_view", "setitem_into_view", "view_of_view",
                                  "select_then_relu"])
def test_an_in_place_change_of_a_view_of_an_activation_has_torchs_gradients(case):
    def scenario(lib):
        x = lib_leaf(lib, [[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
        w = lib_leaf(lib, [0.5, -1.0])
        y = x * 2
        y.retain_grad()
        if case == "iadd":
            y[0, 0:2] += 1
            loss = (y * y).sum()
        elif case == "imul_by_tracked":
            view = y[1, 1:]
            view *= w
            loss = (y * y).sum()
        elif case == "use_the_view":
            view = y[:, 1]
            view.retain_grad()
            view += w
            loss = (view * view).sum() + y.sum()
        elif case == "setitem_into_view":
            view = y[1]
            view[0:2] = w * 3
            loss = (y * y).sum() + (view * 2).sum()
        elif case == "view_of_view":
            inner = y[1][1:]
            inner -= w
            loss = (y * y).sum()
        else:
            lib.nn.functional.relu(y[1], inplace=True)
            loss = (y * y).sum()
        loss.backward()
        return y, x.grad, w.grad, y.grad, (view.grad if case == "use_the_view" else None)

    on_both(scenario)


def test_a_view_that_is_no_indexing_is_refused_clearly():
    """Documented in test_documented_differences.py: torch records it, modulecraft refuses with this message."""
    x = lib_leaf(modulecraft, [[1.0, 2.0], [3.0, 4.0]])
    y = x * 2
    with pytest.raises(NotImplementedError, match="only for views made by indexing"):
        y.T[0] += 1
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0][0:1] += 1


def test_an_in_place_operation_on_a_plain_array_with_a_tracked_tensor_fails_clearly():
    """torch makes the plain tensor part of the graph; numpy cannot: documented in test_documented_differences.py."""
    x = lib_leaf(modulecraft, [1.0, 2.0])
    plain = np.ones(2, dtype=np.float32)
    with pytest.raises(RuntimeError, match="in-place operation on a plain numpy array cannot record the gradient"):
        plain += x
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        np.add(x, 1, out=plain)
    with modulecraft.no_grad():
        plain += x
    assert plain.tolist() == [2.0, 3.0]


def _hooked(lib, change):
    class Model(lib.nn.Module):
        def forward(self, x):
            if change == "base":
                outer.add_(1) if lib is torch else np.add(outer, 1, out=outer)
            else:
                x.add_(1) if lib is torch else np.add(x, 1, out=x)
            return x * 2

    model = Model()
    model.register_full_backward_hook(lambda *args: None)
    outer = lib_leaf(lib, [1.0, 2.0]) * 1
    return model(outer)


@pytest.mark.parametrize("change", ["base", "view"])
def test_a_full_backward_hooks_input_may_not_be_used_after_its_base_changed_in_place(change):
    phrases = ("Output 0 of BackwardHookFunction is a view and",
               "its base or another view of its base has been modified inplace" if change == "base"
               else "is being modified inplace", "You can fix this by cloning the output of the custom Function.")
    assert on_both(lambda lib: outcome(lambda: _hooked(lib, change), *phrases)) == ("RuntimeError", list(phrases))


def test_an_input_a_function_returned_as_is_may_not_be_used_after_its_base_changed():
    def scenario(lib):
        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad

        base = lib_leaf(lib, [1.0, 2.0]) * 1
        out = Identity.apply(base)
        with lib.no_grad():
            base += 1
        with lib.no_grad():
            unrecorded = out * 2
        return unrecorded, outcome(lambda: out * 2, "Output 0 of Identity is a view and its base or another view")

    assert on_both(scenario)[1] == ("RuntimeError", ["Output 0 of Identity is a view and its base or another view"])


@pytest.mark.parametrize("change", ["imul", "setitem", "through_another_view"])
def test_a_view_taken_before_its_base_changed_in_place_reads_the_new_value(change):
    """torch replays the view on the base's new value; so does modulecraft for views made by indexing."""
    def scenario(lib):
        x = lib_leaf(lib, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        y = x * 2
        row, inner = y[1], y[1][0:2]
        if change == "imul":
            y *= x
        elif change == "setitem":
            y[1, 1] = x[0, 0] * 10
        else:
            y[0] += x[1]
        ((row * row).sum() + (inner * 3).sum()).backward()
        return x.grad, row, inner

    on_both(scenario)


def test_a_view_made_otherwise_is_refused_clearly_once_its_base_changed_in_place():
    """Documented in test_documented_differences.py: numpy views do not record how to replay them."""
    x = lib_leaf(modulecraft, [[1.0, 2.0], [3.0, 4.0]])
    y = x * 2
    flat = y.reshape(4)
    y *= x
    with pytest.raises(NotImplementedError, match="take the view .* after the in-place change"):
        (flat * 2).sum()


@pytest.mark.parametrize("change", ["iadd", "setitem", "relu"])
def test_a_view_changed_in_place_after_its_base_was_reads_the_bases_new_value_first(change):
    def scenario(lib):
        x = lib_leaf(lib, [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
        y = x * 2
        row = y[0]
        y *= x
        if change == "iadd":
            row += x[1]
        elif change == "setitem":
            row[1:] = x[1, :2] * 3
        else:
            lib.nn.functional.relu(row, inplace=True)
        (y * y).sum().backward()
        return x.grad, y

    on_both(scenario)
