"""Chapter 13's tests: the capstone's mechanisms, each observed on a few steps of a small drawn problem (never a
full training: these probes also run on the reference in the grader's process for every submission).

The capstone trains on the learner's code only: every mechanism of `modulecraft.mechanisms` is in `YOURS`, so the
grading kernel's modulecraft has none of them (except those the learner switched to the reference in the cell
`c13_whose`: `autograder.judging.verdicts` reads them from the notebook's text, keeps them, and fails their cells). Each
mechanism has an exercise (`c13_mine_<slug>`: paste the chapter's solutions) whose probes train a drawn model a few
steps and observe what that mechanism produces, on the learner's code for that mechanism and for every one the
notebook's `WHOSE` leaves "mine" (while grading, modulecraft has no code of its own for those): a broken mechanism
shows in the others too (`BUILDS_ON`), until switched.
"""
import contextlib
import functools
import importlib.util
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

import modulecraft
from modulecraft import mechanisms, nn, optim

from . import Reference, probe

EXERCISES = {
    "construction and attributes (1-4)": "c13_mine_modules",
    "tree walks and modes (5)": "c13_mine_walks",
    "forward hooks in _call_impl (6)": "c13_mine_forward_hooks",
    "state_dict (7)": "c13_mine_state_dict",
    "lazy modules (8)": "c13_mine_lazy",
    "autograd recording (10)": "c13_mine_recording",
    "engine (10)": "c13_mine_engine",
    "backward formulas (10)": "c13_mine_formulas",
    "batch norm's backward (13)": "c13_mine_batch_norm",
    "backward hooks in _call_impl (11)": "c13_mine_backward_hooks",
    "optimizer (12)": "c13_mine_optimizer",
}
assert set(EXERCISES) == set(mechanisms.MECHANISMS), "one exercise per mechanism of modulecraft.mechanisms"

YOURS = {
    **mechanisms.yours(),
    "train_epoch": "modulecraft.exercises.c13_capstone:train_epoch",
    "accuracy": "modulecraft.exercises.c13_capstone:accuracy",
    "attach_statistics": "modulecraft.exercises.c13_capstone:attach_statistics",
    "save_checkpoint": "modulecraft.exercises.c13_capstone:save_checkpoint",
    "load_checkpoint": "modulecraft.exercises.c13_capstone:load_checkpoint",
    "run_experiment": "modulecraft.exercises.c13_capstone:run_experiment",
}

# modulecraft's functions that hold a mechanism of YOURS under another name (`autograder.judging.answer_key`): the
# optimizer's zero_grad zeroes the gradients the module's does (chapter 11's sibling). The reference's SGD inherits
# it, so it stays when the learner switched the optimizer (12) to the reference; the learner's SGD has its own.
SIBLINGS = {"modulecraft.optim.optimizer:Optimizer.zero_grad": ("zero_grad", "SGD")}

# The test cells that grade each mechanism, and the run (13.8) that grades them all at work:
# `autograder.judging.verdicts` fails a cell when the learner switched one of its mechanisms to the reference.
MECHANISM_OF = {**{f"{exercise}_{kind}": (mechanism,) for mechanism, exercise in EXERCISES.items()
                   for kind in ("visible", "hidden")},
                **{f"c13_run_experiment_{kind}": tuple(EXERCISES) for kind in ("visible", "hidden")}}

# While grading, every module trains, evaluates, saves and loads with all of the learner's mechanisms.
BUILDS_ON = {
    **{exercise: [other for other in EXERCISES.values() if other != exercise] for exercise in EXERCISES.values()},
    **{grade_id: list(EXERCISES.values()) for grade_id in
       ("c13_train_epoch", "c13_accuracy", "c13_statistics", "c13_checkpoint")},
    "c13_run_experiment": [*EXERCISES.values(), "c13_train_epoch", "c13_statistics", "c13_checkpoint"],
}


# -- fixtures -------------------------------------------------------------------------------------------------------
class Problem:
    """A small classification problem drawn from the seed: sizes, features, labels and a seed for the model."""

    def __init__(self, draw, rows=None):
        self.features, self.hidden, self.classes = draw.int(3, 6), draw.int(3, 6), draw.int(2, 4)
        self.rows = rows or draw.int(24, 40)
        self.x = draw.array(self.rows, self.features)
        self.y = np.array([draw.int(0, self.classes - 1) for _ in range(self.rows)])
        self.init_seed = draw.int(0, 2**16)

    def model(self, lazy=False):
        """features -> hidden (batch-normalised, ReLU) -> classes, as the capstone's `build_model`."""
        nn.init.manual_seed(self.init_seed)
        if lazy:
            return nn.Sequential(nn.LazyLinear(self.hidden), nn.LazyBatchNorm1d(), nn.ReLU(),
                                 nn.LazyLinear(self.classes))
        return nn.Sequential(nn.Linear(self.features, self.hidden), nn.BatchNorm1d(self.hidden), nn.ReLU(),
                             nn.Linear(self.hidden, self.classes))


class Once:
    """A fixture made at its first use inside a check, then reused. While grading, building or training any module
    goes through the learner's functions: made inside a check, a failure is an observation (and fails the same way at
    every later use), never a crash that would leave the probe's other checks unmade."""

    def __init__(self, make):
        self._make, self._made = make, None

    def __call__(self):
        if self._made is None:
            try:
                self._made = (True, self._make())
            except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
                self._made = (False, error)
        made, value = self._made
        if not made:
            raise value
        return value


def make_optimizer(parameters):
    return optim.SGD(parameters, lr=0.1, momentum=0.9)


def rounded(array):
    return np.asarray(array, dtype=np.float64).round(5)


def steps(model, optimizer, problem, order):
    """One step per batch of rows `order` (a list of index arrays), in training mode; the losses."""
    model.train()
    losses = []
    for rows in order:
        model.zero_grad()
        loss = nn.CrossEntropyLoss()(model(problem.x[rows]), problem.y[rows])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def draw_batches(draw, problem, count):
    return [np.array(draw.sample(range(problem.rows), 8)) for _ in range(count)]


def gradients(model):
    return {name: None if p.grad is None else rounded(p.grad) for name, p in model.named_parameters()}


@contextlib.contextmanager
def mine(yours, mechanism, check):
    """The learner's side: their code for `mechanism` in place of modulecraft's inside the block, with the rest as
    the notebook's `use(WHOSE, ...)` left it. Yields `check`, whose thunks raise, while a name of the mechanism is
    not defined, that it is not written yet. The reference's side: modulecraft as it is."""
    if isinstance(yours, Reference):
        yield check
        return
    with mechanisms.installed(mechanisms.also(mechanism), vars(yours)["_namespace"]) as gaps:
        missing = [name for names in gaps.values() for name in names]

        def guarded(what, thunk, **options):
            def run():
                if missing:
                    raise NotImplementedError(f"`{missing[0]}` is not written yet: paste its chapter's solution into "
                                              f"the cell of {mechanism} (13.1) and run it")
                return thunk()
            check(what, run, **options)
        yield guarded


