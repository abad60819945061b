"""Chapter 6's tests: forward hooks, `_call_impl`, registration hooks.

The probes register global hooks: each removes what it registered (a `finally` per probe, `global_hooks`)."""
import contextlib
import warnings

import numpy as np

from modulecraft import nn
from modulecraft.nn.modules import module as registry

from . import Reference, probe, resolve

# The learner's names in this chapter, and where the reference keeps each. `run_forward_pre_hooks` and
# `run_forward_hooks` (the two halves of `_call_impl` the learner writes first) have no function of their own in
# the reference: on the reference side they are observed through the reference's whole `_call_impl` (below).
YOURS = {
    "register_forward_pre_hook": "modulecraft.nn.modules.module:Module.register_forward_pre_hook",
    "register_forward_hook": "modulecraft.nn.modules.module:Module.register_forward_hook",
    "register_module_forward_hook": "modulecraft.nn.modules.module:register_module_forward_hook",
    "_call_impl": "modulecraft.nn.modules.module:Module._call_impl",
    "register_parameter": "modulecraft.nn.modules.module:Module.register_parameter",
    "register_buffer": "modulecraft.nn.modules.module:Module.register_buffer",
}

# modulecraft's functions that hold a mechanism of YOURS under another name (`autograder.judging.answer_key`): the
# backward hooks' registrations store a hook under a handle and honour `prepend` as the forward ones do (on another
# dict, which a caller can swap for the forward one). Nothing of this chapter registers a backward hook.
SIBLINGS = {
    "modulecraft.nn.modules.module:Module.register_full_backward_pre_hook": "register_forward_pre_hook",
    "modulecraft.nn.modules.module:Module.register_full_backward_hook": "register_forward_hook",
}

# While grading, every module registers its hooks with the learner's functions of exercise 1.
BUILDS_ON = {
    "c06_run_forward_pre_hooks": ["c06_register_hooks"],
    "c06_run_forward_hooks": ["c06_register_hooks"],
    "c06_call_impl": ["c06_register_hooks"],
}

CALL_IMPL = "modulecraft.nn.modules.module:Module._call_impl"
GLOBAL_TABLES = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_with_kwargs",
                 "_global_forward_hooks_always_called", "_global_parameter_registration_hooks",
                 "_global_buffer_registration_hooks")
FORWARD_TABLES = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called")
FIRING_EVENTS = ("global pre", "pre A", "pre B", "forward", "global hook", "hook C", "hook D")


# -- fixtures ---------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def global_hooks():
    """Whatever a probe registers for every module is gone when it ends, whatever the learner's code did."""
    saved = {name: dict(getattr(registry, name)) for name in GLOBAL_TABLES}
    try:
        yield
    finally:
        for name, before in saved.items():
            table = getattr(registry, name)
            table.clear()
            table.update(before)


def registering_class(yours):
    """A module that registers its forward hooks with the learner's functions; forward returns what it received."""
    class Registering(nn.Module):
        register_forward_pre_hook = yours.register_forward_pre_hook
        register_forward_hook = yours.register_forward_hook

        def forward(self, *args, **kwargs):
            return args, kwargs
    return Registering


def hooked_class(yours):
    """A module called through the learner's `_call_impl`; forward scales its input by 2 (or fails)."""
    class Hooked(nn.Module):
        _call_impl = yours._call_impl

        def __init__(self, fail=None):
            super().__init__()
            self.fail = fail

        def forward(self, x, scale=1):
            if self.fail:
                raise ValueError(self.fail)
            return 2 * x * scale
    return Hooked


def registered_class(yours):
    class Registered(nn.Module):
        register_parameter = yours.register_parameter
        register_buffer = yours.register_buffer
    return Registered


def positions(table, handles):
    """The keys of a hook table as the registration order of their handles (None: an id no handle gave)."""
    ids = [handle.id for handle in handles]
    return [ids.index(key) if key in ids else None for key in table]


def holding(owner, names, handle):
    """The tables of `owner` among `names` that hold `handle`'s id."""
    return [name for name in names if handle.id in getattr(owner, name)]


def at_least_one_true(draw, count):
    """`count` options, the first False (prepending the only hook changes nothing), at least one other True."""
    flags = [False] + [draw.coin() for _ in range(count - 1)]
    flags[draw.int(1, count - 1)] = True
    return flags


