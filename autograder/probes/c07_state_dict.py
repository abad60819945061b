"""Chapter 7's tests: saving, the loading driver, one module's load, loaders that translate, torch's weights.

Checkpoints are built here as plain OrderedDicts (not with `state_dict()`), so that the loading exercises do not
go through exercise 1. The translating loaders of exercises 5 and 6 have no function in the reference: on the
reference side they are the model the checkpoint was written for, under the checkpoint's own names, loaded as it
is (`gain_class`, `multimodal_class`, `iris_net`); the learner's loader must make its model behave the same.
"""
from collections import OrderedDict

import numpy as np

import modulecraft
import modulecraft.data
from modulecraft import nn

from . import Reference, probe

YOURS = {
    "_save_to_state_dict": "modulecraft.nn.modules.module:Module._save_to_state_dict",
    "state_dict": "modulecraft.nn.modules.module:Module.state_dict",
    "load_state_dict": "modulecraft.nn.modules.module:Module.load_state_dict",
    "load_from_state_dict": "modulecraft.nn.modules.module:Module._load_from_state_dict",
}

# While grading, every module loads its own entries with the learner's `load_from_state_dict` (exercise 4), every
# load is driven by the learner's `load_state_dict` (exercise 3), and saves go through exercise 1. (Exercise 3's
# probes load `Recording` modules, which do not go through exercise 4: it comes later in the notebook.)
BUILDS_ON = {
    "c07_overrides": ["c07_save_to_state_dict", "c07_load_state_dict", "c07_own_load"],
    "c07_iris_net": ["c07_save_to_state_dict", "c07_load_state_dict", "c07_own_load"],
}

RESULT_TYPES = {"predicted_keys": list, "predicted_parameter_count": int}


# -- fixtures ---------------------------------------------------------------------------------------------------
def checkpoint(entries, metadata=None):
    state = OrderedDict(entries)
    if metadata is not None:
        state._metadata = OrderedDict(metadata)
    return state


def linear_entries(prefix, in_features, out_features, value):
    return [(prefix + "weight", np.full((out_features, in_features), value, dtype=np.float32)),
            (prefix + "bias", np.full(out_features, value, dtype=np.float32))]


def raised_lines(load):
    """The lines of the RuntimeError a load raises (or what it returned, as text)."""
    try:
        return ["returned", str(load())]
    except RuntimeError as error:
        return str(error).split("\n\t")


def with_children(cls, children):
    module = cls()
    for name, child in children.items():
        setattr(module, name, child)
    return module


# -- exercise 1: _save_to_state_dict and state_dict ----------------------------------------------------------------
def saving_module(yours, draw):
    """A module with two parameters, a None parameter, a persistent and a non-persistent buffer (registered in a
    drawn order) and a Linear child; its own entries are saved by the learner's `_save_to_state_dict`."""
    class Saving(nn.Module):
        _save_to_state_dict = yours._save_to_state_dict

    weight, scale, unused, count, cache, inner = draw.names(6)
    size, outputs = draw.int(1, 4), draw.int(1, 3)
    registrations = [
        lambda m: setattr(m, weight, nn.Parameter(np.ones(size, dtype=np.float32))),
        lambda m: setattr(m, scale, nn.Parameter(np.full(size, 2.0, dtype=np.float32))),
        lambda m: m.register_parameter(unused, None),
        lambda m: m.register_buffer(count, np.zeros((), dtype=np.int64)),
        lambda m: m.register_buffer(cache, np.zeros(size, dtype=np.float32), persistent=False),
        lambda m: setattr(m, inner, nn.Linear(size, outputs)),
    ]
    order = draw.shuffled(range(len(registrations)))

    def make():
        module = Saving()
        for index in order:
            registrations[index](module)
        return module
    return make, weight


