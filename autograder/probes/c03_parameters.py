"""Chapter 3's tests: parameters, a flagged array and `register_parameter`."""
import numpy as np

from modulecraft import nn
from modulecraft.autograd.tensor import Tensor

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "Parameter": "modulecraft.exercises.c03_parameters:Parameter",
    "register_parameter": "modulecraft.nn.modules.module:Module.register_parameter",
    "predicted_outcome": "modulecraft.exercises.c03_parameters:predicted_outcome",
    "Scale": "modulecraft.exercises.c03_parameters:Scale",
    "FixedExperts": "modulecraft.exercises.c03_parameters:FixedExperts",
}

# While grading, every parameter assigned in the kernel (`self.weight = nn.Parameter(...)`) is registered by the
# learner's register_parameter.
BUILDS_ON = {
    "c03_scale": ["c03_register_parameter"],
    "c03_fixed_experts": ["c03_register_parameter"],
}

CONTAINERS = ("__dict__", "_parameters", "_modules", "_buffers", "_non_persistent_buffers_set")
OUTCOMES = ("ok", "KeyError", "TypeError", "AttributeError")
METHODS = ("eval", "train", "forward", "apply", "parameters", "training", "zero_grad")


def where(module, name):
    """The containers of `module` that hold `name`."""
    state = vars(module)
    return [key for key in CONTAINERS if name in (state if key == "__dict__" else state.get(key, ()))]


class Owner(nn.Module):
    """A module that files whatever assignment dispatches to register_parameter, checking nothing (a fixture that
    shows the reference's dispatch without going through anyone's register_parameter)."""

    def register_parameter(self, name, param):
        self._parameters[name] = param


# modulecraft's classes that hold this exercise's __new__ and __array_finalize__: they stay in the grading kernel
# (the chapter's modules are built with them), so `class Parameter(nn.Parameter)` would take the answer from them.
PARAMETER_CLASSES = (nn.Parameter, nn.Buffer, Tensor)


def _codes(namespace):
    """The code objects of the functions in a class's namespace (methods, static and class methods, properties)."""
    for value in namespace.values():
        for function in (value, getattr(value, "__func__", None), getattr(value, "fget", None)):
            if hasattr(function, "__code__"):
                yield function.__code__


PARAMETER_CODES = {id(code): f"{sibling.__name__}.{code.co_name}" for sibling in PARAMETER_CLASSES
                   for code in _codes(vars(sibling))}


def siblings_inherited(cls):
    """What `cls` takes from PARAMETER_CLASSES: the classes it inherits from (read from the interpreter's own MRO,
    which a metaclass cannot fake, and compared by identity), and their methods' code it reuses (an assignment,
    `types.FunctionType(nn.Parameter.__new__.__code__, ...)`)."""
    mro = type.__dict__["__mro__"].__get__(cls, type)
    own = type.__dict__["__dict__"].__get__(cls, type)
    inherited = [sibling.__name__ for sibling in PARAMETER_CLASSES if any(base is sibling for base in mro)]
    return inherited + sorted({PARAMETER_CODES[id(code)] for code in _codes(own) if id(code) in PARAMETER_CODES})


SIBLING_HINT = ("your Parameter inherits from modulecraft's nn.Parameter (or Tensor), which is not yours to reuse "
                "here: subclass np.ndarray and write __new__ and __array_finalize__ yourself (section 3.2)")


def registering_class(yours):
    """A module whose register_parameter is the learner's."""
    return type("Registering", (nn.Module,), {"register_parameter": yours.register_parameter})


