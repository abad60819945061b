"""Module state, forward/__call__, attribute dispatch and the registration methods' validation (chapters 1-4)."""

import pytest

from .models import make_value, where
from .observe import differential, raises

INTERNALS = (
    "training", "_parameters", "_buffers", "_non_persistent_buffers_set", "_modules",
    "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook",
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_state_dict_hooks", "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
)


@differential
def test_init_sets_state_without_going_through_setattr(lib):
    seen = []

    class Spy(lib.nn.Module):
        def __setattr__(self, name, value):
            seen.append(name)
            super().__setattr__(name, value)

    module = Spy()
    return seen, {name: type(vars(module)[name]) for name in INTERNALS}, module.training


@differential
def test_module_init_takes_no_arguments(lib):
    return [
        raises(lambda: lib.nn.Module(1), "Module.__init__() takes 1 positional argument but 2 were given"),
        raises(lambda: lib.nn.Module(x=1), "Module.__init__() got an unexpected keyword argument 'x'"),
    ]


@differential
def test_default_forward_raises_missing_forward(lib):
    class Headless(lib.nn.Module):
        pass

    return [
        raises(lambda: lib.nn.Module()(1), 'Module [Module] is missing the required "forward" function'),
        raises(lambda: Headless().forward(), 'Module [Headless] is missing the required "forward" function'),
    ]


@differential
def test_forward_is_a_class_attribute_and_call_passes_args_and_kwargs(lib):
    class Scale(lib.nn.Module):
        def forward(self, x, *, factor=1):
            return ("forward", x, factor)

    module = Scale()
    return (
        "forward" in vars(lib.nn.Module), "forward" in vars(module), callable(lib.nn.Module.forward),
        module(3), module(3, factor=2),
    )


@differential
def test_call_goes_through_an_overridable_call_impl(lib):
    class Patched(lib.nn.Linear):
        def _call_impl(self, *args, **kwargs):
            return ("patched", args, kwargs)

    return Patched(1, 1)(1, 2, key=3)


@differential
def test_setattr_dispatch_and_mutual_exclusion(lib):
    """Assign a sequence of values to one name and record, after each, where the name lives."""
    module = lib.nn.Module()
    steps = [
        ("plain value", lambda: 1),
        ("Parameter over a plain value", lambda: lib.Parameter(lib.zeros(2))),
        ("None over a Parameter", lambda: None),
        ("Module over a None parameter slot is refused", lambda: lib.nn.ReLU()),
        ("Parameter over a None parameter slot", lambda: lib.Parameter(lib.zeros(2))),
        ("Module over a parameter is refused", lambda: lib.nn.ReLU()),
        ("del", None),
        ("Module over nothing", lambda: lib.nn.ReLU()),
        ("None over a Module", lambda: None),
        ("Buffer over a None module slot is refused", lambda: lib.Buffer(lib.zeros(1))),
        ("Parameter over a None module slot", lambda: lib.Parameter(lib.ones(1))),
        ("del", None),
        ("Buffer", lambda: lib.Buffer(lib.zeros(1), persistent=False)),
        ("tensor over a non-persistent buffer keeps it one", lambda: lib.ones(3)),
        ("None over a buffer", lambda: None),
        ("Module over a buffer", lambda: lib.nn.Identity()),
        ("Parameter over a module", lambda: lib.Parameter(lib.ones(1))),
        ("del", None),
        ("persistent Buffer", lambda: lib.Buffer(lib.zeros(1))),
        ("Parameter over a buffer", lambda: lib.Parameter(lib.ones(1))),
    ]
    trace = []
    for label, make in steps:
        if make is None:
            del module.x
            continue
        trace.append((label, raises(lambda: setattr(module, "x", make())), where(module, "x")))
    module.y = lib.ones(2)
    trace.append(("plain tensor on a new name stays a plain attribute", where(module, "y")))
    return trace


@differential
def test_setattr_type_errors_for_registered_names(lib):
    module = lib.nn.Module()
    module.w = lib.Parameter(lib.zeros(1))
    module.c = lib.nn.ReLU()
    module.register_buffer("b", lib.zeros(1))
    module.register_buffer("empty_buffer", None)
    return [
        raises(lambda: setattr(module, "w", lib.zeros(1)),
               "cannot assign", "as parameter 'w'", "Parameter or None expected"),
        raises(lambda: setattr(module, "w", 3), "cannot assign 'int' as parameter 'w'"),
        raises(lambda: setattr(module, "c", 3),
               "cannot assign 'int' as child module 'c'", "Module or None expected"),
        raises(lambda: setattr(module, "b", "text"), "cannot assign 'str' as buffer 'b'", "or None expected"),
        raises(lambda: setattr(module, "empty_buffer", 1.5), "cannot assign 'float' as buffer 'empty_buffer'"),
        raises(lambda: setattr(module, "forward", lib.Parameter(lib.zeros(1))), "attribute 'forward' already exists"),
        where(module, "w"), where(module, "c"), where(module, "b"),
    ]


@pytest.mark.parametrize("kind", ["parameter", "module", "buffer", "plain"])
@differential
def test_assignment_before_module_init(lib, kind):
    values = {
        "parameter": lambda: lib.Parameter(lib.zeros(1)),
        "module": lambda: lib.nn.ReLU(),
        "buffer": lambda: lib.Buffer(lib.zeros(1)),
        "plain": lambda: 1,
    }

    class Early(lib.nn.Module):
        def __init__(self):
            self.x = values[kind]()
            super().__init__()

    return raises(Early, "cannot assign", "before Module.__init__() call")


