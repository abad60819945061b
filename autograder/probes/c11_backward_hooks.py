"""Chapter 11's tests: zero_grad and requires_grad_, the identity Function of backward hooks, the backward part of
_call_impl, a gradient watcher."""
import contextlib
import warnings

import numpy as np

import modulecraft
from modulecraft import nn
from modulecraft.autograd import Function
from modulecraft.nn import functional as F
from modulecraft.nn.modules import _functions
from modulecraft.nn.modules import module as registry

from . import Reference, probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own modules call the learner's (every
# module call goes through the learner's `call_impl` there).
YOURS = {
    "zero_grad": "modulecraft.nn.modules.module:Module.zero_grad",
    "requires_grad_": "modulecraft.nn.modules.module:Module.requires_grad_",
    "BackwardHookFunction": "modulecraft.nn.modules._functions:BackwardHookFunction",
    "call_impl": "modulecraft.nn.modules.module:Module._call_impl",
    "watch_gradients": "modulecraft.exercises.c11_backward_hooks:watch_gradients",
}

# modulecraft's functions that hold a mechanism of YOURS under another name: gone while grading this chapter
# (`autograder.judging.answer_key`). The optimizer's zero_grad zeroes the same gradients as the module's.
SIBLINGS = {"modulecraft.optim.optimizer:Optimizer.zero_grad": "zero_grad"}

# Modules with backward hooks wrap their inputs and output with the learner's BackwardHookFunction (`hooks_with`),
# and the watcher's modules are wired by the learner's `call_impl` while grading.
BUILDS_ON = {"c11_call_impl": ["c11_hook_function"], "c11_watch_gradients": ["c11_call_impl", "c11_hook_function"]}


@contextlib.contextmanager
def hooks_with(yours):
    """modulecraft's BackwardHook wrapping with `yours.BackwardHookFunction` while the block runs: the learner's
    class (while grading, modulecraft's own is gone), or on the reference its own (nothing changes)."""
    own = _functions.BackwardHookFunction
    _functions.BackwardHookFunction = yours.BackwardHookFunction
    try:
        yield
    finally:
        _functions.BackwardHookFunction = own


# -- Exercise 1: zero_grad and requires_grad_ ----------------------------------------------------------------------
def resettable_class(yours):
    """A module with a parameter of its own, a Linear child and an optional child; zero_grad and requires_grad_
    are the learner's (its children's are the reference's, or the learner's through the seams)."""
    class Resettable(nn.Module):
        zero_grad = yours.zero_grad
        requires_grad_ = yours.requires_grad_

        def __init__(self, width, child=None):
            super().__init__()
            self.scale = nn.Parameter(np.full(width, 0.5, dtype=np.float32))
            self.linear = nn.Linear(3, width)
            self.child = child
    return Resettable


def backward_without_calls(model, x):
    """sum(child(linear(x) * scale)).backward() through functional ops: no module call, so no `_call_impl` (the
    learner's while grading, maybe not written yet) is involved."""
    out = F.linear(x, model.linear.weight, model.linear.bias) * model.scale
    if model.child is not None:
        out = F.linear(out, model.child.weight, model.child.bias)
    out.sum().backward()


def grads_of(model):
    return {name: p.grad for name, p in model.named_parameters()}


def with_non_finite(draw, array):
    """`array` with one entry, at a drawn place, set to a drawn NaN or infinity: what a diverged step leaves in a
    gradient (and what `grad *= 0` would keep: 0 * inf is NaN)."""
    array = array.copy()
    array.flat[draw.int(0, array.size - 1)] = draw.choice([np.nan, np.inf, -np.inf])
    return array


HINT_ZEROS = ("see 11.2: set_to_none=False leaves every existing gradient all zeros, in the same array, whatever it "
              "held: a diverged step leaves inf or NaN in a gradient, and multiplying by 0 keeps NaN (0 * inf is "
              "NaN); assign zeros instead.")


