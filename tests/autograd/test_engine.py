"""The engine against torch.autograd: accumulation, order, hooks, errors, freeing, grad(), grad mode."""

import re
import warnings

import numpy as np
import pytest
import torch

import modulecraft
from modulecraft import autograd

from .conftest import leaves
from .node_order import node_order


def test_a_small_network_has_torchs_gradients():
    rng = np.random.default_rng(0)
    (x, w, b), (tx, tw, tb) = leaves(rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4))
    loss = (np.tanh(x @ w.T + b) ** 2).mean(axis=0).sum() + np.exp(x).var() - np.log(np.abs(x) + 1).max()
    expected = ((tx @ tw.T + tb).tanh() ** 2).mean(0).sum() + tx.exp().var(unbiased=False) - (tx.abs() + 1).log().max()
    loss.backward()
    expected.backward()
    assert np.isclose(float(loss), expected.item())
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12, atol=1e-12)
        assert type(ours.grad) is np.ndarray


def test_gradients_accumulate_across_backward_calls():
    (x,), (tx,) = leaves([1.0, 2.0])
    for _ in range(3):
        (x * x).sum().backward()
        (tx * tx).sum().backward()
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())
    assert list(x.grad) == [6.0, 12.0]


def test_a_gradient_shared_by_two_leaves_is_not_aliased():
    (a, b), _ = leaves([1.0], [2.0])
    (a + b).sum().backward()
    (a + b).sum().backward()
    assert list(a.grad) == [2.0] and list(b.grad) == [2.0]
    assert not np.shares_memory(a.grad, b.grad)


