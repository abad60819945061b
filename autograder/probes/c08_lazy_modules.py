"""Chapter 8's tests: placeholders, the one-shot pre-hook, lazy loading, shape inference."""
import numpy as np

import modulecraft
from modulecraft import nn
from modulecraft.nn.modules.lazy import LazyModuleMixin
from modulecraft.nn.parameter import is_lazy

from . import Reference, probe

# The learner's names in this chapter, and where the reference keeps each: while grading, every placeholder
# materialises, every lazy layer infers and loads, and LazyLinear initialises with the learner's code.
YOURS = {
    "materialize": "modulecraft.nn.parameter:UninitializedTensorMixin.materialize",
    "_infer_parameters": "modulecraft.nn.modules.lazy:LazyModuleMixin._infer_parameters",
    "_lazy_load_hook": "modulecraft.nn.modules.lazy:LazyModuleMixin._lazy_load_hook",
    "initialize_parameters": "modulecraft.nn.modules.linear:LazyLinear.initialize_parameters",
}

# While grading, placeholders materialise with the learner's `materialize` (exercise 1) wherever they are.
BUILDS_ON = {
    "c08_lazy_load_hook": ["c08_materialize"],
    "c08_initialize_parameters": ["c08_materialize"],
}

PREDICTIONS = {"class_after_load": (str,), "in_features_after_load": (int,), "pre_hooks_after_load": (int,),
               "error_on_wrong_width": (str, type(None))}


# -- fixtures ---------------------------------------------------------------------------------------------------
def placeholder_class(yours):
    class Placeholder(nn.UninitializedParameter):
        materialize = yours.materialize
    return Placeholder


def filled_parameters(layer, width, values):
    """What a layer's `initialize_parameters` may do without materialising: new Parameters in the placeholders'
    place (the probes of `_infer_parameters` do not go through exercise 1)."""
    layer.in_features = width
    layer.weight = nn.Parameter(values[: layer.out_features * width].reshape(layer.out_features, width))
    if layer.bias is not None:
        layer.bias = nn.Parameter(values[: layer.out_features])


def infer_class(yours, draw, **attributes):
    """A LazyLinear whose first-call pre-hook is the learner's; it fills its parameters from drawn values."""
    values = draw.array(64)

    def initialize_parameters(self, input, *args, **kwargs):
        filled_parameters(self, np.shape(input)[-1], values)

    return type(draw.choice(("Lazy", "Deferred", "Late", "Pending")) + draw.choice(("Dense", "Affine", "Proj")),
                (nn.LazyLinear,), {"_infer_parameters": yours._infer_parameters,
                                   "initialize_parameters": initialize_parameters, **attributes})


def loading_class(yours):
    class LoadingLazy(nn.LazyLinear):
        _lazy_load_hook = yours._lazy_load_hook
    return LoadingLazy


def my_lazy_linear_class(yours):
    """The notebook's MyLazyLinear: a Linear whose shapes come from the learner's `initialize_parameters`."""
    class MyLazyLinear(LazyModuleMixin, nn.Linear):
        cls_to_become = nn.Linear
        initialize_parameters = yours.initialize_parameters

        def __init__(self, out_features, bias=True):
            super().__init__(0, 0, bias=False)
            self.weight = nn.UninitializedParameter()
            self.out_features = out_features
            if bias:
                self.bias = nn.UninitializedParameter()

        def reset_parameters(self):
            if not self.has_uninitialized_params() and self.in_features != 0:
                super().reset_parameters()
    return MyLazyLinear


def as_loaded(layer, state):
    """The layer as a load leaves it (placeholders replaced by the checkpoint's values, in_features still 0),
    without going through exercise 3's hook."""
    layer.weight = nn.Parameter(state["weight"].copy())
    if "bias" in state:
        layer.bias = nn.Parameter(state["bias"].copy())
    return layer