@probe("c11_zero_grad_visible")
def zero_grad_visible(yours, draw, check):
    width = draw.int(2, 4)
    names = ["scale", "linear.weight", "linear.bias", "child.weight", "child.bias"]
    with_grad = [name for name in names if draw.coin()] or [draw.choice(names)]
    values = {name: with_non_finite(draw, draw.array(*shape)) for name, shape in
              zip(names, [(width,), (width, 3), (width,), (1, width), (1,)])}

    def cleared(set_to_none):
        model = resettable_class(yours)(width, nn.Linear(width, 1))
        for name, p in model.named_parameters():
            p.grad = values[name].copy() if name in with_grad else None
        before = grads_of(model)
        if set_to_none is None:
            model.zero_grad()  # the default, as a training loop calls it
        else:
            model.zero_grad(set_to_none=set_to_none)
        return [(name, None if p.grad is None else (p.grad is before[name], float(np.abs(p.grad).sum())))
                for name, p in model.named_parameters()]
    check(f"zero_grad() when {', '.join(with_grad)} have a gradient: (name, grad) of every parameter",
          lambda: cleared(None), hint="see 11.2: zero_grad() reaches every parameter of the module and its "
                                      "descendants, and without an argument sets grads to None (set_to_none=True is "
                                      "the default).")
    check(f"zero_grad(set_to_none=False) when {', '.join(with_grad)} have a gradient (each with a NaN or an inf "
          "somewhere): (name, (same array as before?, sum of |grad|))", lambda: cleared(False), hint=HINT_ZEROS)

    unfrozen = draw.choice(["child", "linear"])

    def frozen_but_one():
        model = resettable_class(yours)(width, nn.Linear(width, 1))
        returned = model.requires_grad_(False)
        getattr(model, unfrozen).requires_grad_(True)
        x = modulecraft.Tensor(draw_x).requires_grad_()
        backward_without_calls(model, x)
        return (returned is model, [(name, p.requires_grad, p.grad is not None) for name, p in model.named_parameters()],
                x.grad is not None)
    draw_x = draw.array(4, 3)
    check(f"requires_grad_(False) on the parent, then True on its {unfrozen}, then backward: "
          "(returns self?, (name, requires_grad, has grad), input has grad?)", frozen_but_one,
          hint="see 11.2: requires_grad_ calls p.requires_grad_(flag) on self.parameters() (children too) and "
               "returns self.")


@probe("c11_zero_grad_hidden")
def zero_grad_hidden(yours, draw, check):
    width = draw.int(2, 4)
    names = ["scale", "linear.weight", "linear.bias", "child.weight", "child.bias"]
    only = draw.choice(names)
    shapes = dict(zip(names, [(width,), (width, 3), (width,), (1, width), (1,)]))
    gradient = with_non_finite(draw, np.ones(shapes[only], dtype=np.float32))

    def one_grad():
        model = resettable_class(yours)(width, nn.Linear(width, 1))
        target = dict(model.named_parameters())[only]
        target.grad = gradient.copy()
        kept = target.grad
        result = model.zero_grad(set_to_none=False)
        return (result, [(name, None if p.grad is None else (p.grad is kept, p.grad.tolist()))
                         for name, p in model.named_parameters()])
    check(f"zero_grad(set_to_none=False) when only {only} has a gradient (with a NaN or an inf): (what it returns, "
          "(name, (same array?, grad)) of every parameter)", one_grad,
          hint="see 11.2: zero_grad returns None, and must leave a grad that is None as None (not create zeros); "
               "it fills the same grad array with zeros in place, whatever it held (0 * inf is NaN).")
    copies = draw.int(2, 3)

    def shared_frozen():
        shared = nn.Linear(width, width)
        model = resettable_class(yours)(width, nn.Sequential(*[shared] * copies))
        model.requires_grad_(False)
        frozen = ([p.requires_grad for p in model.parameters()], shared.weight.requires_grad)
        returned = model.requires_grad_()
        return frozen, returned is model, [p.requires_grad for p in model.parameters()]
    check(f"a Linear shared {copies} times under the model: requires_grad_(False), then requires_grad_(): "
          "(flags after False, returns self?, flags after ())", shared_frozen,
          hint="see 11.2: requires_grad_(False) must reach the parameters of every descendant; requires_grad_() with "
               "no argument sets requires_grad=True and returns the module itself.")