def _first_grad_cases(lib):
    """Ways a leaf's first gradient can arrive, each with the array it might alias (per library)."""
    Function = torch.autograd.Function if lib is torch else modulecraft.autograd.Function
    address = (lambda a: a.data_ptr()) if lib is torch else (lambda a: a.__array_interface__["data"][0])
    aliased = (lambda a, b: a.data_ptr() == b.data_ptr()) if lib is torch else np.shares_memory
    float64 = torch.float64 if lib is torch else np.float64
    array = torch.tensor if lib is torch else np.array  # gradients are plain arrays in modulecraft
    kept = array([5.0, 5.0], dtype=float64)
    made = []

    class Fresh(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            fresh = grad * 2
            made.append(address(fresh))  # not the array: a reference kept here would make torch copy it
            return fresh

    class Kept(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, grad):
            return kept

    def leaf():
        return lib.tensor([1.0, 2.0], dtype=float64, requires_grad=True)

    def fresh():
        x = leaf()
        Fresh.apply(x).sum().backward()
        return address(x.grad) == made.pop()

    def fresh_past_a_hook():
        x = leaf()
        x.register_hook(lambda grad: None)
        Fresh.apply(x).sum().backward()
        return address(x.grad) == made.pop()

    def kept_by_the_function():
        x = leaf()
        Kept.apply(x).sum().backward()
        return aliased(x.grad, kept)

    def given_to_backward():
        x, g = leaf(), array([1.0, 1.0], dtype=float64)
        x.backward(g)
        return aliased(x.grad, g)

    def passed_through_unchanged():
        x, g = leaf(), array([1.0, 1.0], dtype=float64)
        (x + 0).backward(g)
        return aliased(x.grad, g)

    def kept_by_a_hook():
        x, seen = leaf(), []
        x.register_hook(seen.append)
        (x * 2).sum().backward()
        return aliased(x.grad, seen[0])

    return [fresh, fresh_past_a_hook, kept_by_the_function, given_to_backward, passed_through_unchanged,
            kept_by_a_hook]


@pytest.mark.parametrize("case", range(6))
def test_the_first_gradient_becomes_grad_without_a_copy_only_when_nothing_else_holds_it(case):
    """torch adopts ("steals") a leaf's first gradient that no one else references, else copies it."""
    ours = _first_grad_cases(modulecraft)[case]()
    theirs = _first_grad_cases(torch)[case]()
    assert ours == theirs
    assert ours == (case < 2)


def test_a_linear_backward_allocates_the_weight_gradient_once():
    """The weight's gradient is computed laid out like the weight, then adopted: no second copy at the peak."""
    import tracemalloc

    layer = modulecraft.nn.Linear(512, 512)
    loss = layer(modulecraft.tensor(np.ones((4, 512), dtype=np.float32))).sum()
    tracemalloc.start()
    try:
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert layer.weight.grad.flags.c_contiguous
    assert peak < 1.25 * layer.weight.nbytes


def test_broadcasting_is_undone():
    (x, b, s), (tx, tb, ts) = leaves(np.ones((2, 3)), np.arange(3.0), [[2.0], [3.0]])
    ((x + b) * s).sum().backward()
    ((tx + tb) * ts).sum().backward()
    for ours, theirs in ((x, tx), (b, tb), (s, ts)):
        assert ours.grad.shape == theirs.grad.shape
        np.testing.assert_array_equal(ours.grad, theirs.grad.numpy())


def _returned_and_seen(lib, combine, *inputs):
    """The shapes a node returns for broadcast inputs, those its hook sees, and the leaves' .grad shapes."""
    y = combine(lib, *inputs)
    gradient = np.ones(y.shape)
    node = y.grad_fn
    returned = node(torch.tensor(gradient)) if lib is torch else node.backward(gradient)
    seen = []
    node.register_hook(lambda grad_inputs, grad_outputs: seen.append([tuple(g.shape) for g in grad_inputs]))
    y.backward(torch.tensor(gradient) if lib is torch else gradient)
    return [tuple(g.shape) for g in returned if g is not None], seen, [tuple(t.grad.shape) for t in inputs]


def _linear(lib, x, weight, bias):
    return (torch.nn.functional if lib is torch else modulecraft.nn.functional).linear(x, weight, bias)


@pytest.mark.parametrize("combine, shapes", [
    (lambda lib, x, b: x + b, [(4, 3), (3,)]), (lambda lib, x, b: x * b, [(4, 3), (1, 3)]),
    (lambda lib, x, b: b - x, [(4, 3), (4, 1)]), (_linear, [(4, 3), (2, 3), (2,)])])
def test_nodes_return_the_outputs_shape_and_the_engine_sums_it_as_torchs(combine, shapes):
    """As torch's formulas, AddBackward0, MulBackward0, SubBackward0 and AddmmBackward0 return a broadcast input's
    gradient with the output's shape; the engine sums it to the input's (validate_outputs) before the node's hooks."""
    ours, theirs = leaves(*[np.arange(float(np.prod(shape))).reshape(shape) for shape in shapes])
    assert _returned_and_seen(modulecraft, combine, *ours) == _returned_and_seen(torch, combine, *theirs)


def test_a_gradient_of_a_shape_no_broadcast_explains_is_refused_naming_the_node(monkeypatch):
    """torch's engine checks every node's gradients against the shapes of their inputs: a (1,) or 0-d gradient for
    a (3,) input is refused (the input's shape does not broadcast to it), by torch's message."""
    from modulecraft.autograd.ops.elementwise import MulBackward0

    for wrong in (np.ones(1), np.float64(1.0), np.ones((2, 4))):
        monkeypatch.setattr(MulBackward0, "gradients", lambda self, grad, first, second, wrong=wrong: (grad, wrong))
        (x, b), _ = leaves(np.ones((2, 3)), np.ones(3))
        with pytest.raises(RuntimeError) as raised:
            (x * b).sum().backward()
        assert str(raised.value) == (f"Function MulBackward0 returned an invalid gradient at index 1 - got "
                                     f"{list(np.shape(wrong))} but expected shape compatible with [3]")


def test_node_names_and_next_functions_match_torch():
    (x, w), (tx, tw) = leaves(np.ones((2, 3)), np.ones((4, 3)))

    def structure(node):
        if node is None:
            return None
        name = node.name().replace("torch::autograd::", "")
        return name, tuple((structure(n), nr) for n, nr in node.next_functions)

    cases = [lambda a, b: a @ b.T + 1, lambda a, b: 1 - a, lambda a, b: a ** 2 * 3, lambda a, b: 2 ** a,
             lambda a, b: -a[0], lambda a, b: a[[0, 1]], lambda a, b: a[0:1], lambda a, b: a.mean(),
             lambda a, b: a.reshape(3, 2), lambda a, b: a / b[:2], lambda a, b: a.T, lambda a, b: a.round(),
             lambda a, b: a.clip(0, 1) if isinstance(a, np.ndarray) else a.clamp(0, 1)]
    for build in cases:
        assert structure(build(x, w).grad_fn) == structure(build(tx, tw).grad_fn)
    assert structure(x.sum(axis=0).grad_fn) == structure(tx.sum(0).grad_fn)
    assert x.grad_fn is None and x.is_leaf and not (x * 2).is_leaf


def test_accumulate_grad_node_is_shared_while_a_graph_holds_it():
    (x,), _ = leaves([1.0])
    y, z = x * 2, x * 3
    assert y.grad_fn.next_functions[0][0] is z.grad_fn.next_functions[0][0]
    assert y.grad_fn.next_functions[0][0].variable is x


def _hook_order(lib, x):
    calls = []
    y = x * 2
    z = y * y
    y.register_hook(lambda g: calls.append("tensor y"))
    x.register_hook(lambda g: calls.append("tensor x"))
    z.grad_fn.register_prehook(lambda go: calls.append("pre z"))
    z.grad_fn.register_hook(lambda gi, go: calls.append("post z"))
    y.grad_fn.register_prehook(lambda go: calls.append("pre y"))
    y.grad_fn.register_hook(lambda gi, go: calls.append("post y"))
    y.retain_grad()
    z.sum().backward()
    return calls, lib_to_numpy(y.grad)


def _leaf_hook_order(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    accumulate = y.grad_fn.next_functions[0][0]
    calls = []
    x.register_hook(lambda g: calls.append("tensor x"))
    accumulate.register_prehook(lambda grad_outputs: calls.append("pre accumulate"))
    accumulate.register_hook(lambda grad_inputs, grad_outputs: calls.append(
        ("post accumulate node", len(grad_inputs), len(grad_outputs))))
    x.register_post_accumulate_grad_hook(lambda tensor: calls.append(("post accumulate", tensor is x)))
    y.sum().backward()
    return calls


def test_leaf_hooks_fire_in_torchs_order():
    assert _leaf_hook_order(modulecraft) == _leaf_hook_order(torch)


def lib_to_numpy(value):
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def test_hooks_fire_in_torchs_order_and_retain_grad_keeps_the_gradient():
    (x,), (tx,) = leaves([1.0, 2.0])
    ours, theirs = _hook_order(modulecraft, x), _hook_order(torch, tx)
    assert ours[0] == theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])


