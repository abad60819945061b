"""Chapter 4's tests: buffers, state that is saved but not trained."""
import numpy as np

from modulecraft import nn

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "register_buffer": "modulecraft.nn.modules.module:Module.register_buffer",
    "saved_buffers": "modulecraft.exercises.c04_buffers:saved_buffers",
    "predicted_state_keys": "modulecraft.exercises.c04_buffers:predicted_state_keys",
    "RunningMean": "modulecraft.exercises.c04_buffers:RunningMean",
    "FixedEncoding": "modulecraft.exercises.c04_buffers:FixedEncoding",
}

# While grading, every buffer registered in the kernel (BatchNorm1d's, the learner's modules', an assignment to a
# buffer name) goes through the learner's register_buffer.
BUILDS_ON = {
    "c04_predict_state": ["c04_register_buffer"],
    "c04_running_mean": ["c04_register_buffer"],
    "c04_fixed_encoding": ["c04_register_buffer"],
}

CONTAINERS = ("__dict__", "_parameters", "_modules", "_buffers", "_non_persistent_buffers_set")


def where(module, name):
    """The containers of `module` that hold `name`."""
    state = vars(module)
    return [key for key in CONTAINERS if name in (state if key == "__dict__" else state.get(key, ()))]


def registering_class(yours):
    """A module whose register_buffer is the learner's."""
    return type("Registering", (nn.Module,), {"register_buffer": yours.register_buffer})


def with_buffers(entries):
    """A bare module holding `entries` [(name, array or None, persistent)] as buffers, written into its containers
    directly (a fixture that does not go through anyone's register_buffer)."""
    module = nn.Module()
    for name, value, persistent in entries:
        module._buffers[name] = value
        if not persistent:
            module._non_persistent_buffers_set.add(name)
    return module


# -- exercise 2: register_buffer --------------------------------------------------------------------------------
@probe("c04_register_buffer_visible")
def register_buffer_visible(yours, draw, check):
    Registering = registering_class(yours)
    stats = Registering()
    mean_name, mask_name = draw.names(2)
    mean, mask = draw.array(draw.int(2, 5)), np.ones(draw.int(1, 3), dtype=bool)
    check(f"stats.register_buffer('{mean_name}', array)", lambda: stats.register_buffer(mean_name, mean),
          hint="a new name and an array pass every check (section 4.2)")
    check(f"stats.register_buffer('{mask_name}', array, persistent=False)",
          lambda: stats.register_buffer(mask_name, mask, persistent=False),
          hint="a new name and an array pass every check (section 4.2)")
    check(f"stats._buffers['{mean_name}'] is the array you registered", lambda: stats._buffers.get(mean_name) is mean,
          hint="store the array itself in self._buffers[name] (section 4.2)")
    check(f"Where the buffer '{mask_name}' registered with persistent=False lives", lambda: where(stats, mask_name),
          hint="store it in _buffers and add its name to _non_persistent_buffers_set (section 4.2)")
    check("state_dict keys", lambda: list(stats.state_dict()), hint="only persistent buffers are saved (section 4.2)")


@probe("c04_register_buffer_hidden")
def register_buffer_hidden(yours, draw, check):
    Registering = registering_class(yours)
    module = Registering()
    mask, empty, dotted_left, dotted_right, listed = draw.names(5)

    def flip():
        module.register_buffer(mask, np.ones(2), persistent=False)
        module.register_buffer(mask, np.ones(2), persistent=True)
        return where(module, mask)
    check("re-registering a non-persistent buffer with persistent=True: where its name lives", flip,
          hint="discard the name from _non_persistent_buffers_set when persistent is true (section 4.2)")
    check(f"register_buffer('{empty}', None): None is a valid buffer",
          lambda: (module.register_buffer(empty, None), where(module, empty), module._buffers.get(empty, 0) is None),
          hint="None is a valid buffer (section 4.2)")
    method = draw.choice(["training", "eval", "forward", "apply", "buffers"])
    number = draw.int(1, 99)
    for name, value, phrase, hint in [
        (f"{dotted_left}.{dotted_right}", np.ones(1), "contain", "dots are not allowed in a name (section 4.2)"),
        ("", np.ones(1), "empty string", "the empty name is refused (section 4.2)"),
        (method, np.ones(1), "already exists", "an existing attribute may not become a buffer (section 4.2)"),
        (listed, [1.0, 2.0], f"buffer '{listed}'", "only an array or None may be registered (section 4.2)"),
        (number, np.ones(1), "should be a string", "a name must be a str (section 4.2)"),
    ]:
        check(f"register_buffer({name!r}, {type(value).__name__}) is refused",
              lambda name=name, value=value: module.register_buffer(name, value), hint=hint, phrase=phrase)
    early, early_name = object.__new__(Registering), draw.name()
    check("register_buffer before Module.__init__() ran", lambda: early.register_buffer(early_name, np.ones(1)),
          hint="section 4.2, first row: check for _buffers in self.__dict__ first",
          phrase="before Module.__init__() call")
    check(f"register_buffer('{dotted_left}.{dotted_right}', list): which is refused first, the name or the value",
          lambda: module.register_buffer(f"{dotted_left}.{dotted_right}", [1.0]),
          hint="the name is checked before the value, so the dot fails first (section 4.2, the order of the table)",
          phrase="contain")