def ones(*shape):
    return np.ones(shape, dtype=np.float32)


# -- the pre-hook and hook runners: the learner's functions, or the reference's `_call_impl` observed ---------------
def pre_hooks_runner(yours):
    """`run_forward_pre_hooks(module, args, kwargs)`: the learner's; on the reference, what its `_call_impl` hands
    to forward (the probes' modules have no forward hooks)."""
    if not isinstance(yours, Reference):
        return yours.run_forward_pre_hooks
    call_impl = resolve(CALL_IMPL)

    def through_call(module, args, kwargs):
        with forward_returning(module, lambda *args, **kwargs: (args, kwargs)):
            return call_impl(module, *args, **kwargs)
    return through_call


def forward_hooks_runner(yours):
    """`run_forward_hooks(module, args, kwargs, output, called)`: the learner's; on the reference, what its
    `_call_impl` returns when forward returns `output`, with `called` filled by the always-call hooks as they run
    (the probes' modules have no pre-hooks)."""
    if not isinstance(yours, Reference):
        return yours.run_forward_hooks
    call_impl = resolve(CALL_IMPL)

    def through_call(module, args, kwargs, output, called):
        tables = [registry._global_forward_hooks, module._forward_hooks]
        always = {**registry._global_forward_hooks_always_called, **module._forward_hooks_always_called}
        saved = [dict(table) for table in tables]
        for table in tables:
            for hook_id, hook in table.items():
                if hook_id in always:
                    table[hook_id] = recording(hook, hook_id, called)
        try:
            with forward_returning(module, lambda *args, **kwargs: output):
                return call_impl(module, *args, **kwargs)
        finally:
            for table, before in zip(tables, saved):
                table.update(before)
    return through_call


def recording(hook, hook_id, called):
    def recorded(*args):
        called.add(hook_id)
        return hook(*args)
    return recorded


@contextlib.contextmanager
def forward_returning(module, forward):
    object.__setattr__(module, "forward", forward)
    try:
        yield
    finally:
        object.__delattr__(module, "forward")


# -- exercise 1: registering forward hooks -------------------------------------------------------------------------
@probe("c06_register_hooks_visible")
def register_hooks_visible(yours, draw, check):
    Registering = registering_class(yours)
    prepends = at_least_one_true(draw, draw.int(3, 5))
    kwargs_flags = at_least_one_true(draw, 4)
    removed_options = dict(zip(("with_kwargs", "always_call"), draw.shuffled([True, draw.coin()])))
    global_options = dict(with_kwargs=draw.coin(), always_call=True)
    hint = "see 6.1: store the hook under handle.id, record each option in its side table, return the handle."

    def prepended_order():
        module = Registering()
        handles = [module.register_forward_pre_hook(lambda m, args: None, prepend=prepend) for prepend in prepends]
        ids = [handle.id for handle in handles]
        return positions(module._forward_pre_hooks, handles), ids == sorted(ids)
    check(f"pre-hooks registered with prepend={prepends}: (dict order as registration indices, ids grow)",
          prepended_order,
          hint="see 6.1, step 4: move_to_end(handle.id, last=False) when prepend is true; ids come from "
               "RemovableHandle.")

    def kwargs_side_tables():
        module = Registering()
        pre = [module.register_forward_pre_hook(lambda *a: None, with_kwargs=flag) for flag in kwargs_flags]
        post = [module.register_forward_hook(lambda *a: None, with_kwargs=flag) for flag in kwargs_flags]
        return (positions(module._forward_pre_hooks_with_kwargs, pre),
                positions(module._forward_hooks_with_kwargs, post))
    check(f"with_kwargs hooks get the keyword arguments: hooks registered with with_kwargs={kwargs_flags}, "
          "(registration indices in the pre-hooks' with_kwargs table, in the forward hooks')", kwargs_side_tables,
          hint="see 6.1, step 3: with_kwargs=True puts handle.id into the with_kwargs side table.")

    def removed_everywhere():
        module = Registering()
        handle = module.register_forward_hook(lambda *a: None, **removed_options)
        before = holding(module, FORWARD_TABLES, handle)
        handle.remove()
        return before, holding(module, FORWARD_TABLES, handle)
    check(f"tables holding a forward hook's id registered with {removed_options}: (before, after handle.remove())",
          removed_everywhere,
          hint="see 6.1, step 1: give the handle both side tables as extra_dict, so remove() cleans them too.")

    def global_always_called():
        with global_hooks():
            handle = yours.register_module_forward_hook(lambda *a: None, **global_options)
            names = ("_global_forward_hooks", "_global_forward_hooks_with_kwargs",
                     "_global_forward_hooks_always_called")
            before = holding(registry, names, handle)
            handle.remove()
            return before, holding(registry, names, handle)
    check(f"a global always_call hook (register_module_forward_hook with {global_options}): global tables holding "
          "its id (before, after handle.remove())", global_always_called,
          hint="see 6.1: write into registry._global_forward_hooks and registry._global_forward_hooks_always_called.")


