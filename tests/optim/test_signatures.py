"""The optimizers' names, parameters, kinds and defaults are torch's (annotations differ: arrays for tensors)."""

import inspect

import pytest
import torch
import torch.optim.optimizer as torch_optimizer

import modulecraft.optim
import modulecraft.optim.optimizer as our_optimizer

METHODS = ("__init__", "step", "zero_grad", "state_dict", "load_state_dict", "add_param_group",
           "register_step_pre_hook", "register_step_post_hook", "register_state_dict_pre_hook",
           "register_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
           "__getstate__", "__setstate__", "__repr__")


def parameters(function):
    return [(p.name, p.kind.name, repr(p.default)) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", ["Optimizer", "SGD", "Adam", "AdamW"])
@pytest.mark.parametrize("method", METHODS)
def test_method_signatures_match_torch(name, method):
    theirs = getattr(getattr(torch.optim, name), method)
    ours = getattr(getattr(modulecraft.optim, name), method)
    assert parameters(ours) == parameters(theirs)


@pytest.mark.parametrize("name", ["register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"])
def test_global_hook_functions_match_torch(name):
    assert parameters(getattr(our_optimizer, name)) == parameters(getattr(torch_optimizer, name))


def test_the_same_public_names():
    assert set(modulecraft.optim.__all__) <= set(dir(torch.optim))
    assert repr(our_optimizer.required) == repr(torch_optimizer.required)
