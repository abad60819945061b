"""Chapter 13's tests: the capstone's mechanisms, each observed on a few steps of a small drawn problem (never a
full training: these probes also run on the reference in the grader's process for every submission)."""
import shutil
import tempfile
import warnings
from functools import cache
from pathlib import Path

import numpy as np

import modulecraft
from modulecraft import nn, optim

from . import Reference, probe

# Every mechanism of the learner's that the capstone's training uses, and where the reference keeps each: while
# grading, these do not exist in the kernel's modulecraft (`autograder.answer_key`), so every module there walks,
# switches mode, saves and loads with the learner's chapter 5 and 7 functions.
#
# `_call_impl` is not listed: the learner's is chapter 6's (forward hooks only), and the capstone's own `Crafted`
# hands calls with backward hooks to the reference's `nn.Module._call_impl`, which must keep wiring them.
# `run_forward_pre_hooks` and `run_forward_hooks` have no reference counterpart (the reference's `_call_impl`
# inlines its loops): they are observed through the learner's `_call_impl`.
YOURS = {
    "named_modules": "modulecraft.nn.modules.module:Module.named_modules",
    "train": "modulecraft.nn.modules.module:Module.train",
    "_save_to_state_dict": "modulecraft.nn.modules.module:Module._save_to_state_dict",
    "state_dict": "modulecraft.nn.modules.module:Module.state_dict",
    "load_state_dict": "modulecraft.nn.modules.module:Module.load_state_dict",
    "train_epoch": "modulecraft.exercises.c13_capstone:train_epoch",
    "accuracy": "modulecraft.exercises.c13_capstone:accuracy",
    "attach_statistics": "modulecraft.exercises.c13_capstone:attach_statistics",
    "save_checkpoint": "modulecraft.exercises.c13_capstone:save_checkpoint",
    "load_checkpoint": "modulecraft.exercises.c13_capstone:load_checkpoint",
}

# While grading, every module trains, evaluates, saves and loads with the learner's `Crafted` functions.
BUILDS_ON = {grade_id: ["c13_crafted"] for grade_id in
             ("c13_train_epoch", "c13_accuracy", "c13_statistics", "c13_checkpoint")}


# -- fixtures -------------------------------------------------------------------------------------------------------
class Problem:
    """A small classification problem drawn from the seed: sizes, features, labels and a seed for the model."""

    def __init__(self, draw, rows=None):
        self.features, self.hidden, self.classes = draw.int(3, 6), draw.int(3, 6), draw.int(2, 4)
        self.rows = rows or draw.int(24, 40)
        self.x = draw.array(self.rows, self.features)
        self.y = np.array([draw.int(0, self.classes - 1) for _ in range(self.rows)])
        self.init_seed = draw.int(0, 2**16)

    def model(self, layers=nn, lazy=False):
        """features -> hidden (batch-normalised, ReLU) -> classes, as the capstone's `build_model`."""
        nn.init.manual_seed(self.init_seed)
        if lazy:
            return layers.Sequential(layers.LazyLinear(self.hidden), layers.LazyBatchNorm1d(), layers.ReLU(),
                                     layers.LazyLinear(self.classes))
        return layers.Sequential(layers.Linear(self.features, self.hidden), layers.BatchNorm1d(self.hidden),
                                 layers.ReLU(), layers.Linear(self.hidden, self.classes))


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


def crafted_layers(yours):
    """The reference's layer classes with the learner's `Crafted` in front, as the capstone builds them."""
    if isinstance(yours, Reference):  # the reference's own machinery: its layers as they are
        return nn
    call_impl = yours._call_impl

    class Crafted:
        named_modules = yours.named_modules
        train = yours.train
        _save_to_state_dict = yours._save_to_state_dict
        state_dict = yours.state_dict
        load_state_dict = yours.load_state_dict

        def _call_impl(self, *args, **kwargs):
            if (self._backward_hooks or self._backward_pre_hooks or nn.modules.module._global_backward_hooks
                    or nn.modules.module._global_backward_pre_hooks):
                return nn.Module._call_impl(self, *args, **kwargs)
            return call_impl(self, *args, **kwargs)

    class Layers:
        @cache
        def __getattr__(self, name):
            base = getattr(nn, name)
            namespace = {"__module__": __name__, "__qualname__": name}
            if getattr(base, "cls_to_become", None) is not None:
                namespace["cls_to_become"] = getattr(self, base.cls_to_become.__name__)
            return type(name, (Crafted, base), namespace)
    return Layers()


def rounded(array):
    return np.asarray(array, dtype=np.float64).round(5)


# -- Exercise 1: the Crafted mixin --------------------------------------------------------------------------------
HINT_CRAFTED = "see 13.1: paste your chapter 5-7 functions and assign them in the body of Crafted."