@probe("c07_save_to_state_dict_visible")
def save_to_state_dict_visible(yours, draw, check):
    make_saving, _ = saving_module(yours, draw)

    class Collecting(nn.Module):
        state_dict = yours.state_dict
    body, head = draw.names(2)
    width, hidden = draw.int(1, 4), draw.int(1, 4)

    def collecting():
        return with_children(Collecting, {body: nn.Sequential(nn.Linear(width, hidden), nn.BatchNorm1d(hidden)),
                                          head: nn.Linear(hidden, 1)})
    check("keys of a Saving module's state_dict (two parameters, a None one, a persistent and a non-persistent "
          "buffer, a Linear child, registered in a drawn order)", lambda: list(make_saving().state_dict()),
          hint="see 7.1 and 7.2: the module's own parameters, then its persistent buffers (skip None and names in "
               "_non_persistent_buffers_set), then its children's entries.")
    check("value types without keep_vars", lambda: [type(v).__name__ for v in make_saving().state_dict().values()],
          hint="see 7.1: without keep_vars store value.view(np.ndarray): a plain ndarray viewing the same memory "
               "(not the Parameter object itself, and not a copy).")
    check(f"keys of Collecting({body}=Sequential(Linear, BatchNorm1d), {head}=Linear).state_dict()",
          lambda: list(collecting().state_dict()),
          hint="see 7.2: record the metadata, save your own entries, then call each child's state_dict with "
               "prefix + name + '.'.")
    check("the _metadata of the same state_dict",
          lambda: list(getattr(collecting().state_dict(), "_metadata", {}).items()),
          hint="see 7.2: destination._metadata[prefix[:-1]] = {'version': self._version}, root first.")
    mark = draw.name()

    def hooked():
        module, calls = collecting(), []

        def post(m, state, prefix, local_metadata):
            calls.append(("post", prefix, len(state), dict(local_metadata)))
            state[prefix + mark] = np.zeros(1, dtype=np.float32)
        for owner in (module, getattr(module, head)):
            owner.register_state_dict_pre_hook(lambda m, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))
            owner.register_state_dict_post_hook(post)
        keys = list(module.state_dict())
        return calls, keys
    check(f"Collecting and its {head} each with a state-dict pre-hook and a post-hook that adds a key {mark!r}: (the "
          "hooks' calls (pre: prefix, keep_vars; post: prefix, how many entries it saw, local_metadata), the keys)",
          hooked, hint="see 7.2: before _save_to_state_dict call each hook(self, prefix, keep_vars) of "
                       "self._state_dict_pre_hooks; after the children each hook(self, destination, prefix, "
                       "local_metadata) of self._state_dict_hooks, so a post-hook sees the children's entries too.")


@probe("c07_save_to_state_dict_hidden")
def save_to_state_dict_hidden(yours, draw, check):
    make_saving, weight = saving_module(yours, draw)
    prefix, net, child, hole = draw.name() + ".", draw.name(), draw.name(), draw.name()
    own, buffer_name, first, second = draw.names(4)
    value = float(draw.int(3, 9))

    class Collecting(nn.Module):
        state_dict = yours.state_dict

    def kept():
        module, into = make_saving(), {}
        module._save_to_state_dict(into, prefix, True)
        return list(into), into[prefix + weight] is module._parameters[weight]
    check(f"_save_to_state_dict(destination, {prefix!r}, keep_vars=True): keys are prefix + name, children are not "
          "its business, and keep_vars=True stores the Parameter object itself: (keys, the weight is the Parameter)",
          kept, hint="see 7.1: destination[prefix + name] = param if keep_vars else param.view(np.ndarray).")

    def written_through():
        module, into = make_saving(), {}
        module._save_to_state_dict(into, "", False)
        into[weight][0] = value
        return float(module._parameters[weight][0])
    check(f"The saved array must be a view of the parameter, not a copy: the parameter's first value after writing "
          f"{value} into the saved array", written_through,
          hint="see 7.1: value.view(np.ndarray) views the parameter's own memory; np.array(value), value.copy() or "
               "value.astype(...) make a copy, and writing into a checkpoint entry must write into the model.")

    def dtypes():
        module, into = make_saving(), {}
        module._save_to_state_dict(into, "", False)
        return [str(v.dtype) for v in into.values()]
    check("The saved arrays keep their dtypes (float32 parameters, an int64 buffer): dtypes", dtypes,
          hint="see 7.1: value.view(np.ndarray) keeps the dtype; convert nothing.")

    def root():
        return type(with_children(Collecting, {child: nn.Linear(1, 1)}).state_dict()).__name__
    check("The root call of state_dict must create an OrderedDict (its type)", root,
          hint="see 7.2: destination = OrderedDict(), with destination._metadata = OrderedDict().")

    def passed_in():
        into = OrderedDict()
        into._metadata = OrderedDict()
        result = with_children(Collecting, {child: nn.Linear(1, 1)}).state_dict(destination=into, prefix=net + ".")
        return result is into, list(into), list(into._metadata)
    check(f"A destination passed in to state_dict is filled (keys starting with the prefix {net + '.'!r}) and "
          "returned; metadata keys are the prefixes without their trailing dot: (returned it, keys, metadata keys)",
          passed_in, hint="see 7.2: fill and return the destination you were given.")

    def own_and_children():
        module = Collecting()
        setattr(module, child, nn.Linear(1, 1))  # registered before the module's own entries: the walk decides
        setattr(module, own, nn.Parameter(np.ones(1, dtype=np.float32)))
        module.register_buffer(buffer_name, np.zeros(1, dtype=np.float32))
        return list(module.state_dict())
    check(f"A module with its own parameter {own!r} and buffer {buffer_name!r} (registered after its child "
          f"{child!r}): state_dict keys; its own entries come first, then each child's", own_and_children,
          hint="see 7.2: save the module's own entries (self._save_to_state_dict) before calling the children's "
               "state_dict, whatever order they were registered in.")

    def shared_twice():
        layer = nn.Linear(1, 1)
        module = with_children(Collecting, {first: layer, second: layer})
        state = module.state_dict()
        return list(state), list(state._metadata)
    check(f"A Linear registered twice, as {first!r} and {second!r}: (state_dict keys, metadata keys); state_dict "
          "has no memo, a module is saved once per path", shared_twice,
          hint="see 7.2 and the prediction after it: walk self._modules with each child's own state_dict, not "
               "named_modules(), whose memo skips the second path.")

    def gap():
        module = with_children(Collecting, {child: nn.Linear(1, 1)})
        module.add_module(hole, None)
        return list(module.state_dict())
    check("state_dict must skip children registered as None", gap, hint="see 7.2: skip a child that is None.")

    def returning():
        module = with_children(Collecting, {child: nn.Linear(1, 1)})
        getattr(module, child).register_state_dict_post_hook(lambda m, state, prefix, local_metadata: {})
        try:
            return "returned", list(module.state_dict())
        except RuntimeError as error:
            return "RuntimeError", str(error)
    check(f"A post-hook registered on {child!r} with register_state_dict_post_hook that returns a dict: (what "
          "state_dict did, its keys or the error)", returning,
          hint="see 7.2: a post-hook with hook._from_public_api set must return None: raise RuntimeError(\"state_dict "
               "post-hook must return None\") otherwise.")

    def replaced():
        module = with_children(Collecting, {child: nn.Linear(1, 1)})
        module._register_state_dict_hook(lambda m, state, prefix, local_metadata: OrderedDict(only=value))
        return dict(module.state_dict())
    check("A post-hook of the private _register_state_dict_hook on the root returns a new dict: what state_dict "
          "returns", replaced, hint="see 7.2: the result of a post-hook without _from_public_api, when not None, "
                                    "replaces destination.")
    check("state_dict must pass keep_vars down to the children (value types with keep_vars=True)",
          lambda: [type(v).__name__ for v in
                   with_children(Collecting, {child: nn.Linear(1, 1)}).state_dict(keep_vars=True).values()],
          hint="see 7.2: child.state_dict(destination=..., prefix=..., keep_vars=keep_vars).")