def _replacing_hooks(x):
    y = x * 3
    y.register_hook(lambda g: g * 10)
    y.grad_fn.register_prehook(lambda go: (go[0] + 1,))
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 2, gi[1]))
    y.sum().backward()
    return lib_to_numpy(x.grad)


def test_hooks_may_replace_gradients_as_torchs_do():
    (x,), (tx,) = leaves([1.0, 2.0])
    np.testing.assert_array_equal(_replacing_hooks(x), _replacing_hooks(tx))


def test_removed_hooks_do_not_fire():
    (x,), _ = leaves([1.0])
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    (x * 2).sum().backward()
    assert calls == []


def _message(action):
    with pytest.raises(RuntimeError) as raised:
        action()
    return str(raised.value)


def _same_error(ours, theirs, phrase):
    ours_message, theirs_message = _message(ours), _message(theirs)
    assert phrase in theirs_message, theirs_message
    assert phrase in ours_message, ours_message


def test_classic_mistakes_raise_torchs_errors():
    (x,), (tx,) = leaves([1.0, 2.0])
    _same_error(lambda: (x * 2).backward(), lambda: (tx * 2).backward(),
                "grad can be implicitly created only for scalar outputs")
    _same_error(lambda: modulecraft.tensor([1.0]).backward(),
                lambda: torch.tensor([1.0]).backward(),
                "element 0 of tensors does not require grad and does not have a grad_fn")
    _same_error(lambda: modulecraft.tensor([1, 2], requires_grad=True),
                lambda: torch.tensor([1, 2], requires_grad=True),
                "Only Tensors of floating point and complex dtype can require gradients")
    _same_error(lambda: modulecraft.nn.Parameter(np.array([1, 2])), lambda: torch.nn.Parameter(torch.tensor([1, 2])),
                "Only Tensors of floating point and complex dtype can require gradients")

    def twice(lib_x):
        loss = (lib_x * lib_x).sum()
        loss.backward()
        loss.backward()

    _same_error(lambda: twice(x), lambda: twice(tx), "Trying to backward through the graph a second time")

    def modified(lib_x):
        hidden = lib_x * 1
        loss = (hidden * hidden).sum()
        hidden += 1
        loss.backward()

    _same_error(lambda: modified(x), lambda: modified(tx),
                "one of the variables needed for gradient computation has been modified by an inplace operation")