def hint(mechanism, text):
    return f"see 13.1, {mechanism}: {text}"


# -- the mechanisms (13.1): each observed while a drawn model trains -----------------------------------------------
class Scenario:
    """A drawn problem, its model, an SGD with drawn settings and a few drawn batches."""

    def __init__(self, draw):
        self.problem = Problem(draw)
        self.batches = draw_batches(draw, self.problem, draw.int(2, 3))
        self.lr, self.momentum = draw.choice([0.05, 0.1, 0.2]), draw.choice([0.5, 0.9])
        self.weight_decay = draw.choice([0.01, 0.05])

    def model(self, lazy=False):
        return self.problem.model(lazy)

    def optimizer(self, model):
        return optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)

    def trained(self, model=None):
        """(model, optimizer, losses) after one step per drawn batch."""
        model = model or self.model()
        optimizer = self.optimizer(model)
        return model, optimizer, steps(model, optimizer, self.problem, self.batches)

    def outputs(self, model):
        """The model's logits on the problem in eval mode, without a graph."""
        with modulecraft.no_grad():
            return rounded(model.eval()(self.problem.x))


LOSSES = "the losses of a few training steps of a drawn model"


@probe("c13_mine_modules_visible")
def modules_visible(yours, draw, check):
    mechanism = "construction and attributes (1-4)"
    scenario = Scenario(draw)
    width = draw.int(2, 5)
    with mine(yours, mechanism, check) as check:
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "every module is built with your __init__, __setattr__ and register_*."))
        check("children, the first Linear's parameters, the BatchNorm's buffers (names, in order)",
              lambda: (lambda m: (list(m._modules), list(m[0]._parameters), list(m[1]._buffers)))(scenario.model()),
              hint=hint(mechanism, "__setattr__ files a Module in _modules, a Parameter in _parameters (chapter 2)."))

        def assigned():
            model = scenario.model()
            model.scale = nn.Parameter(np.ones(width, dtype=np.float32))
            model.extra = nn.Linear(width, 2)
            return list(model._parameters), list(model._modules), tuple(model.scale.shape), model.extra.out_features
        check(f"assigning a Parameter of {width} and a Linear to a Sequential: where each went, read back",
              assigned, hint=hint(mechanism, "__setattr__ registers Parameters and Modules; __getattr__ finds them."))


@probe("c13_mine_modules_hidden")
def modules_hidden(yours, draw, check):
    mechanism = "construction and attributes (1-4)"
    scenario = Scenario(draw)
    name = draw.name()
    with mine(yours, mechanism, check) as check:
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "modules built with your code must train as modulecraft's."))

        def buffer():
            model = scenario.model()
            model.register_buffer(name, np.full(3, 2.0, dtype=np.float32), persistent=False)
            return name in model._buffers, name in model._non_persistent_buffers_set, getattr(model, name).tolist()
        check(f"a non-persistent buffer {name!r}: (in _buffers, non-persistent, its value)", buffer,
              hint=hint(mechanism, "register_buffer (chapter 4) with persistent=False."))
        check(f"reading a missing attribute {name!r} of a model", lambda: getattr(scenario.model(), name + "x"),
              phrase="object has no attribute", hint=hint(mechanism, "__getattr__ raises AttributeError (chapter 2)."))

        def refused():
            model = scenario.model()
            model[0].weight = np.zeros((2, 2), dtype=np.float32)
        check("assigning a plain array to a Linear's weight", refused, phrase="cannot assign",
              hint=hint(mechanism, "a name that is a parameter takes a Parameter or None (chapter 3)."))


@probe("c13_mine_walks_visible")
def walks_visible(yours, draw, check):
    mechanism = "tree walks and modes (5)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "parameters() (your _named_members) must hand every parameter to the optimizer."))
        nested = lambda: nn.Sequential(scenario.model(), nn.Sequential(nn.ReLU()))  # noqa: E731
        check("named_modules and named_parameters of Sequential(model, Sequential(ReLU))",
              lambda: (lambda m: ([n for n, _ in m.named_modules()], [n for n, _ in m.named_parameters()]))(nested()),
              hint=hint(mechanism, "pre-order, dotted prefixes (chapter 5)."))
        check("eval(): (returns the model, the mode of every module)",
              lambda: (lambda m: (m.eval() is m, [sub.training for sub in m.modules()]))(nested()),
              hint=hint(mechanism, "eval sets training=False on every module and returns self."))


@probe("c13_mine_walks_hidden")
def walks_hidden(yours, draw, check):
    mechanism = "tree walks and modes (5)"
    scenario = Scenario(draw)
    copies = draw.int(2, 3)
    with mine(yours, mechanism, check) as check:
        check("eval outputs of the trained model (BatchNorm uses its running statistics in eval mode)",
              lambda: scenario.outputs(scenario.trained()[0]), close=True,
              hint=hint(mechanism, "train() and eval() must reach every child."))
        check(f"named_parameters of a Sequential holding one Linear {copies} times",
              lambda: [n for n, _ in nn.Sequential(*[nn.Linear(2, 2)] * copies).named_parameters()],
              hint=hint(mechanism, "a shared module or parameter is listed once (memo)."))
        check("named_children of the model", lambda: [n for n, _ in scenario.model().named_children()],
              hint=hint(mechanism, "named_children yields each child once, in order."))


@probe("c13_mine_forward_hooks_visible")
def forward_hooks_visible(yours, draw, check):
    mechanism = "forward hooks in _call_impl (6)"
    scenario = Scenario(draw)
    factor = draw.choice([0.5, 2.0, 3.0])
    # the classes' shifts at least 0.5 apart: the same shift for every class changes no loss (softmax ignores it)
    shift = draw.array(scenario.problem.classes, low=0.0, high=0.5) + np.arange(scenario.problem.classes,
                                                                                 dtype=np.float32)
    with mine(yours, mechanism, check) as check:
        calls = []

        def hooked():
            model = scenario.model()
            model[3].register_forward_pre_hook(lambda module, args: (args[0] * factor,))
            model[3].register_forward_hook(lambda module, args, output: (calls.append(len(args)), output + shift)[1])
            return scenario.trained(model)[2]
        check(f"losses of training steps with hooks on the last Linear: a pre-hook scaling its input by {factor}, a "
              f"hook adding {shift.tolist()} to its output", hooked, close=True,
              hint=hint(mechanism, "a pre-hook's result replaces args; a hook's result replaces the output."))
        check("how many times the forward hook ran", lambda: len(calls),
              hint=hint(mechanism, "once per call of the module."))


