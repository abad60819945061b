"""The seams the chapters plug into: a learner replaces one mechanism on a subclass, the rest still works."""

import inspect

import numpy as np

from modulecraft import nn
from modulecraft.nn.modules import module as module_module


def test_call_goes_through_the_instances_call_impl():
    calls = []

    def learner_call_impl(self, *args, **kwargs):
        calls.append(args)
        return self.forward(*args, **kwargs)

    class Learner(nn.Linear):
        _call_impl = learner_call_impl

    layer = Learner(2, 1)
    layer(np.ones((1, 2)))
    assert len(calls) == 1


def test_a_replaced_setattr_is_used_for_every_assignment():
    seen = []

    def learner_setattr(self, name, value):
        seen.append(name)
        nn.Module.__setattr__(self, name, value)

    class Learner(nn.Module):
        __setattr__ = learner_setattr

        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(2, 2)
            self.scale = 3

    learner = Learner()
    assert seen == ["layer", "scale"] and list(learner._modules) == ["layer"]


def test_a_replaced_named_modules_drives_every_traversal():
    def learner_named_modules(self, memo=None, prefix="", remove_duplicate=True):
        yield prefix, self  # a deliberately wrong DFS: only the root

    class Learner(nn.Sequential):
        named_modules = learner_named_modules

    learner = Learner(nn.Linear(2, 2))
    learner.own = nn.Parameter(np.zeros(1))
    assert [name for name, _ in learner.named_parameters()] == ["own"]


def test_a_learners_flagged_parameter_class_is_registered_everywhere():
    class LearnerParameter(np.ndarray):
        _is_param = True

    module = nn.Module()
    module.w = np.zeros(2).view(LearnerParameter)
    module.register_parameter("v", np.ones(1).view(LearnerParameter))
    assert list(module._parameters) == ["w", "v"]
    assert [name for name, _ in module.named_parameters()] == ["w", "v"]
    assert list(module.state_dict()) == ["w", "v"]


def test_calls_without_any_hook_take_the_fast_path():
    """With no hook anywhere, forward is called straight from _call_impl, not from the hook-running code."""
    class Probe(nn.Module):
        def forward(self):
            return inspect.stack()[1].function

    probe = Probe()
    assert probe() == "_call_impl"
    with probe.register_forward_hook(lambda *args: None):
        assert probe() == "inner"
    assert probe() == "_call_impl"
    handle = module_module.register_module_forward_pre_hook(lambda *args: None)
    try:
        assert probe() == "inner"
    finally:
        handle.remove()
    assert probe() == "_call_impl"