# -- exercise 1: materialize --------------------------------------------------------------------------------------
@probe("c08_materialize_visible")
def materialize_visible(yours, draw, check):
    Placeholder = placeholder_class(yours)
    size, shape = draw.int(1, 9), (draw.int(1, 5), draw.int(1, 5))
    dtype = draw.choice(("float64", "float16", "int32"))
    name = draw.name()

    def same_object():
        placeholder, module = Placeholder(), nn.Module()
        setattr(module, name, placeholder)
        result = getattr(module, name).materialize((size,))
        return result is None, getattr(module, name) is placeholder, module._parameters[name] is placeholder
    check("materialize works in place: (returns None, the module holds the same object, so does its _parameters)",
          same_object, hint="see 8.1 ('materialize'): do not build a new Parameter; change `self` itself.")

    def materialized():
        placeholder = Placeholder()
        placeholder.materialize(shape)
        return type(placeholder).__name__, placeholder.shape
    check(f"type and shape of Placeholder() after materialize({shape})", materialized,
          hint="see 8.1 ('materialize'): resize self in place, then set self.__class__ = self.cls_to_become.")

    def with_dtype():
        placeholder = Placeholder()
        placeholder.materialize((size,), dtype=np.dtype(dtype))
        return str(placeholder.dtype), placeholder.shape
    check(f"dtype of Placeholder() after materialize(({size},), dtype=np.{dtype}): (dtype, shape)", with_dtype,
          hint="see 8.1 ('materialize'), step 1: set self.dtype before resizing.")


@probe("c08_materialize_hidden")
def materialize_hidden(yours, draw, check):
    Placeholder = placeholder_class(yours)
    size, listed = draw.int(2, 9), [draw.int(1, 4), draw.int(1, 4)]
    own_dtype = draw.choice(("float64", "float16"))
    shape = (draw.int(1, 3), draw.int(1, 3))

    def from_int():
        frozen = Placeholder(requires_grad=False)
        frozen.materialize(size)
        return type(frozen).__name__, frozen.shape, frozen.requires_grad
    check(f"materialize({size}) (an int) of Placeholder(requires_grad=False): (type, shape, requires_grad)",
          from_int, hint="see 8.1 ('materialize'), step 2: an int n means the shape (n,); requires_grad stays.")

    def own_dtype_kept():
        wide = Placeholder(dtype=np.dtype(own_dtype))
        wide.materialize(shape)
        return str(wide.dtype)
    check(f"Without a dtype argument the placeholder keeps its own dtype: Placeholder(dtype=np.{own_dtype})"
          f".materialize({shape})", own_dtype_kept, hint="see 8.1 ('materialize'): change dtype only when given.")

    def from_list():
        placeholder = Placeholder()
        placeholder.materialize(list(listed))
        return placeholder.shape, is_lazy(placeholder)
    check(f"A shape given as a list works too: materialize({listed}): (shape, still lazy)", from_list,
          hint="see 8.1 ('materialize'): resize to tuple(shape).")


# -- exercise 2: _infer_parameters ----------------------------------------------------------------------------------
@probe("c08_infer_parameters_visible")
def infer_parameters_visible(yours, draw, check):
    Infer = infer_class(yours, draw)
    out, batch, width = draw.int(1, 5), draw.int(1, 5), draw.int(1, 5)
    layer = Infer(out)
    hint = "see 8.2: initialise, check, remove both hooks and their attributes, then swap the class."

    def first_call():
        output = layer(np.ones((batch, width), dtype=np.float32))
        return type(layer).__name__, np.shape(output)
    check(f"class and output shape after the first call with input of shape ({batch}, {width})", first_call,
          hint=hint)
    check("hooks left on the module after the first call: (forward pre-hooks, load_state_dict pre-hooks)",
          lambda: (len(layer._forward_pre_hooks), len(layer._load_state_dict_pre_hooks)),
          hint="see 8.2, step 3: call remove() on module._initialize_hook and module._load_hook.")
    check("the hook attributes are gone: names left in vars(layer)",
          lambda: [name for name in ("_initialize_hook", "_load_hook") if name in vars(layer)],
          hint="see 8.2, step 3: delattr(module, '_initialize_hook') and delattr(module, '_load_hook').")


