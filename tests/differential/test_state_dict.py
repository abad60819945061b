"""state_dict, load_state_dict and their hooks (chapter 7)."""

import gc
from collections import OrderedDict

import numpy as np
import pytest

from .models import net, set_values
from .observe import differential, raises


def metadata(state):
    return getattr(state, "_metadata", None)


@pytest.mark.parametrize("keep_vars", [False, True])
@differential
def test_state_dict_keys_values_and_metadata(lib, keep_vars):
    model = net(lib)
    state = model.state_dict(keep_vars=keep_vars)
    return (
        type(state), state, metadata(state),
        [value is getattr(model.get_submodule(key.rpartition(".")[0]), key.rpartition(".")[2])
         for key, value in state.items()],
        # torch's detached values say requires_grad=False; a plain numpy array has no such attribute
        [getattr(value, "requires_grad", False) for value in state.values()],
    )


@differential
def test_state_dict_values_share_memory_with_the_model(lib):
    model = net(lib)
    state = model.state_dict()
    lib.copy_into(state["a.weight"], np.zeros((3, 2), dtype=np.float32))
    return model.a.weight, all(lib.shares_memory(state[k], v) for k, v in model.named_parameters())


@differential
def test_state_dict_into_a_destination_with_a_prefix(lib):
    model = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.BatchNorm1d(1))
    destination = OrderedDict(existing=1)
    returned = model.state_dict(destination=destination, prefix="model.")
    return returned is destination, list(destination), metadata(destination)


@differential
def test_save_to_state_dict_override_and_none_members(lib):
    class Extra(lib.nn.Linear):
        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "note"] = lib.ones(1)

    model = lib.nn.Sequential(Extra(1, 1, bias=False), lib.nn.BatchNorm1d(2, track_running_stats=False))
    model.add_module("empty", None)
    return list(model.state_dict())


@differential
def test_extra_state(lib):
    class Noted(lib.nn.Linear):
        def get_extra_state(self):
            return {"note": "kept", "count": 3}

        def set_extra_state(self, state):
            self.received = state

    source, target = lib.nn.Sequential(Noted(1, 1)), lib.nn.Sequential(Noted(1, 1))
    state = source.state_dict()
    trace = [list(state), state["0._extra_state"], target.load_state_dict(state), target[0].received]
    del state["0._extra_state"]
    trace.append(raises(lambda: target.load_state_dict(state), whole_message=True))
    return trace


@differential
def test_state_dict_hooks(lib):
    log = []
    model = lib.nn.Sequential(lib.nn.Linear(1, 1))
    inner = model[0]
    inner.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
    inner.register_state_dict_post_hook(
        lambda m, state, prefix, local_metadata: log.append(("post", prefix, list(state), dict(local_metadata))))
    model._register_state_dict_hook(lambda m, state, prefix, local_metadata: OrderedDict(replaced=lib.ones(1)))
    inner._register_state_dict_hook(lambda m, state, prefix, local_metadata: OrderedDict(ignored=lib.ones(1)))
    replaced = model.state_dict(prefix="top.")
    model[0].register_state_dict_post_hook(lambda m, state, prefix, local_metadata: state)
    return log, replaced, raises(model.state_dict, "state_dict post-hook must return None")


def _problems(lib):
    """Source and target models for the load scenarios: the same except where named."""
    source = set_values(lib, lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3)), seed=1)
    target = set_values(lib, lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3)), seed=2)
    return source, target