# -- exercise 2: predict (0 points: its form only) ------------------------------------------------------------------
def prediction_form(yours, name):
    """Whether the learner's prediction has the type asked for; the reference side has no prediction to make (a
    constant answer cannot be graded: the reference can tell it), so it has the right type by definition."""
    if isinstance(yours, Reference):
        return True
    return type(getattr(yours, name)) is RESULT_TYPES[name]


@probe("c07_predict_shared_visible")
def predict_shared_visible(yours, draw, check):
    check("predicted_keys is a list (run the cell under the tests to see the keys)",
          lambda: prediction_form(yours, "predicted_keys"), hint="assign a list of key strings to predicted_keys.")


@probe("c07_predict_shared_hidden")
def predict_shared_hidden(yours, draw, check):
    check("predicted_parameter_count is an int", lambda: prediction_form(yours, "predicted_parameter_count"),
          hint="assign a number to predicted_parameter_count.")


# -- exercise 3: load_state_dict ------------------------------------------------------------------------------------
class Recording(nn.Module):
    """A module whose own load records what the driver handed it and reports what the probe scripted (missing
    and unexpected names, error messages), so that the driver is observed without any module's real load (that
    is exercise 4, written later in the notebook)."""

    def __init__(self, log, missing=(), unexpected=(), errors=(), edit=None):
        super().__init__()
        self.log, self.missing, self.unexpected, self.errors, self.edit = log, missing, unexpected, errors, edit

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        self.log.append((prefix, list(state_dict), dict(local_metadata), strict))
        if self.edit is not None:
            self.edit(state_dict, prefix)
        missing_keys.extend(prefix + name for name in self.missing)
        unexpected_keys.extend(prefix + name for name in self.unexpected)
        error_msgs.extend(self.errors)


def recording_tree(yours, draw):
    """A root loaded by the learner's driver, with two drawn children (the first with a child of its own) and a
    None child; everything records into one log. Returns (make, the log, the keys of a full checkpoint)."""
    first, inner, hole, last = draw.names(4)
    log = []

    class Loading(Recording):
        load_state_dict = yours.load_state_dict

    def make(**scripts):
        root = Loading(log, **scripts.get("", {}))
        setattr(root, first, Recording(log, **scripts.get(first, {})))
        setattr(getattr(root, first), inner, Recording(log, **scripts.get(f"{first}.{inner}", {})))
        root.add_module(hole, None)
        setattr(root, last, Recording(log, **scripts.get(last, {})))
        return root
    keys = ["scale", f"{first}.weight", f"{first}.{inner}.bias", f"{last}.weight"]
    return make, log, keys, (first, inner, last)


def entries(keys, value=1.0, metadata=None):
    return checkpoint([(key, np.full(1, value, dtype=np.float32)) for key in keys], metadata)