# -- exercise 1: Parameter --------------------------------------------------------------------------------------
@probe("c03_parameter_visible")
def parameter_visible(yours, draw, check):
    values = draw.array(draw.int(2, 6))
    name = draw.name()
    check("type(Parameter(values)).__name__", lambda: type(yours.Parameter(values)).__name__,
          hint="__new__ returns np.asarray(data).view(cls) with requires_grad set (section 3.2)")
    check("modulecraft classes your Parameter inherits from", lambda: siblings_inherited(yours.Parameter),
          hint=SIBLING_HINT)
    check("Parameter(values) holds the values", lambda: yours.Parameter(values),
          hint="__new__ returns np.asarray(data).view(cls) (section 3.2)")
    check("isinstance(Parameter(values), nn.Parameter)", lambda: isinstance(yours.Parameter(values), nn.Parameter),
          hint="set the class attribute _is_param = True (section 3.3)")
    check("Parameter(values) is a view of values, not a copy (they share memory)",
          lambda: np.shares_memory(yours.Parameter(values), values),
          hint="Parameter(values) made a copy of values: np.array(data) copies, np.asarray(data).view(cls) views "
               "the same memory and does not copy (section 3.2)")
    check("Parameter(values).requires_grad", lambda: yours.Parameter(values).requires_grad,
          hint="the default is True (section 3.1)")
    check("Parameter(values, requires_grad=False).requires_grad",
          lambda: yours.Parameter(values, requires_grad=False).requires_grad, hint="store the argument (section 3.2)")

    def registered():
        owner = Owner()
        setattr(owner, name, yours.Parameter(values))
        return where(owner, name)
    check(f"Where your parameter lives after module.{name} = Parameter(...)", registered,
          hint="the reference registers any array with _is_param = True (section 3.3)")


@probe("c03_parameter_hidden")
def parameter_hidden(yours, draw, check):
    size, factor = draw.int(2, 6), draw.int(2, 9)
    values = draw.array(size)
    check("modulecraft classes your Parameter inherits from", lambda: siblings_inherited(yours.Parameter),
          hint=SIBLING_HINT)
    check("Parameter(): (type, shape, dtype)",
          lambda: (lambda p: (type(p).__name__, p.shape, str(p.dtype)))(yours.Parameter()),
          hint="with no data, a view of np.empty(0, dtype=np.float32) (section 3.2)")
    frozen = lambda: yours.Parameter(np.array(values), requires_grad=False)  # noqa: E731 - a fresh one per check
    start = draw.int(0, size - 1)
    check(f"Parameter(..., requires_grad=False)[{start}:].requires_grad", lambda: frozen()[start:].requires_grad,
          hint="a slice must inherit requires_grad through __array_finalize__ (section 3.2)")
    check("np.ones(...).view(Parameter).requires_grad", lambda: np.ones(size).view(yours.Parameter).requires_grad,
          hint="an array viewed as Parameter defaults to requires_grad=True (__array_finalize__, section 3.2)")
    for label, compute in [(f"p * {factor}", lambda p: p * factor), ("p + p", lambda p: p + p),
                           ("np.exp(p)", np.exp)]:
        check(f"type of {label}", lambda compute=compute: type(compute(frozen())).__name__,
              hint="arithmetic results must be plain np.ndarray (__array_wrap__, section 3.2)")
    check(f"p * {factor}", lambda: np.asarray(frozen() * factor), close=True,
          hint="arithmetic results must be plain np.ndarray (__array_wrap__, section 3.2)")

    def in_place():
        p = frozen()
        same = p
        same += factor
        return same is p, type(same).__name__, np.asarray(p)
    check(f"p += {factor}: (the same object, its type, its values)", in_place, close=True,
          hint="p += 1 must update the parameter in place and keep it a Parameter (section 3.2)")


# -- exercise 3: register_parameter -----------------------------------------------------------------------------
@probe("c03_register_parameter_visible")
def register_parameter_visible(yours, draw, check):
    layer = registering_class(yours)()
    weight = nn.Parameter(draw.array(draw.int(1, 4)))
    name, plain, left, right = draw.names(4)
    check(f"layer.register_parameter('{name}', p)", lambda: layer.register_parameter(name, weight),
          hint="a new name and a Parameter pass every check (section 3.4)")
    check(f"layer._parameters['{name}'] is p after register_parameter('{name}', p)",
          lambda: layer._parameters.get(name) is weight,
          hint="register_parameter stored a copy of p (or nothing): store the parameter object itself, "
               "self._parameters[name] = param, so that training it trains the module (section 3.4)")
    check(f"register_parameter('{left}.{right}', p)", lambda: layer.register_parameter(f"{left}.{right}", weight),
          hint="dots are not allowed in a name (section 3.4)", phrase='contain "."')
    check(f"register_parameter('{plain}', np.ones(2))", lambda: layer.register_parameter(plain, np.ones(2)),
          hint="only a Parameter or None may be registered (section 3.4)", phrase=f"parameter '{plain}'")


