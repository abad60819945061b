"""``RemovableHandle`` details the differential suite cannot observe through torch."""

import copy
import gc
import pickle
from collections import OrderedDict

import numpy as np

from modulecraft import nn
from modulecraft.utils.hooks import RemovableHandle


def test_ids_increase_across_modules_and_remove_is_idempotent():
    a, b = nn.Identity(), nn.Identity()
    first = a.register_forward_hook(lambda *args: None, with_kwargs=True, always_call=True)
    second = b.register_forward_pre_hook(lambda *args: None)
    assert second.id > first.id
    first.remove()
    first.remove()
    assert not a._forward_hooks and not a._forward_hooks_with_kwargs and not a._forward_hooks_always_called


def test_a_handle_does_not_keep_its_hooks_alive():
    module = nn.Identity()
    handle = module.register_forward_hook(lambda *args: None)
    del module
    gc.collect()
    assert handle.hooks_dict_ref() is None
    handle.remove()  # harmless


def test_handles_survive_pickling_and_deepcopy_of_their_module():
    module = nn.Identity()
    module.handle = module.register_forward_pre_hook(print)
    clone = copy.deepcopy(module)
    clone.handle.remove()
    assert not clone._forward_pre_hooks and module._forward_pre_hooks
    hooks = OrderedDict()
    handle = RemovableHandle(hooks)
    hooks[handle.id] = "hook"
    revived_hooks, revived = pickle.loads(pickle.dumps((hooks, handle)))
    revived.remove()
    assert not revived_hooks and RemovableHandle.next_id > handle.id


def test_always_call_hook_runs_when_forward_raises_and_error_propagates():
    class Failing(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    seen = []
    module = Failing()
    module.register_forward_hook(lambda m, args, output: seen.append((args, output)), always_call=True)
    try:
        module(np.ones(1))
    except ValueError as error:
        assert str(error) == "boom"
    assert len(seen) == 1 and seen[0][1] is None