# -- exercise 3: saved_buffers ----------------------------------------------------------------------------------
@probe("c04_saved_buffers_visible")
def saved_buffers_visible(yours, draw, check):
    features = draw.int(1, 4)
    norm = with_buffers([("running_mean", np.zeros(features, dtype=np.float32), True),
                         ("running_var", np.ones(features, dtype=np.float32), True),
                         ("num_batches_tracked", np.array(0, dtype=np.int64), True)])
    check(f"Names from saved_buffers of a module holding BatchNorm1d({features})'s three buffers",
          lambda: list(yours.saved_buffers(norm)), hint="every persistent buffer (section 4.2)")
    table, steps, extra = draw.names(3)
    entries = draw.shuffled([(table, np.zeros(3, dtype=np.float32), False), (steps, np.zeros((), dtype=np.int64), True),
                             (extra, np.ones(2), draw.coin())])
    check("Names from saved_buffers of a module with persistent and non-persistent buffers",
          lambda: list(yours.saved_buffers(with_buffers(entries))),
          hint="leave out the names in _non_persistent_buffers_set (section 4.2)")


@probe("c04_saved_buffers_hidden")
def saved_buffers_hidden(yours, draw, check):
    missing, kept, hidden, child, other = draw.names(5)
    arrays = {name: draw.array(2) for name in (kept, hidden, other)}
    entries = draw.shuffled([(missing, None, True), (kept, arrays[kept], True), (hidden, arrays[hidden], False),
                             (other, arrays[other], True)])
    module = with_buffers(entries)
    module._modules[child] = with_buffers([(draw.name(), np.zeros(1), True)])
    check("saved_buffers of a module with a None buffer, a non-persistent one and a child",
          lambda: list(yours.saved_buffers(module)),
          hint="a None buffer is not saved and children's buffers are not this module's (section 4.2)")
    check("saved_buffers returns the buffer objects themselves",
          lambda: [value is arrays.get(name) for name, value in yours.saved_buffers(module).items()],
          hint="return the buffer objects themselves, not copies (section 4.2)")


# -- exercise 1: predict the state_dict's keys ------------------------------------------------------------------
def tracker(draw):
    """A module holding state in every way the chapter shows, in a drawn order, with drawn names, written into its
    containers directly: the prediction comes before register_buffer is written, so the fixture goes through no
    one's register_buffer (a child Linear registers parameters only)."""
    scale, count, cache, missing, history, child, total = draw.names(7)
    module = nn.Module()
    state = vars(module)
    steps = [
        lambda: state["_parameters"].update({scale: nn.Parameter(np.ones(2, dtype=np.float32))}),
        lambda: state["_buffers"].update({count: np.zeros((), dtype=np.int64)}),
        lambda: (state["_buffers"].update({cache: np.zeros(2)}), state["_non_persistent_buffers_set"].add(cache)),
        lambda: state["_buffers"].update({missing: None}),
        lambda: state.update({history: np.zeros(3)}),
        lambda: state["_modules"].update({child: nn.Linear(2, 2)}),
        lambda: (state["_buffers"].update({total: np.zeros(1)}),
                 draw.coin() or state["_non_persistent_buffers_set"].add(total)),
    ]
    for step in draw.shuffled(steps):
        step()
    if draw.coin():
        state["_parameters"][draw.name()] = None
    return module


@probe("c04_predict_state_visible")
def predict_state_visible(yours, draw, check):
    module = tracker(draw)
    held = {*vars(module), *module._parameters, *module._buffers}
    check("your predicted_state_keys returns a list of keys: names the module holds, or a child's name, a dot and a "
          "key", lambda: (lambda keys: isinstance(keys, list) and all(
              isinstance(key, str) and (key in held or key.split(".", 1)[0] in module._modules) for key in keys))(
              yours.predicted_state_keys(module)),
          hint="return a list of strings such as 'scale' or 'norm.weight', without calling state_dict (exercise 1)")


@probe("c04_predict_state_hidden")
def predict_state_hidden(yours, draw, check):
    for module in [tracker(draw) for _ in range(3)]:
        check("the keys of the state_dict of a module you have not seen, in order",
              lambda module=module: list(yours.predicted_state_keys(module)),
              hint="own parameters first, then own buffers in registration order (not None, not persistent=False; "
                   "assigning a plain array to a buffer keeps its persistence; a plain array attribute is neither), "
                   "then each child's entries (sections 4.2 and 4.3)")