@probe("c06_register_hooks_hidden")
def register_hooks_hidden(yours, draw, check):
    Registering = registering_class(yours)
    forward_prepends = at_least_one_true(draw, draw.int(4, 6))
    removals = draw.int(1, 3)
    global_kwargs, global_always = True, draw.coin()

    def forward_order():
        module = Registering()
        handles = [module.register_forward_hook(lambda *a: None, prepend=prepend) for prepend in forward_prepends]
        return (positions(module._forward_hooks, handles), dict(module._forward_hooks_with_kwargs),
                dict(module._forward_hooks_always_called))
    check(f"prepend=True puts a forward hook first: forward hooks registered with prepend={forward_prepends}, "
          "(dict order as registration indices, with_kwargs table, always_call table)", forward_order,
          hint="see 6.1: the same move_to_end as for pre-hooks; side tables hold only ids registered with that option.")

    def handles_and_ids():
        first, second = Registering(), Registering()
        handles = [first.register_forward_hook(lambda *a: None), second.register_forward_pre_hook(lambda *a: None),
                   second.register_forward_hook(lambda *a: None), first.register_forward_pre_hook(lambda *a: None)]
        return [type(handle).__name__ for handle in handles], len({handle.id for handle in handles})
    check("Registering returns the RemovableHandle, and its ids come from one counter shared by every module: "
          "(handle types, distinct ids among 4 handles of 2 modules)", handles_and_ids,
          hint="see 6.1: build the handle with RemovableHandle(...); never count ids yourself.")

    def pre_hook_removed():
        module = Registering()
        handles = [module.register_forward_pre_hook(lambda *a: None, with_kwargs=True) for _ in range(removals + 1)]
        for handle in handles[:removals]:
            handle.remove()
            handle.remove()
        return (positions(module._forward_pre_hooks, handles),
                positions(module._forward_pre_hooks_with_kwargs, handles))
    check(f"remove() (twice) of {removals} with_kwargs pre-hooks out of {removals + 1} must clean "
          "_forward_pre_hooks_with_kwargs too: (pre-hooks left, with_kwargs table left)", pre_hook_removed,
          hint="see 6.1: give the pre-hook's handle extra_dict=self._forward_pre_hooks_with_kwargs.")

    def global_tables():
        with global_hooks():
            handle = yours.register_module_forward_hook(lambda *a: None, with_kwargs=global_kwargs,
                                                        always_call=global_always)
            names = ("_global_forward_hooks", "_global_forward_hooks_with_kwargs",
                     "_global_forward_hooks_always_called")
            return type(handle).__name__, holding(registry, names, handle)
    check(f"register_module_forward_hook(with_kwargs={global_kwargs}, always_call={global_always}): (handle type, "
          "global tables holding its id); options that are off leave the side tables alone", global_tables,
          hint="see 6.1: with_kwargs goes to registry._global_forward_hooks_with_kwargs, always_call to "
               "registry._global_forward_hooks_always_called.")


# -- exercise 2: predict the firing order (0 points: its form only) ------------------------------------------------
def prediction(yours, name):
    """The learner's prediction; on the reference side, any list of the events in the firing (its form only is
    checked: a constant answer cannot be graded, the reference can tell it)."""
    return list(FIRING_EVENTS) if isinstance(yours, Reference) else getattr(yours, name)


