"""Forward pre-hooks, forward hooks, global hooks, registration hooks and RemovableHandle (chapter 6)."""

import warnings
from collections import OrderedDict

import pytest

from .observe import differential, raises


def echo_module(lib, log, name="echo"):
    """A module whose forward logs what it received and returns it."""
    class Echo(lib.nn.Module):
        def forward(self, *args, **kwargs):
            log.append(("forward", name, args, kwargs))
            return ("out", args, kwargs)

    return Echo()


def tree_with_logging_leaves(lib, log):
    """outer(first: Leaf, rest: Sequential(Leaf, Leaf)); every forward logs its qualified name."""
    class Leaf(lib.nn.Module):
        def forward(self, x):
            log.append(("forward", names[self]))
            return x + 1

    class Outer(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = Leaf()
            self.rest = lib.nn.Sequential(Leaf(), Leaf())

        def forward(self, x):
            log.append(("forward", names[self]))
            return self.rest(self.first(x))

    outer = Outer()
    names = {module: name or "outer" for name, module in outer.named_modules()}
    return outer, names


@differential
def test_firing_order_of_local_and_global_hooks_in_nested_modules(lib):
    log = []
    outer, names = tree_with_logging_leaves(lib, log)

    def logger(kind):
        return lambda module, *args: log.append((kind, names[module]))

    lib.hooks.register_module_forward_pre_hook(logger("global pre"))
    lib.hooks.register_module_forward_hook(logger("global forward"))
    for module in outer.modules():
        module.register_forward_pre_hook(logger("pre"))
        module.register_forward_pre_hook(logger("pre, prepended"), prepend=True)
        module.register_forward_hook(logger("forward hook"))
        module.register_forward_hook(logger("forward hook, prepended"), prepend=True)
    lib.hooks.register_module_forward_pre_hook(logger("second global pre"))
    output = outer(lib.zeros(1))
    return output, log


PRE_HOOK_RESULTS = {
    "None keeps the arguments": lambda args: None,
    "a single value is wrapped in a tuple": lambda args: "replaced",
    "a tuple replaces the arguments": lambda args: (1, 2, 3),
    "a list is wrapped, not unpacked": lambda args: [1, 2],
    "an empty tuple removes them": lambda args: (),
}


@pytest.mark.parametrize("result", PRE_HOOK_RESULTS)
@differential
def test_pre_hook_result_replaces_positional_args(lib, result):
    log = []
    module = echo_module(lib, log)
    seen = []
    module.register_forward_pre_hook(lambda m, args: seen.append(args) or PRE_HOOK_RESULTS[result](args))
    return module(7, 8, key="kw"), seen, log


WITH_KWARGS_RESULTS = {
    "None keeps both": lambda args, kwargs: None,
    "a pair replaces both": lambda args, kwargs: ((0,), {"new": 1}),
    "kwargs may be edited": lambda args, kwargs: (args, {**kwargs, "extra": True}),
}


@pytest.mark.parametrize("result", WITH_KWARGS_RESULTS)
@differential
def test_with_kwargs_pre_hook(lib, result):
    log = []
    module = echo_module(lib, log)
    seen = []
    module.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append((args, kwargs)) or WITH_KWARGS_RESULTS[result](args, kwargs),
        with_kwargs=True)
    return module(7, key="kw"), seen


@pytest.mark.parametrize("bad", ["single", (1, 2, 3), ((1,),)])
@differential
def test_with_kwargs_pre_hook_must_return_a_pair(lib, bad):
    module = echo_module(lib, [])
    module.register_forward_pre_hook(lambda m, args, kwargs: bad, with_kwargs=True)
    return raises(lambda: module(1), "forward pre-hook must return None or a tuple of (new_args, new_kwargs)")


@differential
def test_forward_hooks_replace_the_output_in_turn(lib):
    module = echo_module(lib, [])
    seen = []
    module.register_forward_hook(lambda m, args, out: seen.append(("plain", args, out)))
    module.register_forward_hook(lambda m, args, out: seen.append(("replace", args, out)) or "second")
    module.register_forward_hook(
        lambda m, args, kwargs, out: seen.append(("with kwargs", args, kwargs, out)) or out + "!", with_kwargs=True)
    return module(1, key=2), seen