@pytest.mark.parametrize("write", ["iadd", "setitem", "out", "fill"])
def test_every_in_place_write_bumps_the_version(write):
    (x,), _ = leaves([1.0, 2.0])
    hidden = x * 1
    loss = (hidden * hidden).sum()
    before = hidden._version
    with modulecraft.no_grad():
        if write == "iadd":
            hidden += 1
        elif write == "setitem":
            hidden[0] = 5
        elif write == "out":
            np.multiply(hidden, 2, out=hidden)
        else:
            hidden.fill(0)
    assert hidden._version == before + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_view_shares_the_version_counter_of_its_base():
    (x,), (tx,) = leaves([1.0, 2.0, 3.0])
    for lib_x in (x, tx):
        base = lib_x * 1
        view = base[1:]
        loss = (base * base).sum()
        with (modulecraft.no_grad() if lib_x is x else torch.no_grad()):
            view[0] = 7  # a write through the view changes what MulBackward0 saved
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_reading_grad_of_a_non_leaf_warns_as_torch():
    (x,), (tx,) = leaves([1.0])
    for hidden in (x * 2, tx * 2):
        with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf Tensor"):
            assert hidden.grad is None
    retained = x * 2
    retained.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert retained.grad is None and x.grad is None


def test_retain_graph_allows_a_second_backward():
    (x,), _ = leaves([1.0, 2.0])
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert list(x.grad) == [4.0, 8.0]


def test_higher_order_gradients_are_refused_clearly():
    (x,), _ = leaves([1.0])
    with pytest.raises(NotImplementedError, match="create_graph=True is not supported"):
        (x * x).sum().backward(create_graph=True)


def test_autograd_grad_returns_without_accumulating():
    (x, w), (tx, tw) = leaves([1.0, 2.0], [3.0, 4.0])
    ours = autograd.grad((x * w).sum(), [w, x])
    theirs = torch.autograd.grad((tx * tw).sum(), [tw, tx])
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b.numpy())
    assert x.grad is None and w.grad is None
    (unused,), (tunused,) = leaves([1.0])
    _same_error(lambda: autograd.grad((x * 2).sum(), [unused]), lambda: torch.autograd.grad((tx * 2).sum(), [tunused]),
                "The differentiated Tensor at index 0 appears to not have been used in the graph")
    assert autograd.grad((x * 2).sum(), [unused], allow_unused=True) == (None,)