def form(predicted):
    return (type(predicted).__name__, all(event in FIRING_EVENTS for event in predicted)
            if isinstance(predicted, list) else False)


@probe("c06_predict_firing_visible")
def predict_firing_visible(yours, draw, check):
    check("firing_order is a list of the event names above (run the cell under the tests to check its order)",
          lambda: form(prediction(yours, "firing_order")),
          hint="assign a list of strings such as 'global pre' or 'hook C' to firing_order.")


@probe("c06_predict_firing_hidden")
def predict_firing_hidden(yours, draw, check):
    check("firing_order_when_forward_fails is a list of the event names above",
          lambda: form(prediction(yours, "firing_order_when_forward_fails")),
          hint="assign a list of strings such as 'global pre' or 'hook C' to firing_order_when_forward_fails.")


# -- exercise 3: running the pre-hooks ---------------------------------------------------------------------------
@probe("c06_run_forward_pre_hooks_visible")
def run_forward_pre_hooks_visible(yours, draw, check):
    run = pre_hooks_runner(yours)
    step, first, key, value = draw.int(1, 9), draw.int(-9, 9), draw.name(), draw.int(0, 99)
    locals_count, extra, flag = draw.int(1, 3), draw.name(), draw.name()
    hint = "see 6.2: a plain hook gets (module, args); a non-None result replaces args, wrapped into a tuple if needed."

    def single_value():
        module = registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args: args[0] + step)
        return run(module, (first, 2), {key: value})
    check(f"a plain pre-hook returning args[0] + {step} replaces args by a 1-tuple: run_forward_pre_hooks(module, "
          f"({first}, 2), {{{key!r}: {value}}})", single_value, hint=hint)

    def global_first():
        module, log = registering_class(yours)(), []
        for index in range(locals_count):
            module.register_forward_pre_hook(lambda m, args, index=index: log.append(f"local {index}"))
        with global_hooks():
            registry.register_module_forward_pre_hook(lambda m, args: log.append("global"))
            run(module, (), {})
        return log
    check(f"global pre-hooks run before local ones ({locals_count} local, one global)", global_first,
          hint="see 6.2: iterate registry._global_forward_pre_hooks first, then module._forward_pre_hooks.")

    def with_kwargs():
        module = registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args, kwargs: (args + (extra,), {**kwargs, flag: True}),
                                         with_kwargs=True)
        return run(module, (first,), {key: value})
    check("a with_kwargs pre-hook receives and replaces (args, kwargs)", with_kwargs,
          hint="see 6.2: ids in module._forward_pre_hooks_with_kwargs are called as hook(module, args, kwargs).")


@probe("c06_run_forward_pre_hooks_hidden")
def run_forward_pre_hooks_hidden(yours, draw, check):
    run = pre_hooks_runner(yours)
    factor, step, start = draw.int(2, 9), draw.int(1, 9), draw.choice((-1, 1)) * draw.int(1, 9)
    names = draw.names(draw.int(2, 4))
    prepended = draw.int(1, len(names) - 1)
    size, original = draw.int(3, 5), draw.name()
    pair = (draw.int(0, 9), draw.int(0, 9))

    def chained():
        module = registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args: (args[0] * factor,))
        module.register_forward_pre_hook(lambda m, args: None)
        module.register_forward_pre_hook(lambda m, args: args[0] + step)
        return run(module, (start,), {})
    check(f"Each pre-hook must see the args left by the previous one; None keeps them: (x{factor}, None, +{step}) on "
          f"({start},)", chained, hint="see 6.2: assign each non-None result to args before calling the next hook.")

    def prepend_order():
        module, order = registering_class(yours)(), []
        for index, name in enumerate(names):
            module.register_forward_pre_hook(lambda m, args, name=name: order.append(name),
                                             prepend=index == prepended)
        run(module, (), {})
        return order
    check(f"pre-hooks {names}, the one at index {prepended} registered with prepend=True: the order they run in",
          prepend_order, hint="see 6.2: iterate the hook dictionary in its order (prepend puts a hook first).")

    def bad_pair():
        module = registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args, kwargs: tuple(range(size)), with_kwargs=True)
        return run(module, (), {})
    check(f"a with_kwargs pre-hook returning a {size}-tuple must raise RuntimeError", bad_pair,
          phrase="forward pre-hook must return None or a tuple of (new_args, new_kwargs)",
          hint="see 6.2: a with_kwargs result must be None or a pair; otherwise raise RuntimeError saying so.")

    def global_then_local():
        seen, module = [], registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args: seen.append(args))
        with global_hooks():
            registry.register_module_forward_pre_hook(lambda m, args: (seen.append(args), (f"from {original}",))[1])
            run(module, (original,), {})
        return seen
    check("A local pre-hook must see the args returned by the global one: (args seen by the global hook, by the "
          "local one)", global_then_local, hint="see 6.2: one chain, global hooks first.")

    def tuple_result():
        module = registering_class(yours)()
        module.register_forward_pre_hook(lambda m, args: pair)
        return run(module, (0,), {})
    check(f"a pre-hook returning the tuple {pair}: A tuple result replaces args as it is", tuple_result,
          hint="see 6.2: wrap a result into a 1-tuple only when it is not a tuple already.")