@probe("c07_load_state_dict_visible")
def load_state_dict_visible(yours, draw, check):
    make, log, keys, (first, inner, last) = recording_tree(yours, draw)
    missing, unexpected, message = draw.name(), draw.name(), f"size mismatch for {draw.name()}"
    hint = "see 7.3: walk the tree calling each module's _load_from_state_dict, then report strict problems."

    check("loading a complete state returns _IncompatibleKeys with two empty lists",
          lambda: tuple(make().load_state_dict(entries(keys))), hint=hint)

    def walked():
        log.clear()
        make().load_state_dict(entries(keys))
        return [(prefix, seen, strict) for prefix, seen, _, strict in log]
    check("every module received the entries under its prefix: (prefix, keys it was handed, strict) per module, in "
          "the order of the walk", walked,
          hint="see 7.3: recurse into every child (skipping None) with the entries that start with its prefix.")

    scripts = {last: {"missing": [missing]}, "": {"unexpected": [unexpected]}, first: {"errors": [message]}}
    check("the lines of the error message of a strict load where modules report a missing key, an unexpected key "
          "and an error message", lambda: raised_lines(lambda: make(**scripts).load_state_dict(entries(keys))),
          hint="see 7.3, step 4: missing keys first, then unexpected keys, then the other messages, joined by "
               "'\\n\\t', in a RuntimeError.")

    def forgiven():
        root = make(**{last: {"missing": [missing]}})
        root.register_load_state_dict_post_hook(
            lambda module, found: found.missing_keys.remove(f"{last}.{missing}")
            if f"{last}.{missing}" in found.missing_keys else None)
        return str(root.load_state_dict(entries(keys)))
    check(f"a strict load where {last} reports {missing!r} missing, with a post-hook that removes it from "
          "missing_keys", forgiven,
          hint="see 7.3, step 3: after the children, call each hook(module, _IncompatibleKeys(missing_keys, "
               "unexpected_keys)) of module._load_state_dict_post_hooks; strict sees its edits.")

    def assigned():
        log.clear()
        result = make().load_state_dict(entries(keys), assign=True)
        return result is not None, [(prefix, metadata.get("assign_to_params_buffers")) for prefix, _, metadata, _
                                    in log]
    check("assign=True reaches every module: (returns a result, assign_to_params_buffers in each module's "
          "local_metadata)", assigned,
          hint="see 7.3, step 3: with assign, set local_metadata['assign_to_params_buffers'] = assign.")


@probe("c07_load_state_dict_hidden")
def load_state_dict_hidden(yours, draw, check):
    make, log, keys, (first, inner, last) = recording_tree(yours, draw)
    missing, unexpected, message = draw.name(), draw.name(), f"size mismatch for {draw.name()}"
    versions = [draw.int(1, 9) for _ in range(3)]
    old, new = draw.names(2)

    def loose():
        result = make(**{first: {"missing": [missing]}, "": {"unexpected": [unexpected]}}).load_state_dict(
            entries(keys), strict=False)
        return type(result).__name__, result.missing_keys, result.unexpected_keys
    check("With strict=False the missing and unexpected keys are still collected and returned: (result type, "
          "missing, unexpected)", loose, hint="see 7.3: return _IncompatibleKeys(missing_keys, unexpected_keys).")
    check("A state_dict that is not a Mapping must raise TypeError",
          lambda: make().load_state_dict([(keys[0], None)]), phrase="Expected state_dict to be dict-like",
          hint="see 7.3, step 1: TypeError: Expected state_dict to be dict-like, got <type>.")
    check("Error messages are an error even with strict=False (the lines of the error)",
          lambda: raised_lines(lambda: make(**{last: {"errors": [message]}}).load_state_dict(entries(keys),
                                                                                            strict=False)),
          hint="see 7.3, step 4: error messages raise whatever strict says.")

    def untouched():
        original = entries(keys)
        make(**{"": {"edit": lambda state, prefix: state.pop(keys[0])}}).load_state_dict(original)
        return list(original)
    check("The caller's dictionary must not be modified: load from a private copy (its keys after a module popped "
          "one from what it was handed)", untouched,
          hint="see 7.3, step 2: state_dict = OrderedDict(state_dict), keeping _metadata.")

    def metadata():
        log.clear()
        saved = entries(keys, metadata=[("", {"version": versions[0]}), (first, {"version": versions[1]}),
                                        (f"{first}.{inner}", {"version": versions[2]})])
        make().load_state_dict(saved)
        return [(prefix, local.get("version")) for prefix, _, local, _ in log]
    check("Each module must get metadata[prefix[:-1]] as its local_metadata (versions each module saw)", metadata,
          hint="see 7.3: local_metadata = metadata.get(prefix[:-1], {}).")

    def renamed():
        log.clear()

        def rename(state, prefix):
            for key in [k for k in state if k.startswith(f"{first}.{old}")]:
                state[f"{first}.{new}" + key[len(f"{first}.{old}"):]] = state.pop(key)
        make(**{"": {"edit": rename}}).load_state_dict(entries([f"{first}.{old}.weight"]), strict=False)
        return [(prefix, seen) for prefix, seen, _, _ in log if prefix == f"{first}."]
    check("Children must get entries filtered from the parent's dictionary after the parent's _load_from_state_dict "
          f"ran (the root renames {first}.{old}.* to {first}.{new}.*: what {first} was handed)", renamed,
          hint="see 7.3: filter the child's entries from local_state_dict after calling _load_from_state_dict.")

    def post_hook_order():
        order, root = [], make()
        names = draw.names(2)
        for name in names:
            root.register_load_state_dict_post_hook(lambda m, found, name=name: order.append(name))
        getattr(root, first).register_load_state_dict_post_hook(lambda m, found: order.append(first))
        getattr(root, last).register_load_state_dict_post_hook(lambda m, found: order.append(last))
        root.load_state_dict(entries(keys))
        return order
    check("A module's load post-hooks run in registration order, after its children (and their hooks) have loaded",
          post_hook_order, hint="see 7.3, step 3: run a module's post-hooks after recursing into its children.")

    def returning():
        root = make()
        root.register_load_state_dict_post_hook(lambda m, found: found)
        return root.load_state_dict(entries(keys))
    check("A load post-hook that returns something other than None must raise AssertionError", returning,
          phrase="not expected to return new values",
          hint="see 7.3, step 3: AssertionError saying hooks are not expected to return new values.")