# -- Exercise 2: predict, then run (graded on its form only: a constant answer cannot be graded securely) ---------
LABELS = ["fwd 0", "fwd 1", "fwd root", "bpre root", "bwd 1", "bwd 0", "bwd root"]


def _prediction(yours):
    """The learner's prediction; on the reference, a list of the right form (the reference predicts nothing)."""
    return list(LABELS) if isinstance(yours, Reference) else yours.prediction


@probe("c11_predict_order_visible")
def predict_order_visible(yours, draw, check):
    check("prediction holds each of the seven labels once", lambda: sorted(_prediction(yours)) == sorted(LABELS),
          hint="write the seven labels in the order you expect them, e.g. [\"fwd 0\", ...] (section 11.3).")


@probe("c11_predict_order_hidden")
def predict_order_hidden(yours, draw, check):
    check("prediction is a list of seven strings",
          lambda: isinstance(_prediction(yours), list) and len(_prediction(yours)) == 7
          and all(isinstance(label, str) for label in _prediction(yours)),
          hint="assign a list of the seven labels (section 11.3).")


# -- Exercise 3: BackwardHookFunction ---------------------------------------------------------------------------
KINDS = ("requires grad", "Tensor without grad", "plain array")


def draw_inputs(draw):
    """The kinds of the tensors a module call hands to BackwardHookFunction (one of each kind at least, in a drawn
    order: BackwardHook calls it only when one requires grad), their values and a weight per input for a loss."""
    kinds = draw.shuffled([*KINDS, *[draw.choice(KINDS) for _ in range(draw.int(0, 2))]])
    shape = (draw.int(1, 3), draw.int(1, 3))
    return kinds, [draw.array(*shape) for _ in kinds], [draw.array(*shape) for _ in kinds]


def made(kinds, values):
    """The inputs: a tensor computed from a leaf (`leaf * 1`, as a module's input usually is), a Tensor that does
    not require grad, or a plain ndarray (modulecraft's tensor that does not require grad); and the leaves."""
    inputs, leaves = [], []
    for kind, value in zip(kinds, values):
        if kind == "requires grad":
            leaf = modulecraft.Tensor(value.copy()).requires_grad_()
            leaves.append(leaf)
            inputs.append(leaf * 1)
        else:
            inputs.append(modulecraft.Tensor(value.copy()) if kind == "Tensor without grad" else value.copy())
    return inputs, leaves


def applied(yours, inputs):
    """BackwardHookFunction.apply(*inputs), as a list (a single output counted as one)."""
    outputs = yours.BackwardHookFunction.apply(*inputs)
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def node_of(outputs):
    return next((out.grad_fn for out in outputs if getattr(out, "grad_fn", None) is not None), None)


def is_a_function(yours):
    """Whether the learner's class is a modulecraft.autograd.Function (a class defined from modulecraft's own, which
    does not exist while grading, is not)."""
    return isinstance(yours.BackwardHookFunction, type) and issubclass(yours.BackwardHookFunction, Function)


HINT_FUNCTION = ("see 11.5: `class BackwardHookFunction(Function)`, with Function from modulecraft.autograd; "
                 "modulecraft's own BackwardHookFunction does not exist while grading: write your own.")
HINT_MARK = ("see 11.5: forward returns its inputs themselves (not copies: each output shares its input's memory) "
             "and marks those that do not require grad "
             "non-differentiable (ctx.mark_non_differentiable); a plain numpy array has no requires_grad: "
             "ctx.needs_input_grad says which inputs require grad.")


HINT_TUPLE = ("see 11.5: forward returns a tuple of its inputs even when there is one (apply then returns a tuple of "
              "one): BackwardHook iterates over what apply returns, and iterating one tensor gives its rows, which "
              "have no BackwardHookFunctionBackward node (torch then says 'Error while setting up backward hooks').")


