"""Module backward hooks, zero_grad and requires_grad_ (issue 13, parts 3 and 6; chapter 10).

Every scenario runs forward and backward on torch and on modulecraft and compares what the hooks saw (their
order, the module, the grad_input and grad_output tuples with their Nones and values), what a hook's result
changed downstream (observed through the leaves' ``.grad``), and the warnings and errors with torch's key phrases.
Values are set identically on both sides (`set_values`), so gradients are compared number by number.
"""

import copy
import warnings

import numpy as np
import pytest

from hypothesis import given
from hypothesis import strategies as st

from .backends import backend
from .models import set_values
from .observe import differential, observe, raises
from .test_properties import PROPERTY_SETTINGS, build, graph_specs

INPUT = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
WEIGHTS = np.linspace(0.5, 2.0, 8, dtype=np.float32).reshape(4, 2)  # makes every output's gradient distinct


def warned(call, *phrases):
    """Call `call()`; return its result and the warnings it gave as (category, key phrases present)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [(w.category.__name__, tuple(p for p in phrases if p in str(w.message))) for w in caught]


def loss(lib, output):
    """A scalar whose gradient with respect to `output` (4, 2) is WEIGHTS."""
    return (output * lib.tensor(WEIGHTS)).sum()


def recorder(log, names, kind):
    """A hook that logs (kind, module name, the gradient tuples it was given) and returns None."""
    def full(module, *grads):
        log.append((kind, names[module], *grads))
    return full


def logged(names, pre=True):
    """Put recording full backward hooks (and pre-hooks) on each module of `names` (module -> name); return the log."""
    log = []
    for module in names:
        if pre:
            module.register_full_backward_pre_hook(recorder(log, names, "pre"))
        module.register_full_backward_hook(recorder(log, names, "hook"))
    return log


def linear(lib, *sizes, seed=0):
    return set_values(lib, lib.nn.Linear(*sizes), seed)


@differential
def test_full_hooks_see_the_gradients_of_inputs_and_outputs(lib):
    layer = linear(lib, 3, 2)
    log = logged({layer: "layer"})
    x = lib.leaf(INPUT)
    output = layer(x)
    before_backward = list(log)
    loss(lib, output).backward()
    return before_backward, log, x.grad, layer.weight.grad, layer.bias.grad, output.grad_fn.name()


def sequential_with_every_hook(lib, log):
    model = lib.nn.Sequential(linear(lib, 3, 3), lib.nn.ReLU(), linear(lib, 3, 2, seed=1))
    names = {module: name or "model" for name, module in model.named_modules()}
    for module in model.modules():
        module.register_forward_pre_hook(lambda m, args: log.append(("forward pre", names[m])))
        module.register_forward_hook(lambda m, args, out: log.append(("forward", names[m])))
        module.register_full_backward_pre_hook(lambda m, go: log.append(("backward pre", names[m])))
        module.register_full_backward_hook(lambda m, gi, go: log.append(("backward", names[m])))
        module.register_full_backward_pre_hook(lambda m, go: log.append(("backward pre, prepended", names[m])),
                                               prepend=True)
        module.register_full_backward_hook(lambda m, gi, go: log.append(("backward, prepended", names[m])),
                                           prepend=True)
    return model, names


@differential
def test_firing_order_of_local_and_global_hooks_forward_and_backward(lib):
    log = []
    model, names = sequential_with_every_hook(lib, log)
    lib.hooks.register_module_full_backward_pre_hook(lambda m, go: log.append(("global backward pre", names[m])))
    lib.hooks.register_module_full_backward_hook(lambda m, gi, go: log.append(("global backward", names[m])))
    lib.hooks.register_module_full_backward_hook(lambda m, gi, go: log.append(("second global", names[m])))
    output = model(lib.leaf(INPUT))
    log.append("backward starts")
    loss(lib, output).backward()
    return log


@differential
def test_module_with_parameters_and_children(lib):
    class Scaled(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.child = linear(lib, 3, 2)
            self.scale = lib.Parameter(lib.tensor([[1.5, -2.0]]))

        def forward(self, x):
            return self.child(x) * self.scale

    model = Scaled()
    log = logged({model: "model", model.child: "child"})
    x = lib.leaf(INPUT)
    loss(lib, model(x)).backward()
    return log, x.grad, model.scale.grad, model.child.weight.grad


@differential
def test_full_hooks_on_a_trained_model_and_its_loss(lib):
    model = lib.nn.Sequential(linear(lib, 3, 3), lib.nn.BatchNorm1d(3), lib.nn.ReLU(), linear(lib, 3, 2, seed=1))
    criterion = lib.nn.MSELoss()
    names = {module: name or "model" for name, module in model.named_modules()}
    names[criterion] = "loss"
    log = logged(names, pre=False)
    x = lib.leaf(INPUT)
    criterion(model(x), lib.tensor(WEIGHTS)).backward()
    return log, x.grad, [(name, p.grad) for name, p in model.named_parameters()]


@differential
def test_full_hooks_on_a_lazy_module_see_its_first_call(lib):
    layer = lib.nn.LazyLinear(2)
    shapes = []
    layer.register_full_backward_pre_hook(lambda m, go: shapes.append([tuple(g.shape) for g in go]))
    layer.register_full_backward_hook(lambda m, gi, go: shapes.append([tuple(g.shape) for g in gi]))
    x = lib.leaf(INPUT)
    layer(x).sum().backward()
    return shapes, type(layer), layer.weight.grad.shape, x.grad.shape


@differential
def test_a_shared_module_fires_once_per_call(lib):
    shared = linear(lib, 3, 3)
    log = logged({shared: "shared"}, pre=False)
    model = lib.nn.Sequential(shared, lib.nn.ReLU(), shared, linear(lib, 3, 2, seed=2))
    x = lib.leaf(INPUT)
    loss(lib, model(x)).backward()
    return log, x.grad, shared.weight.grad


@pytest.mark.parametrize("change", ["pre-hook halves grad_output", "hook scales grad_input",
                                    "hook returns a list", "hook returns None for the input",
                                    "later hook sees the earlier result"])
@differential
def test_what_a_hook_returns_changes_downstream(lib, change):
    layer = linear(lib, 3, 2)
    log = []
    names = {layer: "layer"}
    if change == "pre-hook halves grad_output":
        layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    elif change == "hook scales grad_input":
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,))
    elif change == "hook returns a list":
        layer.register_full_backward_hook(lambda m, gi, go: [gi[0] - 1])
    elif change == "hook returns None for the input":
        layer.register_full_backward_hook(lambda m, gi, go: (None,))
    else:
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0] + 100,))
    layer.register_full_backward_hook(recorder(log, names, "last hook"))
    x = lib.leaf(INPUT)
    upstream = x * 2  # a gradient replaced at the module's input still flows back through this
    loss(lib, layer(upstream)).backward()
    return log, x.grad, layer.weight.grad, layer.bias.grad


def product(lib):
    class Product(lib.nn.Module):
        def forward(self, a, b):
            return a * b

    return Product()


def three_way(lib):
    class ThreeWay(lib.nn.Module):
        def forward(self, a, flag, b):
            return a * 2, b + flag, "text"

    return ThreeWay()


@differential
def test_several_inputs_and_outputs_with_non_tensors_and_unused_outputs(lib):
    module = three_way(lib)
    log = logged({module: "module"})
    a, b = lib.leaf(INPUT), lib.leaf([[1.0], [2.0], [3.0], [4.0]])
    outputs, caught = warned(lambda: module(a, 5.0, b))
    (outputs[0] * 3).sum().backward()
    first = (list(log), lib.clone(a.grad), lib.clone(b.grad))
    log.clear()
    outputs = module(a, 5.0, b)
    (outputs[0].sum() + (outputs[1] * lib.tensor([[1.0], [-1.0], [2.0], [0.5]])).sum()).backward()
    return caught, [type(o) for o in outputs], first, log, a.grad, b.grad


@differential
def test_an_input_that_does_not_require_grad_beside_one_that_does_gets_zeros(lib):
    """Not None: BackwardHookFunction marks it non-differentiable, and its missing gradient is filled with zeros."""
    module = product(lib)
    log = logged({module: "module"})
    b = lib.leaf(INPUT[::-1].copy())
    (module(lib.tensor(INPUT), b) * 2).sum().backward()
    return log, b.grad


@differential
def test_tensors_passed_as_keywords_are_not_hooked(lib):
    module = product(lib)
    log = logged({module: "module"}, pre=False)
    a, b = lib.leaf(INPUT), lib.leaf(INPUT[::-1].copy())
    (module(a, b=b) * 2).sum().backward()
    return log, a.grad, b.grad


@differential
def test_every_backward_through_a_retained_graph_fires_the_hooks(lib):
    class NoInputs(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = lib.Parameter(lib.tensor([1.0, -2.0]))

        def forward(self):
            return self.weight * 3

    layer, source = linear(lib, 3, 2), NoInputs()
    log = logged({layer: "layer", source: "no inputs"})
    output = layer(lib.leaf(INPUT))
    for scale in (1.0, 2.0):
        (loss(lib, output) * scale).backward(retain_graph=True)
    _, caught = warned(lambda: source().sum().backward(), "no inputs require gradients")
    return log, caught, layer.weight.grad, source.weight.grad


@differential
def test_a_gradient_that_bypasses_the_outputs_fires_no_full_hook(lib):
    class Caching(lib.nn.Module):
        def forward(self, x):
            self.seen = x  # the input as forward saw it, after the module's input node
            return x * 2

    module = Caching()
    log = logged({module: "module"}, pre=False)
    x = lib.leaf(INPUT)
    output = module(x)
    (output.sum() + (module.seen * 3).sum()).backward()
    log.append("only through the saved input")
    (module.seen * 5).sum().backward()
    return log, x.grad


@differential
def test_inputs_that_do_not_require_grad(lib):
    layer = linear(lib, 3, 2)
    log = []
    names = {layer: "layer"}
    layer.register_full_backward_pre_hook(recorder(log, names, "pre"))
    layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 10,))
    layer.register_full_backward_hook(recorder(log, names, "hook"))
    layer.register_full_backward_hook(lambda m, gi, go: (None,))
    output = layer(lib.tensor(INPUT))
    _, caught = warned(lambda: loss(lib, output).backward(), "Full backward hook is firing when gradients are "
                       "computed with respect to module outputs since no inputs require gradients")
    refusing = linear(lib, 3, 2)
    refusing.register_full_backward_hook(lambda m, gi, go: (lib.ones(4, 3),))
    refused = raises(lambda: warned(lambda: loss(lib, refusing(lib.tensor(INPUT))).backward()),
                     "Backward hook for Modules where no input requires gradient should always return None "
                     "or None for all gradients.")
    return log, caught, layer.weight.grad, refused


@pytest.mark.parametrize("name", ["torch", "modulecraft"])
def test_the_no_input_grad_warning_points_at_the_backward_call(name):
    lib = backend(name)
    layer = linear(lib, 3, 2)
    layer.register_full_backward_hook(lambda m, gi, go: None)
    output = layer(lib.tensor(INPUT))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss(lib, output).backward()
    assert [w.filename for w in caught] == [__file__]


@differential
def test_no_hook_fires_when_nothing_requires_grad_or_grad_is_off(lib):
    log = []
    frozen = linear(lib, 3, 2).requires_grad_(False)
    layer = linear(lib, 3, 2)
    for module in (frozen, layer):
        module.register_full_backward_pre_hook(lambda m, go: log.append("pre"))
        module.register_full_backward_hook(lambda m, gi, go: log.append("hook"))
    frozen_output = frozen(lib.tensor(INPUT))
    with lib.no_grad():
        no_grad_output = layer(lib.leaf(INPUT))
    # modulecraft gives plain ndarrays where nothing records (see modulecraft.autograd.tensor): no grad_fn either
    return log, [getattr(output, "grad_fn", None) for output in (frozen_output, no_grad_output)]


@differential
def test_output_that_is_not_a_tensor_or_tuple_warns(lib):
    class Named(lib.nn.Module):
        def forward(self, x):
            return {"doubled": x * 2}

    module = Named()
    log = logged({module: "module"}, pre=False)
    x = lib.leaf(INPUT)
    output, caught = warned(lambda: module(x), "For backward hooks to be called, module output should be a Tensor "
                            "or a tuple of Tensors but received")
    output["doubled"].sum().backward()
    return caught, log, x.grad


@pytest.mark.parametrize("bad", ["hook returns two", "hook returns none", "pre-hook returns two",
                                 "pre-hook returns none"])
@differential
def test_hooks_returning_the_wrong_number_of_gradients(lib, bad):
    layer = linear(lib, 3, 2)
    if bad == "hook returns two":
        layer.register_full_backward_hook(lambda m, gi, go: gi + gi)
    elif bad == "hook returns none":
        layer.register_full_backward_hook(lambda m, gi, go: ())
    elif bad == "pre-hook returns two":
        layer.register_full_backward_pre_hook(lambda m, go: go + (lib.ones(2, 2),))
    else:
        layer.register_full_backward_pre_hook(lambda m, go: ())
    expected = "2" if "two" in bad else "0"
    what = "grad_output" if "pre" in bad else "grad_input"
    kind = "Backward pre hook" if "pre" in bad else "Backward hook"
    return raises(lambda: loss(lib, layer(lib.leaf(INPUT))).backward(),
                  f"{kind} returned an invalid number of {what}, got {expected}, but expected 1")


@pytest.mark.parametrize("bad", ["hook: wrong shape", "pre-hook: wrong shape", "hook: wrong dtype"])
@differential
def test_hooks_returning_gradients_of_the_wrong_shape_or_dtype(lib, bad):
    layer = linear(lib, 3, 2)
    if bad == "hook: wrong shape":
        layer.register_full_backward_hook(lambda m, gi, go: (lib.ones(5, 5),))
        phrase = "has changed the size of value"
    elif bad == "pre-hook: wrong shape":
        layer.register_full_backward_pre_hook(lambda m, go: (lib.ones(5, 5),))
        phrase = "has changed the size of value"
    else:
        layer.register_full_backward_hook(lambda m, gi, go: (lib.tensor(INPUT, dtype=lib.float64),))
        phrase = "has changed the type of value"
    return raises(lambda: loss(lib, layer(lib.leaf(INPUT))).backward(), phrase)


@differential
def test_changing_a_hooked_output_in_place_is_refused(lib):
    module = lib.nn.ReLU()
    module.register_full_backward_hook(lambda m, gi, go: None)
    output = module(lib.leaf(INPUT))

    def double_in_place():
        output[...] = output * 2

    return raises(double_in_place, "is a view and is being modified inplace", "This view was created inside a "
                  "custom Function (or because an input was returned as-is)")


@differential
def test_full_and_non_full_hooks_do_not_mix(lib):
    local_message = ("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                     "Please use only one of them.")
    global_message = ("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                      "Please use only one of them.")
    full, old = lib.nn.ReLU(), lib.nn.ReLU()
    states = [full._is_full_backward_hook, lib.hooks._global_is_full_backward_hook]
    handle = full.register_full_backward_hook(lambda m, gi, go: None)
    old.register_backward_hook(lambda m, gi, go: None)
    handle.remove()
    states += [full._is_full_backward_hook, old._is_full_backward_hook]
    local = [raises(lambda: full.register_backward_hook(lambda m, gi, go: None), local_message),
             raises(lambda: old.register_full_backward_hook(lambda m, gi, go: None), local_message),
             raises(lambda: old.register_full_backward_pre_hook(lambda m, go: None))]
    lib.hooks.register_module_full_backward_hook(lambda m, gi, go: None)
    states.append(lib.hooks._global_is_full_backward_hook)
    refused_global = raises(lambda: lib.hooks.register_module_backward_hook(lambda m, gi, go: None), global_message)
    lib.hooks._global_backward_hooks.clear()
    lib.hooks._global_is_full_backward_hook = None
    lib.hooks.register_module_backward_hook(lambda m, gi, go: None)
    states.append(lib.hooks._global_is_full_backward_hook)
    refused_full = raises(lambda: lib.hooks.register_module_full_backward_hook(lambda m, gi, go: None),
                          global_message)
    return states, local, refused_global, refused_full


@differential
def test_global_full_hooks_beside_a_local_non_full_hook(lib):
    module = product(lib)
    log = []
    names = {module: "module"}
    lib.hooks.register_module_full_backward_hook(recorder(log, names, "global full"))
    lib.hooks.register_module_full_backward_pre_hook(recorder(log, names, "global pre"))
    module.register_backward_hook(recorder(log, names, "local non-full"))
    a, b = lib.leaf(INPUT), lib.leaf(INPUT[::-1].copy())
    output, caught = warned(lambda: module(a, b), "is deprecated")
    (output * 2).sum().backward()
    return caught, log, a.grad, b.grad


@differential
def test_handles_remove_backward_hooks(lib):
    layer = linear(lib, 3, 2)
    log = []
    pre = layer.register_full_backward_pre_hook(lambda m, go: log.append("pre"))
    hook = layer.register_full_backward_hook(lambda m, gi, go: log.append("hook"))
    global_pre = lib.hooks.register_module_full_backward_pre_hook(lambda m, go: log.append("global pre"))
    with lib.hooks.register_module_full_backward_hook(lambda m, gi, go: log.append("global")):
        loss(lib, layer(lib.leaf(INPUT))).backward()
    tables = [list(layer._backward_pre_hooks) == [pre.id], list(layer._backward_hooks) == [hook.id],
              list(lib.hooks._global_backward_pre_hooks) == [global_pre.id], dict(lib.hooks._global_backward_hooks)]
    for handle in (pre, hook, global_pre):
        handle.remove()
    log.append("removed")
    loss(lib, layer(lib.leaf(INPUT))).backward()
    return log, tables, dict(layer._backward_pre_hooks), dict(layer._backward_hooks), layer._is_full_backward_hook


@differential
def test_a_deep_copy_keeps_backward_hooks_and_their_kind(lib):
    layer = linear(lib, 3, 2)
    log = []
    layer.register_full_backward_pre_hook(lambda m, go: log.append(("pre", m is layer)))
    layer.register_full_backward_hook(lambda m, gi, go: log.append(("hook", m is layer)))
    clone = copy.deepcopy(layer)
    loss(lib, clone(lib.leaf(INPUT))).backward()
    return log, clone._is_full_backward_hook, raises(lambda: clone.register_backward_hook(lambda *a: None),
                                                     "Cannot use both regular backward hooks and full")


@differential
def test_backward_hooks_see_the_output_that_forward_hooks_returned(lib):
    layer = linear(lib, 3, 2)
    log = []
    layer.register_forward_hook(lambda m, args, out: out * 3)
    layer.register_full_backward_pre_hook(recorder(log, {layer: "layer"}, "pre"))
    x = lib.leaf(INPUT)
    loss(lib, layer(x)).backward()
    return log, x.grad, layer.weight.grad


@differential
def test_non_full_hook_sees_the_last_operation_of_forward(lib):
    module = product(lib)
    log = []
    names = {module: "module"}
    lib.hooks.register_module_backward_hook(recorder(log, names, "global"))
    module.register_backward_hook(recorder(log, names, "local"))
    module.register_backward_hook(lambda m, gi, go: (gi[0] * 10, None))
    a, b = lib.leaf(INPUT), lib.leaf(INPUT[::-1].copy())
    output, caught = warned(lambda: module(a, b), "Using a non-full backward hook when the forward contains "
                            "multiple autograd Nodes is deprecated")
    (output * 2).sum().backward()
    through_nodes = product(lib)
    names[through_nodes] = "after a node"
    through_nodes.register_backward_hook(recorder(log, names, "local"))
    a2 = a * 1
    _, quiet = warned(lambda: (through_nodes(a2, a2 + 1) * 2).sum().backward())
    return caught, quiet, log, a.grad, b.grad


@differential
def test_non_full_hooks_on_layers_see_their_last_node(lib):
    model = lib.nn.Sequential(linear(lib, 3, 3), lib.nn.BatchNorm1d(3), linear(lib, 3, 2, seed=1))
    log = []
    names = {module: name or "model" for name, module in model.named_modules()}
    for module in model.modules():
        module.register_backward_hook(recorder(log, names, "hook"))
    x = lib.leaf(INPUT)
    output, caught = warned(lambda: model(x), "is deprecated")
    loss(lib, output).backward()
    return caught, log, x.grad


@pytest.mark.parametrize("case", ["dict output", "outputs from different nodes", "non-tensor input",
                                  "output without grad_fn"])
@differential
def test_non_full_hook_warnings(lib, case):
    class Forward(lib.nn.Module):
        def forward(self, a, *rest):
            if case == "dict output":
                return {"x": a * 2}
            if case == "outputs from different nodes":
                return a * 2, a + 1
            if case == "non-tensor input":
                return a * rest[0]
            return a.detach()

    module = Forward()
    log = []
    module.register_backward_hook(recorder(log, {module: "module"}, "hook"))
    a = lib.leaf(INPUT)
    args = (a, 3.0) if case == "non-tensor input" else (a,)
    output, caught = warned(lambda: module(*args), "does not return a single Tensor or a tuple of Tensors",
                            "does not take as input a single Tensor or a tuple of Tensors",
                            "outputs are generated by different autograd Nodes", "is deprecated")
    first = output["x"] if isinstance(output, dict) else output[0] if isinstance(output, tuple) else output
    if first.requires_grad:
        first.sum().backward()
    return caught, log


@differential
def test_zero_grad_to_none_or_to_zeros_in_place(lib):
    model = lib.nn.Sequential(linear(lib, 3, 2), lib.nn.ReLU())
    loss(lib, model(lib.leaf(INPUT))).backward()
    weight_grad = model[0].weight.grad
    model.zero_grad(set_to_none=False)
    zeroed = (model[0].weight.grad is weight_grad, model[0].weight.grad, model[0].bias.grad)
    loss(lib, model(lib.leaf(INPUT))).backward()
    accumulated_into_same = model[0].weight.grad is weight_grad
    model.zero_grad()
    return zeroed, accumulated_into_same, model[0].weight.grad, model[0].bias.grad


@differential
def test_requires_grad_freezes_parameters_but_not_the_flow(lib):
    model = lib.nn.Sequential(linear(lib, 3, 3), lib.nn.ReLU(), linear(lib, 3, 2, seed=1))
    model[0].requires_grad_(False)
    x = lib.leaf(INPUT)
    loss(lib, model(x)).backward()
    frozen = [(name, p.requires_grad, p.grad) for name, p in model.named_parameters()]
    model.requires_grad_()
    return frozen, x.grad, [p.requires_grad for p in model.parameters()], model.requires_grad_(False) is model


BACKWARD_HOOK_KINDS = ("pre", "pre, prepended", "hook", "hook, prepended", "forward")


def backward_hook_log(lib, spec, hooked, global_hooks):
    """Forward and backward through a random graph (shared modules run once per call) with hooks logging."""
    modules = build(lib, spec)
    log = []

    def logger(kind, index):
        return lambda module, *grads: log.append((kind, index, grads[-1]))

    for index, kinds in hooked:
        index %= len(modules)
        for kind in kinds:
            prepend = "prepended" in kind
            if kind.startswith("pre"):
                modules[index].register_full_backward_pre_hook(logger(kind, index), prepend=prepend)
            elif kind.startswith("hook"):
                modules[index].register_full_backward_hook(logger(kind, index), prepend=prepend)
            else:
                modules[index].register_forward_hook(logger(kind, index))
    if global_hooks:
        lib.hooks.register_module_full_backward_pre_hook(lambda module, go: log.append(("global pre", go)))
        lib.hooks.register_module_full_backward_hook(lambda module, gi, go: log.append(("global", gi)))
    try:
        x = lib.leaf(INPUT[0])
        (modules[0](x) * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        log.append(("input gradient", x.grad))
    finally:
        lib.hooks._global_backward_pre_hooks.clear()
        lib.hooks._global_backward_hooks.clear()
        lib.hooks._global_is_full_backward_hook = None
    return observe(log, lib, oracle=lib.name == "torch")


@PROPERTY_SETTINGS
@given(graph_specs(), st.lists(st.tuples(st.integers(0, 7), st.lists(st.sampled_from(BACKWARD_HOOK_KINDS),
                                                                      max_size=4)), max_size=5), st.booleans())
def test_backward_hook_firing_order_on_random_graphs_matches_torch(spec, hooked, global_hooks):
    assert backward_hook_log(backend("modulecraft"), spec, hooked, global_hooks) == \
        backward_hook_log(backend("torch"), spec, hooked, global_hooks)
