"""Hypothesis: random sequences of assignments, deletions and registrations on one module, replayed on both libraries.

After every step, where each name lives (parameters / buffers / modules / __dict__, persistence, stored type), the
exception type of a refused step and the state_dict keys must match torch's. This explores the combinations of
`__setattr__`'s dispatch, its None rules and the registration methods' checks that no hand-written list covers.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from .backends import backend
from .models import make_value, where
from .observe import observe, raises

NAMES = ("x", "y", "training")
KINDS = ("Parameter", "Module", "Buffer", "non-persistent Buffer", "tensor", "None", "int")
STEPS = st.one_of(
    st.tuples(st.sampled_from(["setattr", "register_parameter", "add_module"]), st.sampled_from(NAMES),
              st.sampled_from(KINDS)),
    st.tuples(st.just("register_buffer"), st.sampled_from(NAMES), st.sampled_from(KINDS), st.booleans()),
    st.tuples(st.just("delattr"), st.sampled_from(NAMES)),
)


def run_step(lib, module, step):
    action, name, *rest = step
    if action == "delattr":
        delattr(module, name)
    elif action == "register_buffer":
        module.register_buffer(name, make_value(lib, rest[0]), persistent=rest[1])
    else:
        target = setattr if action == "setattr" else getattr(module, action)
        args = (module, name, make_value(lib, rest[0])) if action == "setattr" else (name, make_value(lib, rest[0]))
        target(*args)


def replay(lib, steps):
    module = lib.nn.Module()
    trace = []
    for step in steps:
        outcome = raises(lambda: run_step(lib, module, step))
        trace.append((repr(step), outcome, [where(module, name) for name in NAMES], list(module.state_dict())))
    return observe(trace, lib, oracle=lib.name == "torch")


@settings(max_examples=60, deadline=None)
@given(st.lists(STEPS, max_size=10))
def test_attribute_steps_match_torch(steps):
    assert replay(backend("modulecraft"), steps) == replay(backend("torch"), steps)