@differential
def test_call_uses_the_instance_forward_with_and_without_hooks(lib):
    """The no-hook fast path and the hook path both look `forward` up on the instance."""
    module = lib.nn.Linear(1, 1)
    module.forward = lambda x, *, tag="": ("instance forward", x, tag)
    without_hooks = module(1, tag="fast")
    handle = module.register_forward_hook(lambda m, args, out: out + ("hooked",))
    with_hooks = module(2, tag="slow")
    handle.remove()
    return without_hooks, with_hooks, module(3)


@differential
def test_calling_forward_directly_skips_every_hook(lib):
    log = []
    module = echo_module(lib, log)
    module.register_forward_pre_hook(lambda m, args: log.append("pre"))
    module.register_forward_hook(lambda m, args, out: log.append("forward hook"))
    lib.hooks.register_module_forward_pre_hook(lambda m, args: log.append("global pre"))
    return module.forward(1), log


@differential
def test_plain_hooks_never_see_kwargs(lib):
    log = []
    module = echo_module(lib, log)
    seen = []
    module.register_forward_pre_hook(lambda m, args: seen.append(args))
    lib.hooks.register_module_forward_pre_hook(lambda m, args: seen.append(("global", args)))
    module(key="only keyword")
    return seen, log


@differential
def test_global_hooks_results_and_kwargs(lib):
    log = []
    module = echo_module(lib, log)
    lib.hooks.register_module_forward_pre_hook(lambda m, args: "from global pre")
    module.register_forward_pre_hook(lambda m, args: log.append(("local pre saw", args)))
    lib.hooks.register_module_forward_hook(lambda m, args, kwargs, out: ("global", kwargs), with_kwargs=True)
    module.register_forward_hook(lambda m, args, out: ("local", out))
    return module(1, k=2), log


def failing_module(lib, log):
    class Failing(lib.nn.Module):
        def forward(self, x):
            log.append("forward")
            raise ValueError("forward failed")

    return Failing()


@differential
def test_always_call_hooks_run_when_forward_raises(lib):
    log = []
    module = failing_module(lib, log)
    lib.hooks.register_module_forward_hook(lambda m, args, out: log.append(("global always", args, out)),
                                          always_call=True)
    lib.hooks.register_module_forward_hook(lambda m, args, out: log.append("global normal"))
    module.register_forward_hook(lambda m, args, out: log.append("normal"))
    module.register_forward_hook(lambda m, args, out: log.append(("always", args, out)), always_call=True)
    module.register_forward_hook(lambda m, args, kwargs, out: log.append(("always with kwargs", kwargs)),
                                 always_call=True, with_kwargs=True)
    return raises(lambda: module(5), "forward failed"), log