@probe("c13_mine_forward_hooks_hidden")
def forward_hooks_hidden(yours, draw, check):
    mechanism = "forward hooks in _call_impl (6)"
    scenario = Scenario(draw)
    factor = draw.int(2, 5)
    with mine(yours, mechanism, check) as check:
        def with_kwargs():
            model = scenario.model()
            order = []
            model[3].register_forward_pre_hook(lambda module, args, kwargs: ((args[0] * factor,), kwargs),
                                               with_kwargs=True)
            model.register_forward_hook(lambda module, args, output: order.append("second"))
            model.register_forward_hook(lambda module, args, output: order.append("first"), prepend=True)
            return scenario.outputs(model), order
        check(f"eval outputs with a with_kwargs pre-hook multiplying the last Linear's input by {factor}, and two "
              "hooks on the model (one prepended): (outputs, hook order)", with_kwargs, close=True,
              hint=hint(mechanism, "with_kwargs pre-hooks return (args, kwargs); prepend puts a hook first."))

        def removed():
            model = scenario.model()
            seen = []
            handle = model[1].register_forward_hook(lambda module, args, output: seen.append(1))
            scenario.outputs(model)
            handle.remove()
            scenario.outputs(model)
            return len(seen)
        check("calls of a hook over two forwards, removed between them", removed,
              hint=hint(mechanism, "a removed hook no longer runs."))


@probe("c13_mine_state_dict_visible")
def state_dict_visible(yours, draw, check):
    mechanism = "state_dict (7)"
    scenario = Scenario(draw)
    own = draw.name()
    with mine(yours, mechanism, check) as check:
        trained = Once(lambda: scenario.trained()[0])
        check("state_dict keys of the trained model, and its 1.running_mean",
              lambda: (lambda state: (list(state), rounded(state["1.running_mean"])))(trained().state_dict()),
              close=True, hint=hint(mechanism, "own entries first, then each child's under its prefix (chapter 7)."))
        check("the state_dict's _metadata", lambda: dict(trained().state_dict()._metadata),
              hint=hint(mechanism, "one entry per module, its prefix without the dot: {'version': ...}."))

        def own_and_children():
            model = scenario.model()
            setattr(model, own, nn.Parameter(np.ones(2, dtype=np.float32)))
            return list(model.state_dict())
        check(f"state_dict keys of the model holding its own parameter {own!r} next to its children",
              own_and_children, hint=hint(mechanism, "a module's own entries come first, then its children's."))

        def reloaded():
            fresh = scenario.model()
            result = fresh.load_state_dict(trained().state_dict())
            return str(result), scenario.outputs(fresh)
        check("a fresh model loading the trained state: (the result, its eval outputs)", reloaded, close=True,
              hint=hint(mechanism, "load_state_dict copies every entry into the module that owns it."))


@probe("c13_mine_state_dict_hidden")
def state_dict_hidden(yours, draw, check):
    mechanism = "state_dict (7)"
    scenario = Scenario(draw)
    missing = draw.choice(["0.bias", "3.weight", "1.running_var", "0.weight"])
    with mine(yours, mechanism, check) as check:
        def strict():
            state = scenario.model().state_dict()
            del state[missing]
            return scenario.model().load_state_dict(state)
        check(f"a strict load without {missing!r}", strict, phrase=f'Missing key(s) in state_dict: "{missing}"',
              hint=hint(mechanism, "strict loads report missing keys."))
        check("types of the values of state_dict(keep_vars=True)",
              lambda: sorted({type(v).__name__ for v in scenario.model().state_dict(keep_vars=True).values()}),
              hint=hint(mechanism, "keep_vars=True keeps the Parameter objects."))
        check("1.num_batches_tracked after the training steps",
              lambda: int(scenario.trained()[0].state_dict()["1.num_batches_tracked"]),
              hint=hint(mechanism, "buffers are saved too."))


@probe("c13_mine_lazy_visible")
def lazy_visible(yours, draw, check):
    mechanism = "lazy modules (8)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        def first_call():
            model = scenario.model(lazy=True)
            scenario.outputs(model)
            return [type(m).__name__ for m in model], [tuple(p.shape) for p in model.parameters()]
        check("a lazy model after its first call: (the types of its layers, its parameters' shapes)", first_call,
              hint=hint(mechanism, "the first call infers the input size and materialises the parameters."))
        def trained():
            model = scenario.model(lazy=True)
            scenario.outputs(model)  # the first call materialises the parameters the optimizer needs
            return scenario.trained(model)[2]
        check(LOSSES + ", lazy", trained, close=True,
              hint=hint(mechanism, "materialised parameters are initialised as the layer's reset_parameters does."))


@probe("c13_mine_lazy_hidden")
def lazy_hidden(yours, draw, check):
    mechanism = "lazy modules (8)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        def loaded():
            model = scenario.model(lazy=True)
            model.load_state_dict(scenario.trained()[0].state_dict())
            return [type(m).__name__ for m in model], scenario.outputs(model)
        check("a lazy model loading a trained model's state: (the types of its layers, its eval outputs)", loaded,
              close=True, hint=hint(mechanism, "loading materialises each lazy parameter to the saved shape."))


@probe("c13_mine_recording_visible")
def recording_visible(yours, draw, check):
    mechanism = "autograd recording (10)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "without a recorded graph no gradient reaches the parameters."))

        def graph():
            loss = nn.CrossEntropyLoss()(scenario.model()(scenario.problem.x), scenario.problem.y)
            node = loss.grad_fn
            return node.name(), [(fn.name() if fn is not None else None) for fn, _ in node.next_functions]
        check("the loss's grad_fn and its next_functions", graph,
              hint=hint(mechanism, "a node per operation, an edge per input (None for one without a gradient)."))
        def unrecorded():
            model = scenario.model()
            with modulecraft.no_grad():
                return getattr(model(scenario.problem.x), "grad_fn", None) is None
        check("under no_grad, the logits have no grad_fn", unrecorded,
              hint=hint(mechanism, "nothing is recorded while grad mode is off."))


@probe("c13_mine_recording_hidden")
def recording_hidden(yours, draw, check):
    mechanism = "autograd recording (10)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        def first_layer():
            model = scenario.model()
            node = model[0](scenario.problem.x).grad_fn
            return node.name(), [(fn.name() if fn is not None else None) for fn, _ in node.next_functions]
        check("the first Linear's node on plain input: its name and next_functions", first_layer,
              hint=hint(mechanism, "_recording looks at every value: the input comes first and needs no gradient "
                                   "(its edge is None), the weight and bias after it do (AccumulateGrad)."))
        check("gradients after one backward", lambda: (lambda m: (nn.CrossEntropyLoss()(
            m(scenario.problem.x), scenario.problem.y).backward(), gradients(m))[1])(scenario.model()), close=True,
              hint=hint(mechanism, "record when an input requires grad and grad mode is on."))