def describe_outputs(inputs, outputs):
    """Per output: (the same object as its input?, shares its input's memory?, requires grad, its grad_fn's name)."""
    return [(out is arg, bool(np.shares_memory(np.asarray(out), np.asarray(arg))), bool(getattr(out, "requires_grad",
            False)), None if getattr(out, "grad_fn", None) is None else out.grad_fn.name())
            for arg, out in zip(inputs, outputs)] + [len(outputs)]


def seen_in_backward(yours, kinds, values, weights):
    """What a hook on the node saw (grad_inputs: one per input) and the leaves' gradients, after backward of
    sum(output_i * weight_i) over the outputs of the inputs that require grad."""
    inputs, leaves = made(kinds, values)
    outputs = applied(yours, inputs)
    seen = []
    node_of(outputs).register_hook(lambda grad_inputs, grad_outputs: seen.append(
        [None if g is None else rounded(g) for g in grad_inputs]))
    loss = sum((outputs[i] * weights[i]).sum() for i, kind in enumerate(kinds) if kind == "requires grad")
    loss.backward()
    return seen, [rounded(leaf.grad) for leaf in leaves]


@probe("c11_hook_function_visible")
def hook_function_visible(yours, draw, check):
    kinds, values, weights = draw_inputs(draw)
    listed = ", ".join(kinds)
    check("BackwardHookFunction is a subclass of modulecraft.autograd.Function", lambda: is_a_function(yours),
          hint=HINT_FUNCTION)

    def outputs_of():
        inputs, _ = made(kinds, values)
        return describe_outputs(inputs, applied(yours, inputs))
    check(f"apply on inputs that are ({listed}): per output (the same object as its input?, shares its memory?, "
          "requires_grad, grad_fn name), then how many outputs", outputs_of,
          hint=HINT_MARK + " Only the outputs of inputs that require grad get the BackwardHookFunctionBackward node.")
    check(f"backward through apply on ({listed}): (what a hook on the node saw as grad_inputs, the leaves' grads)",
          lambda: seen_in_backward(yours, kinds, values, weights), close=True,
          hint="see 11.5: backward returns one gradient per input, the one its output received; an input that "
               "does not require grad gets zeros (Function fills them in for an output that received none), "
               "never None.")
    alone, factor = draw.array(draw.int(1, 3), draw.int(1, 3)), draw.int(2, 9)

    def single():
        leaf = modulecraft.Tensor(alone.copy()).requires_grad_()
        outputs = yours.BackwardHookFunction.apply(leaf * 1)
        first = outputs[0] if type(outputs) is tuple else outputs
        (first * factor).sum().backward()
        return type(outputs).__name__, len(outputs), first.grad_fn.name(), rounded(leaf.grad)
    check(f"apply on one tensor that requires grad, then backward of sum(output 0 * {factor}): (the type apply "
          "returned, its length, output 0's node name, the leaf's grad)", single, close=True, hint=HINT_TUPLE)


@probe("c11_hook_function_hidden")
def hook_function_hidden(yours, draw, check):
    kinds, values, weights = draw_inputs(draw)
    listed = ", ".join(kinds)
    changed = draw.choice([i for i, kind in enumerate(kinds) if kind == "requires grad"])
    check("BackwardHookFunction is a subclass of modulecraft.autograd.Function", lambda: is_a_function(yours),
          hint=HINT_FUNCTION)

    def change_in_place(index):
        inputs, _ = made(kinds, values)
        outputs = applied(yours, inputs)
        np.add(outputs[index], 1, out=outputs[index])
        return rounded(inputs[index])
    check(f"apply on ({listed}), then output {changed} (its input requires grad) changed in place",
          lambda: change_in_place(changed),
          phrase=f"Output {changed} of BackwardHookFunction is a view and is being modified inplace",
          hint="see 11.5: forward returns the inputs themselves, not copies: Function then refuses an in-place "
               "change of such an output, as torch does.")
    passive = draw.choice([i for i, kind in enumerate(kinds) if kind != "requires grad"])
    check(f"apply on ({listed}), then output {passive} (its input needs no grad) changed in place: its input "
          "afterwards", lambda: change_in_place(passive), close=True,
          hint="see 11.5: an input that needs no grad comes back as it is (the same memory), marked "
               "non-differentiable: changing it in place is allowed and changes the input.")
    check(f"backward through apply on ({listed}): (what a hook on the node saw as grad_inputs, the leaves' grads)",
          lambda: seen_in_backward(yours, kinds, values, weights), close=True,
          hint="see 11.5: an input that does not require grad gets zeros (not None) from backward; backward "
               "returns exactly the gradients it received.")