LOAD_CASES = {
    "matching": lambda state: None,
    "missing key": lambda state: state.pop("0.bias"),
    "unexpected keys": lambda state: state.update({"1.extra": state["0.bias"], "extra": state["0.bias"]}),
    "missing and unexpected": lambda state: (state.pop("1.running_var"), state.update({"0.w": state["0.bias"]})),
    "size mismatch": lambda state: state.update({"0.weight": state["1.weight"]}),
    "everything at once": lambda state: (state.pop("0.bias"), state.update(
        {"9": state["1.bias"], "0.weight": state["1.weight"], "1.bias": state["0.weight"]})),
}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("case", LOAD_CASES)
@differential
def test_load_state_dict_reports(lib, case, strict):
    source, target = _problems(lib)
    state = source.state_dict()
    LOAD_CASES[case](state)
    returned = []
    outcome = raises(lambda: returned.append(target.load_state_dict(state, strict=strict)), whole_message=True)
    keys = [(type(r), r.missing_keys, r.unexpected_keys, repr(r)) for r in returned]
    return outcome, keys, target.state_dict()  # a failed load has copied what fit, in both


@pytest.mark.parametrize("assign", [False, True])
@differential
def test_failed_strict_load_leaves_what_fit_copied(lib, assign):
    source, target = _problems(lib)
    state = source.state_dict()
    LOAD_CASES["everything at once"](state)
    weight = target[1].weight
    outcome = raises(lambda: target.load_state_dict(state, assign=assign), "size mismatch for 0.weight")
    return outcome, target.state_dict(), target[1].weight is weight


@pytest.mark.parametrize("value", [3, ((1.0, 1.0), (2.0, 2.0))])
@pytest.mark.parametrize("strict", [True, False])
@differential
def test_load_state_dict_refuses_values_that_are_not_tensors(lib, strict, value):
    source, target = _problems(lib)
    state = source.state_dict()
    state["0.bias"] = value
    return raises(lambda: target.load_state_dict(state, strict=strict),
                  "Error(s) in loading state_dict for Sequential:\n\t", 'While copying the parameter named "0.bias", '
                  f"expected", f"from checkpoint but received {type(value)}")


@differential
def test_load_state_dict_leaves_no_reference_cycle(lib):
    model = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.BatchNorm1d(3)))
    state = model.state_dict()
    gc.collect()
    gc.disable()
    try:
        model.load_state_dict(state)
        return gc.collect()  # objects only the cycle collector could free
    finally:
        gc.enable()


@differential
def test_keys_for_none_members_and_non_persistent_buffers_are_unexpected(lib):
    target = lib.nn.Linear(2, 3, bias=False)
    target.register_buffer("cache", lib.zeros(1), persistent=False)
    state = lib.nn.Linear(2, 3).state_dict()
    state["cache"] = lib.ones(1)
    return target.load_state_dict(state, strict=False), raises(lambda: target.load_state_dict(state),
                                                               whole_message=True)


@differential
def test_load_a_plain_dict_without_metadata(lib):
    source, target = _problems(lib)
    state = dict(source.state_dict())
    del state["1.num_batches_tracked"]  # without _metadata every version is None: BatchNorm fills it in
    return target.load_state_dict(state), target.state_dict()


@differential
def test_load_state_dict_refuses_non_mappings(lib):
    return raises(lambda: lib.nn.Linear(1, 1).load_state_dict([1, 2]),
                  "Expected state_dict to be dict-like, got <class 'list'>.")


@differential
def test_load_copies_into_existing_tensors_with_their_dtype(lib):
    source, target = _problems(lib)
    weight = target[0].weight
    state = source.double().state_dict()
    target.load_state_dict(state)
    return target[0].weight is weight, target[0].weight, target[1].running_mean.dtype


@differential
def test_a_one_element_vector_loads_into_a_scalar_in_place(lib):
    """Old checkpoints stored scalars as (1,) vectors; loading unwraps them (chapter 7's own_load teaches it)."""
    module = lib.nn.Module()
    module.register_buffer("count", lib.tensor(0.0))
    count = module.count
    result = module.load_state_dict({"count": lib.tensor([78.0])})
    return result, module.count is count, module.count