# -- exercise 4: running the forward hooks -----------------------------------------------------------------------
@probe("c06_run_forward_hooks_visible")
def run_forward_hooks_visible(yours, draw, check):
    run = forward_hooks_runner(yours)
    # a positive output: out * factor + step is then never out again (0, or -step / (factor - 1), would make
    # hooks whose results are dropped look chained)
    factor, step, output = draw.int(2, 9), draw.int(1, 9), draw.int(1, 20)
    key, value, arg = draw.name(), draw.int(0, 99), draw.int(0, 99)
    plain_before, plain_after = draw.int(0, 2), draw.int(0, 2)

    def chained():
        module = registering_class(yours)()
        module.register_forward_hook(lambda m, args, out: out * factor)
        module.register_forward_hook(lambda m, args, out: None)
        module.register_forward_hook(lambda m, args, out: out + step)
        return run(module, (), {}, output, set())
    check(f"three forward hooks (x{factor}, None, +{step}) on output {output}", chained,
          hint="see 6.3: call hook(module, args, output); a non-None result replaces the output for the next hooks.")

    def with_kwargs():
        module = registering_class(yours)()
        module.register_forward_hook(lambda m, args, kwargs, out: (args, kwargs, out), with_kwargs=True)
        return run(module, (arg,), {key: value}, output, set())
    check("a with_kwargs forward hook receives (module, args, kwargs, output)", with_kwargs,
          hint="see 6.3: ids in module._forward_hooks_with_kwargs are called as hook(module, args, kwargs, output).")

    def called_after_run():
        module, called = registering_class(yours)(), set()
        handles = [module.register_forward_hook(lambda m, args, out: None) for _ in range(plain_before)]
        always = module.register_forward_hook(lambda m, args, out: None, always_call=True)
        handles += [always] + [module.register_forward_hook(lambda m, args, out: None) for _ in range(plain_after)]
        run(module, (), {}, output, called)
        return sorted(positions(called, handles), key=str)
    check(f"the id of an always_call hook that ran is added to `called` (registration indices in `called`; "
          f"the always_call hook is number {plain_before})", called_after_run,
          hint="see 6.3: add hook_id to `called` when it is in _forward_hooks_always_called.")