@probe("c13_mine_engine_visible")
def engine_visible(yours, draw, check):
    mechanism = "engine (10)"
    scenario = Scenario(draw)
    rows = draw.int(4, scenario.problem.rows)
    with mine(yours, mechanism, check) as check:
        model = Once(scenario.model)
        loss = lambda: nn.CrossEntropyLoss()(model()(scenario.problem.x[:rows]), scenario.problem.y[:rows])  # noqa
        check(f"gradients after one backward on {rows} rows", lambda: (loss().backward(), gradients(model()))[1],
              close=True, hint=hint(mechanism, "every parameter's .grad after one backward."))
        check("gradients after a second backward without zero_grad", lambda: (loss().backward(),
                                                                             gradients(model()))[1],
              close=True, hint=hint(mechanism, "AccumulateGrad adds to an existing .grad."))
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "a node runs once all the gradients flowing into it are summed."))


@probe("c13_mine_engine_hidden")
def engine_hidden(yours, draw, check):
    mechanism = "engine (10)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        def shared():
            nn.init.manual_seed(scenario.problem.init_seed)
            layer = nn.Linear(scenario.problem.features, scenario.problem.features)
            model = nn.Sequential(layer, nn.ReLU(), layer)
            model(scenario.problem.x).mean().backward()
            return gradients(model)
        check("a Linear used twice in a row: its gradients (both uses summed)", shared, close=True,
              hint=hint(mechanism, "a node used twice runs once, with the sum of both gradients."))

        def twice():
            loss = nn.CrossEntropyLoss()(scenario.model()(scenario.problem.x), scenario.problem.y)
            loss.backward()
            loss.backward()
        check("a second backward through the same graph", twice,
              phrase="Trying to backward through the graph a second time",
              hint=hint(mechanism, "a backward frees the graph's saved values unless retain_graph=True."))


@probe("c13_mine_formulas_visible")
def formulas_visible(yours, draw, check):
    mechanism = "backward formulas (10)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        check("gradients of the cross-entropy of the model's logits",
              lambda: (lambda m: (nn.CrossEntropyLoss()(m(scenario.problem.x), scenario.problem.y).backward(),
                                  gradients(m))[1])(scenario.model()), close=True,
              hint=hint(mechanism, "validate_outputs (each gradient summed to its input's shape), addmm and "
                                   "the transpose of its weight, relu, nll_loss, log_softmax."))
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(mechanism, "each formula against finite differences (chapter 10)."))


@probe("c13_mine_formulas_hidden")
def formulas_hidden(yours, draw, check):
    mechanism = "backward formulas (10)"
    scenario = Scenario(draw)
    axis = draw.choice([0, 1])
    with mine(yours, mechanism, check) as check:
        check(f"gradients of model(x).mean(axis={axis}).sum()",
              lambda: (lambda m: (m(scenario.problem.x).mean(axis=axis).sum().backward(), gradients(m))[1])(
                  scenario.model()), close=True, hint=hint(mechanism, "mean and sum send the gradient back to every "
                                                                      "element they reduced."))
        check("gradients of model(x).sum() in eval mode",
              lambda: (lambda m: (m.eval()(scenario.problem.x).sum().backward(), gradients(m))[1])(
                  scenario.model()), close=True, hint=hint(mechanism, "relu passes the gradient where its output is "
                                                                      "positive."))


class NormCase:
    """A drawn batch norm: an (N, C) batch, affine parameters, running statistics, eps, and the gradient sent back to
    its output. `gradients(training)` runs one backward through `F.batch_norm` (no module: only the formula and the
    engine) and returns the gradients of the input, the weight and the bias."""

    def __init__(self, draw, affine=True):
        self.rows, channels = draw.int(3, 8), draw.int(2, 5)
        self.x = draw.array(self.rows, channels, dtype=np.float64) * draw.choice([1.0, 3.0]) \
            + draw.array(channels, dtype=np.float64)
        self.parameters = (draw.array(channels, dtype=np.float64, low=0.5, high=2.0),
                           draw.array(channels, dtype=np.float64)) if affine else (None, None)
        self.running = (draw.array(channels, dtype=np.float64),
                        draw.array(channels, dtype=np.float64, low=0.02, high=0.5))
        self.eps = draw.choice([0.01, 0.1, 0.5])  # large enough that where eps goes shows
        self.grad = draw.array(self.rows, channels, dtype=np.float64)

    def gradients(self, training):
        x = modulecraft.Tensor(self.x, requires_grad=True)
        parameters = [None if p is None else modulecraft.Tensor(p, requires_grad=True) for p in self.parameters]
        running_mean, running_var = (np.array(value) for value in self.running)
        out = nn.functional.batch_norm(x, running_mean, running_var, *parameters, training=training, eps=self.eps)
        out.backward(self.grad)
        return [None if t is None else rounded(t.grad) for t in (x, *parameters)]


BATCH_NORM = "batch norm's backward (13)"
TRAINING_INPUT_HINT = ("in training the batch mean and the biased batch variance (divided by N) of each channel depend "
                       "on every input of that channel: the input's gradient has a term through each of them.")


@probe("c13_mine_batch_norm_visible")
def batch_norm_visible(yours, draw, check):
    case, scenario = NormCase(draw), Scenario(draw)
    with mine(yours, BATCH_NORM, check) as check:
        trained = Once(lambda: case.gradients(training=True))
        check(f"training mode, a batch of {case.rows}: the input's gradient", lambda: trained()[0], close=True,
              hint=hint(BATCH_NORM, TRAINING_INPUT_HINT))
        check("training mode: the weight's and the bias's gradients", lambda: trained()[1:], close=True,
              hint=hint(BATCH_NORM, "each channel's weight multiplies the normalised input (x - mean) * inverse_std, "
                                    "its bias adds: sum over the batch."))
        check(LOSSES, lambda: scenario.trained()[2], close=True,
              hint=hint(BATCH_NORM, "check each gradient with your numeric_gradient (chapter 10) first."))


@probe("c13_mine_batch_norm_hidden")
def batch_norm_hidden(yours, draw, check):
    case, bare = NormCase(draw), NormCase(draw, affine=False)
    with mine(yours, BATCH_NORM, check) as check:
        check(f"eval mode (eps={case.eps}): the gradients of the input, the weight and the bias",
              lambda: case.gradients(training=False), close=True,
              hint=hint(BATCH_NORM, "in eval mode the running statistics normalise: constants, the inverse standard "
                                    "deviation 1 / sqrt(running_var + eps)."))
        check("training mode without affine parameters (weight and bias None): the input's gradient",
              lambda: bare.gradients(training=True)[0], close=True,
              hint=hint(BATCH_NORM, "without a weight the normalised input is the output. " + TRAINING_INPUT_HINT))