@probe("c08_infer_parameters_hidden")
def infer_parameters_hidden(yours, draw, check):
    out, width, calls_made = draw.int(1, 4), draw.int(1, 4), draw.int(2, 4)
    marker = draw.name()

    def forgets_bias(self, input):
        self.weight = nn.Parameter(np.ones((self.out_features, np.shape(input)[-1]), dtype=np.float32))
    Incomplete = infer_class(yours, draw, initialize_parameters=forgets_bias)
    check("A module with a placeholder left after initialize_parameters must raise RuntimeError before forward runs "
          "(its message says: module <name> has not been fully initialized)",
          lambda: type(Incomplete(out)(np.ones((1, width), dtype=np.float32))).__name__,
          hint="see 8.2, step 2: if module.has_uninitialized_params(), raise RuntimeError.")

    def stays():
        Stay = infer_class(yours, draw, cls_to_become=None)
        layer = Stay(out)
        layer(np.ones((1, width), dtype=np.float32))
        return type(layer) is Stay, layer.has_uninitialized_params()
    check("Without cls_to_become the class must stay: (same class after the first call, placeholders left)", stays,
          hint="see 8.2, step 4: swap the class only when module.cls_to_become is not None.")

    seen = []

    def keyword_initialize(self, input=None, *, extra=None):
        seen.append(extra)
        filled_parameters(self, np.shape(input)[-1], np.ones(64, dtype=np.float32))

    def keyword_forward(self, input=None, *, extra=None):
        return nn.Linear.forward(self, input)
    Keyword = infer_class(yours, draw, initialize_parameters=keyword_initialize, forward=keyword_forward)
    check("Keyword arguments of the call must reach initialize_parameters: (what it saw as `extra`, weight shape)",
          lambda: (lambda layer: (layer(np.ones((1, width), dtype=np.float32), extra=marker), seen,
                                  layer.weight.shape)[1:])(Keyword(out)),
          hint="see 8.2, step 1: module.initialize_parameters(*args, **kwargs).")

    def initialized_once():
        counted = []

        def counting(self, input):
            counted.append(1)
            filled_parameters(self, np.shape(input)[-1], np.ones(64, dtype=np.float32))
        Counted = infer_class(yours, draw, initialize_parameters=counting)
        layer = Counted(out)
        for _ in range(calls_made):
            layer(np.ones((1, width), dtype=np.float32))
        return len(counted)
    check(f"After the first call the pre-hook must be gone: times initialize_parameters ran in {calls_made} calls",
          initialized_once, hint="see 8.2, step 3: remove the hook once the parameters exist.")


# -- exercise 3: _lazy_load_hook -------------------------------------------------------------------------------------
@probe("c08_lazy_load_hook_visible")
def lazy_load_hook_visible(yours, draw, check):
    LoadingLazy = loading_class(yours)
    out, width = draw.int(1, 5), draw.int(1, 5)
    trained = nn.Linear(width, out)
    restored = LoadingLazy(out)
    hint = "see 8.3: materialise each placeholder whose key is in state_dict to that entry's shape."
    check(f"loading an nn.Linear({width}, {out}) state into LoadingLazy({out})",
          lambda: str(restored.load_state_dict(trained.state_dict())), hint=hint)
    check("the loaded weight", lambda: np.asarray(restored.weight), close=True, hint=hint)
    check("loading a checkpoint without the bias with strict=False (missing keys)",
          lambda: LoadingLazy(out).load_state_dict({"weight": np.ones((out, width), dtype=np.float32)},
                                                   strict=False).missing_keys,
          hint="see 8.3: skip the entries whose key is not in state_dict; the load reports them as missing.")
    check(f"loading the state_dict of a fresh LoadingLazy({out}) (placeholders into placeholders)",
          lambda: str(LoadingLazy(out).load_state_dict(LoadingLazy(out).state_dict())),
          hint="see 8.3: materialise only when the checkpoint's entry is not a placeholder itself.")