@differential
def test_load_with_assign_replaces_the_objects(lib):
    source, target = _problems(lib)
    state = source.double().state_dict()
    target[0].weight.requires_grad_(False)
    target.load_state_dict(state, assign=True)
    return (
        [(name, type(t), t.dtype) for name, t in [*target.named_parameters(), *target.named_buffers()]],
        target[0].weight.requires_grad, target[0].bias.requires_grad,
        lib.shares_memory(target[0].weight, state["0.weight"]), target[1].running_var is state["1.running_var"],
    )


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("assign", [False, True])
@differential
def test_load_hooks(lib, assign, strict):
    """Every module's pre-hook sees strict=True whatever the caller passed (torch checks strictness at the end)."""
    log = []
    source, target = _problems(lib)

    def pre_hook(module, state, prefix, local_metadata, strict, missing, unexpected, errors):
        log.append(("pre", type(module), prefix, sorted(state), dict(local_metadata), strict))

    def forgive_missing(module, incompatible):
        log.append(("post", type(module), list(incompatible.missing_keys), list(incompatible.unexpected_keys)))
        incompatible.missing_keys.clear()

    target[1].register_load_state_dict_pre_hook(pre_hook)
    target.register_load_state_dict_pre_hook(pre_hook)
    target[1].register_load_state_dict_post_hook(forgive_missing)
    target.register_load_state_dict_post_hook(forgive_missing)
    state = source.state_dict()
    del state["1.running_mean"], state["0.bias"]
    result = target.load_state_dict(state, assign=assign, strict=strict)
    return log, result, list(state)


@differential
def test_post_hook_must_not_return_a_value(lib):
    model = lib.nn.Linear(1, 1)
    model.register_load_state_dict_post_hook(lambda module, incompatible: incompatible)
    return raises(lambda: model.load_state_dict(model.state_dict()),
                  "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to return new values")


def versioned_layer(lib, version):
    """Version 1 called its parameter `old_weight`; version 2 renamed it `weight` and loads either."""
    class Versioned(lib.nn.Module):
        _version = version

        def __init__(self):
            super().__init__()
            name = "weight" if version >= 2 else "old_weight"
            self.register_parameter(name, lib.Parameter(lib.arange(2) * version))

        def _load_from_state_dict(self, state, prefix, local_metadata, strict, missing, unexpected, errors):
            if local_metadata.get("version", 1) < 2 and prefix + "old_weight" in state:
                state[prefix + "weight"] = state.pop(prefix + "old_weight")
            super()._load_from_state_dict(state, prefix, local_metadata, strict, missing, unexpected, errors)

    return Versioned()


@differential
def test_load_from_state_dict_override_renames_keys_by_version(lib):
    old = lib.nn.Sequential(versioned_layer(lib, 1))
    new = lib.nn.Sequential(versioned_layer(lib, 2))
    old_state = old.state_dict()
    result = new.load_state_dict(old_state)
    return metadata(old_state), list(old_state), result, new[0].weight, metadata(new.state_dict())


@pytest.mark.parametrize("version", [None, 1, 2])
@differential
def test_batchnorm_loads_checkpoints_from_before_num_batches_tracked(lib, version):
    source, target = _problems(lib)
    lib.copy_into(target[1].num_batches_tracked, np.array(7))
    state = source.state_dict()
    del state["1.num_batches_tracked"]
    if version is None:
        del state._metadata["1"]
    else:
        state._metadata["1"]["version"] = version
    outcome = raises(lambda: target.load_state_dict(state), whole_message=True)
    assert "1.num_batches_tracked" not in state, "the caller's dict is never changed"
    if outcome.error is not None:  # what a failed load leaves behind differs on purpose (test_strict_load_...)
        return outcome
    return outcome, target[1].num_batches_tracked, target[1].running_mean


@pytest.mark.parametrize("assign", [False, True])
@differential
def test_load_into_a_model_with_shared_members(lib, assign):
    source, target = net(lib), set_values(lib, net(lib), seed=5)
    result = target.load_state_dict(source.state_dict(), assign=assign)
    return (result, target.state_dict(), target.head.weight is target.seq[0].weight, target.alias is target.a,
            [type(p) for p in target.parameters()])