# -- exercise 4: RunningMean ------------------------------------------------------------------------------------
@probe("c04_running_mean_visible")
def running_mean_visible(yours, draw, check):
    features = draw.int(2, 4)
    check(f"Building RunningMean({features})", lambda: type(yours.RunningMean(features)).__name__,
          hint="call super().__init__() first, then register the two buffers (exercise 4)")
    centre = yours.RunningMean(features)
    check(f"Parameters of RunningMean({features})", lambda: [name for name, _ in centre.named_parameters()],
          hint="running statistics are buffers, not parameters (section 4.1)")
    check(f"Buffers of RunningMean({features})", lambda: [name for name, _ in centre.named_buffers()],
          hint="register both with register_buffer (section 4.2)")
    batch = draw.array(draw.int(2, 4), features)
    check("centre(batch) in training mode", lambda: np.asarray(centre(batch), dtype=np.float32), close=True,
          hint="subtract the batch mean (exercise 4)")
    check("running_mean after one batch", lambda: np.asarray(centre.running_mean, dtype=np.float32), close=True,
          hint="(1 - momentum) * running + momentum * batch mean (section 4.1)")


@probe("c04_running_mean_hidden")
def running_mean_hidden(yours, draw, check):
    momentum = draw.choice([0.5, 0.25, 0.2, 0.3])
    features, batches = draw.int(2, 4), draw.int(2, 3)
    inputs = [draw.array(draw.int(2, 3), features) for _ in range(batches)]
    probe_input = draw.array(1, features)

    def run():
        centre = yours.RunningMean(features, momentum=momentum)
        for batch in inputs:
            centre(batch)
        return centre
    check(f"num_batches_tracked after {batches} training batches: (value, dtype)",
          lambda: (lambda c: (int(c.num_batches_tracked), str(np.asarray(c.num_batches_tracked).dtype)))(run()),
          hint="num_batches_tracked is np.array(0, dtype=np.int64), plus 1 per training batch (exercise 4)")
    check(f"running_mean after {batches} batches with momentum={momentum}",
          lambda: np.asarray(run().running_mean, dtype=np.float32), close=True,
          hint="running = (1 - momentum) * running + momentum * batch mean (section 4.1)")
    check("after training, where running_mean lives", lambda: where(run(), "running_mean"),
          hint="it must stay a (persistent) buffer (section 4.3)")

    def evaluated():
        centre = run()
        before = np.array(centre.running_mean, copy=True)
        centre.eval()
        out = np.asarray(centre(probe_input), dtype=np.float32)
        return out, bool(np.array_equal(before, centre.running_mean)), int(centre.num_batches_tracked)
    check("in eval mode: (output, running_mean unchanged, num_batches_tracked)", evaluated, close=True,
          hint="in eval mode subtract running_mean and update nothing (exercise 4)")
    check("state_dict keys of RunningMean", lambda: list(run().state_dict()),
          hint="both buffers are saved in the state_dict (section 4.2)")


# -- exercise 5: FixedEncoding ----------------------------------------------------------------------------------
@probe("c04_fixed_encoding_visible")
def fixed_encoding_visible(yours, draw, check):
    short, long = draw.int(3, 8), draw.int(9, 16)
    check(f"Keys of FixedEncoding({short}).state_dict()", lambda: list(yours.FixedEncoding(short).state_dict()),
          hint="the table can be recomputed: register it with persistent=False so it is not saved (section 4.2)")
    check(f"Loading FixedEncoding({short})'s state_dict into FixedEncoding({long})",
          lambda: (yours.FixedEncoding(long).load_state_dict(yours.FixedEncoding(short).state_dict()), None)[1],
          hint="only scale is saved, so the lengths no longer have to match (section 4.2)")
    x = draw.array(draw.int(1, short))
    check(f"FixedEncoding({short})(x) for an x of {len(x)} values", lambda: np.asarray(yours.FixedEncoding(short)(x)),
          close=True, hint="x * scale + the table's first entries, as Encoding does (exercise 5)")


@probe("c04_fixed_encoding_hidden")
def fixed_encoding_hidden(yours, draw, check):
    length = draw.int(3, 8)
    x = draw.array(draw.int(1, length), dtype=np.float64)

    def converted():
        encoding = yours.FixedEncoding(length).double()
        return encoding, np.asarray(encoding(x))
    check(f"after FixedEncoding({length}).double(), where the table lives", lambda: where(converted()[0], "table"),
          hint="it must be a non-persistent buffer, not a plain attribute, so that double() converts it (section 4.3)")
    check("after double(): (the table's dtype, forward(x))",
          lambda: (lambda encoding, out: (str(encoding.table.dtype), out))(*converted()), close=True,
          hint="after double(), the table is float64 and forward adds its first entries (exercise 5)")