@differential
def test_register_methods_before_module_init(lib):
    class Early(lib.nn.Module):
        def __init__(self, register):
            register(self)
            super().__init__()

    return [
        raises(lambda: Early(lambda m: m.register_parameter("w", None)),
               "cannot assign parameter before Module.__init__() call"),
        raises(lambda: Early(lambda m: m.register_buffer("b", None)),
               "cannot assign buffer before Module.__init__() call"),
        raises(lambda: Early(lambda m: m.missing), "'Early' object has no attribute 'missing'"),
    ]


@differential
def test_getattr_finds_registered_values_and_names_the_missing_one(lib):
    module = lib.nn.Linear(2, 3)
    module.register_buffer("b", lib.zeros(1))
    module.child = lib.nn.ReLU()
    return (
        module.weight.shape, module.b, module.child, hasattr(module, "nope"),
        raises(lambda: module.nope, "'Linear' object has no attribute 'nope'"),
    )


@differential
def test_delattr_removes_from_every_store(lib):
    module = lib.nn.Module()
    module.w = lib.Parameter(lib.zeros(1))
    module.register_buffer("b", lib.zeros(1), persistent=False)
    module.c = lib.nn.ReLU()
    module.plain = 1
    for name in ("w", "b", "c", "plain"):
        delattr(module, name)
    return (
        [where(module, name) for name in ("w", "b", "c", "plain")],
        module._non_persistent_buffers_set,
        raises(lambda: delattr(module, "never_there"), "never_there"),
    )


@differential
def test_dir_lists_registered_names_that_are_identifiers(lib):
    module = lib.nn.Linear(2, 2)
    module.register_buffer("b", lib.zeros(1))
    module.add_module("c", lib.nn.ReLU())
    module.plain = 1
    container = lib.nn.ModuleList([lib.nn.ReLU()])
    own = [name for name in dir(module) if not name.startswith("_") and name not in dir(type(module))]
    return own, dir(module) == sorted(dir(module)), "0" in dir(container)


REGISTER_PARAMETER_CASES = {
    "name not a string": (3, "Parameter", ["parameter name should be a string. Got int"]),
    "dotted name": ("a.b", "Parameter", ['parameter name can\'t contain "."']),
    "empty name": ("", "Parameter", ['parameter name can\'t be empty string ""']),
    "existing attribute": ("training", "Parameter", ["attribute 'training' already exists"]),
    "existing buffer": ("b", "Parameter", ["attribute 'b' already exists"]),
    "plain tensor": ("p", "tensor", ["object to parameter 'p'", "Parameter or None required"]),
    "None": ("p", "None", []),
    "replacing a parameter": ("w", "Parameter", []),
}


def _module_with_one_of_each(lib):
    module = lib.nn.Module()
    module.w = lib.Parameter(lib.zeros(1))
    module.register_buffer("b", lib.zeros(1))
    module.c = lib.nn.ReLU()
    return module


@pytest.mark.parametrize("case", REGISTER_PARAMETER_CASES)
@differential
def test_register_parameter_validation(lib, case):
    name, kind, phrases = REGISTER_PARAMETER_CASES[case]
    module = _module_with_one_of_each(lib)
    outcome = raises(lambda: module.register_parameter(name, make_value(lib, kind)), *phrases)
    return outcome, list(module._parameters), where(module, name) if isinstance(name, str) else None


REGISTER_BUFFER_CASES = {
    "name not a string": (3, "tensor", True, ["buffer name should be a string. Got int"]),
    "dotted name": ("a.b", "tensor", True, ['buffer name can\'t contain "."']),
    "empty name": ("", "tensor", True, ['buffer name can\'t be empty string ""']),
    "existing attribute": ("training", "tensor", True, ["attribute 'training' already exists"]),
    "existing parameter": ("w", "tensor", True, ["attribute 'w' already exists"]),
    "not a tensor": ("n", "int", True, ["cannot assign 'int' object to buffer 'n'", "or None required"]),
    "None": ("n", "None", True, []),
    "non-persistent": ("n", "tensor", False, []),
    "existing buffer made non-persistent": ("b", "tensor", False, []),
    "a Parameter is a tensor too": ("n", "Parameter", True, []),
}


@pytest.mark.parametrize("case", REGISTER_BUFFER_CASES)
@differential
def test_register_buffer_validation(lib, case):
    name, kind, persistent, phrases = REGISTER_BUFFER_CASES[case]
    module = _module_with_one_of_each(lib)
    outcome = raises(lambda: module.register_buffer(name, make_value(lib, kind), persistent=persistent), *phrases)
    return outcome, list(module._buffers), module._non_persistent_buffers_set


ADD_MODULE_CASES = {
    "not a module": ("x", "int", ["int is not a Module subclass"]),
    "not a module wins over a bad name": ("", "tensor", ["is not a Module subclass"]),
    "name not a string": (3, "Module", ["module name should be a string. Got int"]),
    "dotted name": ("a.b", "Module", ['module name can\'t contain ".", got: a.b']),
    "empty name": ("", "Module", ['module name can\'t be empty string ""']),
    "existing attribute": ("training", "Module", ["attribute 'training' already exists"]),
    "existing parameter": ("w", "Module", ["attribute 'w' already exists"]),
    "None": ("x", "None", []),
    "replacing a module": ("c", "Module", []),
}


@pytest.mark.parametrize("method", ["add_module", "register_module"])
@pytest.mark.parametrize("case", ADD_MODULE_CASES)
@differential
def test_add_module_validation(lib, case, method):
    name, kind, phrases = ADD_MODULE_CASES[case]
    module = _module_with_one_of_each(lib)
    outcome = raises(lambda: getattr(module, method)(name, make_value(lib, kind)), *phrases)
    return outcome, module._modules
