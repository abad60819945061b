"""Which mechanism methods each public operation goes through, as in torch.

The course plugs a learner's version of one method into a subclass (`named_modules = learner_named_modules`,
`_call_impl = ...`, `register_buffer = ...`) and expects every operation built on it to use it. That only works
if modulecraft's methods call each other the way torch's do, so the calls are observed here.
"""

import copy

import pytest

from .observe import differential, raises

SEAMS = (
    "named_modules", "modules", "named_children", "children", "_named_members", "named_parameters",
    "parameters", "named_buffers", "buffers", "register_parameter", "register_buffer", "add_module",
    "_apply", "_save_to_state_dict", "_load_from_state_dict", "_call_impl", "forward", "extra_repr",
    "state_dict", "train", "_get_name", "__setattr__", "__delattr__",
)  # not __getattr__: torch also reaches it through details with no numpy counterpart (zero_grad's `_is_replica`)


def spied_model(lib, calls):
    """A root module whose every seam records its name when called (the children are plain library modules)."""
    class Root(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(2, 2)
            self.norm = lib.nn.BatchNorm1d(2)
            self.scale = lib.Parameter(lib.ones(1))
            self.register_buffer("steps", lib.zeros(1))

        def forward(self, x):
            return self.norm(self.fc(x)) * self.scale

    def spy(name):
        method = getattr(lib.nn.Module, name)

        def recorded(self, *args, **kwargs):
            calls.append(name)
            return method(self, *args, **kwargs)
        return recorded

    for name in SEAMS:
        if name not in vars(Root):
            setattr(Root, name, spy(name))
    forward = Root.forward
    Root.forward = lambda self, x: calls.append("forward") or forward(self, x)
    return Root()


OPERATIONS = {
    "modules": lambda lib, m: list(m.modules()),
    "children": lambda lib, m: list(m.children()),
    "named_children": lambda lib, m: list(m.named_children()),
    "parameters": lambda lib, m: list(m.parameters()),
    "named_parameters": lambda lib, m: list(m.named_parameters()),
    "buffers": lambda lib, m: list(m.buffers()),
    "named_buffers": lambda lib, m: list(m.named_buffers()),
    "train": lambda lib, m: m.train(),
    "eval": lambda lib, m: m.eval(),
    "apply": lambda lib, m: m.apply(lambda module: None),
    "requires_grad_": lambda lib, m: m.requires_grad_(False),
    "zero_grad": lambda lib, m: m.zero_grad(),
    "double": lambda lib, m: m.double(),
    "to": lambda lib, m: m.to(lib.float64),
    "state_dict": lambda lib, m: m.state_dict(),
    "load_state_dict": lambda lib, m: m.load_state_dict(m.state_dict()),
    "call": lambda lib, m: m(lib.ones(3, 2)),
    "repr": lambda lib, m: repr(m),
    "get_submodule": lambda lib, m: m.get_submodule("fc"),
    "get_parameter": lambda lib, m: m.get_parameter("fc.weight"),
    "assign a parameter": lambda lib, m: setattr(m, "extra", lib.Parameter(lib.ones(1))),
    "assign a tensor to a buffer": lambda lib, m: setattr(m, "steps", lib.ones(1)),
    "assign a Buffer": lambda lib, m: setattr(m, "extra", lib.Buffer(lib.ones(1))),
    "assign a module": lambda lib, m: setattr(m, "extra", lib.nn.ReLU()),
    "assign None to a parameter": lambda lib, m: setattr(m, "scale", None),
    "assign None to a buffer": lambda lib, m: setattr(m, "steps", None),
    "assign None to a module": lambda lib, m: setattr(m, "fc", None),
    "delete a buffer": lambda lib, m: delattr(m, "steps"),
    "dir": lambda lib, m: dir(m),
    "deepcopy": lambda lib, m: copy.deepcopy(m),
}


@pytest.mark.parametrize("operation", OPERATIONS)
@differential
def test_operation_goes_through_the_same_seams(lib, operation):
    calls = []
    model = spied_model(lib, calls)
    calls.clear()
    OPERATIONS[operation](lib, model)
    return sorted(set(calls))


@differential
def test_setattr_works_with_a_register_buffer_override_without_persistent(lib):
    """A learner's `register_buffer(self, name, tensor)` (no `persistent`) still receives assigned buffers."""
    calls = []

    class OldStyle(lib.nn.Module):
        def register_buffer(self, name, tensor):
            calls.append(name)
            super().register_buffer(name, tensor)

    module = OldStyle()
    module.kept = lib.Buffer(lib.zeros(1))
    module.kept = lib.ones(1)
    refused = raises(lambda: setattr(module, "hidden", lib.Buffer(lib.zeros(1), persistent=False)),
                     "Registering a non-persistent buffer on a Module subclass that implements "
                     "register_buffer() without the persistent argument is not allowed.")
    return calls, refused, list(module._buffers)
