"""Chapter 1's tests: `Module.__init__`, the default `forward`, and `__call__` -> `_call_impl`."""
import re

from modulecraft import nn
from modulecraft.nn.modules import module as module_impl

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "module_init": "modulecraft.nn.modules.module:Module.__init__",
    "forward_unimplemented": "modulecraft.nn.modules.module:_forward_unimplemented",
    "call_impl": "modulecraft.nn.modules.module:Module._call_impl",
    "prediction": "modulecraft.exercises.c01_init_and_call:prediction",
    "FixedPipeline": "modulecraft.exercises.c01_init_and_call:FixedPipeline",
}

# While grading, every module of the kernel is built by the learner's module_init and called through the learner's
# call_impl: the exercises that build or call modules lose points when those are wrong.
BUILDS_ON = {
    "c01_call_impl": ["c01_module_init"],
    "c01_fixed_pipeline": ["c01_module_init", "c01_call_impl"],
}

EVENT_FORMATS = ("forward", "hook A", "hook B", "global", "returned")


def class_name(draw) -> str:
    return draw.name().capitalize()


def initialised_class(yours, draw):
    """A module class, under a drawn name, whose __init__ is the learner's."""
    return type(class_name(draw), (nn.Module,), {"__init__": yours.module_init})


def plain_state(module) -> list:
    """The instance attributes as (name, type name, repr) triples, sorted by name."""
    return [[name, type(value).__name__, repr(value)] for name, value in sorted(vars(module).items())]


@probe("c01_module_init_visible")
def module_init_visible(yours, draw, check):
    hint = "create each attribute with object.__setattr__(self, name, value) (section 1.2)"
    Initialised = initialised_class(yours, draw)
    check("Building a module whose __init__ is module_init", lambda: type(Initialised()).__name__, hint=hint)
    check("The attributes created by module_init", lambda: sorted(vars(Initialised())),
          hint="create exactly the attributes printed in section 1.1")
    check("The initial value and type of each attribute (name, type, value)",
          lambda: plain_state(Initialised()),
          hint="section 1.1 lists each attribute with its type and initial value")
    parameters = {name: nn.Parameter(draw.array(draw.int(1, 3))) for name in draw.names(draw.int(1, 3))}
    names = list(parameters)

    def register():
        made = Initialised()
        for name, parameter in parameters.items():
            setattr(made, name, parameter)
        return list(made._parameters)
    check(f"Registering parameters {names} after module_init", register,
          hint="__setattr__ needs a real dict in _parameters (section 1.1)")


@probe("c01_module_init_hidden")
def module_init_hidden(yours, draw, check):
    written = []

    class Spy(nn.Module):
        __init__ = yours.module_init

        def __setattr__(self, name, value):
            written.append(name)
            super().__setattr__(name, value)

    def through_setattr():
        Spy()
        return written
    check("Names module_init wrote through Module.__setattr__", through_setattr,
          hint="module_init went through Module.__setattr__ for these names: write with "
               "object.__setattr__(self, name, value) (section 1.2)")

    Twice = initialised_class(yours, draw)
    count = draw.int(2, 4)

    def shared():
        made = [vars(Twice()) for _ in range(count)]
        return sorted({name for first in made for second in made if first is not second
                       for name, value in first.items()
                       if isinstance(value, (dict, set)) and value is second.get(name)})
    check(f"Containers that {count} modules built by module_init share", shared,
          hint="two modules share the same containers: create new ones on every call (exercise 1)")
    check("vars(module)['training'] is the bool True", lambda: vars(Twice())["training"] is True,
          hint="training must be the bool True after __init__ (section 1.1)")

    children = draw.names(draw.int(2, 4))

    def children_registered():
        parent = Twice()
        for name in children:
            setattr(parent, name, Twice())
        return [name for name, _ in parent.named_children()]
    check(f"Children {children} assigned to a module built by module_init", children_registered,
          hint="__setattr__ files modules in the dict _modules, which module_init creates (section 1.1)")

    def hooks_registered():
        made = Twice()
        made.register_forward_hook(lambda *a: None, with_kwargs=True, always_call=True)
        made.register_forward_pre_hook(lambda *a: None, with_kwargs=True)
        return [len(getattr(made, hooks)) for hooks in ("_forward_hooks", "_forward_hooks_with_kwargs",
                                                         "_forward_hooks_always_called", "_forward_pre_hooks",
                                                         "_forward_pre_hooks_with_kwargs")]
    check("Hooks registered with with_kwargs and always_call, counted per hook dict", hooks_registered,
          hint="the registration methods need every hook dict of section 1.1, the kwargs ones included")

    Sub = initialised_class(yours, draw)
    extra, keyword = [draw.int(1, 64) for _ in range(draw.int(1, 3))], draw.name()
    refuse = ("module_init must refuse extra arguments itself, with torch's TypeError naming the class being built "
              "(exercise 1): accepting them silently hides a subclass's super().__init__(features) slip, and "
              "Python's own error names module_init, not the class")
    check(f"{Sub.__name__}(*{extra}): Module.__init__ called with {len(extra)} extra positional argument(s)",
          lambda: Sub(*extra), hint=refuse)
    check(f"{Sub.__name__}({extra[0]}, {keyword}=True): an extra positional and an extra keyword argument",
          lambda: Sub(extra[0], **{keyword: True}),
          hint="a keyword argument is refused first, naming the first keyword (exercise 1); " + refuse)