@probe("c06_run_forward_hooks_hidden")
def run_forward_hooks_hidden(yours, draw, check):
    run = forward_hooks_runner(yours)
    output, replaced = draw.name(), draw.name()
    key, value = draw.name(), draw.int(0, 99)
    plain_count = draw.int(1, 3)

    def global_first():
        log, module = [], registering_class(yours)()
        module.register_forward_hook(lambda m, args, out: log.append(("local", out)))
        with global_hooks():
            registry.register_module_forward_hook(lambda m, args, out: (log.append(("global", out)), replaced)[1])
            final = run(module, (), {}, output, set())
        return log, final
    check("Global forward hooks must run first, and local hooks must see the output they returned; a None result "
          "keeps it: (what each hook saw, the final output)", global_first,
          hint="see 6.3: iterate registry._global_forward_hooks first, then module._forward_hooks.")

    def global_side_tables():
        seen, called = [], set()
        with global_hooks():
            handle = registry.register_module_forward_hook(lambda m, args, kwargs, out: seen.append(kwargs),
                                                           with_kwargs=True, always_call=True)
            run(registering_class(yours)(), (), {key: value}, None, called)
        return seen, [hook_id == handle.id for hook_id in called]
    check("Global with_kwargs forward hooks (registry._global_forward_hooks_with_kwargs) get kwargs too, and global "
          "always_call hooks (registry._global_forward_hooks_always_called) are recorded: (kwargs seen, `called` "
          "holds its id)", global_side_tables,
          hint="see 6.3: look ids up in the global side tables as well as in the module's.")

    def only_always_recorded():
        module, called = registering_class(yours)(), set()
        for _ in range(plain_count):
            module.register_forward_hook(lambda m, args, out: None)
        run(module, (), {}, 0, called)
        return len(called)
    check(f"Only always_call hooks are recorded in `called`: size of `called` after {plain_count} plain hooks",
          only_always_recorded, hint="see 6.3: add an id only when it is in an always_call table.")


# -- exercise 5: _call_impl ---------------------------------------------------------------------------------------
class Tripwire(dict):
    """An empty hook dictionary that fails when iterated: only a fast path never iterates it."""

    def items(self):
        raise RuntimeError("a module without hooks had its hook dictionaries iterated (no fast path)")

    def __iter__(self):
        raise RuntimeError("a module without hooks had its hook dictionaries iterated (no fast path)")


@probe("c06_call_impl_visible")
def call_impl_visible(yours, draw, check):
    Hooked = hooked_class(yours)
    x, pre, post, scale, kw_scale = (draw.int(-9, 9), draw.int(1, 9), draw.int(10, 99), draw.int(2, 5),
                                     draw.int(6, 12))
    message = f"forward failed in {draw.name()}"
    hint = "see 6.4: pre-hooks, then forward, then forward hooks."

    def both_hooks():
        hooked = Hooked()
        hooked.register_forward_pre_hook(lambda m, args: args[0] + pre)
        hooked.register_forward_hook(lambda m, args, out: out + post)
        return hooked(x)
    check(f"Hooked()({x}) with a +{pre} pre-hook and a +{post} forward hook (forward doubles)", both_hooks, hint=hint)

    def kwargs_through():
        hooked = Hooked()
        hooked.register_forward_pre_hook(lambda m, args, kwargs: (args, {"scale": kw_scale}), with_kwargs=True)
        return hooked(x, scale=scale)
    check(f"keyword arguments reach forward through with_kwargs pre-hooks: scale={scale} replaced by {kw_scale}",
          kwargs_through, hint=hint)

    def fast_path():
        fast = Hooked()
        object.__setattr__(fast, "_forward_pre_hooks", Tripwire())
        object.__setattr__(fast, "_forward_hooks", Tripwire())
        return fast(x)
    check("a module without any hook is called through the fast path", fast_path,
          hint="see 6.4, part 1: when no hook dictionary holds anything, return self.forward(*args, **kwargs) at once.")

    log = []

    def failing_call():
        failing = Hooked(fail=message)
        failing.register_forward_hook(lambda m, args, out: log.append(("always", out)), always_call=True)
        failing.register_forward_hook(lambda m, args, out: log.append("plain"))
        return failing(x)
    check("the error of a failing forward still reaches the caller", failing_call,
          hint="see 6.4, part 3: after running the always_call hooks, re-raise with a bare `raise`.")
    check("after a failing forward, only the always_call hook ran, with output None", lambda: log,
          hint="see 6.4, part 3: in `except Exception:`, run the always_call hooks that have not run yet.")