def _norms(model, record):
    for name in ("0", "3"):
        model.get_submodule(name).register_full_backward_hook(
            lambda module, grad_input, grad_output, name=name: record.append(
                (name, [None if g is None else round(float(np.linalg.norm(g)), 4) for g in grad_input],
                 round(float(np.linalg.norm(grad_output[0])), 4))))


@probe("c13_mine_backward_hooks_visible")
def backward_hooks_visible(yours, draw, check):
    mechanism = "backward hooks in _call_impl (11)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        check(LOSSES + ", then the gradients after model.zero_grad() (your chapter 11 zero_grad)",
              lambda: (lambda model, optimizer, losses: (losses, model.zero_grad(), gradients(model))[::2])(
                  *scenario.trained()), close=True,
              hint=hint(mechanism, "zero_grad() sets the .grad of every parameter, its children's too, to None."))
        record = []

        def hooked():
            model = scenario.model()
            _norms(model, record)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                return scenario.trained(model)[2]
        check(LOSSES + ", with full backward hooks on both Linear layers", hooked, close=True,
              hint=hint(mechanism, "hooks must not change the gradients."))
        check("what the hooks saw at each step: (layer, norms of grad_input, norm of grad_output[0])",
              lambda: record, close=True,
              hint=hint(mechanism, "the last layer's hook first; the first layer's input needs no gradient: None."))

        def diverged():
            model = scenario.trained()[0]
            model[0].weight.grad[0, 0], model[3].bias.grad[0] = np.inf, np.nan
            model.zero_grad(set_to_none=False)
            return gradients(model)
        check("after a step that diverged (inf and nan in two gradients), model.zero_grad(set_to_none=False): the "
              "gradients", diverged, close=True,
              hint=hint(mechanism, "zero_grad(set_to_none=False) writes zeros: multiplying by 0 keeps inf and nan "
                                   "(as nan)."))


@probe("c13_mine_backward_hooks_hidden")
def backward_hooks_hidden(yours, draw, check):
    mechanism = "backward hooks in _call_impl (11)"
    scenario = Scenario(draw)
    factor = draw.choice([0.5, 2.0, 4.0])
    size = draw.int(2, 5)
    left, right = draw.array(size), draw.array(size)
    with mine(yours, mechanism, check) as check:
        def scaled():
            model = scenario.model()
            model[3].register_full_backward_pre_hook(lambda module, grad_output: (grad_output[0] * factor,))
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                nn.CrossEntropyLoss()(model(scenario.problem.x), scenario.problem.y).backward()
            return gradients(model)
        check(f"gradients with a backward pre-hook on the last layer multiplying grad_output by {factor}", scaled,
              close=True, hint=hint(mechanism, "a backward pre-hook's result replaces grad_output."))

        def two_inputs():
            product, seen = Product(), []
            product.register_full_backward_hook(lambda module, grad_input, grad_output: seen.append(
                [None if g is None else rounded(g) for g in grad_input]))
            a, b = modulecraft.Tensor(left, requires_grad=True), modulecraft.Tensor(right)
            product(a, b).sum().backward()
            return seen, rounded(a.grad)
        check("a full backward hook on a module multiplying a tensor that requires grad by one that does not: (the "
              "grad_input it saw, the first tensor's gradient)", two_inputs, close=True,
              hint=hint(mechanism, "BackwardHookFunction marks the inputs that need no gradient non-differentiable: "
                                   "next to one that does, they get zeros in grad_input."))

        def zeroed_in_place():
            model = scenario.trained()[0]
            before = [p.grad for p in model.parameters()]
            model.zero_grad(set_to_none=False)
            return [p.grad is grad for p, grad in zip(model.parameters(), before)], gradients(model)
        check("after training steps, model.zero_grad(set_to_none=False): (each parameter's .grad still the same "
              "array?, the gradients)", zeroed_in_place, close=True,
              hint=hint(mechanism, "zero_grad(set_to_none=False) fills each existing .grad with zeros in place."))


class Product(nn.Module):
    """a * b: a module with two tensor inputs."""

    def forward(self, a, b):
        return a * b


@probe("c13_mine_optimizer_visible")
def optimizer_visible(yours, draw, check):
    mechanism = "optimizer (12)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        trained = Once(scenario.trained)
        check(f"the first layer's weight after SGD steps (lr {scenario.lr}, momentum {scenario.momentum}, "
              f"weight_decay {scenario.weight_decay})", lambda: rounded(trained()[0][0].weight), close=True,
              hint=hint(mechanism, "decay, then momentum buffer, then p -= lr * g (chapter 12)."))
        check("the optimizer's state_dict: lr, momentum and params of its param_groups, the state's keys",
              lambda: (lambda state: ([{key: group[key] for key in ("lr", "momentum", "params")}
                                       for group in state["param_groups"]],
                                      {k: sorted(v) for k, v in state["state"].items()}))(trained()[1].state_dict()),
              hint=hint(mechanism, "state keyed by each parameter's index in the groups."))


@probe("c13_mine_optimizer_hidden")
def optimizer_hidden(yours, draw, check):
    mechanism = "optimizer (12)"
    scenario = Scenario(draw)
    with mine(yours, mechanism, check) as check:
        def frozen_middle():
            model = scenario.model()
            model[1].weight.requires_grad_(False)
            optimizer = scenario.optimizer(model)
            steps(model, optimizer, scenario.problem, scenario.batches)
            return rounded(model[1].weight), sorted(optimizer.state_dict()["state"]), rounded(model[3].weight)
        check("with BatchNorm's weight frozen (no gradient) mid-group: (its value, the state's keys, the last "
              "layer's weight)", frozen_middle, close=True,
              hint=hint(mechanism, "a parameter without a gradient is skipped; the others still step."))
        check("zero_grad(): the gradients after it",
              lambda: (lambda m, o: (o.zero_grad(), [p.grad for p in m.parameters()])[1])(*scenario.trained()[:2]),
              hint=hint(mechanism, "zero_grad() sets every gradient to None (set_to_none=True)."))

# -- Exercise: train_epoch ----------------------------------------------------------------------------------------
def batch_size_for(draw, rows, low, high):
    """A batch size whose last batch is not a single row: BatchNorm1d refuses to normalise one row while training
    (as torch's does), which would make every implementation, the reference's too, fail the same way."""
    return draw.choice([size for size in range(low, high + 1) if rows % size != 1])