def test_autograd_grad_of_an_intermediate_tensor():
    (x,), (tx,) = leaves([1.0, 2.0])
    hidden, thidden = x * 3, tx * 3
    (ours,) = autograd.grad((hidden * hidden).sum(), hidden)
    (theirs,) = torch.autograd.grad((thidden * thidden).sum(), thidden)
    np.testing.assert_array_equal(ours, theirs.numpy())


def test_no_grad_records_nothing_and_results_stay_plain_arrays():
    (x,), _ = leaves([1.0])
    with modulecraft.no_grad():
        assert type(x * 2) is np.ndarray
        with modulecraft.enable_grad():
            assert (x * 2).grad_fn is not None
    assert modulecraft.is_grad_enabled()

    @modulecraft.no_grad()
    def decorated():
        return modulecraft.is_grad_enabled()

    assert decorated() is False and modulecraft.is_grad_enabled()
    switch = modulecraft.set_grad_enabled(False)
    assert not modulecraft.is_grad_enabled()
    with switch:
        pass
    assert modulecraft.is_grad_enabled()


def test_numpy_functions_without_a_gradient_rule_refuse_to_drop_the_graph():
    (x,), _ = leaves([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="numpy.cumsum is not differentiable in modulecraft"):
        np.cumsum(x)
    with pytest.raises(NotImplementedError, match="numpy.sin is not differentiable in modulecraft"):
        np.sin(x)
    assert np.argmax(x) == 1 and bool(np.all(x > 0)) and type(x > 0) is np.ndarray
    assert type(np.zeros_like(x)) is np.ndarray
    with modulecraft.no_grad():
        assert type(np.cumsum(x)) is np.ndarray


def _ones(lib, shape):
    return torch.ones(shape) if lib is torch else np.ones(shape, dtype=np.float32)


HOOK_REPLACEMENTS = {
    "tensor hook, wrong shape": (lambda y, lib: y.register_hook(lambda g: _ones(lib, 5)),
                                 "has changed the size of value"),
    "tensor hook, wrong dtype": (lambda y, lib: y.register_hook(lambda g: g.astype("float64") if lib is modulecraft
                                                                else g.double()),
                                 "has changed the type of value (was "),
    "pre-hook, wrong shape": (lambda y, lib: y.grad_fn.register_prehook(lambda go: (_ones(lib, (5, 5)),)),
                              "has changed the size of value"),
    "pre-hook, two values": (lambda y, lib: y.grad_fn.register_prehook(lambda go: (go[0], go[0])),
                             "has returned an incorrect number of values (got 2, but expected 1)"),
    "hook, one value for two inputs": (lambda y, lib: y.grad_fn.register_hook(lambda gi, go: (gi[0],)),
                                       "has returned an incorrect number of values (got 1, but expected 2)"),
    "hook, a value where there was none": (lambda y, lib: y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0])),
                                           "can't replace a None gradient with a non-None value"),
}


@pytest.mark.parametrize("case", list(HOOK_REPLACEMENTS))
def test_what_hooks_return_is_checked_as_torch_checks_it(case):
    register, phrase = HOOK_REPLACEMENTS[case]
    for lib in (modulecraft, torch):
        x = lib.tensor(np.ones((2, 3), dtype=np.float32), requires_grad=True)
        y = x * 2
        register(y, lib)
        with pytest.raises(RuntimeError, match=re.escape(phrase)):
            y.sum().backward()


def _identity_function(base):
    class Passthrough(base):
        @staticmethod
        def forward(ctx, a):
            return a

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Passthrough


