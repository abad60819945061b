"""Beyond torch: a strict ``load_state_dict`` that fails leaves the module exactly as it was."""

import numpy as np
import pytest

from modulecraft import nn


def model():
    net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    net.register_buffer("scratch", np.arange(3.0), persistent=False)
    return net


def snapshot(module):
    """Everything a load could disturb: array objects, their values and classes, and each module's class."""
    return [(name, type(m), {k: (id(v), type(v), None if v is None or nn.parameter.is_lazy(v) else np.array(v))
                             for k, v in [*m._parameters.items(), *m._buffers.items()]})
            for name, m in module.named_modules()]


def assert_same(before, after):
    assert [(n, c, {k: v[:2] for k, v in d.items()}) for n, c, d in before] == \
           [(n, c, {k: v[:2] for k, v in d.items()}) for n, c, d in after]
    for (_, _, old), (_, _, new) in zip(before, after):
        for key in old:
            if old[key][2] is not None:
                assert np.array_equal(old[key][2], new[key][2]), key


def corrupt(state, how):
    if how == "missing":
        del state["1.running_var"]
    elif how == "unexpected":
        state["1.extra"] = np.zeros(1)
    elif how == "size":
        state["1.bias"] = np.zeros(7, dtype=np.float32)
    return state


@pytest.mark.parametrize("how", ["missing", "unexpected", "size"])
@pytest.mark.parametrize("assign", [False, True])
def test_failed_strict_load_restores_values_and_objects(how, assign):
    target = model()
    source = {k: np.full(v.shape, 9, dtype=v.dtype) for k, v in target.state_dict().items()}
    before = snapshot(target)
    with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict for Sequential"):
        target.load_state_dict(corrupt(source, how), assign=assign)
    assert_same(before, snapshot(target))


def test_non_strict_load_keeps_torchs_behaviour_and_copies_what_fits():
    target = model()
    state = corrupt({k: np.full(v.shape, 9, dtype=v.dtype) for k, v in target.state_dict().items()}, "size")
    with pytest.raises(RuntimeError, match="size mismatch for 1.bias"):
        target.load_state_dict(state, strict=False)
    assert np.all(target[0].weight == 9)


def test_failed_strict_load_unmaterialises_lazy_parameters():
    lazy = nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d())
    weight = lazy[0].weight
    eager = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    state = eager.state_dict()
    state["unexpected"] = np.zeros(1)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "unexpected"'):
        lazy.load_state_dict(state)
    assert lazy[0].weight is weight and type(weight) is nn.UninitializedParameter
    assert nn.parameter.is_lazy(lazy[1].running_mean) and lazy[0].has_uninitialized_params()
    del state["unexpected"]
    lazy.load_state_dict(state)
    assert lazy[0].weight is weight and np.array_equal(weight, eager[0].weight)


def test_changes_made_by_a_pre_hook_are_rolled_back_too():
    target = model()

    def replace_bias(module, state_dict, prefix, *rest):
        module.bias = nn.Parameter(np.zeros(3, dtype=np.float32))

    target[0].register_load_state_dict_pre_hook(replace_bias)
    bias = target[0].bias
    with pytest.raises(RuntimeError):
        target.load_state_dict({})
    assert target[0].bias is bias
