"""Hypothesis properties on random module graphs, built identically on torch and modulecraft.

A random graph is a tree of plain Modules (module i hangs under an earlier one), plus aliases (an earlier module
holding a later one a second time) and tied parameters (a module holding another module's parameter). Every
property is checked against counts computed from the spec itself, and the traversal orders against torch.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .backends import backend
from .observe import observe, raises

PROPERTY_SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def graph_specs(draw):
    size = draw(st.integers(1, 8))
    parents = [draw(st.integers(0, child - 1)) for child in range(1, size)]
    alias = st.integers(1, max(size - 1, 1)).flatmap(
        lambda child: st.tuples(st.integers(0, child - 1), st.just(child)))
    aliases = draw(st.lists(alias, max_size=3, unique=True)) if size > 1 else []
    params = [draw(st.integers(0, 2)) for _ in range(size)]
    with_params = [i for i, count in enumerate(params) if count]
    ties = draw(st.lists(st.tuples(st.sampled_from(with_params), st.integers(0, size - 1)), max_size=2,
                         unique_by=lambda tie: tie[1])) if with_params else []
    buffers = [draw(st.sampled_from([None, "persistent", "non-persistent", "int64"])) for _ in range(size)]
    return {"parents": parents, "aliases": aliases, "params": params, "ties": ties, "buffers": buffers}


def node_class(lib):
    """A module whose forward calls its children in order, so a random graph can be called."""
    class Node(lib.nn.Module):
        def forward(self, x):
            for child in self._modules.values():
                x = child(x)
            return x + 1

    return Node


def build(lib, spec, seed=0):
    """The modules of `spec` on `lib` (index 0 is the root), filled with reproducible values."""
    rng = np.random.default_rng(seed)
    node = node_class(lib)
    modules = [node() for _ in spec["params"]]
    for index, count in enumerate(spec["params"]):
        for k in range(count):
            shape = (k + 1, 2)
            setattr(modules[index], f"p{k}", lib.Parameter(lib.tensor(rng.normal(size=shape))))
    for index, kind in enumerate(spec["buffers"]):
        if kind == "int64":
            modules[index].register_buffer("count", lib.tensor(rng.integers(0, 9, 3), dtype=lib.int64))
        elif kind:
            modules[index].register_buffer("stat", lib.tensor(rng.normal(size=2)),
                                           persistent=kind == "persistent")
    for owner, holder in spec["ties"]:
        modules[holder].tied = modules[owner].p0
    for child, parent in enumerate(spec["parents"], start=1):
        setattr(modules[parent], f"m{child}", modules[child])
    for parent, child in spec["aliases"]:
        setattr(modules[parent], f"alias{child}", modules[child])
    return modules


def path_counts(spec):
    """How many distinct attribute paths lead from the root to each module (parents always have smaller index)."""
    counts = [1] + [0] * (len(spec["params"]) - 1)
    edges = sorted([(parent, child) for child, parent in enumerate(spec["parents"], start=1)] + spec["aliases"],
                   key=lambda edge: edge[1])
    for parent, child in edges:
        counts[child] += counts[parent]
    return counts


def registered_params(spec):
    """Parameter slots per module: its own, plus one if it holds a tied parameter."""
    tied = {holder for _, holder in spec["ties"]}
    return [count + (index in tied) for index, count in enumerate(spec["params"])]


def traversals(lib, root):
    return observe((
        [name for name, _ in root.named_modules()],
        [name for name, _ in root.named_modules(remove_duplicate=False)],
        [name for name, _ in root.named_parameters()],
        [name for name, _ in root.named_parameters(remove_duplicate=False)],
        [name for name, _ in root.named_buffers()],
        list(root.state_dict()),
        root.state_dict()._metadata,
    ), lib, oracle=lib.name == "torch")


@PROPERTY_SETTINGS
@given(graph_specs())
def test_traversal_orders_match_torch(spec):
    torch_lib, ours = backend("torch"), backend("modulecraft")
    assert traversals(ours, build(ours, spec)[0]) == traversals(torch_lib, build(torch_lib, spec)[0])


@PROPERTY_SETTINGS
@given(graph_specs())
def test_each_distinct_module_is_yielded_once(spec):
    lib = backend("modulecraft")
    modules = build(lib, spec)
    yielded = [id(module) for _, module in modules[0].named_modules()]
    assert sorted(yielded) == sorted(id(module) for module in modules)
    every_path = list(modules[0].named_modules(remove_duplicate=False))
    assert len(every_path) == sum(path_counts(spec))


@PROPERTY_SETTINGS
@given(graph_specs())
def test_shared_parameters_are_yielded_once_unless_asked(spec):
    lib = backend("modulecraft")
    root = build(lib, spec)[0]
    distinct = sum(spec["params"])
    assert len(list(root.parameters())) == distinct
    assert len({id(p) for p in root.parameters()}) == distinct
    every_slot = sum(paths * slots for paths, slots in zip(path_counts(spec), registered_params(spec)))
    assert len(list(root.named_parameters(remove_duplicate=False))) == every_slot


@PROPERTY_SETTINGS
@given(graph_specs(), st.lists(st.integers(0, 7), max_size=4))
def test_train_false_reaches_every_module(spec, flipped_first):
    lib = backend("modulecraft")
    modules = build(lib, spec)
    for index in flipped_first:  # start from a mixed state
        modules[index % len(modules)].training = False
    assert modules[0].train(False) is modules[0]
    assert not any(module.training for module in modules)
    modules[0].train()
    assert all(module.training for module in modules)


def _values(state):
    return [(key, np.asarray(value).dtype.str, np.asarray(value).tolist()) for key, value in state.items()]


@PROPERTY_SETTINGS
@given(graph_specs(), st.integers(0, 2**16))
def test_state_dict_round_trip_through_disk(tmp_path_factory, spec, seed):
    lib = backend("modulecraft")
    root = build(lib, spec, seed=seed)[0]
    path = tmp_path_factory.mktemp("checkpoint") / "model.npz"
    state = root.state_dict()
    lib.modulecraft.save(state, path)
    loaded = lib.modulecraft.load(path)
    assert _values(loaded) == _values(state)
    assert dict(loaded._metadata) == dict(state._metadata)
    fresh = build(lib, spec, seed=seed + 1)[0]
    fresh.load_state_dict(loaded)
    assert _values(fresh.state_dict()) == _values(state)


HOOK_KINDS = ("pre", "pre, prepended", "pre with kwargs", "forward", "forward, prepended", "forward, always")


def register_logging_hooks(lib, modules, hooked, global_hooks, log):
    def logger(kind, index):
        return lambda *args: log.append((kind, index))

    for index, kinds in hooked:
        module = modules[index % len(modules)]
        for kind in kinds:
            hook = logger(kind, index % len(modules))
            if kind.startswith("pre"):
                module.register_forward_pre_hook(hook, prepend="prepended" in kind, with_kwargs="kwargs" in kind)
            else:
                module.register_forward_hook(hook, prepend="prepended" in kind, always_call="always" in kind)
    if global_hooks:
        lib.hooks.register_module_forward_pre_hook(lambda module, args: log.append(("global pre", args)))
        lib.hooks.register_module_forward_hook(lambda module, args, out: log.append(("global forward", out)))


def hook_log(lib, spec, hooked, global_hooks):
    modules = build(lib, spec)
    log = []
    register_logging_hooks(lib, modules, hooked, global_hooks, log)
    try:
        log.append(("result", modules[0](0)))
    finally:
        for registry in ("_global_forward_pre_hooks", "_global_forward_hooks"):
            getattr(lib.hooks, registry).clear()
    return log


@PROPERTY_SETTINGS
@given(graph_specs(), st.lists(st.tuples(st.integers(0, 7), st.lists(st.sampled_from(HOOK_KINDS), max_size=4)),
                               max_size=5), st.booleans())
def test_hook_firing_order_matches_torch(spec, hooked, global_hooks):
    assert hook_log(backend("modulecraft"), spec, hooked, global_hooks) == \
        hook_log(backend("torch"), spec, hooked, global_hooks)


CORRUPTIONS = ["drop a key", "add a key", "change a shape"]


def corrupt(lib, state, corruptions, choices):
    """Apply the corruptions to `state` in place, picking keys by the drawn indices (same picks on both libraries)."""
    keys = list(state)
    for corruption, choice in zip(corruptions, choices):
        if corruption == "add a key" or not keys:
            state[f"m{choice}.extra"] = lib.zeros(1)
        elif corruption == "drop a key":
            del state[keys.pop(choice % len(keys))]
        else:
            key = keys[choice % len(keys)]
            state[key] = lib.zeros(*state[key].shape, 1)


def load_report(lib, spec, corruptions, choices, strict):
    """What a load reports and what it leaves in the target: a failed strict load keeps what fit copied."""
    state = build(lib, spec, seed=1)[0].state_dict()
    corrupt(lib, state, corruptions, choices)
    target, returned = build(lib, spec)[0], []
    outcome = raises(lambda: returned.append(target.load_state_dict(state, strict=strict)), whole_message=True)
    return observe((outcome, returned), lib, oracle=lib.name == "torch"), _values(target.state_dict())


@PROPERTY_SETTINGS
@given(graph_specs(), st.lists(st.sampled_from(CORRUPTIONS), max_size=3), st.lists(st.integers(0, 50), min_size=3,
                                                                                   max_size=3), st.booleans())
def test_load_report_matches_torch(spec, corruptions, choices, strict):
    assert load_report(backend("modulecraft"), spec, corruptions, choices, strict) == \
        load_report(backend("torch"), spec, corruptions, choices, strict)