@probe("c13_train_epoch_visible")
def train_epoch_visible(yours, draw, check):
    problem = Problem(draw)
    batch_size, seeds = batch_size_for(draw, problem.rows, 6, 12), [draw.int(0, 99) for _ in range(2)]
    hint = "see 13.3: train mode, shuffled batches, then zero_grad, forward, loss, backward, step for each batch."
    model = Once(lambda: problem.model().eval())
    optimizer = Once(lambda: make_optimizer(model().parameters()))
    epochs = []

    def epoch(seed):
        losses = yours.train_epoch(model(), optimizer(), nn.CrossEntropyLoss(), problem.x, problem.y, batch_size, seed)
        epochs.append(losses)
        return len(losses), sorted({type(loss).__name__ for loss in losses})
    check(f"number of losses of one epoch of {problem.rows} rows in batches of {batch_size}, and their type",
          lambda: epoch(seeds[0]), hint=hint)
    check("the model is in training mode after train_epoch", lambda: model().training,
          hint="see 13.3: call model.train() first (BatchNorm uses batch statistics while training).")
    check("losses of two epochs (the second with another seed)", lambda: (epoch(seeds[1]), epochs)[1], close=True,
          hint="see 13.3: zero the gradients before backward, and step after it, on the batches of the seeded "
               "permutation.")


@probe("c13_train_epoch_hidden")
def train_epoch_hidden(yours, draw, check):
    problem = Problem(draw)
    batch_size, seeds = batch_size_for(draw, problem.rows, 5, 9), [draw.int(0, 99) for _ in range(2)]
    model = Once(problem.model)
    optimizer = Once(lambda: make_optimizer(model().parameters()))
    check(f"losses of two epochs of {problem.rows} rows in batches of {batch_size} (the last one may be shorter)",
          lambda: [yours.train_epoch(model(), optimizer(), nn.CrossEntropyLoss(), problem.x, problem.y, batch_size,
                                     seed)
                   for seed in seeds], close=True,
          hint="see 13.3: zero_grad, forward, loss, backward, step on the batches of the seeded permutation "
               "np.random.default_rng(seed).permutation(len(x)), cut in consecutive batches.")
    check("the first layer's weight after those two epochs", lambda: rounded(model()[0].weight), close=True,
          hint="see 13.3: one optimizer step per batch, after its backward.")


# -- Exercise: accuracy -----------------------------------------------------------------------------------------------
def warmed(problem, steps=2):
    """The problem's model after a few training steps (so that its running statistics are not the initial ones)."""
    model = problem.model()
    optimizer = make_optimizer(model.parameters())
    for start in range(0, steps * 8, 8):
        model.zero_grad()
        nn.CrossEntropyLoss()(model(problem.x[start:start + 8]), problem.y[start:start + 8]).backward()
        optimizer.step()
    return model


@probe("c13_accuracy_visible")
def accuracy_visible(yours, draw, check):
    problem = Problem(draw)
    model = Once(lambda: warmed(problem))
    before = Once(lambda: {key: np.array(value) for key, value in model().state_dict().items()})
    hint = "see 13.4: call model.eval() before the forward pass, and compute the logits under modulecraft.no_grad()."
    values = []
    check("accuracy, twice: (the two values agree, the type of the value)",
          lambda: (before(), values.extend(yours.accuracy(model(), problem.x, problem.y) for _ in range(2)),
                   (values[0] == values[1], type(values[0]).__name__))[2], hint=hint)
    check("running statistics changed by accuracy (keys whose values moved)",
          lambda: [key for key, value in model().state_dict().items() if not np.array_equal(value, before()[key])],
          hint=hint)
    check("the accuracy", lambda: values[0], close=True,
          hint="see 13.4: the fraction of rows whose highest logit (argmax over axis 1) is their label.")


@probe("c13_accuracy_hidden")
def accuracy_hidden(yours, draw, check):
    problem = Problem(draw)
    warm_steps = draw.int(1, 3)
    model = Once(lambda: warmed(problem, warm_steps))
    rows = draw.int(8, problem.rows)
    graphs = []

    def measured():
        handle = model()[3].register_forward_hook(lambda module, args, output: graphs.append(
            getattr(output, "grad_fn", None) is not None))
        try:
            return yours.accuracy(model().train(), problem.x[:rows], problem.y[:rows])
        finally:
            handle.remove()
    check(f"accuracy on {rows} rows of a model in training mode", measured, close=True,
          hint="see 13.4: evaluate in eval mode: the fraction of rows whose highest logit is their label.")
    check("the model's mode after accuracy (training?)", lambda: model().training,
          hint="see 13.4: accuracy must leave the model in evaluation mode (model.eval()).")
    check("for each forward accuracy ran: was a graph recorded?", lambda: graphs,
          hint="see 13.4: accuracy must compute the logits under modulecraft.no_grad(): a graph was recorded.")


# -- Exercise: predict, then run (graded on its form only: a constant answer cannot be graded securely) ----------
def _prediction(yours, name, form):
    """The learner's prediction; on the reference, a value of the right form (the reference predicts nothing)."""
    return form if isinstance(yours, Reference) else getattr(yours, name)


@probe("c13_predict_hooks_visible")
def predict_hooks_visible(yours, draw, check):
    check("your prediction of the hooks' order is a list of 'forward <name>' and 'backward <name>' strings",
          lambda: (lambda order: isinstance(order, list) and all(
              isinstance(s, str) and s.split(" ")[0] in ("forward", "backward") for s in order))(
              _prediction(yours, "hook_order", ["forward 0"])),
          hint="see 13.5: forward hooks fire in call order, backward hooks as backward reaches each module.")


@probe("c13_predict_hooks_hidden")
def predict_hooks_hidden(yours, draw, check):
    check("first_layer_grad_input is a tuple", lambda: isinstance(
        _prediction(yours, "first_layer_grad_input", ()), tuple),
          hint="see 13.5: grad_input is a tuple with one entry per positional argument of forward; an entry is None "
               "when no input requires a gradient (an input that does not, next to one that does, gets zeros).")


# -- Exercise: attach_statistics -------------------------------------------------------------------------------------
def one_step(model, problem, rows):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        nn.CrossEntropyLoss()(model(problem.x[:rows]), problem.y[:rows]).backward()


