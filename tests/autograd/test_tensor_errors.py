"""torch's errors for misuses of tensors and of the engine: deleting attributes, ``.data = None``, integer
tensors requiring grad, gradient counts, empty ``inputs``, hooks returning values, freed index nodes."""

import numpy as np
import pytest

from .conftest import lib_leaf, on_both, outcome


@pytest.mark.parametrize("name, expected", [
    ("data", ("RuntimeError", ["Deleting tensor data is not allowed. Delete tensor instead!"])),
    ("requires_grad", ("RuntimeError", ["requires_grad must be a bool"])),
    ("_backward_hooks", ("RuntimeError", ["Deletion of _backwards_hooks not allowed!"])),
    ("_post_accumulate_grad_hooks", ("RuntimeError", ["Deletion of _post_accumulate_grad_hooks not allowed!"])),
    ("grad_fn", ("AttributeError", [])),
    ("is_leaf", ("AttributeError", [])),
    ("grad", ("returned", None)),
])
def test_deleting_tensor_attributes_raises_torchs_exceptions(name, expected):
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        x.register_hook(lambda grad: None)
        x.register_post_accumulate_grad_hook(lambda t: None)
        phrases = expected[1] if expected[0] != "returned" else ()
        return outcome(lambda: delattr(x, name), *phrases)

    assert on_both(scenario) == expected


def test_data_must_be_assigned_a_tensor():
    phrase = "Variable data has to be a tensor, but got NoneType"

    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        return outcome(lambda: setattr(x, "data", None), phrase)

    assert on_both(scenario) == ("TypeError", [phrase])


def test_an_integer_tensor_cannot_require_grad():
    phrase = "only Tensors of floating point and complex dtype can require gradients"

    def scenario(lib):
        x = lib.tensor(np.array([1, 2]))
        return outcome(lambda: setattr(x, "requires_grad", True), phrase)

    assert on_both(scenario) == ("RuntimeError", [phrase])


def test_gradients_are_paired_with_outputs_as_torch_pairs_them():
    """Fewer gradients than outputs: torch's wording; more: the extra ones are ignored."""
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        one = lib.tensor(np.float32(1.0))
        fewer = outcome(lambda: lib.autograd.backward([(x * 2).sum(), (x * 3).sum()], [one]),
                        "got 2 tensors and 1 gradients")
        fewer_grad = outcome(lambda: lib.autograd.grad([(x * 2).sum(), (x * 3).sum()], [x], [one]),
                             "got 2 tensors and 1 gradients")
        none = outcome(lambda: lib.autograd.backward([(x * 2).sum()], []), "got 1 tensors and 0 gradients")
        lib.autograd.backward([(x * 2).sum()], [one, one])
        return fewer, fewer_grad, none, x.grad

    assert on_both(scenario)[:3] == (("RuntimeError", ["got 2 tensors and 1 gradients"]),) * 2 + (
        ("RuntimeError", ["got 1 tensors and 0 gradients"]),)


def test_autograd_grad_refuses_empty_inputs():
    phrase = "`inputs` argument to `grad()` cannot be empty."

    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        return [outcome(lambda: lib.autograd.grad((x * 2).sum(), inputs), phrase) for inputs in ([], ())]

    assert on_both(scenario) == [("RuntimeError", [phrase])] * 2


def test_post_accumulate_grad_hooks_see_grad_and_must_return_none():
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        seen = []
        handle = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad))
        for _ in range(2):
            (x * 3).sum().backward()
            seen.append(seen[-1] is x.grad)
        handle.remove()
        x.register_post_accumulate_grad_hook(lambda t: t.grad * 2)
        returned = outcome(lambda: (x * 3).sum().backward(), "Tensor post accumulate grad hooks should return None.")
        return seen, returned

    assert on_both(scenario)[1] == ("RuntimeError", ["Tensor post accumulate grad hooks should return None."])


@pytest.mark.parametrize("index", ["slice", "select", "integer_array", "mask"])
def test_backward_twice_through_indexing_raises_where_torch_does(index):
    """torch saves index tensors (integer arrays, masks), not slices: only those nodes are freed."""
    phrase = "Trying to backward through the graph a second time"

    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0, 3.0])
        key = {"slice": slice(0, 2), "select": 1, "integer_array": np.array([0, 0, 2]),
               "mask": np.array([True, False, True])}[index]
        if lib.__name__ == "torch" and isinstance(key, np.ndarray):
            key = lib.as_tensor(key)
        loss = x[key].sum() if index != "select" else x[key]  # nothing saved but by the index node
        loss.backward()
        return outcome(loss.backward, phrase), x.grad

    on_both(scenario)