@probe("c08_lazy_load_hook_hidden")
def lazy_load_hook_hidden(yours, draw, check):
    LoadingLazy = loading_class(yours)
    out, width, scale = draw.int(1, 5), draw.int(1, 5), draw.int(2, 9)
    depth = draw.int(1, 3)

    def nested():
        inside = nn.Sequential(*[nn.Identity() for _ in range(depth)], LoadingLazy(out))
        source = nn.Sequential(*[nn.Identity() for _ in range(depth)], nn.Linear(width, out))
        inside.load_state_dict(source.state_dict())
        return inside[depth].weight.shape, bool(np.array_equal(inside[depth].bias, source[depth].bias))
    check(f"Build keys as prefix + name: inside a Sequential the entries are '{depth}.weight' and '{depth}.bias' "
          "(weight shape, bias loaded)", nested, hint="see 8.3: the key of a placeholder is prefix + name.")

    def lazy_into_lazy():
        layer = LoadingLazy(out)
        layer.load_state_dict(LoadingLazy(out).state_dict())
        return is_lazy(layer.weight), is_lazy(layer.bias)
    check("Loading placeholders into placeholders must leave them lazy: (weight lazy, bias lazy)", lazy_into_lazy,
          hint="see 8.3: materialise only when the checkpoint's entry is not a placeholder itself.")

    def partial():
        layer = LoadingLazy(out)
        result = layer.load_state_dict({"weight": np.ones((out, width), dtype=np.float32)}, strict=False)
        return layer.weight.shape, is_lazy(layer.bias), result.missing_keys
    check("Only the entries present in the checkpoint are materialised: (weight shape, bias lazy, missing keys)",
          partial, hint="see 8.3: skip the placeholders whose key is not in state_dict.")

    def buffered():
        layer = LoadingLazy(out)
        layer.register_buffer("scale", nn.UninitializedBuffer())
        layer.load_state_dict({**nn.Linear(width, out).state_dict(),
                               "scale": np.full(width, float(scale), dtype=np.float32)})
        return is_lazy(layer.scale), np.asarray(layer.scale).tolist()
    check("Placeholder buffers are materialised too: (scale lazy, its values)", buffered,
          hint="see 8.3: go through self._buffers as well as self._parameters.")


# -- exercise 4: predict the state after a load (0 points: its form only) ---------------------------------------
@probe("c08_predict_after_load_visible")
def predict_after_load_visible(yours, draw, check):
    check("your predictions have the right types: class_after_load a str, in_features_after_load and "
          "pre_hooks_after_load ints (run the cell under the tests to see the answers)",
          lambda: [prediction_form(yours, name) for name in list(PREDICTIONS)[:3]],
          hint="assign a class name (a str) and two ints.")


@probe("c08_predict_after_load_hidden")
def predict_after_load_hidden(yours, draw, check):
    check("error_on_wrong_width is the name of an exception class (a str), or None",
          lambda: prediction_form(yours, "error_on_wrong_width"),
          hint="assign the exception's class name, such as 'ValueError', to error_on_wrong_width.")


def prediction_form(yours, name):
    """Whether the learner's prediction has the type asked for; the reference side has no prediction to make (a
    constant answer cannot be graded: the reference can tell it), so it holds the right type by definition."""
    if isinstance(yours, Reference):
        return True
    return type(getattr(yours, name)) in PREDICTIONS[name]


