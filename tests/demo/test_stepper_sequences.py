"""The steppers' sequences of states against what torch (and modulecraft) actually do on the same model.

Each stepper computes its steps from the module alone; these tests run the real mechanism next to it and record
what happens (the memo's membership tests and contents, the hooks as they fire, the keys a load reports and the
values that land), then compare step by step.
"""

import copy
import re

import numpy as np
import pytest
import torch

from modulecraft.viz import introspect
from modulecraft.viz.steppers import (LOADED, MISSING, NOT_AN_ARRAY, SIZE_MISMATCH, UNEXPECTED, WHAT_RUNS,
                                      step_call, step_load_state_dict, step_named_modules)
from modulecraft.viz.timeline import (FORWARD_END, FORWARD_HOOK, FORWARD_START, GLOBAL_FORWARD_HOOK, GLOBAL_PRE_HOOK,
                                      PRE_HOOK)

from .models import MODELS, backends


# -- named_modules --------------------------------------------------------------------------------------------


class RecordingMemo(set):
    """A memo that logs each membership test named_modules makes on it: (module, was it there?)."""

    def __init__(self):
        super().__init__()
        self.tests = []

    def __contains__(self, module):
        found = super().__contains__(module)
        self.tests.append((module, found))
        return found


@pytest.mark.parametrize("nn", backends())
@pytest.mark.parametrize("build", MODELS.values(), ids=MODELS.keys())
@pytest.mark.parametrize("remove_duplicate", [True, False])
def test_dfs_steps_follow_named_modules(nn, build, remove_duplicate):
    assert_dfs_steps_match(build(nn), remove_duplicate)


def assert_dfs_steps_match(model, remove_duplicate):
    """The steps against the module's real named_modules: yields, every memo test, the memo after each yield."""
    memo = RecordingMemo()
    yielded, memo_after_each_yield = [], []
    for prefix, module in model.named_modules(memo=memo, remove_duplicate=remove_duplicate):
        yielded.append((prefix, id(module)))
        memo_after_each_yield.append({id(m) for m in memo})

    steps = step_named_modules(model, remove_duplicate=remove_duplicate)

    assert [(s.prefix, id(s.module)) for s in steps if s.yielded] == yielded
    assert [(id(s.module), not s.yielded) for s in steps] == [(id(m), found) for m, found in memo.tests]
    memo_per_step = [{id(model.get_submodule(name)) for name in s.memo} for s in steps if s.yielded]
    assert memo_per_step == memo_after_each_yield


def test_a_shared_module_is_skipped_and_lit_at_its_first_name():
    shared = torch.nn.Linear(2, 2)
    model = torch.nn.Sequential(torch.nn.Sequential(shared), shared)
    skipped = [s for s in step_named_modules(model) if not s.yielded]
    assert [(s.prefix, s.node) for s in skipped] == [("1", "0.0")]
    assert "already in the memo" in skipped[0].describe()