def check_hook_function(yours, check):
    """The first check of the exercises that run on the learner's BackwardHookFunction: when it cannot wrap one
    tensor, modulecraft's BackwardHook fails with torch's "Error while setting up backward hooks. Please open an
    issue", which would otherwise be blamed on this exercise's own code."""
    def one_tensor():
        outputs = yours.BackwardHookFunction.apply(modulecraft.Tensor(np.ones(2, dtype=np.float32)).requires_grad_())
        names = [None if getattr(out, "grad_fn", None) is None else out.grad_fn.name() for out in list(outputs)[:2]]
        return type(outputs).__name__, len(outputs), names
    check("your BackwardHookFunction (Exercise 3), which the module hooks here wrap with: apply on one tensor that "
          "requires grad gives (its type, its length, the grad_fn names of its items)", one_tensor,
          hint="this exercise runs on your Exercise 3: fix BackwardHookFunction first (your code here may well be "
               "right). " + HINT_TUPLE.removeprefix("see 11.5: "))


# -- Exercise 4: the backward part of _call_impl ---------------------------------------------------------------------
def draw_wired(draw):
    """What a Wired is made of: a seed for its Linear, its scale and an input (drawn before anything runs)."""
    return draw.int(0, 2**16), draw.array(2), draw.array(draw.int(1, 4), 3)


def wired(yours, drawn):
    """forward(x, *, shift=None) = relu(h) * scale + h (+ shift) with h = linear(x) (several autograd nodes; the
    `+ h` keeps the input's gradient from being all zeros when ReLU cuts every unit, where a slip would go unseen),
    called through the learner's `call_impl`; and an input that requires grad."""
    seed, scale, data = drawn

    class Wired(nn.Module):
        _call_impl = yours.call_impl

        def __init__(self):
            super().__init__()
            nn.init.manual_seed(seed)
            self.linear = nn.Linear(3, 2)
            self.scale = nn.Parameter(scale.copy())

        def forward(self, x, *, shift=None):
            h = self.linear(x)
            out = F.relu(h) * self.scale + h
            return out if shift is None else out + shift
    return Wired(), modulecraft.Tensor(data.copy()).requires_grad_()


def backward_log(yours, module, x, register):
    """Register hooks with register(module, log), run sum(module(x)).backward() with the learner's
    BackwardHookFunction, return the log (hooks removed)."""
    log = []
    handles = register(module, log)
    try:
        with warnings.catch_warnings(), hooks_with(yours):
            warnings.simplefilter("ignore")
            module(x).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    return log


def rounded(array):
    return None if array is None else np.round(np.asarray(array, dtype=np.float64), 4)