# -- exercise 5: initialize_parameters ------------------------------------------------------------------------------
@probe("c08_initialize_parameters_visible")
def initialize_parameters_visible(yours, draw, check):
    MyLazyLinear = my_lazy_linear_class(yours)
    out, batch, width, seed = draw.int(1, 4), draw.int(1, 3), draw.int(4, 6), draw.int(0, 10_000)
    x = draw.array(batch, width)
    checkpoint = nn.Linear(width, out).state_dict()
    hint = ("see 8.4, branch 1: materialize weight as (out_features, in_features) and bias as (out_features,), then "
            "reset_parameters().")

    def first_call():
        modulecraft.manual_seed(seed)
        layer = MyLazyLinear(out)
        layer.initialize_parameters(x)
        return layer.in_features, layer.weight.shape, layer.bias.shape, layer.weight.tolist()
    check(f"in_features, parameter shapes and the weights drawn by reset_parameters after initialize_parameters on "
          f"an input of shape ({batch}, {width})", first_call, close=True, hint=hint)

    loaded = "see 8.4, branch 2: when in_features is still 0, check the input's width against self.weight.shape[-1]."

    def after_load():
        layer = as_loaded(MyLazyLinear(out), checkpoint)
        layer.initialize_parameters(np.ones((1, width), dtype=np.float32))
        return layer.in_features, bool(np.array_equal(layer.weight, checkpoint["weight"]))
    check(f"after loading an nn.Linear({width}, {out}) state, initialize_parameters on {width} features: "
          "(in_features, weight kept)", after_load, hint=loaded + " Then set in_features, and draw nothing new.")
    check(f"after loading an nn.Linear({width}, {out}) state, a first call with {width + 1} features is refused",
          lambda: as_loaded(MyLazyLinear(out), checkpoint).initialize_parameters(
              np.ones((1, width + 1), dtype=np.float32)), hint=loaded)


@probe("c08_initialize_parameters_hidden")
def initialize_parameters_hidden(yours, draw, check):
    MyLazyLinear = my_lazy_linear_class(yours)
    out, width, seed = draw.int(1, 4), draw.int(2, 6), draw.int(0, 10_000)
    leading = (draw.int(1, 3), draw.int(1, 3))
    checkpoint = nn.Linear(width, out).state_dict()

    def without_bias():
        layer = MyLazyLinear(out, bias=False)
        layer.initialize_parameters(np.ones((2, width), dtype=np.float32))
        return layer.bias is None, layer.weight.shape
    check(f"A layer without bias must materialise only weight: MyLazyLinear({out}, bias=False) on width {width}: "
          "(bias is None, weight shape)", without_bias, hint="see 8.4, branch 1: materialize bias only if it exists.")

    def batched():
        layer = MyLazyLinear(out)
        layer.initialize_parameters(np.ones((*leading, width), dtype=np.float32))
        return layer.in_features, layer.weight.shape
    check(f"in_features is the size of the LAST input dimension: input of shape {(*leading, width)}: "
          "(in_features, weight shape)", batched, hint="see 8.4: np.shape(input)[-1].")

    def bias_drawn():
        modulecraft.manual_seed(seed)
        layer = MyLazyLinear(out)
        layer.initialize_parameters(np.ones((1, width), dtype=np.float32))
        return np.asarray(layer.bias)
    check("The bias must be initialised by reset_parameters too (its values under the seed)", bias_drawn, close=True,
          hint="see 8.4, branch 1: call self.reset_parameters() after materialising both.")

    def nothing_left():
        layer = as_loaded(MyLazyLinear(out), checkpoint)
        layer.in_features = width
        layer.initialize_parameters(np.ones((1, width), dtype=np.float32))
        return layer.in_features, bool(np.array_equal(layer.weight, checkpoint["weight"]))
    check("With no placeholder left and in_features set, initialize_parameters with nothing left to do must change "
          "nothing: (in_features, weight kept)", nothing_left,
          hint="see 8.4: branch 1 only while placeholders are left, branch 2 only while in_features is 0.")

    def refused_then_right():
        layer = as_loaded(MyLazyLinear(out), checkpoint)
        try:
            layer.initialize_parameters(np.ones((1, width + 1), dtype=np.float32))
        except AssertionError:
            pass
        refused_in_features = layer.in_features
        layer.initialize_parameters(np.ones((1, width), dtype=np.float32))
        return refused_in_features, layer.in_features, bool(np.array_equal(layer.bias, checkpoint["bias"]))
    check("After a refused first call (wrong width) the layer stays lazy: check the width before setting in_features; "
          "then the right width succeeds and keeps the loaded values: (in_features after the refusal, after the "
          "right call, bias kept)", refused_then_right,
          hint="see 8.4, branch 2: raise before assigning in_features.")