@probe("c13_statistics_visible")
def statistics_visible(yours, draw, check):
    problem = Problem(draw)
    rows = draw.int(8, problem.rows)
    hint = "see 13.5: one forward hook per child, a full backward hook per Linear, bound to that child's record."
    model = problem.model()
    attached = []
    check("attach_statistics, then one training step with the statistics hooks (runs without error)",
          lambda: (attached.append(yours.attach_statistics(model)), one_step(model, problem, rows))[1], hint=hint)
    stats = lambda: attached[0][0]  # noqa: E731
    check("keys and lengths of stats after one step",
          lambda: {name: {key: len(values) for key, values in record.items()} for name, record in stats().items()},
          hint=hint)
    check("stats['2'] (the ReLU's output: mean and std)", lambda: stats()["2"], close=True,
          hint="see 13.5: record the mean of the ReLU's output (the output, not the input), at each call.")
    check("the grad_norm of each Linear", lambda: [stats()[name]["grad_norm"] for name in ("0", "3")], close=True,
          hint="see 13.5: one training step with the statistics hooks: the norm of grad_output[0], the gradient "
               "with respect to the layer's output.")


@probe("c13_statistics_hidden")
def statistics_hidden(yours, draw, check):
    problem = Problem(draw)
    rows = draw.int(8, problem.rows)
    model = problem.model()
    attached = []
    check("attach_statistics and a step with its hooks (runs without error)",
          lambda: (attached.append(yours.attach_statistics(model)), one_step(model, problem, rows))[1],
          hint="see 13.5: a forward hook per child, a full backward hook per Linear.")
    check("the Linear layers' backward hooks are full ones (_is_full_backward_hook of layers 0 and 3)",
          lambda: [model[i]._is_full_backward_hook for i in (0, 3)],
          hint="see 13.5: the gradient statistics need full backward hooks (register_full_backward_hook).")
    check("stats of the last layer: mean, std and grad_norm", lambda: attached[0][0]["3"], close=True,
          hint="see 13.5: each layer's forward hook records the mean and std of that layer's output; grad_norm is the "
               "norm of grad_output[0].")
    check("the number of handles returned", lambda: len(attached[0][1]),
          hint="see 13.5: handles must hold the handles of all six hooks (four forward, two backward).")

    def after_removal():
        stats, handles = attached[0]
        for handle in handles:
            handle.remove()
        one_step(model, problem, rows)
        return {name: {key: len(values) for key, values in record.items()} for name, record in stats.items()}
    check("lengths of stats after removing every handle and another step", after_removal,
          hint="see 13.5: after removing every handle no hook records.")


# -- Exercise: checkpoint ---------------------------------------------------------------------------------------------
class Checkpointed:
    """A model trained a few steps, saved with the learner's save_checkpoint in a private folder."""

    def __init__(self, yours, draw):
        self.yours = yours
        self.problem = Problem(draw)
        self.before, self.after = draw_batches(draw, self.problem, draw.int(2, 3)), draw_batches(draw, self.problem, 3)
        self.folder = Path(tempfile.mkdtemp(prefix="probe-checkpoint-"))
        self.trained = Once(self._train)

    def _train(self):
        model = self.problem.model()
        optimizer = make_optimizer(model.parameters())
        steps(model, optimizer, self.problem, self.before)
        return model, optimizer

    def save(self):
        self.yours.save_checkpoint(*self.trained(), self.folder)
        return sorted(path.name for path in self.folder.iterdir())

    def remove(self):
        shutil.rmtree(self.folder, ignore_errors=True)


@probe("c13_checkpoint_visible")
def checkpoint_visible(yours, draw, check):
    saved = Checkpointed(yours, draw)
    try:
        hint = ("see 13.7: save model.state_dict() and the flattened optimizer state; load the model first, then make "
                "the optimizer and load its rebuilt state (int indices).")
        check("the files save_checkpoint(model, optimizer, folder) writes in folder", saved.save,
              hint="see 13.7: modulecraft.save(model.state_dict(), folder / \"model.safetensors\"), and the flattened "
                   "optimizer state to folder / \"optimizer.safetensors\".")
        continued = Once(lambda: steps(*saved.trained(), saved.problem, saved.after))

        def resumed():
            fresh = saved.problem.model(lazy=True)
            optimizer = yours.load_checkpoint(saved.folder, fresh, make_optimizer)
            return steps(fresh, optimizer, saved.problem, saved.after)
        check("losses of three more steps, resumed from the checkpoint in a fresh lazy model", resumed, close=True,
              hint=hint)
        check("losses of the same three steps without a restart (the model you saved, trained on)",
              continued, close=True, hint="see 13.7: saving must not change the model or its optimizer.")
    finally:
        saved.remove()


@probe("c13_checkpoint_hidden")
def checkpoint_hidden(yours, draw, check):
    saved = Checkpointed(yours, draw)
    try:
        check("the files save_checkpoint(model, optimizer, folder) writes in folder", saved.save,
              hint="see 13.7: model.safetensors and optimizer.safetensors.")
        check("the keys of model.safetensors, and its 1.running_mean",
              lambda: (lambda saved_model: (list(saved_model), rounded(saved_model["1.running_mean"])))(
                  modulecraft.load(saved.folder / "model.safetensors")), close=True,
              hint="see 13.7: model.safetensors must hold model.state_dict(), BatchNorm's running statistics included.")
        check("the keys of optimizer.safetensors, sorted",
              lambda: sorted(modulecraft.load(saved.folder / "optimizer.safetensors")),
              hint='see 13.7: optimizer.safetensors holds "param_groups" and one "state.<index>.<name>" key per state '
                   'entry.')
        restored = []

        def load():
            fresh = saved.problem.model(lazy=True)
            restored.append((fresh, yours.load_checkpoint(saved.folder, fresh, make_optimizer)))
            return type(fresh[0]).__name__, sorted(restored[0][1].state_dict()["state"], key=repr)
        check("load_checkpoint into a fresh lazy model: (the type its first layer became, the optimizer's state "
              "keys)", load, hint="see 13.7: the lazy layer becomes a Linear when the model loads; load_checkpoint "
                                  "must give the optimizer back its state, keyed by int indices.")
        broken = saved.folder / "broken"

        def load_without_buffers():
            broken.mkdir()
            modulecraft.save(dict(saved.trained()[0].named_parameters()), broken / "model.safetensors")
            shutil.copy(saved.folder / "optimizer.safetensors", broken / "optimizer.safetensors")
            yours.load_checkpoint(broken, saved.problem.model(lazy=True), make_optimizer)
        check("load_checkpoint of a checkpoint without the model's buffers", load_without_buffers,
              phrase="Missing key(s)", hint="see 13.7: load_checkpoint must load the model strictly: a checkpoint "
                                            "without buffers is an error (Missing key(s) in state_dict).")
    finally:
        saved.remove()


# -- Exercise: the whole run (13.8), graded on what the machinery does -------------------------------------------
DIGITS_EPOCHS, DIGITS_ACCURACY = 2, 0.93  # stated in 13.8; modulecraft's code gets 95.0-96.2 % on seeds 0-9
DIGITS_GOING_ON = 256  # rows of the epoch after the checkpoint (four batches): resuming is checked, at a small cost