# -- exercise 4: one module's _load_from_state_dict -----------------------------------------------------------------
def fixed_class(yours, sizes):
    """A frozen bias, a None parameter, a persistent and a non-persistent buffer, and a child; its own entries are
    loaded by the learner's `load_from_state_dict`, called directly (not through exercise 3's driver)."""
    rows, columns = sizes

    class Fixed(nn.Module):
        _load_from_state_dict = yours.load_from_state_dict

        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(np.ones((rows, columns), dtype=np.float32))
            self.bias = nn.Parameter(np.zeros(columns, dtype=np.float32), requires_grad=False)
            self.register_parameter("unused", None)
            self.register_buffer("steps", np.array(0, dtype=np.int64))
            self.register_buffer("cache", np.zeros(columns, dtype=np.float32), persistent=False)
            self.inner = nn.Linear(columns, 1)
    return Fixed


def own_entries(prefix, sizes, value):
    rows, columns = sizes
    return {prefix + "weight": np.full((rows, columns), value, dtype=np.float32),
            prefix + "bias": np.full(columns, value, dtype=np.float32),
            prefix + "steps": np.array(3, dtype=np.int64),
            prefix + "inner.weight": np.zeros((1, columns), dtype=np.float32),
            prefix + "inner.bias": np.zeros(1, dtype=np.float32)}


def load_own(module, state, prefix, *, assign=False, strict=True):
    """One module's own load, as the driver calls it: (missing, unexpected, error messages)."""
    missing, unexpected, errors = [], [], []
    metadata = {"assign_to_params_buffers": True} if assign else {}
    module._load_from_state_dict(state, prefix, metadata, strict, missing, unexpected, errors)
    return missing, unexpected, errors