@probe("c11_call_impl_visible")
def call_impl_visible(yours, draw, check):
    check_hook_function(yours, check)

    def full_and_pre(module, log):
        return [module.register_full_backward_pre_hook(lambda m, grad_output: log.append(("pre", rounded(grad_output[0])))),
                module.register_full_backward_hook(
                    lambda m, grad_input, grad_output: log.append(("full", rounded(grad_input[0]))))]
    check("what a backward pre-hook and a full backward hook saw, in order (your Wired)",
          lambda: backward_log(yours, *wired(yours, draw_wired(draw)), full_and_pre), close=True,
          hint="see 11.4: the pre-hook must see grad_output where the module ends, the full hook grad_input where it "
               "begins: wrap the inputs (setup_input_hook) before forward and the output (setup_output_hook) after.")
    factor = draw.choice([0, 0.5, 2, 3])

    def pre_hook_alone(module, log):
        return [module.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * factor,)),
                module.register_full_backward_pre_hook(lambda m, grad_output: log.append(rounded(grad_output[0])))]

    drawn = draw_wired(draw)

    def scaled():
        module, x = wired(yours, drawn)
        seen = backward_log(yours, module, x, pre_hook_alone)
        return seen, rounded(module.linear.weight.grad), rounded(x.grad)
    check(f"a backward pre-hook alone that scales grad_output by {factor}, then a second one: "
          "(what the second saw, linear.weight.grad, x.grad)", scaled, close=True,
          hint="see 11.4: a backward pre-hook alone must fire too: a BackwardHook is needed for backward pre-hooks "
               "even without full hooks.")
    drawn, shift = draw_wired(draw), draw.array(2)

    def keyword_call():
        module, x = wired(yours, drawn)
        moved = modulecraft.Tensor(shift.copy()).requires_grad_()
        seen = []
        handle = module.register_full_backward_hook(lambda m, gi, go: seen.append([rounded(g) for g in gi]))
        try:
            with warnings.catch_warnings(), hooks_with(yours):
                warnings.simplefilter("ignore")
                out = module(x, shift=moved)
                out.sum().backward()
        finally:
            handle.remove()
        return rounded(out), seen, rounded(moved.grad), rounded(x.grad)
    check("a call with a keyword argument, Wired()(x, shift=s), and a full backward hook: (the output, the hook's "
          "grad_input, s.grad, x.grad)", keyword_call, close=True,
          hint="see 11.4 and 11.5: keyword arguments reach forward as they came (forward(*args, **kwargs)), with "
               "hooks as without; only the positional arguments are wrapped, so grad_input has one entry per "
               "positional argument.")


@probe("c11_call_impl_hidden")
def call_impl_hidden(yours, draw, check):
    check_hook_function(yours, check)

    def global_and_local(module, log):
        return [registry.register_module_full_backward_hook(
                    lambda m, gi, go: log.append(("global", type(m).__name__, rounded(gi[0])))
                    if type(m).__name__ == "Wired" else None),
                module.register_full_backward_hook(lambda m, gi, go: log.append(("local", type(m).__name__)))]
    check("a global and a module's own full backward hook: what fired, in order",
          lambda: backward_log(yours, *wired(yours, draw_wired(draw)), global_and_local), close=True,
          hint="see 11.4: A global full backward hook must fire too, before the module's own: "
               "self._get_backward_hooks() gives both, in that order.")
    factor = draw.int(2, 9)

    def replacing_forward_hook(module, log):
        return [module.register_forward_hook(lambda m, args, output: output * factor),
                module.register_full_backward_pre_hook(lambda m, go: log.append(rounded(go[0]))),
                module.register_full_backward_hook(lambda m, gi, go: log.append(rounded(gi[0])))]
    check(f"a forward hook that multiplies the output by {factor}: what the backward hooks saw",
          lambda: backward_log(yours, *wired(yours, draw_wired(draw)), replacing_forward_hook), close=True,
          hint="see 11.4: the backward hooks must see the gradient of the replaced output: wrap the "
               "output after the forward hooks.")

    def replacing_pre_hook(module, log):
        return [module.register_forward_pre_hook(lambda m, args: (args[0] * factor,)),
                module.register_full_backward_hook(lambda m, gi, go: log.append(rounded(gi[0])))]
    check(f"a forward pre-hook that multiplies the input by {factor}: what the full backward hook saw, each time it "
          "fired", lambda: backward_log(yours, *wired(yours, draw_wired(draw)), replacing_pre_hook), close=True,
          hint="see 11.4: the full backward hook must fire once with the gradient of the replaced "
               "input: wrap the inputs after the forward pre-hooks.")

    def non_full(module, log):
        return [module.register_backward_hook(lambda m, gi, go: log.append([rounded(g) for g in gi]))]
    check("a non-full backward hook (register_backward_hook): what it saw, each time it fired",
          lambda: backward_log(yours, *wired(yours, draw_wired(draw)), non_full), close=True,
          hint="see 11.4 (full and non-full hooks): A non-full backward hook (register_backward_hook) must fire on "
               "the output's grad_fn: self._register_non_full_backward_hooks(hooks, args, result).")

    drawn = draw_wired(draw)

    def plain_call():
        module, _ = wired(yours, drawn)
        out = np.full((1, 2), float(factor), dtype=np.float32)
        module.forward = lambda x: out
        return module(np.ones((1, 3), dtype=np.float32)) is out
    check("calling a Wired with no hook returns forward's result itself", plain_call,
          hint="see Exercise 4: without any hook, return forward's result itself.")


