"""The Optimizer machinery against torch's: argument checks and messages, param groups, hooks, zero_grad, repr."""

import copy
import warnings

import numpy as np
import pytest
import torch
import torch.optim.optimizer as torch_optimizer

import modulecraft.optim
import modulecraft.optim.optimizer as our_optimizer
from modulecraft import nn

from .twins import assert_same_params, feed, optimizers, twins

LIBRARIES = {"torch": torch.optim, "ours": modulecraft.optim}
# torch.optim deletes its `optimizer` attribute; the module itself is still there.
BASE = {torch.optim: torch_optimizer, modulecraft.optim: our_optimizer}


def parameters(side, count=2):
    return [getattr(pair, side) for pair in twins([(2, 3)] * count)]


def outcome(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the exception is what is compared
        return type(error), str(error)
    return None


# (what is wrong, the call on (optim, params)): each must fail on both with the same type and message.
BAD_CALLS = {
    "negative lr": lambda optim, ps: optim.SGD(ps, lr=-0.1),
    "negative momentum": lambda optim, ps: optim.SGD(ps, momentum=-0.5),
    "negative weight decay": lambda optim, ps: optim.SGD(ps, weight_decay=-1.0),
    "nesterov without momentum": lambda optim, ps: optim.SGD(ps, nesterov=True),
    "nesterov with dampening": lambda optim, ps: optim.SGD(ps, momentum=0.9, dampening=0.1, nesterov=True),
    "lr with two elements": lambda optim, ps: optim.SGD(ps, lr=np.ones(2) if optim is modulecraft.optim
                                                        else torch.ones(2)),
    "fused and foreach": lambda optim, ps: optim.SGD(ps, fused=True, foreach=True),
    "adam negative lr": lambda optim, ps: optim.Adam(ps, lr=-1.0),
    "adam negative eps": lambda optim, ps: optim.Adam(ps, eps=-1e-8),
    "adam beta1 of 1": lambda optim, ps: optim.Adam(ps, betas=(1.0, 0.999)),
    "adam beta2 negative": lambda optim, ps: optim.AdamW(ps, betas=(0.9, -0.1)),
    "adam negative weight decay": lambda optim, ps: optim.AdamW(ps, weight_decay=-0.1),
    "adam integer beta": lambda optim, ps: optim.Adam(ps, betas=(0, 0.9)),
    "adam fused and foreach": lambda optim, ps: optim.Adam(ps, fused=True, foreach=True),
    "no parameters": lambda optim, ps: optim.SGD([], lr=0.1),
    "an empty generator": lambda optim, ps: optim.Adam(p for p in ()),
    "a group holding a set": lambda optim, ps: optim.SGD([{"params": set(ps)}], lr=0.1),
    "an int among the params": lambda optim, ps: optim.SGD([ps[0], 3], lr=0.1),
    "a computed tensor": lambda optim, ps: optim.SGD([ps[0] * 2], lr=0.1),
    "one parameter in two groups": lambda optim, ps: optim.SGD([{"params": ps}, {"params": ps[:1]}], lr=0.1),
    "a group that is not a dict": lambda optim, ps: optim.SGD(ps[:1], lr=0.1).add_param_group(ps[1:]),
    "some names missing": lambda optim, ps: optim.SGD([("a", ps[0]), ps[1]], lr=0.1),
    "groups with and without names": lambda optim, ps: optim.SGD(
        [{"params": [("a", ps[0])]}, {"params": [ps[1]]}], lr=0.1),
    "a required option missing": lambda optim, ps: BASE[optim].Optimizer(ps, {"lr": BASE[optim].required}),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_arguments_fail_as_in_torch(case):
    results = {side: outcome(lambda: BAD_CALLS[case](optim, parameters(side))) for side, optim in LIBRARIES.items()}
    assert results["torch"] is not None
    assert results["ours"] == results["torch"]


def test_a_lone_parameter_is_refused_as_in_torch_naming_its_type():
    for side, optim in LIBRARIES.items():
        with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got "):
            optim.SGD(parameters(side)[0], lr=0.1)
    with pytest.raises(TypeError, match="but got modulecraft.nn.parameter.Parameter$"):
        modulecraft.optim.SGD(parameters("ours")[0], lr=0.1)


def test_a_computed_tensor_that_retains_its_grad_can_be_optimized_as_in_torch():
    for side, optim in LIBRARIES.items():
        computed = parameters(side)[0] * 2
        computed.retain_grad()
        assert optim.SGD([computed], lr=0.1).param_groups[0]["params"][0] is computed, side


def test_a_plain_array_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match=r"optimizer can only optimize Tensors, but one of the params is "
                                        r"numpy.ndarray \(.*wrap it in modulecraft.nn.Parameter"):
        modulecraft.optim.SGD([np.zeros(2, dtype=np.float32)], lr=0.1)


def test_differentiable_is_refused_with_the_reason():
    with pytest.raises(NotImplementedError, match="no higher-order gradients"):
        modulecraft.optim.Adam(parameters("ours"), differentiable=True)


def test_duplicate_parameters_in_a_group_warn_as_in_torch():
    messages = {}
    for side, optim in LIBRARIES.items():
        ps = parameters(side)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optim.SGD([ps[0], ps[1], ps[0]], lr=0.1)
        messages[side] = [str(w.message) for w in caught]
    assert messages["ours"] == messages["torch"] and len(messages["torch"]) == 1


def test_groups_get_missing_options_from_the_defaults_in_torchs_order():
    groups = {}
    for side, optim in LIBRARIES.items():
        ps = parameters(side, 3)
        optimizer = optim.Adam([{"params": ps[:1], "lr": 0.5}, {"params": ps[1], "amsgrad": True}], eps=1e-6)
        optimizer.add_param_group({"params": (p for p in ps[2:]), "weight_decay": 0.1})
        groups[side] = [{key: value for key, value in group.items() if key != "params"}
                        for group in optimizer.param_groups]
        groups[side + " order"] = [list(group) for group in optimizer.param_groups]
        assert [len(group["params"]) for group in optimizer.param_groups] == [1, 1, 1]
        assert all(type(group["params"]) is list for group in optimizer.param_groups)
    assert groups["ours"] == groups["torch"] and groups["ours order"] == groups["torch order"]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_repr_as_torch_prints_an_optimizer(name):
    reprs = {side: repr(getattr(optim, name)([{"params": parameters(side)[:1]},
                                               {"params": parameters(side)[1:], "lr": 0.5}], lr=0.01))
             for side, optim in LIBRARIES.items()}
    assert reprs["ours"] == reprs["torch"]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    pairs = twins([(2, 3), (3,)])
    theirs, ours = optimizers("SGD", pairs, lr=0.1)
    feed(pairs, np.random.default_rng(0))
    before = [(pair.torch.grad, pair.ours.grad) for pair in pairs]
    theirs.zero_grad(set_to_none=set_to_none)
    ours.zero_grad(set_to_none=set_to_none)
    for pair, (torch_grad, our_grad) in zip(pairs, before):
        if set_to_none:
            assert pair.torch.grad is None and pair.ours.grad is None
        else:  # zeroed in place
            assert pair.torch.grad is torch_grad and pair.ours.grad is our_grad
            assert not pair.torch.grad.any() and not pair.ours.grad.any()
    assert_same_params(pairs)


def test_zero_grad_set_to_none_is_the_default():
    pairs = twins([(2,)])
    _, ours = optimizers("SGD", pairs, lr=0.1)
    feed(pairs, np.random.default_rng(0))
    ours.zero_grad()
    assert pairs[0].ours.grad is None


def test_step_returns_the_closures_loss():
    pairs = twins([(2,)])
    theirs, ours = optimizers("Adam", pairs)
    feed(pairs, np.random.default_rng(0))
    assert theirs.step(lambda: 1.5) == ours.step(lambda: 1.5) == 1.5


def test_the_closure_records_a_graph_even_when_step_is_called_under_no_grad():
    grad_modes = {}
    for side, library in (("torch", torch), ("ours", modulecraft)):
        optimizer = LIBRARIES[side].SGD(parameters(side), lr=0.1)
        with library.no_grad():
            grad_modes[side] = optimizer.step(library.is_grad_enabled)
    assert grad_modes == {"torch": True, "ours": True}


def test_a_step_counts_as_an_in_place_change_for_graphs_that_saved_the_old_values():
    """torch refuses to backpropagate through values a step overwrote; so must we (the version counter)."""
    for side, library in (("torch", torch), ("ours", modulecraft)):
        param = parameters(side)[0]
        optimizer = LIBRARIES[side].SGD([param], lr=0.1)
        loss = (param * param).sum()
        param.grad = torch.ones(2, 3) if side == "torch" else np.ones((2, 3), dtype=np.float32)
        version = param._version
        optimizer.step()
        assert param._version > version, side
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def events_of_hooked_steps(optim, params):
    """Every hook call (global and the optimizer's own) in order, with what it was given."""
    events = []
    optimizer = optim.SGD(params, lr=0.1)

    def hook(label, result=None):
        def record(opt, args, kwargs):
            assert opt is optimizer and args[0] is optimizer
            events.append((label, len(args), sorted(kwargs)))
            return result
        return record

    handles = [BASE[optim].register_optimizer_step_pre_hook(hook("global pre")),
               BASE[optim].register_optimizer_step_post_hook(hook("global post")),
               optimizer.register_step_post_hook(hook("post")),
               optimizer.register_step_pre_hook(hook("pre")),
               optimizer.register_step_pre_hook(hook("pre that adds a closure",
                                                     ((optimizer,), {"closure": lambda: 7.0})))]
    try:
        for param in params:
            param.grad = param * 0 + 1
        loss = optimizer.step()
        events.append(("loss", loss))
        handles[-1].remove()
        optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    optimizer.step()  # the hooks are gone
    return events


def test_step_hooks_run_in_torchs_order_with_the_same_arguments():
    events = {side: events_of_hooked_steps(optim, parameters(side)) for side, optim in LIBRARIES.items()}
    assert events["ours"] == events["torch"]
    assert ("loss", 7.0) in events["ours"]


def test_a_pre_hook_returning_something_else_is_an_error():
    messages = {}
    for side, optim in LIBRARIES.items():
        optimizer = optim.SGD(parameters(side), lr=0.1)
        optimizer.register_step_pre_hook(lambda *args: 5)
        with pytest.raises(RuntimeError) as error:
            optimizer.step()
        messages[side] = str(error.value).split(" must return ")[1]
    assert messages["ours"] == messages["torch"]


def test_param_groups_from_named_parameters_without_decay_on_biases_and_norms():
    """The usual recipe: weight decay only on weight matrices, chosen by name; 50 AdamW steps match torch."""
    torch.manual_seed(0)
    models = {"torch": torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))}
    models["ours"] = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    models["ours"].load_state_dict({key: value.numpy() for key, value in models["torch"].state_dict().items()})
    norms = {"1"}
    optimizers_, named = {}, {}
    for side, model in models.items():
        named[side] = list(model.named_parameters())
        decay = [(n, p) for n, p in named[side] if not n.endswith("bias") and n.split(".")[0] not in norms]
        rest = [(n, p) for n, p in named[side] if (n, p) not in decay]
        optimizers_[side] = LIBRARIES[side].AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}],
                                                  lr=0.01, weight_decay=0.1)
    assert [n for n, _ in named["ours"]] == [n for n, _ in named["torch"]]
    assert ([g["param_names"] for g in optimizers_["ours"].param_groups]
            == [g["param_names"] for g in optimizers_["torch"].param_groups] == [["0.weight", "2.weight"],
                                                                                ["0.bias", "1.weight", "1.bias",
                                                                                 "2.bias"]])
    rng = np.random.default_rng(0)
    for _ in range(50):
        for (_, ours), (_, theirs) in zip(named["ours"], named["torch"]):
            grad = rng.standard_normal(ours.shape).astype(np.float32)
            ours.grad, theirs.grad = grad, torch.tensor(grad)
        optimizers_["ours"].step()
        optimizers_["torch"].step()
    for (name, ours), (_, theirs) in zip(named["ours"], named["torch"]):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=name)
    assert optimizers_["ours"].state_dict()["param_groups"] == optimizers_["torch"].state_dict()["param_groups"]