@probe("c03_register_parameter_hidden")
def register_parameter_hidden(yours, draw, check):
    Registering = registering_class(yours)
    layer = Registering()
    weight = nn.Parameter(draw.array(draw.int(1, 4)))
    first, second = draw.sample(METHODS, 2)
    number = draw.int(1, 99)
    for name, phrase, hint in [
        ("", "empty string", "the empty name is refused (section 3.4)"),
        (first, "already exists", "an existing attribute may not become a parameter (section 3.4)"),
        (second, "already exists", "an existing attribute may not become a parameter (section 3.4)"),
        (number, "should be a string", "a name must be a str (section 3.4)"),
    ]:
        check(f"register_parameter({name!r}, p) is refused", lambda name=name: layer.register_parameter(name, weight),
              hint=hint, phrase=phrase)
    bias, early_name = draw.names(2)
    check(f"register_parameter('{bias}', None): (its result, the entry is None)",
          lambda: (layer.register_parameter(bias, None), layer._parameters.get(bias, 0) is None),
          hint="None is a valid parameter (section 3.4)")
    check(f"registering '{bias}' again with a Parameter stores it",
          lambda: (layer.register_parameter(bias, weight), layer._parameters.get(bias) is weight),
          hint="re-registering an existing parameter name is allowed (section 3.4)")
    early = object.__new__(Registering)
    check("register_parameter before Module.__init__() ran", lambda: early.register_parameter(early_name, weight),
          hint="section 3.4, first row: check for _parameters in self.__dict__ first",
          phrase="before Module.__init__() call")
    check("register_parameter('', array): which is refused first, the name or the value",
          lambda: layer.register_parameter("", np.ones(1)),
          hint="the name is checked before the value, so the empty name fails first (section 3.4, the order of the "
               "table)", phrase="empty string")


# -- exercise 2: predict register_parameter's outcomes ----------------------------------------------------------
def scenario(names):
    """A module with a parameter, a plain attribute and a child, filed in its containers directly."""
    weight, note, child = names
    module = nn.Module()
    module._parameters[weight] = nn.Parameter(np.ones(2, dtype=np.float32))
    vars(module)[note] = "a plain attribute"
    module._modules[child] = nn.ReLU()
    return module


def calls(draw, names):
    """A register_parameter call of every kind section 3.4's table tells apart, with drawn names, in a drawn order."""
    weight, note, child = names
    fresh, other, left, right = draw.names(4)
    param = nn.Parameter(np.ones(1, dtype=np.float32))
    kinds = [(weight, None), (weight, param), (draw.choice(METHODS), param), (fresh, np.ones(2, dtype=np.float32)),
             (note, param), (child, param), ("", "not an array"), (f"{left}.{right}", np.ones(1)), (other, param),
             (draw.int(1, 9), param), (child, None), ("", param)]
    return draw.shuffled(kinds)


def outcomes(yours, names, chosen):
    return [yours.predicted_outcome(scenario(names), name, value) for name, value in chosen]


@probe("c03_predict_registration_visible")
def predict_visible(yours, draw, check):
    names = draw.names(3)
    chosen = calls(draw, names)
    check(f"your predicted_outcome gives, for each of {len(chosen)} calls, 'ok' or an exception's name",
          lambda: all(outcome in OUTCOMES for outcome in outcomes(yours, names, chosen)),
          hint="return 'ok', 'KeyError', 'TypeError' or 'AttributeError' (a string), without calling "
               "register_parameter (exercise 2)")


@probe("c03_predict_registration_hidden")
def predict_hidden(yours, draw, check):
    for _ in range(2):
        names = draw.names(3)
        chosen = calls(draw, names)
        check("the outcomes of register_parameter calls you have not seen",
              lambda names=names, chosen=chosen: outcomes(yours, names, chosen),
              hint="the name is checked before the value; a method, an attribute in __dict__ or a child module's "
                   "name already exists: register_parameter does not remove it the way assignment does; None may "
                   "replace a parameter (section 3.4)")