@probe("c06_call_impl_hidden")
def call_impl_hidden(yours, draw, check):
    Hooked = hooked_class(yours)
    x, scale, first, factor, step = (draw.int(1, 9), draw.int(2, 5), draw.int(1, 9), draw.int(2, 9),
                                     draw.int(1, 9))
    message = f"forward failed in {draw.name()}"
    extra_always = draw.int(1, 3)

    def hook_raises_after_always():
        done, hooked = [], Hooked()
        hooked.register_forward_hook(lambda m, args, out: done.append("always") or None, always_call=True)
        hooked.register_forward_hook(lambda m, args, out: 1 / 0)
        try:
            hooked(x)
        except ZeroDivisionError:
            return "ZeroDivisionError", done
        return "no error", done
    check("A forward hook's ZeroDivisionError must reach the caller, and an always_call hook that already ran must "
          "not run a second time after the exception: (what the call raised, the always hook's runs)",
          hook_raises_after_always,
          hint="see 6.4, part 3: remember the always_call ids that ran in `called` and skip them.")

    def noisy():
        failing = Hooked(fail=message)
        for _ in range(extra_always):
            failing.register_forward_hook(lambda m, args, out: 1 / 0, always_call=True)
        raised = "no error"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                failing(x)
            except Exception as error:  # noqa: BLE001 - which error reached the caller is the observation
                raised = type(error).__name__, str(error)
        return raised, len(caught)
    check(f"{extra_always} always_call hooks that raise when forward fails must be turned into a warning each, "
          "and forward's error re-raised: ((error type, message), number of warnings)", noisy,
          hint="see 6.4, part 3: wrap each always_call hook in try/except Exception and warnings.warn(...).")

    def global_pre_only():
        seen = []
        with global_hooks():
            registry.register_module_forward_pre_hook(lambda m, args: seen.append(type(m).__name__))
            return Hooked()(x), seen
    check("Global pre-hooks must run even when the module has no hook of its own: (result, modules seen)",
          global_pre_only, hint="see 6.4, part 1: the fast path needs the global dictionaries empty too.")

    def global_always():
        seen = []
        with global_hooks():
            yours.register_module_forward_hook(lambda m, args, out: seen.append(out), always_call=True)
            try:
                Hooked(fail=message)(x)
            except ValueError:
                pass
        return seen
    check("Global always_call forward hooks must also run when forward raises (what they saw as output)",
          global_always, hint="see 6.4, part 3: run the global always_call hooks first, then the module's.")

    def local_kwargs_always():
        got, failing = [], Hooked(fail=message)
        failing.register_forward_hook(lambda m, args, kwargs, out: got.append(kwargs), with_kwargs=True,
                                      always_call=True)
        try:
            failing(x, scale=scale)
        except ValueError:
            pass
        return got
    check("A local with_kwargs always_call hook is called with (module, args, kwargs, output) when forward raises "
          "(the kwargs it saw)", local_kwargs_always,
          hint="see 6.4, part 3: call it as in part 2, with kwargs when its id is in _forward_hooks_with_kwargs.")

    def global_and_local():
        order, both = [], Hooked()
        both.register_forward_pre_hook(lambda m, args: order.append("local pre"))
        both.register_forward_pre_hook(lambda m, args: (order.append("prepended pre"), (args[0] + first,))[1],
                                       prepend=True)
        both.register_forward_hook(lambda m, args, out: (order.append("local hook"), out + step)[1])
        with global_hooks():
            registry.register_module_forward_pre_hook(lambda m, args: order.append("global pre"))
            yours.register_module_forward_hook(lambda m, args, out: (order.append("global hook"), out * factor)[1])
            result = both(x)
        return order, result
    check(f"Global hooks run before the module's own, and each hook sees what the previous one returned: "
          f"(order, result of ({x} + {first}) * 2 * {factor} + {step})", global_and_local,
          hint="see 6.4: global hooks run before the module's own, pre-hooks and forward hooks alike.")

    check(f"Without hooks the call must return forward's result: (Hooked()({x}), Hooked()({x}, scale={scale}))",
          lambda: (lambda plain: (plain(x), plain(x, scale=scale)))(Hooked()),
          hint="see 6.4, part 1: return self.forward(*args, **kwargs).")