def default_forward_class(yours, draw):
    """A subclass, under a drawn name, of a module whose forward is the learner's default."""
    base = type("WithDefault", (nn.Module,), {"forward": yours.forward_unimplemented})
    return type(class_name(draw), (base,), {})


def forward_of(cls, inputs):
    """Call forward directly on an instance whose __init__ never ran (only its class matters)."""
    return lambda: object.__new__(cls).forward(*inputs)


@probe("c01_forward_unimplemented_visible")
def forward_unimplemented_visible(yours, draw, check):
    Encoder = default_forward_class(yours, draw)
    check(f"Calling forward of a {Encoder.__name__}, a module whose class defines no forward",
          forward_of(Encoder, (draw.array(2),)),
          hint="raise NotImplementedError naming type(self).__name__ (section 1.3)")


@probe("c01_forward_unimplemented_hidden")
def forward_unimplemented_hidden(yours, draw, check):
    Decoder = default_forward_class(yours, draw)
    for count in (0, draw.int(1, 2), draw.int(3, 5)):
        check(f"Calling forward of a {Decoder.__name__} with {count} inputs",
              forward_of(Decoder, [draw.int(0, 9) for _ in range(count)]),
              hint="it should accept *input and raise NotImplementedError naming the class (section 1.3)")


def calling_class(yours, forward):
    return type("Called", (nn.Module,), {"__call__": yours.call_impl, "forward": forward})


@probe("c01_call_impl_visible")
def call_impl_visible(yours, draw, check):
    scale, x, shift, added = draw.int(2, 5), draw.int(1, 9), draw.int(1, 9), draw.int(10, 50)
    Affine = calling_class(yours, lambda self, x, shift=0: scale * x + shift)

    def affine(*hooks):
        """An Affine with a pre-hook (first of `hooks`) and a forward hook (second), each one optional."""
        module = Affine()
        if hooks:
            module.register_forward_pre_hook(hooks[0])
        if hooks[1:]:
            module.register_forward_hook(hooks[1])
        return module
    pre_hook = lambda module, args: args[0] + added  # noqa: E731 - returns a single value, not a tuple
    check(f"Affine()({x}, shift={shift}) with no hook, forward = {scale} * x + shift",
          lambda: affine()(x, shift=shift),
          hint="without hooks, return self.forward(*args, **kwargs) (section 1.4, step 2)")
    check(f"A pre-hook returning a single value ({x} -> {x + added})", lambda: affine(pre_hook)(x),
          hint="a pre-hook result that is not a tuple is wrapped as (result,) and replaces args (step 3)")
    check("The same pre-hook, and a forward hook negating the result",
          lambda: affine(pre_hook, lambda module, args, result: -result)(x),
          hint="a forward hook result that is not None replaces the result (step 5)")


@probe("c01_call_impl_hidden")
def call_impl_hidden(yours, draw, check):
    start, step, factor, bonus = draw.int(1, 9), draw.int(1, 9), draw.int(2, 9), draw.int(1, 9)
    order = []

    def forward(self, x):
        order.append(f"forward({x})")
        return x * factor
    Traced = calling_class(yours, forward)

    def call_with_global_hooks():
        traced = Traced()
        traced.register_forward_pre_hook(lambda m, args: order.append(f"local pre 1({args[0]})") or (args[0] + step,))
        traced.register_forward_pre_hook(lambda m, args: order.append(f"local pre 2({args[0]})"))
        traced.register_forward_hook(lambda m, args, result: order.append(f"local post 1({result})") or result + bonus)
        traced.register_forward_hook(lambda m, args, result: order.append(f"local post 2({result})"))
        handles = [
            module_impl.register_module_forward_pre_hook(lambda m, args: order.append(f"global pre({args[0]})")),
            module_impl.register_module_forward_hook(lambda m, args, result: order.append(f"global post({result})")),
        ]
        try:
            return traced(start)
        finally:
            for handle in handles:
                handle.remove()
    check(f"Calling a module with global and local hooks of each kind on {start}: what it returns",
          call_with_global_hooks,
          hint="the last replacement of the result is what the call returns (section 1.4, step 5)")
    check("The kinds of the events, in the order they ran", lambda: [event.split("(")[0] for event in order],
          hint="global hooks run before local ones, each kind in the order it was registered, pre-hooks before "
               "forward (section 1.4)")
    check("What each hook and forward saw", lambda: list(order),
          hint="each hook must see the args and result as the hooks before it left them (section 1.4, steps 3 "
               "and 5)")

    value, extra = draw.int(1, 99), draw.name()
    Plain = calling_class(yours, lambda self, x: ("class forward", x))

    def instance_forward():
        plain = Plain()
        plain.forward = lambda x: ("instance forward", x)
        return plain(value)
    check(f"Calling a module whose instance has its own forward, on {value}", instance_forward,
          hint="an instance attribute model.forward was ignored: look up self.forward at call time (section 1.4, "
               "step 1)")
    seen = []

    def tuple_then_none():
        plain = Plain()
        plain.register_forward_pre_hook(lambda m, args: (args[0], extra))
        plain.register_forward_pre_hook(lambda m, args: None)
        plain.register_forward_hook(lambda m, args, result: seen.append(args))
        plain.forward = lambda a, b: [a, b]
        return plain(value)
    check(f"A pre-hook returning the tuple (x, {extra!r}), then one returning None: what forward returned",
          tuple_then_none, hint="a pre-hook returning None must leave args unchanged (section 1.4, step 3)")
    check("The args the forward hook received", lambda: list(seen),
          hint="forward hooks receive the args given to forward (section 1.4, step 5)")