# -- Exercise 5: the gradient watcher ------------------------------------------------------------------------------
def watched(draw):
    """Linear-ReLU-Linear with a drawn width, and a batch that requires grad (so every full hook sees a
    grad_input). Called the same number of times on both runs, so the models' initial values agree."""
    width = draw.int(3, 8)
    model = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, 2))
    return model, draw.array(16, 3)


def backward(yours, model, data, scale=1.0):
    with hooks_with(yours):
        model(modulecraft.Tensor(data * np.float32(scale)).requires_grad_()).sum().backward()


def grads(model):
    return [np.asarray(p.grad, dtype=np.float64) for p in model.parameters()]


@probe("c11_watch_gradients_visible")
def watch_gradients_visible(yours, draw, check):
    check_hook_function(yours, check)
    model, data = watched(draw)
    max_norm = draw.choice([0.2, 0.3, 0.5, 0.8])
    log = []

    def run():
        yours.watch_gradients(model, log, max_norm)
        backward(yours, model, data)
    check("watch_gradients on Linear-ReLU-Linear, then backward (returns without error)", lambda: run() is None,
          hint="see 11.6: register the hooks, and return the handles.")
    check("the names in the log, in firing order", lambda: [name for name, _ in log],
          hint="see 11.6: bind each layer's name when the hook is made (name=name), not when it runs.")
    check("the norms in the log", lambda: [norm for _, norm in log], close=True,
          hint="see 11.6: log round(float(np.linalg.norm(grad_output[0])), 3).")
    check(f"norms of every parameter's .grad after clipping to {max_norm}",
          lambda: [round(float(np.linalg.norm(p.grad)), 3) for p in model.parameters()], close=True,
          hint="see 11.6: a tensor hook replaces the gradient only by returning it; scale the whole array by "
               "max_norm / norm.")


@probe("c11_watch_gradients_hidden")
def watch_gradients_hidden(yours, draw, check):
    check_hook_function(yours, check)
    model, data = watched(draw)
    scale = draw.choice([0.001, 0.002, 0.005])
    log, handles = [], []

    def small_gradients():
        handles.extend(yours.watch_gradients(model, log, 1000.0))
        backward(yours, model, data, scale)
        return grads(model)
    check(f"every .grad with max_norm=1000 on inputs scaled by {scale} (below max_norm: unchanged)",
          small_gradients, close=True, hint="see 11.6: A gradient below max_norm must pass unchanged.")

    def after_removal():
        count = len(log)
        for handle in handles:
            handle.remove()
        for p in model.parameters():  # not model.zero_grad(): that is exercise 1's, the learner's while grading
            p.grad = None
        backward(yours, model, data)
        return len(log) - count
    check("log entries added by a backward after removing every returned handle", after_removal,
          hint="see 11.6: Removing the returned handles must stop the logging hooks: return every handle.")
    small, data = watched(draw)
    max_norm = draw.choice([0.05, 0.1, 0.15])

    def clipped():
        yours.watch_gradients(small, [], max_norm)
        backward(yours, small, data)
        return grads(small)
    check(f"every .grad after clipping to {max_norm}", clipped, close=True,
          hint="see 11.6: A clipped gradient keeps its direction: the whole array scaled by max_norm / norm.")