@probe("c13_crafted_visible")
def crafted_visible(yours, draw, check):
    problem = Problem(draw)
    model = lambda: problem.model(crafted_layers(yours))  # noqa: E731
    check("named_modules of a crafted Sequential(Linear, BatchNorm1d, ReLU, Linear)",
          lambda: [name for name, _ in model().named_modules()], hint=HINT_CRAFTED)
    check("state_dict keys and metadata of the same model",
          lambda: (lambda m: (list(m.state_dict()), dict(m.state_dict()._metadata)))(model()), hint=HINT_CRAFTED)
    shift = float(draw.int(1, 9))

    def hooked():
        crafted = model()
        crafted.register_forward_hook(lambda module, args, output: output + shift)
        with modulecraft.no_grad():
            return rounded(crafted.eval()(problem.x[:4]))
    check(f"output with a forward hook (+{shift:g}) in eval mode", hooked, close=True, hint=HINT_CRAFTED)


@probe("c13_crafted_hidden")
def crafted_hidden(yours, draw, check):
    problem = Problem(draw)
    model = lambda: problem.model(crafted_layers(yours))  # noqa: E731
    check("crafted.train(False): (returns self, the mode of every module)",
          lambda: (lambda m: (m.train(False) is m, [sub.training for sub in m.modules()]))(model()),
          hint="see 13.1: Crafted.train must come from chapter 5: set the mode on every module and return self.")
    mean = draw.array(problem.hidden)

    def loaded():
        crafted, source = model(), problem.model().state_dict()
        source["1.running_mean"] = mean
        result = crafted.load_state_dict(source)
        return str(result), rounded(crafted[1].running_mean)
    check("load_state_dict of a reference model's state with a new running_mean: (its result, the child's "
          "running_mean)", loaded, close=True,
          hint="see 13.1: Crafted.load_state_dict (chapter 7); the loaded values must reach the children.")
    missing = draw.choice(["0.bias", "3.weight", "1.running_var", "0.weight"])

    def strict():
        source = problem.model().state_dict()
        del source[missing]
        return model().load_state_dict(source)
    check(f"a strict load without {missing!r}", strict, phrase=f'Missing key(s) in state_dict: "{missing}"',
          hint="see 13.1: strict loads report missing keys (chapter 7).")
    factor = draw.int(2, 9)

    def with_kwargs():
        layers = crafted_layers(yours)
        wrapped = layers.Sequential(layers.Identity())
        wrapped.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] * factor,), kwargs), with_kwargs=True)
        return wrapped(factor + 1), layers.Identity()(factor)
    check(f"a with_kwargs pre-hook multiplying by {factor}, and a crafted Identity without hooks",
          with_kwargs, hint="see 13.1: Crafted._call_impl must run with_kwargs pre-hooks (chapter 6); without hooks "
                            "the crafted call returns forward's result.")
    copies = draw.int(2, 3)
    check(f"named_modules of a crafted Sequential holding one Linear {copies} times",
          lambda: (lambda layers: [n for n, _ in layers.Sequential(*[layers.Linear(2, 2)] * copies).named_modules()])(
              crafted_layers(yours)), hint="see 13.1: Crafted.named_modules must skip a shared module (memo).")
    check("types of the values of state_dict(keep_vars=True)",
          lambda: sorted({type(v).__name__ for v in model().state_dict(keep_vars=True).values()}),
          hint="see 13.1: state_dict(keep_vars=True) keeps the Parameter objects.")


# -- Exercise 2: train_epoch ----------------------------------------------------------------------------------------
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


# -- Exercise 3: accuracy -----------------------------------------------------------------------------------------------
def warmed(problem, steps=2):
    """The problem's model after a few training steps (so that its running statistics are not the initial ones)."""
    model = problem.model()
    optimizer = make_optimizer(model.parameters())
    for start in range(0, steps * 8, 8):
        optimizer.zero_grad()
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


# -- Exercise 4: predict, then run (graded on its form only: a constant answer cannot be graded securely) ----------
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
          hint="see 13.5: grad_input is a tuple, one entry per input of forward.")


# -- Exercise 5: attach_statistics -------------------------------------------------------------------------------------
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


# -- Exercise 6: checkpoint --------------------------------------------------------------------------------------------
def steps(model, optimizer, problem, order):
    """One step per batch of rows `order` (a list of index arrays), in training mode; the losses."""
    model.train()
    losses = []
    for rows in order:
        optimizer.zero_grad()
        loss = nn.CrossEntropyLoss()(model(problem.x[rows]), problem.y[rows])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def draw_batches(draw, problem, count):
    return [np.array(draw.sample(range(problem.rows), 8)) for _ in range(count)]


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