@differential
def test_failing_always_call_hook_is_silenced_with_a_warning(lib):
    module = failing_module(lib, [])

    def broken(m, args, out):
        raise KeyError("hook failed too")

    module.register_forward_hook(broken, always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = raises(lambda: module(1), "forward failed")
    return outcome, [("raised an exception that was silenced" in str(w.message), "hook failed too" in str(w.message))
                     for w in caught if "always_call" in str(w.message)]


@differential
def test_always_call_hook_already_run_is_not_run_again(lib):
    log = []
    module = echo_module(lib, log)
    module.register_forward_hook(lambda m, args, out: log.append("always"), always_call=True)

    def broken(m, args, out):
        log.append("broken")
        raise KeyError("hook failed")

    module.register_forward_hook(broken)
    module.register_forward_hook(lambda m, args, out: log.append("late always"), always_call=True)
    return raises(lambda: module(1), "hook failed"), log


@differential
def test_removable_handles(lib):
    module = echo_module(lib, [])

    def hook_dicts():
        return [len(getattr(module, name)) for name in (
            "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
            "_forward_hooks_with_kwargs", "_forward_hooks_always_called")]

    first = module.register_forward_pre_hook(lambda m, args: None, with_kwargs=True)
    second = module.register_forward_hook(lambda m, args, kwargs, out: None, with_kwargs=True, always_call=True)
    trace = [second.id - first.id, hook_dicts(), isinstance(first, lib.RemovableHandle)]
    first.remove()
    second.remove()
    second.remove()
    trace.append(hook_dicts())
    with module.register_forward_hook(lambda m, args, out: "inside") as handle:
        trace.append((type(handle), module(1)))
    trace.append((module(1), hook_dicts()))
    return trace


@differential
def test_removable_handle_on_plain_dicts(lib):
    hooks, extra = OrderedDict(), OrderedDict()  # handles keep weak references, which plain dicts refuse
    handle = lib.RemovableHandle(hooks, extra_dict=extra)
    hooks[handle.id] = "hook"
    extra[handle.id] = True
    following = lib.RemovableHandle(hooks)
    trace = [following.id - handle.id, len(hooks), len(extra)]
    handle.remove()
    trace += [len(hooks), len(extra)]
    return trace


@differential
def test_global_handles_remove_their_hooks(lib):
    log = []
    module = echo_module(lib, log)
    pre = lib.hooks.register_module_forward_pre_hook(lambda m, args: log.append("global pre"))
    post = lib.hooks.register_module_forward_hook(lambda m, args, out: log.append("global forward"),
                                                 always_call=True)
    module(1)
    pre.remove()
    post.remove()
    module(2)
    return log, len(lib.hooks._global_forward_hooks_always_called)


@differential
def test_registration_hooks_see_and_may_replace_values(lib):
    log = []

    def on_module(module, name, submodule):
        log.append(("module", name, submodule))
        return lib.nn.Identity() if name == "swapped" else None

    def on_parameter(module, name, param):
        log.append(("parameter", name, type(param), param.shape))
        return lib.Parameter(lib.ones(2)) if name == "swapped_param" else None

    def on_buffer(module, name, buffer):
        log.append(("buffer", name, type(buffer), buffer.shape))
        return lib.ones(3) if name == "swapped_buffer" else None

    handles = [lib.hooks.register_module_module_registration_hook(on_module),
               lib.hooks.register_module_parameter_registration_hook(on_parameter),
               lib.hooks.register_module_buffer_registration_hook(on_buffer)]
    module = lib.nn.Linear(1, 1)
    module.swapped = lib.nn.ReLU()
    module.add_module("kept", lib.nn.ReLU())
    module.kept = None
    module.swapped_param = lib.Parameter(lib.zeros(1))
    module.register_buffer("swapped_buffer", lib.zeros(1))
    module.assigned_buffer = lib.Buffer(lib.zeros(1))
    for handle in handles:
        handle.remove()
    module.after_removal = lib.nn.ReLU()
    return log, module._modules, module.swapped_param, module.swapped_buffer


@differential
def test_hooks_added_or_removed_during_a_call_take_effect_on_the_next_call(lib):
    """torch iterates over a snapshot of the hooks: the classic one-shot hook removes itself safely."""
    log = []
    module = echo_module(lib, log)
    handles = {}

    def once(m, args):
        log.append("once")
        handles["once"].remove()
        m.register_forward_pre_hook(lambda m, args: log.append("added during the call"))

    def once_after(m, args, out):
        log.append("once after")
        handles["once after"].remove()

    handles["once"] = module.register_forward_pre_hook(once)
    handles["once after"] = module.register_forward_hook(once_after)
    module.register_forward_hook(lambda m, args, out: log.append("stays"))
    for call in range(3):
        log.append(("call", call))
        module(call)
    return log


@differential
def test_handle_ids_are_the_keys_of_the_hook_dicts(lib):
    module = echo_module(lib, [])
    pre = module.register_forward_pre_hook(lambda m, args: None)
    post = module.register_forward_hook(lambda m, args, out: None, always_call=True)
    glob = lib.hooks.register_module_forward_hook(lambda m, args, out: None, always_call=True)
    return (list(module._forward_pre_hooks) == [pre.id], list(module._forward_hooks) == [post.id],
            list(module._forward_hooks_always_called) == [post.id],
            list(lib.hooks._global_forward_hooks) == [glob.id],
            list(lib.hooks._global_forward_hooks_always_called) == [glob.id])