# -- __call__ -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nn", backends())
def test_call_steps_follow_the_hooks_as_they_fire(nn):
    """Hooks of every kind log themselves as they fire; the stepper, computed beforehand, must list the same."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
    names = {id(module): name for name, module in model.named_modules()}
    fired = []

    def logger(qualname, kind):
        return lambda *args, **kwargs: fired.append((qualname, kind))

    def global_logger(kind):
        return lambda module, *args: fired.append((names[id(module)], kind))

    def forward_logger(module, qualname):
        forward = module.forward

        def logged(*args, **kwargs):
            fired.append((qualname, FORWARD_START))
            result = forward(*args, **kwargs)
            fired.append((qualname, FORWARD_END))
            return result
        return logged

    hooks = nn.modules.module
    handles = [
        hooks.register_module_forward_pre_hook(global_logger(GLOBAL_PRE_HOOK)),
        hooks.register_module_forward_hook(global_logger(GLOBAL_FORWARD_HOOK)),
        model[0].register_forward_pre_hook(logger("0", PRE_HOOK)),
        model[0].register_forward_pre_hook(logger("0", PRE_HOOK), prepend=True),
        model[1][0].register_forward_hook(logger("1.0", FORWARD_HOOK)),
        model[1].register_forward_hook(logger("1", FORWARD_HOOK), with_kwargs=True),
        model.register_forward_hook(logger("", FORWARD_HOOK), always_call=True),
    ]
    inputs = np.ones((1, 2), dtype=np.float32)
    if nn is torch.nn:
        inputs = torch.from_numpy(inputs)
    try:
        steps = step_call(model, inputs)
        assert fired, "the stepper calls the model once, so the hooks fired"
        fired.clear()
        for name, module in model.named_modules():
            module.forward = forward_logger(module, name)
        model(inputs)
    finally:
        for handle in handles:
            handle.remove()

    assert [(s.node, s.kind) for s in steps] == fired
    assert {s.kind for s in steps} == set(WHAT_RUNS)  # every forward kind (backward is not part of a call)


# -- load_state_dict ------------------------------------------------------------------------------------------


def _perturbed(state_dict):
    """Every array changed (so a test can see where it lands), type, shape and dtype kept; extra state kept as is."""
    def plus_seven(value):
        value = copy.deepcopy(value)
        value += 7  # in place: a 0-d numpy array stays an array (``value + 7`` would be a numpy scalar)
        return value
    return {key: plus_seven(value) if not introspect.is_lazy(value) and hasattr(value, "shape") else value
            for key, value in state_dict.items()}


def _drop(*keys):
    return lambda sd: {k: v for k, v in sd.items() if k not in keys}


def _add(**entries):
    return lambda sd: {**sd, **{k.replace("__", "."): v(sd) for k, v in entries.items()}}


LOAD_SCENARIOS = {
    "exact": ("nested", lambda sd: sd),
    "missing": ("nested", _drop("0.bias", "2.0.weight")),
    "unexpected keys of every kind": ("buffers", _add(
        stray__weight=lambda sd: sd["0.weight"],  # no module called "stray"
        **{"0__gain": lambda sd: sd["0.weight"]},  # no such attribute on 0
        **{"1__scratch": lambda sd: sd["1.running_mean"]},  # a non-persistent buffer
        **{"2__bias": lambda sd: sd["0.bias"]},  # Linear(bias=False): bias is None
    )),
    "size mismatch": ("nested", lambda sd: {**sd, "0.weight": sd["0.weight"][:1], "2.0.bias": sd["2.0.bias"][:1]}),
    "old scalar as a 1-element vector": ("buffers", lambda sd: {
        **sd, "1.num_batches_tracked": sd["1.num_batches_tracked"].reshape(1)}),
    "not an array": ("nested", lambda sd: {**sd, "0.bias": [1.0, 2.0, 3.0]}),
    "shared module": ("shared", _drop("2.weight")),
    "extra state": ("extra_state", lambda sd: sd),
    "extra state missing": ("extra_state", _drop("0._extra_state")),
    "extra state not wanted": ("nested", lambda sd: {**sd, "1._extra_state": {"count": 3}}),
    "holes": ("holes", _drop("0.1.weight")),
    "lazy placeholders into a lazy layer": ("lazy", lambda sd: sd),
    "real arrays into a lazy layer": ("lazy", lambda sd: {**sd, "0.weight": sd["1.weight"], "0.bias": sd["1.bias"]}),
    "missing everything, unexpected everything": ("nested", lambda sd: {"x." + k: v for k, v in sd.items()}),
}


def _outcomes(steps, outcome):
    return [s.key for s in steps if s.outcome == outcome]


@pytest.mark.parametrize("nn", backends())
@pytest.mark.parametrize("model_name, change", LOAD_SCENARIOS.values(), ids=LOAD_SCENARIOS.keys())
def test_load_steps_follow_load_state_dict(nn, model_name, change):
    model = MODELS[model_name](nn)
    assert_load_steps_match(model, change(_perturbed(model.state_dict())))


def assert_load_steps_match(model, checkpoint):
    """The steps against the module's real load_state_dict(strict=False): the keys it reports, the entries it
    refuses, and the values that land."""
    steps = step_load_state_dict(model, checkpoint)

    reported = {}
    model.register_load_state_dict_post_hook(lambda module, keys: reported.update(
        missing=list(keys.missing_keys), unexpected=list(keys.unexpected_keys)))
    refused = []
    try:
        model.load_state_dict(checkpoint, strict=False)
    except RuntimeError as error:
        refused = re.findall(r'size mismatch for ([^:]+):|parameter named "([^"]+)"', str(error))
    assert _outcomes(steps, MISSING) == reported["missing"]
    assert _outcomes(steps, UNEXPECTED) == reported["unexpected"]
    assert _outcomes(steps, SIZE_MISMATCH) == [m for m, _ in refused if m]
    assert _outcomes(steps, NOT_AN_ARRAY) == [n for _, n in refused if n]
    after = model.state_dict()  # a refused entry does not stop the others: both libraries keep what they copied
    for key in _outcomes(steps, LOADED):
        if key.endswith("_extra_state") or introspect.is_lazy(checkpoint[key]):
            continue
        assert np.array_equal(np.asarray(after[key]).ravel(), np.asarray(checkpoint[key]).ravel()), key


def test_load_steps_say_why_a_key_is_unexpected():
    model = MODELS["buffers"](torch.nn)
    checkpoint = {**model.state_dict(), "1.scratch": torch.zeros(3), "2.bias": torch.zeros(3), "3.x": torch.zeros(1)}
    reasons = {s.key: s.reason for s in step_load_state_dict(model, checkpoint) if s.outcome == UNEXPECTED}
    assert "non-persistent buffer" in reasons["1.scratch"]
    assert "is None" in reasons["2.bias"]
    assert "no submodule named '3'" in reasons["3.x"]
