"""Chapter 0's tests: a linear layer's computation, and first modules built from the reference's layers.

Only `linear` has a counterpart in the reference (`nn.functional.linear`). `count_parameters`, `TinyMLP` and
`FixedStack` are exercises in *using* the reference (`parameters()`, assignment of children, `nn.ModuleList`),
so their references are built from those same mechanisms in `modulecraft.exercises.c00_welcome`.
"""

from modulecraft import nn

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own layers call the learner's.
YOURS = {
    "linear": "modulecraft.nn.functional:linear",
    "count_parameters": "modulecraft.exercises.c00_welcome:count_parameters",
    "TinyMLP": "modulecraft.exercises.c00_welcome:TinyMLP",
    "prediction": "modulecraft.exercises.c00_welcome:prediction",
    "FixedStack": "modulecraft.exercises.c00_welcome:FixedStack",
}

# While grading, every nn.Linear computes with the learner's `linear`.
BUILDS_ON = {
    "c00_tiny_mlp": ["c00_linear"],
    "c00_fixed_stack": ["c00_linear"],
}

LAYER_KINDS = ("Linear", "Linear(bias=False)", "ReLU", "Dropout")


def drawn_layer_arrays(draw, sizes) -> list:
    """A weight and a bias for each Linear from sizes[i] to sizes[i + 1], drawn before anything runs."""
    return [(draw.array(b, a), draw.array(b)) for a, b in zip(sizes, sizes[1:])]


def load(linears, arrays):
    """Give each layer its drawn weight and bias (outputs then do not depend on how layers were initialised)."""
    for layer, (weight, bias) in zip(linears, arrays):
        layer.weight[...] = weight
        layer.bias[...] = bias


# -- exercise 1: linear -----------------------------------------------------------------------------------------
@probe("c00_linear_visible")
def linear_visible(yours, draw, check):
    batch, inputs, outputs = draw.int(1, 4), draw.int(2, 4), draw.int(2, 5)
    x, weight, bias = draw.array(batch, inputs), draw.array(outputs, inputs), draw.array(outputs)
    check(f"linear(x, weight, bias) for x of shape ({batch}, {inputs}), weight of shape ({outputs}, {inputs})",
          lambda: yours.linear(x, weight, bias), close=True,
          hint="weight has one row per output: compute x @ weight.T + bias (exercise 1)")


@probe("c00_linear_hidden")
def linear_hidden(yours, draw, check):
    inputs, outputs, batch = draw.int(2, 4), draw.int(2, 5), draw.int(2, 6)
    weight, bias = draw.array(outputs, inputs), draw.array(outputs)
    single, many = draw.array(inputs), draw.array(batch, inputs)
    hint = "add the bias only when it is not None; x may be 1-D or a batch (exercise 1)"
    check(f"linear(x, weight) without a bias, for a 1-D x of {inputs} values", lambda: yours.linear(single, weight),
          close=True, hint=hint)
    check(f"linear(x, weight, None) for a batch of {batch}", lambda: yours.linear(many, weight, None), close=True,
          hint=hint)
    check(f"linear(x, weight, bias) for a batch of {batch}", lambda: yours.linear(many, weight, bias), close=True,
          hint="a batch of inputs gives one row of outputs per input: x @ weight.T + bias (exercise 1)")


# -- exercise 2: count_parameters -------------------------------------------------------------------------------
@probe("c00_count_parameters_visible")
def count_parameters_visible(yours, draw, check):
    inputs, outputs = draw.int(2, 9), draw.int(1, 9)
    check(f"count_parameters(nn.Linear({inputs}, {outputs}))",
          lambda: yours.count_parameters(nn.Linear(inputs, outputs)),
          hint="count values, not arrays: a weight of inputs x outputs values plus a bias of outputs (exercise 2)")
    sizes = [draw.int(1, 6) for _ in range(3)]
    check(f"count_parameters of a Sequential of Linear({sizes[0]}, {sizes[1]}), BatchNorm1d({sizes[1]}), ReLU and "
          f"Linear({sizes[1]}, {sizes[2]})",
          lambda: yours.count_parameters(nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.BatchNorm1d(sizes[1]),
                                                       nn.ReLU(), nn.Linear(sizes[1], sizes[2]))),
          hint="count the parameters of the children too: use module.parameters() (exercise 2)")


@probe("c00_count_parameters_hidden")
def count_parameters_hidden(yours, draw, check):
    width, inputs = draw.int(2, 6), draw.int(2, 9)

    def shared():
        layer = nn.Linear(width, width)
        return yours.count_parameters(nn.Sequential(layer, nn.ReLU(), layer))
    check(f"count_parameters of a Sequential using one Linear({width}, {width}) twice", shared,
          hint="a layer used twice shares its parameters: count them once (module.parameters() does)")
    check(f"count_parameters(nn.Linear({inputs}, 1, bias=False))",
          lambda: yours.count_parameters(nn.Linear(inputs, 1, bias=False)),
          hint="a layer without bias has only its weight")
    check("count_parameters(nn.ReLU())", lambda: yours.count_parameters(nn.ReLU()),
          hint="a module without parameters has 0")