@functools.cache
def _digits_table():
    """Read once per process: the grader runs the probe on the reference for every submission."""
    path = Path(importlib.util.find_spec("sklearn").origin).parent / "datasets" / "data" / "digits.csv.gz"
    return np.loadtxt(path, delimiter=",", dtype=np.float32)


def digits():
    """scikit-learn's digits, split as the capstone splits them (13.2): (x_train, y_train, x_test, y_test), new arrays
    at each call."""
    table = _digits_table()
    features, labels = table[:, :64] / 16, table[:, 64].astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    return features[order[:1400]], labels[order[:1400]], features[order[1400:]], labels[order[1400:]]


def held_out_accuracy(model, x, y):
    """Measured here, not with the learner's `accuracy` (graded in 13.4): eval mode, no graph."""
    with modulecraft.no_grad():
        return float((np.asarray(model.eval()(x)).argmax(axis=1) == y).mean())


_REFERENCE_RUNS: dict = {}  # (check, initialisation seed) -> the reference's observation, made once per grader process


def remembered(yours, key, thunk):
    """`thunk`, whose result the reference computes once: the grader runs this probe on the reference for every
    submission, and the digits run only depends on the initialisation seed (ten of them)."""
    if not isinstance(yours, Reference):
        return thunk

    def once():
        if key not in _REFERENCE_RUNS:
            _REFERENCE_RUNS[key] = thunk()
        return _REFERENCE_RUNS[key]
    return once


class Run:
    """`run_experiment` on a model built from `build` into a private folder, then one more epoch on the first `going_on`
    rows for that model and for a fresh lazy one resumed from the checkpoint with the learner's `load_checkpoint`."""

    def __init__(self, yours, build, x, y, epochs, going_on=None):
        self.yours, self.build, self.x, self.y, self.epochs = yours, build, x, y, epochs
        self.going_on = slice(going_on)
        self.folder = Path(tempfile.mkdtemp(prefix="probe-run-"))
        self.ran = Once(self._run)
        self.resumed = Once(self._resume)

    def _run(self):
        model = self.build(lazy=False)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            optimizer, losses, stats = self.yours.run_experiment(model, make_optimizer, self.x, self.y, self.epochs,
                                                                 self.folder)
        return model, optimizer, losses, stats

    def _resume(self):
        model, optimizer = self.ran()[:2]
        fresh = self.build(lazy=True)
        restored = self.yours.load_checkpoint(self.folder, fresh, make_optimizer)
        x, y, loss_fn = self.x[self.going_on], self.y[self.going_on], nn.CrossEntropyLoss()
        going_on = self.yours.train_epoch(model, optimizer, loss_fn, x, y, seed=self.epochs)
        return going_on, self.yours.train_epoch(fresh, restored, loss_fn, x, y, seed=self.epochs)

    def remove(self):
        shutil.rmtree(self.folder, ignore_errors=True)


def statistics_seen(stats):
    """Per layer: how many values each statistic recorded, and the last one."""
    return {name: {key: (len(values), values[-1] if values else None) for key, values in record.items()}
            for name, record in stats.items()}


RUN_HINT = ("see 13.8: an optimizer from make_optimizer(model.parameters()), attach_statistics, train_epoch with seeds "
            "0, 1, ..., every handle removed, then save_checkpoint; returns (optimizer, losses, stats).")


@probe("c13_run_experiment_visible")
def run_experiment_visible(yours, draw, check):
    problem = Problem(draw, rows=draw.choice([24, 28, 32, 36, 40]))  # batches of 64: one batch of all the rows
    run = Run(yours, problem.model, problem.x, problem.y, draw.int(2, 3))
    try:
        check(f"the losses of {run.epochs} epochs of run_experiment on a small drawn problem",
              lambda: run.ran()[2], close=True, hint=RUN_HINT)
        check("the statistics it returns: per layer, (count, last value) of each", lambda: statistics_seen(run.ran()[3]),
              close=True, hint="see 13.5 and 13.8: the hooks record during the run's steps only, and are removed after.")
        check("the files of its checkpoint", lambda: (run.ran(), sorted(p.name for p in run.folder.iterdir()))[1],
              hint="see 13.7 and 13.8: save_checkpoint(model, optimizer, folder) after the last epoch.")
        check("one more epoch: (losses going on, losses of a lazy model resumed from the checkpoint)", run.resumed,
              close=True, hint="see 13.7: the resumed run must repeat the original exactly.")
        check("how many values each statistic holds after that epoch, outside run_experiment",
              lambda: (run.resumed(), statistics_seen(run.ran()[3]))[1], close=True,
              hint="see 13.8: run_experiment removes every hook it attached before it returns.")
    finally:
        run.remove()


@probe("c13_run_experiment_hidden")
def run_experiment_hidden(yours, draw, check):
    x_train, y_train, x_test, y_test = digits()
    init_seed = draw.int(0, 9)

    def build(lazy):
        modulecraft.manual_seed(init_seed)
        if lazy:
            return nn.Sequential(nn.LazyLinear(32), nn.LazyBatchNorm1d(), nn.ReLU(), nn.LazyLinear(10))
        return nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    run = Run(yours, build, x_train, y_train, DIGITS_EPOCHS, going_on=DIGITS_GOING_ON)

    def once(label, thunk):
        return remembered(yours, (label, init_seed), thunk)
    try:
        check(f"held-out accuracy of the digits model (initialisation seed {init_seed}) after {DIGITS_EPOCHS} epochs "
              f"of run_experiment on your machinery: at least {DIGITS_ACCURACY:.0%}?",
              once("accuracy", lambda: held_out_accuracy(run.ran()[0], x_test, y_test) >= DIGITS_ACCURACY),
              hint="see 13.8: your mechanisms, train_epoch and run_experiment together must train the model; if the "
                   "tests of 13.1 fail, fix those first.")
        check("the losses of every step of that run", once("losses", lambda: run.ran()[2]), close=True, hint=RUN_HINT)
        check("its statistics: per layer, (count, last value) of each",
              once("statistics", lambda: statistics_seen(run.ran()[3])), close=True,
              hint="see 13.5: one mean and std per forward of each layer, one grad_norm per backward of each Linear, "
                   "recorded by your hooks while it trains.")
        check(f"a third epoch on the first {DIGITS_GOING_ON} rows: (losses going on, losses of a lazy model resumed "
              "from the checkpoint)",
              once("resumed", lambda: (lambda going_on, resumed: (going_on == resumed, going_on))(*run.resumed())),
              close=True, hint="see 13.7: the resumed run must repeat the original exactly (model, BatchNorm's "
                               "statistics, momentum buffers).")
    finally:
        run.remove()