# -- exercise 6: registration hooks -----------------------------------------------------------------------------
@probe("c06_registration_hooks_visible")
def registration_hooks_visible(yours, draw, check):
    Registered = registered_class(yours)
    factor, step, size = draw.int(2, 9), draw.int(1, 9), draw.int(1, 4)
    param, buffer, filled = draw.names(3)
    hint = "see 6.5: run the hooks in order; a non-None result replaces the value and the next hook sees it."

    def chained_parameter():
        with global_hooks():
            registry.register_module_parameter_registration_hook(lambda m, name, p: nn.Parameter(p * factor))
            registry.register_module_parameter_registration_hook(lambda m, name, p: nn.Parameter(p + step))
            module = Registered()
            module.register_parameter(param, nn.Parameter(ones(size)))
        return type(module._parameters[param]).__name__, module._parameters[param].tolist()
    check(f"register_parameter({param!r}, ones({size})) with two hooks (x{factor}, then +{step}): (type, values)",
          chained_parameter, hint=hint)

    def hooks_seen_for_none():
        seen = []
        with global_hooks():
            registry.register_module_parameter_registration_hook(lambda m, name, v: seen.append(("parameter", name)))
            registry.register_module_buffer_registration_hook(lambda m, name, v: seen.append(("buffer", name)))
            module = Registered()
            module.register_parameter(param, None)
            module.register_buffer(buffer, None)
        return seen
    check(f"the hooks that fire for register_parameter({param!r}, None) and register_buffer({buffer!r}, None)",
          hooks_seen_for_none,
          hint="see 6.5: a None parameter is stored without running the parameter hooks; buffer hooks run for None "
               "too.")

    def replaced_none_buffer():
        with global_hooks():
            registry.register_module_buffer_registration_hook(lambda m, name, v: ones(size) if v is None else None)
            module = Registered()
            module.register_buffer(filled, None, persistent=False)
        return module._buffers[filled].tolist(), sorted(module._non_persistent_buffers_set)
    check("a buffer hook that replaces None: (buffer, non-persistent names)", replaced_none_buffer, hint=hint)


@probe("c06_registration_hooks_hidden")
def registration_hooks_hidden(yours, draw, check):
    Registered = registered_class(yours)
    assigned, bad_param, stats, scratch, bad_buffer = draw.names(5)
    size = draw.int(1, 4)

    def watched_assignment():
        calls, owner, value = [], Registered(), nn.Parameter(ones(size))
        with global_hooks():
            registry.register_module_parameter_registration_hook(lambda *args: calls.append(args))
            setattr(owner, assigned, value)
        return ([(m is owner, name, p is value) for m, name, p in calls], owner._parameters.get(assigned) is value)
    check("A parameter hook is called as hook(module, name, param), also when the parameter is assigned; a hook that "
          "returns None keeps the parameter itself: ([(module is owner, name, param is value)], stored is value)",
          watched_assignment, hint="see 6.5: call hook(self, name, param) and keep param when it returns None.")

    check(f"register_parameter({bad_param!r}, a plain array) raises TypeError",
          lambda: Registered().register_parameter(bad_param, np.ones(size)),
          phrase=f"object to parameter '{bad_param}'",
          hint="see 6.5: the TypeError says: cannot assign '<type>' object to parameter '<name>' ...")

    def buffer_hooks():
        seen, module, array = [], Registered(), np.zeros(size)
        with global_hooks():
            registry.register_module_buffer_registration_hook(lambda m, name, value: seen.append(name))
            module.register_buffer(stats, array)
            module.register_buffer(scratch, np.zeros(1), persistent=False)
            non_persistent = sorted(module._non_persistent_buffers_set)
            module.register_buffer(scratch, np.zeros(1))
        return seen, module._buffers[stats] is array, non_persistent, sorted(module._non_persistent_buffers_set)
    check("Buffer hooks run for every register_buffer; None results keep the array; registering a buffer again as "
          "persistent must discard its name: (names the hook saw, array kept, non-persistent names after each)",
          buffer_hooks, hint="see 6.5: discard the name from _non_persistent_buffers_set when persistent is true.")

    check(f"register_buffer({bad_buffer!r}, a list) raises TypeError",
          lambda: Registered().register_buffer(bad_buffer, [1] * size),
          phrase=f"cannot assign 'list' object to buffer '{bad_buffer}'",
          hint="see 6.5: the TypeError says: cannot assign '<type>' object to buffer '<name>' ...")

    check(f"Run the name checks first: register_parameter('{assigned}.{stats}', None) raises KeyError",
          lambda: Registered().register_parameter(f"{assigned}.{stats}", None),
          hint="see 6.5: start with self._check_member_name('parameter', '_parameters', name).")
