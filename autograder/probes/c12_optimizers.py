"""Chapter 12's tests: param groups, SGD with momentum, the optimizer's state_dict, Adam and AdamW."""
import numpy as np

from modulecraft import nn, no_grad, optim

from . import Reference, probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`): `optim.SGD` refuses to be built, and every optimizer's
# `state_dict()` is the learner's `optimizer_state_dict`; `optim.Adam` and `optim.AdamW` refuse to be built too.
YOURS = {
    "param_groups": "modulecraft.exercises.c12_optimizers:param_groups",
    "SGD": "modulecraft.optim.sgd:SGD",
    "optimizer_state_dict": "modulecraft.optim.optimizer:Optimizer.state_dict",
    "Adam": "modulecraft.optim.adam:Adam",
    "AdamW": "modulecraft.optim.adamw:AdamW",
}
# modulecraft's functions that hold a mechanism of YOURS under another name: gone while grading this chapter
# (`autograder.judging.answer_key`). The optimizer's zero_grad is the one every optimizer inherits, and what the
# learner's `SGD.zero_grad` writes (the notebook's Adam borrows the learner's; the tests' SignSteps has its own).
SIBLINGS = {"modulecraft.optim.optimizer:Optimizer.zero_grad": "SGD.zero_grad"}

# The notebook's AdamW is declared as a subclass of the learner's Adam (it inherits Adam's __init__), so an Adam that
# cannot be built (e.g. one delegating to the reference's, which refuses while grading) costs AdamW its points too.
BUILDS_ON = {"c12_adamw": ["c12_adam"]}


# -- Exercise 1: param groups ----------------------------------------------------------------------------------------
def draw_stack(draw):
    """A Sequential of Linear layers, each maybe followed by a BatchNorm1d and a ReLU, with drawn widths."""
    widths = [draw.int(1, 4) for _ in range(draw.int(3, 4))]
    layers = []
    for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(n_in, n_out, bias=draw.coin() or i == 0))
        if draw.coin():
            layers.append(nn.BatchNorm1d(n_out))
        if draw.coin():
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Scaled(nn.Module):
    """A module with its own 1-D weight `gain` (and one more, named at random) and children, one of them (`head`)
    reachable under two names."""

    def __init__(self, width, norm_first, extra, head_bias):
        super().__init__()
        self.gain = nn.Parameter(np.ones(width, dtype=np.float32))
        body = [nn.BatchNorm1d(width), nn.Linear(width, width)] if norm_first else \
            [nn.Linear(width, width), nn.BatchNorm1d(width)]
        self.body = nn.Sequential(*body)
        self.head = nn.Linear(width, 1, bias=head_bias)
        self.tail = self.head
        setattr(self, extra, nn.Parameter(np.zeros(1, dtype=np.float32)))


def group_names(model, groups):
    """The names of the parameters in each group ('?' for an object that is not one of the model's parameters)."""
    name_of = {id(p): name for name, p in model.named_parameters()}
    return [[name_of.get(id(p), "?") for p in group["params"]] for group in groups]


@probe("c12_param_groups_visible")
def param_groups_visible(yours, draw, check):
    model = draw_stack(draw)
    decay = draw.choice([0.1, 0.01, 0.001, 0.05])
    hint = "see 12.1: decide by the last part of the name and by the owning module's type, in named_parameters() order."
    check(f"param_groups(a Sequential of {len(model)} layers, {decay}): names in each group",
          lambda: group_names(model, yours.param_groups(model, decay)),
          hint=hint + " A normalisation layer's parameters go in the second group.")
    check("the weight_decay of each group", lambda: [g["weight_decay"] for g in yours.param_groups(model, decay)],
          hint=hint)


@probe("c12_param_groups_hidden")
def param_groups_hidden(yours, draw, check):
    scaled = Scaled(draw.int(2, 4), draw.coin(), draw.name(), draw.coin())
    decay = draw.choice([0.1, 0.2, 0.3])
    check(f"param_groups(Scaled(), {decay}): names in each group (gain is a 1-D weight of the model itself; head is "
          "shared, also named tail; body holds a BatchNorm1d)",
          lambda: group_names(scaled, yours.param_groups(scaled, decay)),
          hint="see 12.1: gain is chosen by name, not by shape: it belongs in the first group; each parameter "
               "appears once (named_parameters() yields a shared module's parameters once); a normalisation "
               "layer's parameters go in the second group; each group lists its parameters in named_parameters() "
               "order.")
    check("every parameter of the model is in a group as the object itself, not a copy",
          lambda: (lambda groups: [any(p is q for g in groups for p in g["params"]) for q in scaled.parameters()])(
              yours.param_groups(scaled, decay)),
          hint="see 12.1: the groups must hold the model's parameter objects themselves, not copies.")


# -- Exercise 2: SGD ----------------------------------------------------------------------------------------------------
# Each check adds one rule to the ones before it, so that the first check a slip fails names that slip.
SHAPES = [(2,), (1, 2), (3,), (1,)]  # the first three in the first group, the last alone in a group without decay


def draw_steps(draw, steps, middle_without_grad=False):
    """Four parameters' initial values and their gradients at each step (None: no gradient that step)."""
    start = [draw.array(*shape) for shape in SHAPES]
    grads = [[draw.array(*shape) for shape in SHAPES] for _ in range(steps)]
    if middle_without_grad:  # the middle parameter of the first group has no gradient at one step, neither the first
        grads[draw.int(1, steps - 2)][1] = None  # nor the last: the steps around it show what the gap changed
    return start, grads


def run_steps(optimizer_class, drawn, **options):
    """The parameters' values after every step: two groups, the second with weight_decay 0."""
    start, grads = drawn
    params = [nn.Parameter(value.copy()) for value in start]
    optimizer = optimizer_class([{"params": params[:3]}, {"params": params[3:], "weight_decay": 0.0}], **options)
    history = []
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        optimizer.step()
        history.append([np.asarray(p, dtype=np.float64) for p in params])
    return history


def zero_grad_twice(optimizer_class, start, grad):
    """zero_grad(set_to_none=False), then zero_grad(), on p (holding `grad`) and q (no grad): ((p.grad still the
    same array?, p.grad, q.grad is None), p.grad is None)."""
    p, q = nn.Parameter(start.copy()), nn.Parameter(start.copy())
    p.grad = grad.copy()
    kept = p.grad
    optimizer = optimizer_class([p, q], lr=0.1)
    optimizer.zero_grad(set_to_none=False)
    after_false = (p.grad is kept, None if p.grad is None else p.grad.tolist(), q.grad is None)
    optimizer.zero_grad()
    return after_false, p.grad is None


@probe("c12_sgd_visible")
def sgd_visible(yours, draw, check):
    lr, momentum = draw.choice([0.1, 0.05, 0.2]), draw.choice([0.5, 0.9])
    plain, with_momentum = draw_steps(draw, 3), draw_steps(draw, 3)
    check(f"three steps of SGD(lr={lr}): p -= lr * grad, in place", lambda: run_steps(yours.SGD, plain, lr=lr),
          close=True, hint="see 12.2: without momentum or decay a step is p -= lr * p.grad, on the parameter itself, "
                           "under modulecraft.no_grad() (outside it, autograd refuses an in-place change of a leaf "
                           "that requires grad).")
    check(f"three steps of SGD(lr={lr}, momentum={momentum}): the momentum buffer starts as a copy of the first "
          "gradient and is kept in state[p] between steps", lambda: run_steps(yours.SGD, with_momentum, lr=lr,
                                                                             momentum=momentum),
          close=True, hint="see 12.2: buffer = copy of g at the first step, then buffer = m * buffer + g at each next "
                           "step, kept in self.state[p]['momentum_buffer']; p -= lr * buffer.")
    start, grad = draw.array(2), draw.array(2)
    check("zero_grad(set_to_none=False), then zero_grad(): ((same array?, p.grad, q.grad is None), p.grad is None)",
          lambda: zero_grad_twice(yours.SGD, start, grad),
          hint="see 12.2: zero_grad(set_to_none=False) fills the same grad arrays with zeros and leaves a None grad "
               "as None; zero_grad() sets every grad to None by default.")


@probe("c12_sgd_hidden")
def sgd_hidden(yours, draw, check):
    lr, momentum, decay = draw.choice([0.1, 0.05]), draw.choice([0.5, 0.9]), draw.choice([0.1, 0.01])
    decayed, together, gaps = draw_steps(draw, 3), draw_steps(draw, 3), draw_steps(draw, 4, middle_without_grad=True)
    check(f"three steps of SGD(lr={lr}, weight_decay={decay}), the second group with weight_decay 0: each group's "
          "decay adds wd * p to the gradient", lambda: run_steps(yours.SGD, decayed, lr=lr, weight_decay=decay),
          close=True, hint="see 12.2: g = grad + group['weight_decay'] * p, with each group's own weight_decay.")
    check(f"three steps of SGD(lr={lr}, momentum={momentum}, weight_decay={decay}): the decay goes into the gradient "
          "before the momentum buffer", lambda: run_steps(yours.SGD, together, lr=lr, momentum=momentum,
                                                           weight_decay=decay),
          close=True, hint="see 12.2: g = grad + wd * p first; the buffer then accumulates that g (decay is not added "
                           "after momentum).")
    check("four steps with momentum where the middle parameter of a group has no gradient at one step: it is skipped "
          "and the parameters after it in its group still step",
          lambda: run_steps(yours.SGD, gaps, lr=lr, momentum=momentum), close=True,
          hint="see 12.2: a parameter whose grad is None is skipped this step (continue: no update, its buffer "
               "untouched); the loop goes on with the next parameter.")
    start, grad = draw.array(2), draw.array(2)
    loss = float(draw.int(1, 99))

    def two_steps():
        p = nn.Parameter(start.copy())
        p.grad = grad.copy()
        kept = p.grad
        optimizer = yours.SGD([p], lr=0.1, momentum=0.9)
        returned = optimizer.step(lambda: loss)
        optimizer.step()
        return (returned, np.asarray(kept, dtype=np.float64), sorted(optimizer.state[p]),
                np.asarray(p, dtype=np.float64))
    check("two steps with the same gradient, the first with a closure: (step's result, p.grad afterwards, keys of "
          "state[p], p)", two_steps, close=True,
          hint="see 12.2: step(closure) returns what the closure returns; the momentum buffer must be a copy of the "
               "first gradient, not the gradient array itself (step must not change p.grad); state[p] holds the "
               "momentum_buffer.")

    diverged = grad.copy()
    diverged[draw.int(0, 1)] = draw.choice([np.nan, np.inf, -np.inf])
    check("zero_grad(set_to_none=False) on a p.grad holding a NaN or an inf, then zero_grad(): ((same array?, "
          "p.grad, q.grad is None), p.grad is None)",
          lambda: zero_grad_twice(yours.SGD, start, diverged),
          hint="see 12.2: zero_grad(set_to_none=False) fills the same grad arrays with zeros, whatever they held "
               "(multiplying by 0 is not enough: 0 * inf is NaN), and leaves a None grad as None; zero_grad() sets "
               "every grad to None by default.")


# -- Exercise 3: predict, then run (graded on its form only: a constant answer cannot be graded securely) ------------
def _prediction(yours):
    """The learner's prediction; on the reference, a dict of the right form (the reference predicts nothing)."""
    return {"params": [[], []], "state": []} if isinstance(yours, Reference) else yours.prediction


@probe("c12_predict_indices_visible")
def predict_indices_visible(yours, draw, check):
    check("your prediction has the form {'params': [[...], [...]], 'state': [...]}",
          lambda: (lambda p: isinstance(p, dict) and sorted(p) == ["params", "state"] and len(p["params"]) == 2)(
              _prediction(yours)),
          hint="see exercise 3: two groups, then the state's keys.")


@probe("c12_predict_indices_hidden")
def predict_indices_hidden(yours, draw, check):
    check("your prediction holds lists of integers",
          lambda: (lambda p: all(isinstance(i, int) for group in p["params"] for i in group)
                   and all(isinstance(i, int) for i in p["state"]))(_prediction(yours)),
          hint="see exercise 3: indices are integers.")


# -- Exercise 4: the optimizer's state_dict ---------------------------------------------------------------------------
class SignSteps(optim.Optimizer):
    """A made-up optimizer with state (a step count and the previous gradient's sign per parameter), none of the
    learner's, so that this exercise stands alone: p -= lr * (sign(grad) + sign(previous grad)) / 2."""

    def __init__(self, params, lr, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    def step(self, closure=None):
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    sign = np.sign(np.asarray(p.grad) + group["weight_decay"] * np.asarray(p))
                    previous = state.get("previous_sign", sign)
                    state["step"] = state.get("step", 0) + 1
                    state["previous_sign"] = sign
                    p -= group["lr"] * (sign + previous) / 2

    def zero_grad(self):  # its own: modulecraft's Optimizer has none while grading
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


class Run:
    """A model, its optimizer (its parameters shuffled into two groups; `SignSteps`, not one of the learner's, so
    that this exercise stands alone) and fixed data; `train(n)` runs n steps and returns the losses."""

    def __init__(self, drawn, init_seed):
        widths, data, labels, order, cut, frozen = drawn
        nn.init.manual_seed(init_seed)
        self.model = nn.Sequential(nn.Linear(widths[0], widths[1]), nn.BatchNorm1d(widths[1]), nn.ReLU(),
                                   nn.Linear(widths[1], 3))
        params = list(self.model.parameters())
        if frozen is not None:
            params[frozen].requires_grad_(False)
        self.optimizer = SignSteps([{"params": [params[i] for i in order[:cut]], "weight_decay": 0.01},
                                    {"params": [params[i] for i in order[cut:]], "lr": 0.05}], lr=0.02)
        self.data, self.labels = data, labels

    def train(self, steps):
        losses = []
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = nn.CrossEntropyLoss()(self.model(self.data), self.labels)
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss))
        return losses


def draw_run(draw):
    """Layer widths, data, labels, the order and split of the six parameters into the two groups, and the index
    of a frozen parameter (or None)."""
    widths = (draw.int(2, 5), draw.int(3, 8))
    rows = draw.int(8, 16)
    return (widths, draw.array(rows, widths[0]), np.array([draw.int(0, 2) for _ in range(rows)]),
            draw.shuffled(range(6)), draw.int(1, 5), draw.choice([None, *range(6)]))


@probe("c12_state_dict_visible")
def state_dict_visible(yours, draw, check):
    drawn, before, after = draw_run(draw), draw.int(2, 5), draw.int(2, 4)

    def resumed():
        run = Run(drawn, 0)
        run.train(before)
        saved_model, saved_optimizer = run.model.state_dict(), yours.optimizer_state_dict(run.optimizer)
        run = Run(drawn, 1)  # new objects, new ids, other initial values
        run.model.load_state_dict(saved_model)
        run.optimizer.load_state_dict(saved_optimizer)
        return run.train(after)
    check(f"the losses of {after} steps after a restart from your optimizer_state_dict (saved after {before} steps)",
          resumed, close=True,
          hint="see 12.3: number the parameters 0, 1, 2, ... across the groups and key the state by those numbers.")

    def saved_then_continued():
        run = Run(drawn, 0)
        run.train(before)
        yours.optimizer_state_dict(run.optimizer)
        return run.train(after)
    check(f"the losses of {after} more steps of the same run after saving with your optimizer_state_dict (saved "
          f"after {before} steps)", saved_then_continued, close=True, hint=HINT_UNCHANGED)


HINT_UNCHANGED = ("see 12.3: saving never changes the optimizer: each group's entry is a new dict with a new "
                  "\"params\" list of indices; the optimizer's own groups keep their parameters (a training loop "
                  "goes on after a checkpoint).")


@probe("c12_state_dict_hidden")
def state_dict_hidden(yours, draw, check):
    drawn, steps = draw_run(draw), draw.int(1, 3)
    run = Run(drawn, 0)
    run.train(steps)
    params = [p for group in run.optimizer.param_groups for p in group["params"]]

    def groups_after_saving():
        own = [list(group["params"]) for group in run.optimizer.param_groups]
        yours.optimizer_state_dict(run.optimizer)
        return [(len(group["params"]), all(q is p for q, p in zip(group["params"], kept)))
                for group, kept in zip(run.optimizer.param_groups, own)]
    check("the optimizer's own groups after your optimizer_state_dict: per group, (how many params, still "
          "its parameter objects?)", groups_after_saving, hint=HINT_UNCHANGED)
    check("the params of each group in your optimizer_state_dict",
          lambda: [g["params"] for g in yours.optimizer_state_dict(run.optimizer)["param_groups"]],
          hint="see 12.3: the indices are numbered across the groups, the second group continuing the first.")
    check("the keys of its state (a frozen parameter has none: only parameters that have state)",
          lambda: sorted(yours.optimizer_state_dict(run.optimizer)["state"], key=repr),
          hint="see 12.3: the state must be keyed by index, not by id or name.")
    check("for each parameter in group order: the state dict under its index is the optimizer's own object",
          lambda: (lambda state: [state.get(i) is run.optimizer.state.get(p) for i, p in enumerate(params)
                                  if p in run.optimizer.state])(yours.optimizer_state_dict(run.optimizer)["state"]),
          hint="see 12.3: each index maps to that parameter's state dict, the optimizer's own object (not a copy).")
    check("each group's options (everything but params)",
          lambda: [{k: v for k, v in g.items() if k != "params"}
                   for g in yours.optimizer_state_dict(run.optimizer)["param_groups"]],
          hint="see 12.3: each group keeps all its options (lr, weight_decay, ...) next to its params.")


# -- Exercise 5: Adam ----------------------------------------------------------------------------------------------------
def draw_betas(draw):
    return draw.choice([(0.9, 0.999), (0.8, 0.99), (0.5, 0.9)])


def adam_state(optimizer, params):
    """Per parameter (None when it has no state): its state's keys, step count, exp_avg and exp_avg_sq."""
    def reduced(p):
        state = optimizer.state.get(p)
        if not state:
            return None
        return (sorted(state), float(state.get("step", float("nan"))),
                np.asarray(state.get("exp_avg"), dtype=np.float64), np.asarray(state.get("exp_avg_sq"), dtype=np.float64))
    return [reduced(p) for p in params]


def run_with_state(optimizer_class, drawn, **options):
    """`run_steps`, also returning each parameter's state after the last step."""
    start, grads = drawn
    params = [nn.Parameter(value.copy()) for value in start]
    optimizer = optimizer_class([{"params": params[:3]}, {"params": params[3:], "weight_decay": 0.0}], **options)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        optimizer.step()
    return [np.asarray(p, dtype=np.float64) for p in params], adam_state(optimizer, params)


@probe("c12_adam_visible")
def adam_visible(yours, draw, check):
    lr, betas = draw.choice([0.1, 0.05, 0.01]), draw_betas(draw)
    first, three = draw_steps(draw, 1), draw_steps(draw, 3)
    check(f"one step of Adam(lr={lr}, betas={betas}): bias correction makes the first step move each entry by about "
          "lr", lambda: run_steps(yours.Adam, first, lr=lr, betas=betas), close=True,
          hint="see 12.5: divide exp_avg by 1 - beta1**t and exp_avg_sq by 1 - beta2**t (bias correction), t the "
               "parameter's step count starting at 1; p -= lr * m_hat / (sqrt(v_hat) + eps).")
    check(f"three steps of Adam(lr={lr}, betas={betas}): the parameters after each step",
          lambda: run_steps(yours.Adam, three, lr=lr, betas=betas), close=True,
          hint="see 12.5: exp_avg = beta1 * exp_avg + (1 - beta1) * g and exp_avg_sq = beta2 * exp_avg_sq + "
               "(1 - beta2) * g * g, kept in state[p] between steps.")


@probe("c12_adam_hidden")
def adam_hidden(yours, draw, check):
    lr, betas, decay = draw.choice([0.1, 0.05]), draw_betas(draw), draw.choice([0.1, 0.5, 1.0])
    plain, decayed, gaps = draw_steps(draw, 2), draw_steps(draw, 3), draw_steps(draw, 4, middle_without_grad=True)
    check(f"after two steps of Adam(lr={lr}, betas={betas}), each parameter's state: (sorted keys, step, exp_avg, "
          "exp_avg_sq)", lambda: run_with_state(yours.Adam, plain, lr=lr, betas=betas)[1], close=True,
          hint="see 12.5: state[p] holds exactly 'step' (a count), 'exp_avg' and 'exp_avg_sq', named as torch's.")
    # The state never sees eps; the parameters do (a gradient entry near 0 shows even the default eps misplaced):
    # eps is checked next, so that a misplaced eps is named before a check of something else fails on it.
    eps, epsilon_steps = draw.choice([0.05, 0.1, 0.5]), draw_steps(draw, 3)
    check(f"three steps of Adam(lr={lr}, betas={betas}, eps={eps}): eps where it matters",
          lambda: run_steps(yours.Adam, epsilon_steps, lr=lr, betas=betas, eps=eps), close=True,
          hint="see 12.5: eps is added to the square root of the bias-corrected average, sqrt(v_hat) + eps (not "
               "inside the root, not before the bias correction): with the default eps=1e-8 the difference shows "
               "only where a gradient is near 0.")
    check(f"three steps of Adam(lr={lr}, betas={betas}, weight_decay={decay}), the second group with weight_decay 0: "
          "the decay enters the gradient before the averages",
          lambda: run_steps(yours.Adam, decayed, lr=lr, betas=betas, weight_decay=decay), close=True,
          hint="see 12.5: g = grad + group['weight_decay'] * p first; exp_avg and exp_avg_sq then average that g "
               "(the decay is not added to the update after the adaptive scaling).")
    check("four steps where the middle parameter of a group has no gradient at one step: (parameters, state): each "
          "parameter counts its own steps",
          lambda: run_with_state(yours.Adam, gaps, lr=lr, betas=betas), close=True,
          hint="see 12.5: a parameter whose grad is None is skipped (no update, its state untouched); step is counted "
               "per parameter in state[p]['step'], not once per optimizer.step().")
    start, grad, loss = draw.array(2), draw.array(2), float(draw.int(1, 99))

    def closure_and_grad():
        p = nn.Parameter(start.copy())
        p.grad = grad.copy()
        returned = yours.Adam([p], lr=lr).step(lambda: loss)
        return returned, np.asarray(p.grad, dtype=np.float64)
    check("step(closure): (its result, p.grad afterwards)", closure_and_grad, close=True,
          hint="see 12.5: step(closure) returns what the closure returns; step must not change p.grad.")


# -- Exercise 6: predict one step with weight decay (graded on its form only) -----------------------------------------
def _decay_prediction(yours):
    """The learner's prediction; on the reference, a dict of the right form (the reference predicts nothing)."""
    return {"adam": [0.0, 0.0], "adamw": [0.0, 0.0]} if isinstance(yours, Reference) else yours.decay_prediction


@probe("c12_predict_decay_visible")
def predict_decay_visible(yours, draw, check):
    check("your prediction has the form {'adam': [two numbers], 'adamw': [two numbers]}",
          lambda: (lambda p: isinstance(p, dict) and sorted(p) == ["adam", "adamw"]
                   and all(len(p[key]) == 2 for key in p))(_decay_prediction(yours)),
          hint="see exercise 6: the two entries of p after one step, for each optimizer.")


@probe("c12_predict_decay_hidden")
def predict_decay_hidden(yours, draw, check):
    check("your prediction holds numbers",
          lambda: all(isinstance(v, (int, float)) and not isinstance(v, bool)
                      for key in ("adam", "adamw") for v in _decay_prediction(yours)[key]),
          hint="see exercise 6: write each value as a number such as 1.5.")


# -- Exercise 7: AdamW (given as behaviour only) ----------------------------------------------------------------------
@probe("c12_adamw_visible")
def adamw_visible(yours, draw, check):
    lr, decay = draw.choice([0.1, 0.05]), draw.choice([0.5, 1.0, 2.0])
    drawn = draw_steps(draw, 3)
    check(f"three steps of AdamW(lr={lr}, weight_decay={decay}), the second group with weight_decay 0: the "
          "parameters after each step", lambda: run_steps(yours.AdamW, drawn, lr=lr, weight_decay=decay),
          close=True, hint="see 12.6: AdamW first multiplies the parameter by 1 - lr * weight_decay, then takes "
                           "Adam's step from averages of the plain gradient.")


@probe("c12_adamw_hidden")
def adamw_hidden(yours, draw, check):
    lr, betas, decay = draw.choice([0.1, 0.2]), draw_betas(draw), draw.choice([0.5, 1.0, 2.0])
    plain, gaps, default = draw_steps(draw, 2), draw_steps(draw, 4, middle_without_grad=True), draw_steps(draw, 2)
    check(f"two steps of AdamW(lr={lr}, betas={betas}, weight_decay={decay}): (parameters, state): the averages see "
          "the plain gradient", lambda: run_with_state(yours.AdamW, plain, lr=lr, betas=betas, weight_decay=decay),
          close=True, hint="see 12.6: the decay multiplies the parameter by 1 - lr * weight_decay; it does not enter "
                           "the gradient, so exp_avg and exp_avg_sq are Adam's averages of p.grad itself.")
    eps, epsilon_steps = draw.choice([0.05, 0.1, 0.5]), draw_steps(draw, 3)
    check(f"three steps of AdamW(lr={lr}, betas={betas}, weight_decay={decay}, eps={eps}): eps where it matters",
          lambda: run_steps(yours.AdamW, epsilon_steps, lr=lr, betas=betas, weight_decay=decay, eps=eps), close=True,
          hint="see 12.5 and 12.6: AdamW's step after the decay is Adam's, eps added to the square root of the "
               "bias-corrected average, sqrt(v_hat) + eps: with the default eps=1e-8 a misplaced eps hides.")
    check("four steps where the middle parameter of a group has no gradient at one step: a parameter without a "
          "gradient is not shrunk either",
          lambda: run_with_state(yours.AdamW, gaps, lr=lr, betas=betas, weight_decay=decay), close=True,
          hint="see 12.6: a parameter whose grad is None is skipped entirely: no decay, no update, its state "
               "untouched.")
    check(f"two steps of AdamW(lr={lr}) without a weight_decay argument: the default weight_decay, 0.01, applies",
          lambda: run_steps(yours.AdamW, default, lr=lr), close=True,
          hint="see 12.6: AdamW's default weight_decay is 0.01, as torch's (Adam's is 0).")
