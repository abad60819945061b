"""Traversal, lookup, modes, apply and dtype conversion (chapter 5)."""

import numpy as np
import pytest

from .models import net
from .observe import differential, raises

NAMED_MODULES_CALLS = {
    "default": {},
    "prefix": {"prefix": "model"},
    "keep duplicates": {"remove_duplicate": False},
    "memo": "memo",
}


@pytest.mark.parametrize("call", NAMED_MODULES_CALLS)
@differential
def test_named_modules(lib, call):
    model = net(lib)
    kwargs = {"memo": {model.seq}} if call == "memo" else NAMED_MODULES_CALLS[call]
    return list(model.named_modules(**kwargs))


@differential
def test_modules_children_and_named_children(lib):
    model = net(lib)
    return list(model.modules()), list(model.children()), list(model.named_children())


MEMBER_CALLS = {
    "default": {},
    "prefix": {"prefix": "model"},
    "not recursive": {"recurse": False},
    "keep duplicates": {"remove_duplicate": False},
}


@pytest.mark.parametrize("kind", ["parameters", "buffers"])
@pytest.mark.parametrize("call", MEMBER_CALLS)
@differential
def test_named_parameters_and_buffers(lib, kind, call):
    model = net(lib)
    model.seq[0].register_parameter("gone", None)
    model.seq[0].register_buffer("gone_buffer", None)
    model.a.register_buffer("shared_steps", model.steps)
    named = list(getattr(model, f"named_{kind}")(**MEMBER_CALLS[call]))
    plain_kwargs = {"recurse": False} if call == "not recursive" else {}
    plain = list(getattr(model, kind)(**plain_kwargs))
    return [name for name, _ in named], named, [tensor.shape for tensor in plain]


@differential
def test_none_children_are_skipped(lib):
    model = lib.nn.Sequential(lib.nn.Linear(1, 1))
    model.add_module("empty", None)
    model.register_module("also_empty", None)
    return (list(model.named_modules()), list(model.named_children()), list(model.state_dict()),
            [type(m) for m in model.children()], raises(lambda: model.get_submodule("empty.x"), "`empty` is not an nn.Module"))


@differential
def test_get_submodule_parameter_and_buffer(lib):
    model = net(lib)
    found = [
        model.get_submodule(""), model.get_submodule("seq.2"), model.get_parameter("seq.0.weight"),
        model.get_parameter("scale"), model.get_buffer("seq.2.running_mean"), model.get_buffer("steps"),
    ]
    errors = [
        raises(lambda: model.get_submodule("seq.9"), "Sequential has no attribute `9`"),
        raises(lambda: model.get_submodule("a.weight"), "`weight` is not an nn.Module"),
        raises(lambda: model.get_submodule("nope.x"), "Net has no attribute `nope`"),
        raises(lambda: model.get_parameter("a.nope"), "Linear has no attribute `nope`"),
        raises(lambda: model.get_parameter("steps"), "`steps` is not an nn.Parameter"),
        raises(lambda: model.get_parameter("seq.2.running_mean"), "`running_mean` is not an nn.Parameter"),
        raises(lambda: model.get_buffer("scale"), "`scale` is not a buffer"),
        raises(lambda: model.get_buffer("seq.nope"), "Sequential has no attribute `nope`"),
    ]
    return found, errors


@differential
def test_train_and_eval_reach_every_module(lib):
    model = net(lib)
    trace = [model.eval() is model, [m.training for m in model.modules()]]
    trace += [model.train() is model, [m.training for m in model.modules()]]
    trace += [model.seq.train(False) is model.seq, [m.training for m in model.modules()]]
    trace += [raises(lambda: model.train(mode), "training mode is expected to be boolean") for mode in ("yes", 1, None)]
    return trace


@differential
def test_apply_visits_children_before_parents(lib):
    model = net(lib)
    visited = []
    return model.apply(lambda m: visited.append(type(m).__name__)) is model, visited