# -- exercise 4: Scale ------------------------------------------------------------------------------------------
@probe("c03_scale_visible")
def scale_visible(yours, draw, check):
    features = draw.int(2, 5)
    x = draw.array(features)
    check(f"Building Scale({features})", lambda: type(yours.Scale(features)).__name__,
          hint="call super().__init__() first, then assign nn.Parameter objects (exercise 4)")
    check(f"Names of Scale({features}).named_parameters()",
          lambda: [name for name, _ in yours.Scale(features).named_parameters()],
          hint="assign nn.Parameter objects in __init__ (section 3.1)")
    check(f"Scale({features}).weight", lambda: np.asarray(yours.Scale(features).weight),
          hint="ones of shape (features,), dtype float32 (exercise 4)")
    check(f"Scale({features})(x) for a drawn x", lambda: np.asarray(yours.Scale(features)(x)), close=True,
          hint="x * weight + bias (exercise 4)")


@probe("c03_scale_hidden")
def scale_hidden(yours, draw, check):
    features = draw.int(2, 5)
    x, bias = draw.array(features), draw.array(features)
    check(f"Scale({features}, bias=False): where 'bias' lives, and whether its entry is None",
          lambda: (lambda s: (where(s, "bias"), s._parameters.get("bias", 0) is None))(yours.Scale(features, bias=False)),
          hint="with bias=False, 'bias' must be registered as a None parameter with register_parameter('bias', None), "
               "not stored as an ordinary attribute (section 3.5)")
    check(f"named_parameters and state_dict of Scale({features}, bias=False)",
          lambda: (lambda s: ([n for n, _ in s.named_parameters()], list(s.state_dict())))(
              yours.Scale(features, bias=False)),
          hint="a None parameter is skipped by traversal and by the state_dict (section 3.5)")
    check(f"Scale({features}, bias=False)(x)", lambda: np.asarray(yours.Scale(features, bias=False)(x)), close=True,
          hint="without a bias, forward is x * weight (exercise 4)")

    def biased():
        scale = yours.Scale(features)
        shape_dtype = (scale.bias.shape, str(scale.bias.dtype))
        scale.bias[...] = bias
        return shape_dtype, np.asarray(scale(x))
    check(f"Scale({features}): (the bias's shape and dtype, forward(x) once the bias is set)", biased, close=True,
          hint="bias: zeros, shape (features,), float32; forward must add the bias when it exists (exercise 4)")


# -- exercise 5: FixedExperts -----------------------------------------------------------------------------------
@probe("c03_fixed_experts_visible")
def fixed_experts_visible(yours, draw, check):
    count, features = draw.int(2, 4), draw.int(2, 4)
    check(f"Names of FixedExperts({count}, {features}).named_parameters()",
          lambda: [name for name, _ in yours.FixedExperts(count, features).named_parameters()],
          hint="a dict of parameters is an ordinary attribute; register each with register_parameter under the name "
               "scale_<i> (section 3.4)")
    check(f"FixedExperts({count}, {features})(x) for x of ones",
          lambda: np.asarray(yours.FixedExperts(count, features)(np.ones(features, dtype=np.float32))), close=True,
          hint="multiply x by 1, 2, ..., count (exercise 5)")


@probe("c03_fixed_experts_hidden")
def fixed_experts_hidden(yours, draw, check):
    count, features = draw.int(2, 4), draw.int(2, 4)
    changed, value = draw.int(0, count - 1), draw.choice([0.5, 0.25, -2.0, -1.0])  # never a scale's own value (1..4)
    x = draw.array(features)

    def run():
        experts = yours.FixedExperts(count, features)
        getattr(experts, f"scale_{changed}")[...] = value
        return experts, np.asarray(experts(x))
    check(f"the state_dict of FixedExperts({count}, {features})", lambda: list(run()[0].state_dict()),
          hint="every scale must be a registered parameter named scale_<i> (section 3.4)")
    check(f"the output after setting scale_{changed} to {value}", lambda: run()[1], close=True,
          hint="forward must use the registered parameters themselves, not copies kept elsewhere (exercise 5)")
    check("'scales' in the fixed module's __dict__", lambda: "scales" in vars(run()[0]),
          hint="the dict of scales is gone from the fixed module's __dict__ (exercise 5)")