def test_an_input_a_function_returned_as_is_cannot_be_changed_in_place():
    messages = []
    for lib, base, no_grad in ((modulecraft, autograd.Function, modulecraft.no_grad),
                               (torch, torch.autograd.Function, torch.no_grad)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = _identity_function(base).apply(x * 1)
        with pytest.raises(RuntimeError) as raised:
            out[...] = out * 2
        messages.append(str(raised.value))
        with no_grad():
            out += 1  # allowed without grad mode, as torch
    assert messages[0] == messages[1]
    assert messages[0].startswith("Output 0 of Passthrough is a view and is being modified inplace.")


def _execution_order(lib):
    """Names of the nodes in the order they run, for a graph where two branches are ready at once."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    tanh, exp = (np.tanh, np.exp) if lib is modulecraft else (torch.tanh, torch.exp)
    first = tanh(x)
    second = exp(x * 3)
    loss = (first * second + first).sum()
    return [name.split("::")[-1] for name in node_order(loss)]


def test_nodes_run_in_torchs_order():
    """Ready nodes run newest first (highest sequence number), leaves' AccumulateGrad before any other."""
    assert _execution_order(modulecraft) == _execution_order(torch)


def test_several_roots_and_explicit_gradients():
    (x, w), (tx, tw) = leaves([1.0, 2.0], [3.0, -1.0])
    results = []
    for lib, a, b in ((modulecraft, x, w), (torch, tx, tw)):
        grad_module = autograd if lib is modulecraft else torch.autograd
        float64 = np.float64 if lib is modulecraft else torch.float64
        first, second = a * b, (a * a).sum()
        seed = lib.tensor([0.5, 2.0], dtype=float64)
        grad_module.backward([first, second], [seed, lib.tensor(3.0, dtype=float64)])
        shared = a * b
        (direct,) = grad_module.grad([shared, shared.sum()], [b], grad_outputs=[seed, None], retain_graph=True)
        out = a * 2
        out.backward(lib.tensor([1.0, -1.0], dtype=float64))
        results.append((lib_to_numpy(a.grad).tolist(), lib_to_numpy(b.grad).tolist(), lib_to_numpy(direct).tolist()))
    assert results[0] == results[1]


def _accumulation_order(lib, permutation):
    """The order in which the leaves' hooks fire when all their AccumulateGrad nodes are ready at once."""
    leaves_ = [lib.tensor([1.0, 2.0], requires_grad=True) for _ in permutation]
    fired = []
    for index, leaf in enumerate(leaves_):
        leaf.register_hook(lambda grad, index=index: fired.append(index))
    concatenate = torch.cat if lib is torch else np.concatenate
    concatenate([leaves_[i] for i in permutation]).sum().backward()
    return fired


@pytest.mark.parametrize("permutation", [[0, 1, 2, 3], [3, 1, 4, 0, 2], [4, 5, 1, 8, 3, 0, 7, 6, 2]])
def test_ready_accumulators_run_in_the_order_of_torchs_heap(permutation):
    """AccumulateGrad nodes share one sequence number: torch's heap, not their arrival, orders them."""
    assert _accumulation_order(modulecraft, permutation) == _accumulation_order(torch, permutation)


def _root_accumulation_order(lib, permutation):
    """The order in which the leaves' hooks fire when backward starts at the leaves themselves (all roots)."""
    leaves_ = [lib.tensor([1.0, 2.0], requires_grad=True) for _ in permutation]
    fired = []
    for index, leaf in enumerate(leaves_):
        leaf.register_hook(lambda grad, index=index: fired.append(index))
    ones = [torch.ones(2) if lib is torch else np.ones(2) for _ in permutation]
    lib.autograd.backward([leaves_[i] for i in permutation], ones)
    return fired


@pytest.mark.parametrize("permutation", [[0, 1, 2], [2, 0, 3, 1], [4, 5, 1, 8, 3, 0, 7, 6, 2]])
def test_accumulators_given_as_roots_run_in_the_order_of_torchs_heap(permutation):
    """Roots enter the ready queue one by one in the order given (torch's graph root sends them so), not heapified."""
    assert _root_accumulation_order(modulecraft, permutation) == _root_accumulation_order(torch, permutation)