# -- exercise 3: TinyMLP ----------------------------------------------------------------------------------------
@probe("c00_tiny_mlp_visible")
def tiny_mlp_visible(yours, draw, check):
    inputs, hidden, outputs, batch = draw.int(2, 6), draw.int(2, 8), draw.int(1, 4), draw.int(1, 5)
    x = draw.array(batch, inputs)
    shape = f"TinyMLP({inputs}, {hidden}, {outputs})"
    check(f"Names and parameter shapes of {shape}.named_parameters()",
          lambda: [[name, list(p.shape)] for name, p in yours.TinyMLP(inputs, hidden, outputs).named_parameters()],
          hint="call super().__init__() first, then assign the three children in this order (exercise 3)")
    check(f"Names of {shape}.named_modules()",
          lambda: [name for name, _ in yours.TinyMLP(inputs, hidden, outputs).named_modules()],
          hint="assign the children hidden, activation and output, in this order (exercise 3)")
    check(f"Shape of {shape}(x) for x of shape ({batch}, {inputs})",
          lambda: list(yours.TinyMLP(inputs, hidden, outputs)(x).shape),
          hint="forward applies hidden, activation, then output (exercise 3)")


@probe("c00_tiny_mlp_hidden")
def tiny_mlp_hidden(yours, draw, check):
    inputs, hidden, outputs = draw.int(2, 4), draw.int(2, 5), draw.int(1, 3)
    arrays, x = drawn_layer_arrays(draw, [inputs, hidden, outputs]), draw.array(draw.int(2, 5), inputs)
    # the hidden unit the first output leans on most is negative for the first row, so skipping relu shows
    (weight, bias), (out_weight, _) = arrays
    unit = max(range(hidden), key=lambda j: abs(out_weight[0][j]))
    bias[unit] = -abs(weight[unit] @ x[0]) - 1

    def call():
        mlp = yours.TinyMLP(inputs, hidden, outputs)
        load([mlp.hidden, mlp.output], arrays)
        return mlp(x)
    check(f"TinyMLP({inputs}, {hidden}, {outputs})(x) with given weights", call, close=True,
          hint="TinyMLP(x) should be output(relu(hidden(x))); check the order and the activation (exercise 3)")


# -- exercise 4: predict, then run ------------------------------------------------------------------------------
@probe("c00_predict_names_visible")
def predict_names_visible(yours, draw, check):
    layers = [draw.choice(LAYER_KINDS) for _ in range(draw.int(2, 5))]
    check("prediction(layers) returns a list of strings",
          lambda: (lambda names: isinstance(names, list) and all(isinstance(n, str) for n in names))(
              yours.prediction(layers)),
          hint="a list of names such as '0.weight' (exercise 4)")


@probe("c00_predict_names_hidden")
def predict_names_hidden(yours, draw, check):
    for first in draw.shuffled(["ReLU", "Dropout", draw.choice(LAYER_KINDS)]):
        layers = [first, *draw.shuffled([*LAYER_KINDS, draw.choice(LAYER_KINDS)])]
        check(f"prediction({layers})", lambda: yours.prediction(layers),
              hint="the children of a Sequential keep their position as name, parameterless layers included; "
                   "a Linear built with bias=False has a weight only (section 0.1, exercise 4)")


# -- exercise 5: FixedStack -------------------------------------------------------------------------------------
@probe("c00_fixed_stack_visible")
def fixed_stack_visible(yours, draw, check):
    sizes = [draw.int(1, 6) for _ in range(draw.int(3, 4))]
    batch = draw.int(1, 5)
    x = draw.array(batch, sizes[0])
    check(f"Names of FixedStack({sizes}).named_parameters()",
          lambda: [name for name, _ in yours.FixedStack(sizes).named_parameters()],
          hint="a plain list is an ordinary attribute: the module never sees what is inside; keep the name layers "
               "and use nn.ModuleList (exercise 5)")
    check(f"Shape of FixedStack({sizes})(x) for x of shape ({batch}, {sizes[0]})",
          lambda: list(yours.FixedStack(sizes)(x).shape), hint="forward applies the layers in order (exercise 5)")


@probe("c00_fixed_stack_hidden")
def fixed_stack_hidden(yours, draw, check):
    sizes = [draw.int(1, 5) for _ in range(draw.int(4, 5))]
    arrays, x = drawn_layer_arrays(draw, sizes), draw.array(draw.int(1, 3), sizes[0])
    check(f"The keys of FixedStack({sizes}).state_dict()", lambda: list(yours.FixedStack(sizes).state_dict()),
          hint="every layer must be a registered child of layers, so that it is saved (exercise 5)")

    def call():
        stack = yours.FixedStack(sizes)
        load(stack.layers, arrays)
        return stack(x)
    check(f"FixedStack({sizes})(x) with given weights", call, close=True,
          hint="forward applies every layer, in order (exercise 5)")