@pytest.mark.parametrize("conversion", ["to float64", "double", "half", "float after double", "to float32"])
@differential
def test_dtype_conversion(lib, conversion):
    model = net(lib)
    convert = {
        "to float64": lambda: model.to(lib.float64),
        "double": model.double,
        "half": model.half,
        "float after double": lambda: model.double().float(),
        "to float32": lambda: model.to(dtype=lib.float32),
    }[conversion]
    lib.set_grad(model.scale, [1.0])
    returned = convert()
    members = [*model.named_parameters(), *model.named_buffers()]
    return (
        returned is model, [(name, type(t), t.dtype) for name, t in members], model.scale.grad,
        model.head.weight is model.seq[0].weight, model.alias is model.a,
    )


@differential
def test_to_refuses_non_floating_dtypes(lib):
    return raises(lambda: lib.nn.Linear(1, 1).to(lib.int64),
                  "nn.Module.to only accepts floating point or complex dtypes", "but got desired dtype=int64")


TO_ARGUMENTS = {
    "device and non_blocking": (lambda lib: ("cpu", True), {}),
    "None and non_blocking": (lambda lib: (None, True), {}),
    "a list": (lambda lib: ([],), {}),
    "a dict": (lambda lib: ({},), {}),
    "two devices": (lambda lib: ("cpu", "cpu"), {}),
    "two dtypes": (lambda lib: (lib.float64, lib.float32), {}),
    "an unknown keyword": (lambda lib: (), {"foo": 1}),
}


@pytest.mark.parametrize("arguments", TO_ARGUMENTS)
@differential
def test_to_refuses_arguments_that_fit_no_signature(lib, arguments):
    args, kwargs = TO_ARGUMENTS[arguments]
    return raises(lambda: lib.nn.Linear(1, 1).to(*args(lib), **kwargs),
                  "to() received an invalid combination of arguments - got (", "but expected one of:")


@pytest.mark.parametrize("copy", [True, False])
@differential
def test_to_refuses_copy(lib, copy):
    return (raises(lambda: lib.nn.Linear(1, 1).to("cpu", copy=copy), ".to() does not accept copy argument"),
            raises(lambda: lib.nn.Linear(1, 1).to(lib.float64, False, copy), ".to() does not accept copy argument"))


@differential
def test_to_accepts_each_signature(lib):
    model = lib.nn.Linear(1, 1)
    calls = [lambda: model.to("cpu", None), lambda: model.to(None), lambda: model.to(lib.float64, True),
             lambda: model.to("cpu", lib.float32, True), lambda: model.to(dtype=lib.float64, non_blocking=True),
             lambda: model.to(lib.tensor(np.zeros(2, dtype=np.float32)), True)]
    return [(call() is model, model.weight.dtype) for call in calls]


@pytest.mark.parametrize("recurse", [True, False])
@differential
def test_private_apply_transforms_every_tensor(lib, recurse):
    model = net(lib)
    model._apply(lambda t: t * 2, recurse=recurse)
    return list(model.named_parameters()), list(model.named_buffers()), model.head.weight is model.seq[0].weight


@differential
def test_requires_grad_and_zero_grad(lib):
    model = net(lib)
    frozen = model.requires_grad_(False)
    trace = [frozen is model, [p.requires_grad for p in model.parameters()]]
    model.requires_grad_()
    trace.append([p.requires_grad for p in model.parameters()])
    for param in model.parameters():
        lib.set_grad(param, np.ones(tuple(param.shape)))
    model.zero_grad(set_to_none=False)
    trace.append([p.grad for p in model.parameters()])
    model.zero_grad()
    trace.append([p.grad for p in model.parameters()])
    return trace


@differential
def test_set_submodule(lib):
    model = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.Sequential(lib.nn.ReLU()))
    trace = [
        raises(lambda: model.set_submodule("", lib.nn.ReLU()), "Cannot set the submodule without a target name!"),
        raises(lambda: model.set_submodule("1.5", lib.nn.ReLU(), strict=True), "Sequential has no attribute `5`"),
        raises(lambda: model.set_submodule("0.weight", lib.nn.ReLU()), "`weight` is not an nn.Module"),
        raises(lambda: model.set_submodule("1.0", 3), "`module` is not an nn.Module, found <class 'int'>"),
        raises(lambda: model.set_submodule("9.0", lib.nn.ReLU()), "Sequential has no attribute `9`"),
    ]
    model.set_submodule("1.0", lib.nn.Identity(), strict=True)
    model.set_submodule("1.7", lib.nn.Dropout())
    return trace, repr(model)