def event_formats(events) -> list:
    """Which of the cell's formats the events use (sorted: the form, not the order)."""
    return sorted(next((kind for kind in EVENT_FORMATS if re.fullmatch(rf"{kind}(\(-?\d+\)| -?\d+)", event)), "?")
                  for event in events)


@probe("c01_predict_hooks_visible")
def predict_hooks_visible(yours, draw, check):
    x = draw.int(2, 99)
    hint = ("prediction(x) returns the five events as strings: forward, three hooks and the returned value "
            "(exercise 3)")
    check(f"prediction({x}) is a list of 5 strings",
          lambda: (lambda events: isinstance(events, list) and len(events) == 5
                   and all(isinstance(e, str) for e in events))(yours.prediction(x)), hint=hint)
    check(f"The formats prediction({x}) uses (sorted)", lambda: event_formats(yours.prediction(x)),
          hint="use the formats of the cell: 'forward(x)', 'hook A(r)', 'hook B(r)', 'global(r)', 'returned r'")


@probe("c01_predict_hooks_hidden")
def predict_hooks_hidden(yours, draw, check):
    for x in draw.sample(range(-50, 100), 3):
        check(f"prediction({x})", lambda: yours.prediction(x),
              hint="the pre-hook's single value replaces the input; global hooks run before local ones; each hook "
                   "sees the result as it stands, and B's return value replaces what model(x) returns "
                   "(section 1.4, steps 3-5)")


def drawn_weights(draw) -> list:
    """Weights and biases for encoder (2 -> 3) and head (3 -> 1), drawn before anything runs."""
    return [draw.array(3, 2), draw.array(3), draw.array(1, 3), draw.array(1)]


def drawn_pipeline(yours, weights):
    """A FixedPipeline holding `weights` (so that outputs do not depend on how the layers were initialised)."""
    pipeline = yours.FixedPipeline()
    for array, target in zip(weights, (pipeline.encoder.weight, pipeline.encoder.bias, pipeline.head.weight,
                                       pipeline.head.bias)):
        target[...] = array
    return pipeline


@probe("c01_fixed_pipeline_visible")
def fixed_pipeline_visible(yours, draw, check):
    rows = draw.int(1, 6)
    x, weights = draw.array(rows, 2), drawn_weights(draw)
    calls = []

    def call():
        pipeline = drawn_pipeline(yours, weights)
        pipeline.encoder.register_forward_hook(lambda module, args, result: calls.append("encoder"))
        pipeline.head.register_forward_hook(lambda module, args, result: calls.append("head"))
        return pipeline(x)
    check(f"FixedPipeline()(x) for x of shape ({rows}, 2)", call, close=True,
          hint="forward still applies encoder, then head (exercise 5)")
    check("The hooks that ran during one call", lambda: list(calls),
          hint="call the children, self.encoder(x), not self.encoder.forward(x): forward skips every hook "
               "(section 1.4)")


@probe("c01_fixed_pipeline_hidden")
def fixed_pipeline_hidden(yours, draw, check):
    x, replacement, weights = draw.array(draw.int(1, 4), 2), draw.array(3), drawn_weights(draw)
    ran = []

    def call():
        pipeline = drawn_pipeline(yours, weights)
        pipeline.encoder.register_forward_pre_hook(lambda m, args: ran.append("encoder pre"))
        pipeline.encoder.register_forward_hook(lambda m, args, result: ran.append("encoder"))
        pipeline.head.register_forward_pre_hook(lambda m, args: ran.append("head pre") or (args[0] * 0 + replacement,))
        pipeline.head.register_forward_hook(lambda m, args, result: ran.append("head"))
        return pipeline(x)
    check("FixedPipeline()(x), where a pre-hook on head replaces its input", call, close=True,
          hint="a pre-hook on head that replaced its input was ignored: call self.head(...) so its hooks run "
               "(section 1.4)")
    check("The hooks of encoder and head that ran, in order", lambda: list(ran),
          hint="call self.encoder(...) and self.head(...), not self.encoder.forward(...) or self.head.forward(...): "
               "calling a child runs its hooks, calling its forward skips them (section 1.4)")