@probe("c07_own_load_visible")
def own_load_visible(yours, draw, check):
    sizes = (draw.int(1, 4), draw.int(2, 5))
    Fixed = fixed_class(yours, sizes)
    prefix, value = draw.choice(("", draw.name() + ".")), float(draw.int(1, 9))
    check(f"loading a complete checkpoint (prefix {prefix!r}) into a Fixed strictly: (missing, unexpected, errors)",
          lambda: load_own(Fixed(), own_entries(prefix, sizes, value), prefix),
          hint="see 7.4, steps 2 and 3: local_state holds the parameters and the persistent buffers only, and "
               "each one's key is prefix + name.")

    steps = draw.int(4, 99)

    def pre_hooked():
        module, seen = Fixed(), []

        def fill(m, state, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
            seen.append((m is module, prefix, strict))
            state[prefix + "steps"] = np.array(steps, dtype=np.int64)
        module.register_load_state_dict_pre_hook(fill)
        state = {key: array for key, array in own_entries(prefix, sizes, value).items() if key != prefix + "steps"}
        return seen, load_own(module, state, prefix), int(module.steps)
    check(f"a load pre-hook on a Fixed puts a missing 'steps' entry ({steps}) into the checkpoint: (what the hook "
          "saw (the module?, prefix, strict), (missing, unexpected, errors), the steps buffer)", pre_hooked,
          hint="see 7.4, step 1: first call each hook(state_dict, prefix, local_metadata, strict, missing_keys, "
               "unexpected_keys, error_msgs) of self._load_state_dict_pre_hooks: the hook edits state_dict before "
               "the module reads it.")

    def short_bias():
        module = Fixed()
        state = {**own_entries(prefix, sizes, value), prefix + "bias": np.full(1, 5.0, dtype=np.float32)}
        return load_own(module, state, prefix), np.asarray(module.bias).tolist()
    check(f"loading a bias of shape (1,) into the ({sizes[1]},) bias: ((missing, unexpected, errors), the bias)",
          short_bias,
          hint="see 7.4, step 3: compare the shapes before copying (numpy would broadcast), report and skip.")

    def assigned():
        module, state = Fixed(), own_entries(prefix, sizes, value)
        load_own(module, state, prefix, assign=True)
        return module, state[prefix + "bias"]
    check("assign=True keeps a frozen parameter frozen: the bias's requires_grad after the load (it was False)",
          lambda: assigned()[0].bias.requires_grad,
          hint="see 7.4, step 3: wrap as nn.Parameter(input_param, param.requires_grad).")
    check("assign=True puts the checkpoint's own array into the module, not a copy: does the loaded bias share "
          "memory with the checkpoint's entry?",
          lambda: (lambda module, entry: bool(np.shares_memory(module.bias, entry)))(*assigned()),
          hint="see 7.4, step 3: with local_metadata['assign_to_params_buffers'], setattr(self, name, ...) the "
               "checkpoint's array itself (wrapped as a Parameter) instead of copying into the old one.")


@probe("c07_own_load_hidden")
def own_load_hidden(yours, draw, check):
    sizes = (draw.int(1, 4), draw.int(2, 5))
    Fixed = fixed_class(yours, sizes)
    # nested under a parent and a grandparent: the driver hands it only the entries under its prefix
    prefix, value, ghost = f"{draw.name()}.{draw.name()}.", float(draw.int(1, 9)), draw.name()
    steps = draw.int(4, 99)
    own = own_entries(prefix, sizes, value)

    check(f"A Fixed nested under the prefix {prefix!r} loads a complete checkpoint strictly: (missing, unexpected, "
          "errors)", lambda: load_own(Fixed(), own, prefix),
          hint="see 7.4, step 3: every key is prefix + name; and in step 5, strip the prefix before taking the "
               "first part of a key (key[len(prefix):]), since a child's name comes after it.")

    extra = {**own, prefix + "cache": np.zeros(sizes[1], np.float32), prefix + "unused": np.zeros(1, np.float32),
             prefix + ghost + ".weight": np.zeros(1, np.float32), prefix + "inner." + ghost: np.zeros(1, np.float32)}
    check("Unexpected keys: a non-persistent buffer, a None parameter and a key of a child that does not exist are "
          "unexpected at this module (a child's own keys are the child's business): unexpected keys",
          lambda: load_own(Fixed(), extra, prefix)[1],
          hint="see 7.4, step 5: a key is unexpected unless it is in local_state or starts with an existing child.")

    missing = {key: array for key, array in own.items() if key != prefix + "steps"}
    check("An absent key is missing (strict=True)", lambda: load_own(Fixed(), missing, prefix)[0],
          hint="see 7.4, step 3: a key of local_state absent from state_dict goes to missing_keys.")

    def copied():
        module = Fixed()
        weight, values = module.weight, {**own, prefix + "weight": np.full(sizes, value + 1, np.float32)}
        load_own(module, values, prefix)
        return (module.weight is weight, float(module.weight[0, 0]),
                bool(np.shares_memory(module.weight, values[prefix + "weight"])))
    check("Without assign=True the checkpoint's values are copied into the parameter the module already has, and the "
          "module keeps no reference to the checkpoint's array: (the module still holds its own Parameter object, "
          "weight[0, 0] after the load, the weight shares memory with the checkpoint's entry)", copied,
          hint="see 7.4, step 3: param[...] = input_param copies the values in place; rebinding a name (param = "
               "input_param) copies nothing, and storing the checkpoint's array itself (setattr, or "
               "self._parameters[name] = ...) is what assign=True does, not a copy.")

    def scalar():
        module = Fixed()
        load_own(module, {**own, prefix + "steps": np.array([steps], np.int64)}, prefix)
        return int(module.steps)
    check("A 1-element vector loads into a scalar buffer (old checkpoints stored scalars so)", scalar,
          hint="see 7.4, step 3: if param.ndim == 0 and input_param.shape == (1,), use input_param[0], then copy it "
               "into the buffer in place like any other value.")
    check("A value that is not an array is an error: the error messages for a list as the weight",
          lambda: load_own(Fixed(), {**own, prefix + "weight": [[1.0] * sizes[1]] * sizes[0]}, prefix)[2],
          hint="see 7.4, step 3: While copying the parameter named ..., expected numpy.ndarray ...")

    def lazy():
        layer, weight = nn.LazyLinear(sizes[0]), np.full(sizes, value, np.float32)
        errors = load_own(layer, {prefix + "weight": weight, prefix + "bias": np.zeros(sizes[0], np.float32)},
                          prefix)[2]
        return errors, np.asarray(layer.weight).tolist()
    check("A LazyLinear loads a checkpoint: its own load pre-hook materialises its weight to the checkpoint's shape "
          "first: (errors, weight)", lazy,
          hint="see 7.4, step 1: run the module's load pre-hooks before reading its parameters (a lazy module's "
               "parameters have no shape until its pre-hook gives them one).")

    def mismatched():
        module = Fixed()
        errors = load_own(module, {**own, prefix + "weight": np.zeros((sizes[0] + 1, sizes[1]), np.float32)}, prefix,
                          assign=True)[2]
        return errors, module.weight.shape
    check("assign=True checks the shape too: a mis-shaped entry must not be assigned (errors, weight shape)",
          mismatched, hint="see 7.4, step 3: check the shape before the assign branch.")


# -- exercise 5: loaders that translate ----------------------------------------------------------------------------
def gain_class(yours, version_of_checkpoint):
    """The learner's Gain (version 2: `weight` and a `calls` buffer, loaded by `gain_load_from_state_dict`); on the
    reference side, Gain as it was when the checkpoint was written (version 1: one parameter called `gain`)."""
    if isinstance(yours, Reference) and version_of_checkpoint != 2:
        class Gain(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.gain = nn.Parameter(np.ones(size, dtype=np.float32))

            def forward(self, x):
                return x * self.gain
        return Gain

    class Gain(nn.Module):
        _version = 2
        if not isinstance(yours, Reference):
            _load_from_state_dict = yours.gain_load_from_state_dict

        def __init__(self, size):
            super().__init__()
            self.weight = nn.Parameter(np.ones(size, dtype=np.float32))
            self.register_buffer("calls", np.array(0, dtype=np.int64))

        def forward(self, x):
            self.calls += 1
            return x * self.weight
    return Gain


def version_1(values, prefix=""):
    return checkpoint([(prefix + "gain", np.asarray(values, dtype=np.float32))], [(prefix[:-1], {"version": 1})])


def backbone_class():
    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Linear(4, 4)
            self.norm = nn.BatchNorm1d(4)
    return Backbone


def detector_entries(prefix, value):
    """A Detector's checkpoint: backbone (Linear + BatchNorm1d), neck, head."""
    backbone = linear_entries(prefix + "backbone.conv.", 4, 4, value) + [
        (prefix + "backbone.norm.weight", np.full(4, value, np.float32)),
        (prefix + "backbone.norm.bias", np.zeros(4, np.float32)),
        (prefix + "backbone.norm.running_mean", np.zeros(4, np.float32)),
        (prefix + "backbone.norm.running_var", np.ones(4, np.float32)),
        (prefix + "backbone.norm.num_batches_tracked", np.array(0, np.int64))]
    return backbone + linear_entries(prefix + "neck.", 4, 3, value) + linear_entries(prefix + "head.", 3, 2, value)


def multimodal_class(yours):
    """The learner's MultiModal (img_backbone, img_neck, points, loaded by `multimodal_load_from_state_dict`); on
    the reference side, the same model under the Detector checkpoint's names (backbone, neck, points)."""
    reference = isinstance(yours, Reference)
    backbone, neck = ("backbone", "neck") if reference else ("img_backbone", "img_neck")
    Backbone = backbone_class()

    class MultiModal(nn.Module):
        if not reference:
            _load_from_state_dict = yours.multimodal_load_from_state_dict

        def __init__(self):
            super().__init__()
            setattr(self, backbone, Backbone())
            setattr(self, neck, nn.Linear(4, 3))
            self.points = nn.Linear(3, 3)

        def parts(self):
            """The backbone's and the neck's weights, whatever they are called."""
            return [np.asarray(getattr(self, backbone).conv.weight).tolist(),
                    np.asarray(getattr(self, neck).weight).tolist()]
    return MultiModal


@probe("c07_overrides_visible")
def overrides_visible(yours, draw, check):
    values, single = [float(draw.int(1, 9)) for _ in range(draw.int(1, 3))], [float(draw.int(1, 9))]
    x = draw.array(len(values))
    depth, value = draw.int(1, 3), float(draw.int(2, 9)) / 2
    hint = "see 7.5: for version None or 1, rename prefix + 'gain' to prefix + 'weight' and add prefix + 'calls' = 0."

    def upgraded():
        layer = gain_class(yours, 1)(len(values))
        result = str(layer.load_state_dict(version_1(values)))
        return result, np.asarray(layer(x)).tolist()
    check(f"loading a version-1 checkpoint {values} strictly: (result, the layer's output on an input)", upgraded,
          close=True, hint=hint)

    def nested():
        Gain = gain_class(yours, 1)
        model = nn.Sequential(*[nn.Identity() for _ in range(depth)], Gain(1))
        result = str(model.load_state_dict(version_1(single, prefix=f"{depth}.")))
        return result, np.asarray(model(np.ones(1, np.float32))).tolist()
    check(f"a version-1 checkpoint of a Gain inside a Sequential (prefix '{depth}.'): (result, output)", nested,
          hint="see 7.5: build every key from `prefix`.")

    MultiModal = multimodal_class(yours)
    hint = "see 7.6: move keys starting with prefix + 'backbone.' / prefix + 'neck.' to the img_ names, then load."

    def fused():
        fusion = MultiModal()
        result = fusion.load_state_dict(checkpoint(detector_entries("", value)), strict=False)
        return tuple(result), fusion.parts()
    check("(missing, unexpected) keys after loading a Detector checkpoint into MultiModal, and the backbone's and "
          "neck's weights", fused, hint=hint)


@probe("c07_overrides_hidden")
def overrides_hidden(yours, draw, check):
    value, calls, size = float(draw.int(1, 9)), draw.int(1, 99), draw.int(1, 3)
    wrapper, similar = draw.name(), draw.name()
    x = draw.array(size)

    def current():
        layer = gain_class(yours, 2)(size)
        v2 = checkpoint([("weight", np.full(size, value, np.float32)), ("calls", np.array(calls, np.int64))],
                        [("", {"version": 2})])
        result = str(layer.load_state_dict(v2))
        return result, np.asarray(layer.weight).tolist(), int(layer.calls)
    check("A version-2 checkpoint must load unchanged: (result, weight, calls)", current,
          hint="see 7.5: touch the entries only when the version is None or below 2.")

    def partial():
        partial = checkpoint([("weight", np.full(size, value, np.float32))], [("", {"version": 2})])
        return raised_lines(lambda: gain_class(yours, 2)(size).load_state_dict(partial))
    check("A version-2 checkpoint without 'calls' is incomplete: it must not be patched (the error lines)", partial,
          hint="see 7.5: only old checkpoints get a default for calls.")

    def no_metadata():
        layer = gain_class(yours, None)(size)
        result = str(layer.load_state_dict({"gain": np.full(size, value, np.float32)}))
        return result, np.asarray(layer(x)).tolist()
    check("A checkpoint without metadata (version None) is treated as old: (result, output)", no_metadata,
          close=True, hint="see 7.5: local_metadata.get('version') is None for a checkpoint without metadata.")

    def both():
        state = version_1(np.full(size, 1.0))
        state["weight"] = np.full(size, value, np.float32)
        layer = gain_class(yours, 2)(size)
        result = layer.load_state_dict(state, strict=False)
        return result.unexpected_keys, np.asarray(layer.weight).tolist()
    check("An old key must not overwrite a present new one: with both 'gain' and 'weight', (unexpected keys, weight)",
          both, hint="see 7.5: rename only when the new key is absent.")

    MultiModal = multimodal_class(yours)

    def inside():
        outer = with_children(nn.Module, {wrapper: MultiModal()})
        result = outer.load_state_dict(checkpoint(detector_entries(wrapper + ".", value), []), strict=False)
        return result.missing_keys, result.unexpected_keys, getattr(outer, wrapper).parts()
    check("Inside another model the keys start with `prefix`: rename prefix + 'backbone.' to prefix + "
          "'img_backbone.': (missing, unexpected, backbone and neck weights)", inside,
          hint="see 7.6: compare and build keys with `prefix`.")

    def near_names():
        state = checkpoint([("backbone" + similar + ".weight", np.zeros(1, np.float32)),
                            ("neck" + similar, np.zeros(1, np.float32))])
        return MultiModal().load_state_dict(state, strict=False).unexpected_keys
    check("Only keys starting with 'backbone.' / 'neck.' (with the dot) are renamed: unexpected keys", near_names,
          hint="see 7.6: match the prefix with its dot.")

    def own_names():
        model = MultiModal()
        return str(MultiModal().load_state_dict(model.state_dict()))
    check("A MultiModal checkpoint (already using its own names) must load strictly", own_names,
          hint="see 7.6: rename only the old names.")


# -- exercise 6: IrisNet ---------------------------------------------------------------------------------------------
def iris_net(yours):
    """The learner's IrisNet; on the reference side, the model torch's checkpoint was written for."""
    if isinstance(yours, Reference):
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return yours.IrisNet()


def torch_state():
    return modulecraft.load(modulecraft.data.path("iris_mlp.pt"))


def flowers(draw, count):
    """Drawn flowers: sepal length and width, petal length and width (cm)."""
    low, high = np.array([4.3, 2.0, 1.0, 0.1]), np.array([7.9, 4.4, 6.9, 2.5])
    return np.round(low + (high - low) * draw.numpy.random((count, 4)), 1).astype(np.float32)


@probe("c07_iris_net_visible")
def iris_net_visible(yours, draw, check):
    x = flowers(draw, draw.int(3, 8))
    hint = "see 7.9: rename prefix + '0.' to prefix + 'hidden.' and prefix + '2.' to prefix + 'out.', then load."
    check("IrisNet().load_state_dict(torch_state) (strict)",
          lambda: str(iris_net(yours).load_state_dict(torch_state())), hint=hint)

    def logits():
        net = iris_net(yours)
        net.load_state_dict(torch_state())
        return np.asarray(net(x))
    check(f"the logits of {len(x)} drawn flowers after the load", logits, close=True,
          hint="see 7.9: forward is out(act(hidden(x))), with the ReLU between the layers.")


@probe("c07_iris_net_hidden")
def iris_net_hidden(yours, draw, check):
    x, name = flowers(draw, draw.int(2, 5)), draw.name()

    def inside():
        outer = nn.ModuleDict({name: iris_net(yours)})
        wrapped = OrderedDict((f"{name}.{key}", value) for key, value in torch_state().items())
        result = str(outer.load_state_dict(wrapped))
        return result, np.asarray(outer[name](x))
    check(f"Inside another model (prefix '{name}.') the checkpoint's keys are '{name}.0.weight', ...: build the names "
          "from `prefix`: (result, logits)", inside, close=True,
          hint="see 7.9: compare and build keys with `prefix`.")
    check("An IrisNet checkpoint (already using its own names) must load strictly too",
          lambda: (lambda net: str(net.load_state_dict(net.state_dict())))(iris_net(yours)),
          hint="see 7.9: rename only the keys that start with prefix + '0.' or prefix + '2.'.")