def test_a_deep_copied_optimizer_continues_like_the_original():
    pairs = twins([(3,), (2, 2)])
    _, ours = optimizers("Adam", pairs, lr=0.01)
    rng = np.random.default_rng(0)
    feed(pairs, rng)
    ours.step()
    clone = copy.deepcopy(ours)
    cloned_params = [p for group in clone.param_groups for p in group["params"]]
    assert all(c is not pair.ours for c, pair in zip(cloned_params, pairs))
    assert clone.state[cloned_params[0]]["exp_avg"] is not ours.state[pairs[0].ours]["exp_avg"]
    for _ in range(3):
        feed(pairs, rng)
        for clone_param, pair in zip(cloned_params, pairs):
            clone_param.grad = pair.ours.grad.copy()
        ours.step()
        clone.step()
    for clone_param, pair in zip(cloned_params, pairs):
        np.testing.assert_array_equal(clone_param, pair.ours)


def events_of_state_dict_hooks(optim, params):
    """The state_dict and load_state_dict hooks: order (with prepend), arguments, replaced dicts."""
    events = []
    optimizer = optim.SGD(params, lr=0.1, momentum=0.9)
    optimizer.register_state_dict_pre_hook(lambda opt: events.append(("pre", opt is optimizer)))
    optimizer.register_state_dict_pre_hook(lambda opt: events.append(("pre first",)), prepend=True)

    def add_note(opt, state_dict):
        events.append(("post", sorted(state_dict)))
        return {**state_dict, "note": "added"}

    optimizer.register_state_dict_post_hook(add_note)
    saved = optimizer.state_dict()
    events.append(("saved", sorted(saved)))

    def change_lr(opt, state_dict):
        events.append(("load pre", sorted(state_dict), state_dict is saved))
        state_dict["param_groups"] = [{**group, "lr": 0.5} for group in state_dict["param_groups"]]

    optimizer.register_load_state_dict_pre_hook(change_lr)
    handle = optimizer.register_load_state_dict_post_hook(
        lambda opt: events.append(("load post", opt.param_groups[0]["lr"])))
    optimizer.load_state_dict(saved)
    events.append(("caller's dict kept", saved["param_groups"][0]["lr"]))
    handle.remove()
    optimizer.load_state_dict(saved)
    return events


def test_state_dict_hooks_as_in_torch():
    events = {side: events_of_state_dict_hooks(optim, parameters(side)) for side, optim in LIBRARIES.items()}
    assert events["ours"] == events["torch"]
    assert ("load post", 0.5) in events["ours"] and ("caller's dict kept", 0.1) in events["ours"]
