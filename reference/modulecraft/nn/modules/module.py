"""``Module``, the base class of every layer, and the module-wide (global) hook registries.

The class mirrors torch 2.13's ``torch.nn.Module`` and is laid out by mechanism, in the order the course
teaches them: construction and ``__call__``; attribute dispatch; registration; traversal; modes and
conversion; hooks; state_dict; repr. It keeps torch's private attribute names (``_parameters``,
``_modules``, ``_forward_hooks``, ...) so code written against torch's internals runs here too, and it
keeps the seams the chapters plug into: ``__call__`` looks ``_call_impl`` up on the instance, and every
dispatch tests ``isinstance(value, Parameter)``, which accepts any array flagged ``_is_param``.

Error messages keep torch's wording; where torch names its own types (``torch.nn.Parameter``,
``torch.FloatTensor``, ``torch.Size([3])``) we name ours (``modulecraft.nn.Parameter``, ``numpy.ndarray``,
``(3,)``). What numpy forces to differ: no devices (``to`` accepts only ``"cpu"``); a dtype change makes
new arrays (see ``_apply``); ``grad`` is always a plain ndarray (see ``zero_grad``); no memory shared between
processes (``share_memory`` is refused).

Backward hooks work as torch's (``BackwardHook`` in ``modulecraft.utils.hooks``) on ``modulecraft.autograd``.
A plain ndarray counts as a tensor that does not require grad, so it gets None in grad_input and grad_output.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Optional

import numpy as np

from modulecraft.nn.parameter import Buffer, Parameter, is_lazy
from modulecraft.utils.hooks import BackwardHook, RemovableHandle

__all__ = [
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_backward_hook",
    "register_module_full_backward_hook",
    "register_module_buffer_registration_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
    "Module",
]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


def _typename(obj: Any) -> str:
    """The name torch's ``torch.typename`` would print, with ``numpy.ndarray`` where torch has a tensor type."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def _name_taken(name: str) -> KeyError:
    """torch's error for registering a member under a name that is already an ordinary attribute."""
    return KeyError(f"attribute '{name}' already exists")


def _detached(array: np.ndarray) -> np.ndarray:
    """A plain ndarray sharing ``array``'s memory: what a state_dict holds unless ``keep_vars``.

    A lazy module's placeholder has no values to view, so it stays itself (as torch's lazy modules save it).
    """
    return array if is_lazy(array) else array.view(np.ndarray)


def _copy(param: np.ndarray, value: np.ndarray) -> None:
    """``param.copy_(value)`` as torch does it: ``value`` broadcast to ``param``'s shape, cast unsafely. numpy's
    assignment would also drop the value's leading 1-sized dimensions (a (1, 1) value "fits" an empty placeholder)."""
    shape = np.ndarray.shape.__get__(param)  # a placeholder's own shape property refuses
    broadcast = np.broadcast_shapes(shape, np.asarray(value).shape)
    if broadcast != shape:
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape {list(broadcast)}")
    param[...] = value


def _split_by_child(state_dict: Mapping[str, Any], prefix_length: int) -> dict[str, dict[str, Any]]:
    """Group the entries ``<prefix><child>.<rest>`` by ``<child>``, keeping their order.

    Names cannot contain ".", so this gives each child exactly the entries that start with its prefix, as
    torch's per-child filtering does, in one pass instead of one pass per child.
    """
    groups: dict[str, dict[str, Any]] = {}
    for key, value in state_dict.items():
        child, dot, _ = key[prefix_length:].partition(".")
        if dot:
            groups.setdefault(child, {})[key] = value
    return groups


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns; prints ``<All keys matched successfully>`` when both lists are empty."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, num_spaces: int) -> str:
    """Indent every line but the first (blank lines stay empty): how a child's repr nests in its parent's."""
    first, *rest = text.split("\n")
    if not rest:
        return text
    return "\n".join([first] + [(" " * num_spaces + line) if line.strip() else "" for line in rest])


class _WrappedHook:
    """A hook that, when created with a module, is called with that module first (held weakly)."""

    def __init__(self, hook: Callable, module: Optional[Module] = None) -> None:
        self.hook = hook
        functools.update_wrapper(self, hook)  # keeps the hook's __name__ for anyone listing hooks
        self.with_module = module is not None
        if module is not None:
            self.module = weakref.ref(module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict:
        state = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            state["module"] = self.module()
        return state

    def __setstate__(self, state: dict) -> None:
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


# Hooks common to all modules. The registration hooks run right before a buffer/module/parameter is stored
# and may return a replacement; the forward and backward hooks run before the module's own hooks on every call.
# The global backward hooks are all full or all non-full: the first registration decides, for the process.
_global_buffer_registration_hooks: dict[int, Callable] = OrderedDict()
_global_module_registration_hooks: dict[int, Callable] = OrderedDict()
_global_parameter_registration_hooks: dict[int, Callable] = OrderedDict()
_global_forward_pre_hooks: dict[int, Callable] = OrderedDict()
_global_forward_hooks: dict[int, Callable] = OrderedDict()
_global_forward_hooks_always_called: dict[int, bool] = OrderedDict()
_global_forward_hooks_with_kwargs: dict[int, bool] = OrderedDict()
_global_backward_pre_hooks: dict[int, Callable] = OrderedDict()
_global_backward_hooks: dict[int, Callable] = OrderedDict()
_global_is_full_backward_hook: Optional[bool] = None


def _register_global(hooks: dict, hook: Callable) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_module_buffer_registration_hook(hook: Callable[..., None]) -> RemovableHandle:
    """``hook(module, name, buffer) -> None or new buffer``, run by every ``register_buffer``."""
    return _register_global(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable[..., None]) -> RemovableHandle:
    """``hook(module, name, submodule) -> None or new submodule``, run whenever a child module is stored."""
    return _register_global(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable[..., None]) -> RemovableHandle:
    """``hook(module, name, param) -> None or new param``, run by every ``register_parameter``."""
    return _register_global(_global_parameter_registration_hooks, hook)


def register_module_forward_pre_hook(hook: Callable[..., None]) -> RemovableHandle:
    """``hook(module, args) -> None or new args`` before every module's forward, ahead of its own pre-hooks."""
    return _register_global(_global_forward_pre_hooks, hook)


def register_module_forward_hook(
    hook: Callable[..., None], *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """``hook(module, args, output) -> None or new output`` after every module's forward, ahead of its own.

    ``with_kwargs`` passes ``(module, args, kwargs, output)``; ``always_call`` runs it even when forward raises.
    """
    handle = RemovableHandle(_global_forward_hooks, extra_dict=_global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """``hook(module, grad_output) -> None or new grad_output`` in every module's backward, ahead of its own."""
    return _register_global(_global_backward_pre_hooks, hook)


def _fix_global_backward_kind(full: bool) -> None:
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a "
                           "global Module hook. Please use only one of them.")
    _global_is_full_backward_hook = full


def register_module_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """The deprecated non-full kind of :func:`register_module_full_backward_hook` (see
    ``Module.register_backward_hook``); the global hooks cannot mix the two kinds."""
    _fix_global_backward_kind(full=False)
    return _register_global(_global_backward_hooks, hook)


def register_module_full_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """``hook(module, grad_input, grad_output) -> None or new grad_input`` in every module's backward, ahead of
    its own full backward hooks; the global hooks cannot mix full and non-full kinds."""
    _fix_global_backward_kind(full=True)
    return _register_global(_global_backward_hooks, hook)


def _forward_unimplemented(self, *input: Any) -> None:
    """The default ``forward``: every subclass must define its own.

    ``forward`` is a class *attribute* holding this function rather than a method, so that subclasses may
    declare ``forward`` with any signature without a type checker calling it an incompatible override.
    """
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')


class _ParameterConversion:
    """Wraps ``_apply``'s function for parameters: in place when it can be, one new Parameter when not.

    torch keeps each Parameter object through a conversion and swaps its storage. We do the same when the
    result has the same shape and dtype (the values are copied back into the array). numpy cannot change
    an array's dtype or shape in place, so otherwise the module gets a *new* Parameter; it is made once per
    source parameter and reused wherever that parameter is shared, so shared parameters stay shared.
    """

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self._replaced: dict[int, tuple[Any, Any]] = {}  # id(old parameter) -> (old kept alive, new)

    def __call__(self, array):
        return _as_array(self.fn(array))

    def _converted(self, array):
        """``fn(array)``, written back into ``array`` when it fits (then ``array`` itself is returned)."""
        applied = self(array)
        if (applied is not array and not is_lazy(array) and not is_lazy(applied)
                and applied.shape == array.shape and applied.dtype == array.dtype):
            array[...] = applied
            return array
        return applied

    def parameter(self, param: Parameter) -> Parameter:
        entry = self._replaced.get(id(param))
        if entry is not None:
            return entry[1]
        applied = self._converted(param)
        grad = None if param.grad is None else self._converted(param.grad)
        if applied is param:
            param.grad = grad
            return param
        new = applied if is_lazy(applied) else Parameter(applied, param.requires_grad)
        new.requires_grad = param.requires_grad
        new.grad = grad
        self._replaced[id(param)] = (param, new)
        return new


def _as_array(value):
    """numpy turns 0-d results into scalars; a buffer or parameter must stay an array."""
    return np.asarray(value) if isinstance(value, np.generic) else value


def _is_dtype(value) -> bool:
    return isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, (np.generic, float, int,
                                                                                           complex, bool))


def _to_device(device=None, dtype=None, non_blocking=False, copy=False, *, memory_format=None):
    return (device is None or isinstance(device, str)) and (dtype is None or _is_dtype(dtype)), device, dtype


def _to_dtype(dtype, non_blocking=False, copy=False, *, memory_format=None):
    return _is_dtype(dtype), None, dtype


def _to_other(tensor, non_blocking=False, copy=False, *, memory_format=None):
    return isinstance(tensor, np.ndarray), None, getattr(tensor, "dtype", None)


_TO_SIGNATURES = {
    _to_device: "(device device = None, dtype dtype = None, bool non_blocking = False, bool copy = False, "
                "*, memory_format memory_format = None)",
    _to_dtype: "(dtype dtype, bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)",
    _to_other: "(numpy.ndarray tensor, bool non_blocking = False, bool copy = False, "
               "*, memory_format memory_format = None)",
}


def _parse_to(*args, **kwargs):
    """``Module.to``'s arguments as (device, dtype, non_blocking), matched against torch's three signatures.

    A device is a string (numpy has no device objects); a dtype is anything ``np.dtype`` names by type. Like
    torch, arguments that fit no signature raise TypeError listing them, and ``copy`` is refused.
    """
    for signature in _TO_SIGNATURES:
        try:
            bound = inspect.signature(signature).bind(*args, **kwargs)
        except TypeError:
            continue
        bound.apply_defaults()
        fits, device, dtype = signature(*bound.args, **bound.kwargs)
        options = bound.arguments
        if fits and isinstance(options["non_blocking"], bool) and isinstance(options["copy"], bool) \
                and options["memory_format"] is None:
            if "copy" in kwargs or len(args) > list(inspect.signature(signature).parameters).index("copy"):
                raise RuntimeError(".to() does not accept copy argument")
            return device, None if dtype is None else np.dtype(dtype), options["non_blocking"]
    got = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
    raise TypeError(f"to() received an invalid combination of arguments - got ({got}{', ' if kwargs else ''}), "
                    "but expected one of:\n" + "\n".join(f" * {text}" for text in _TO_SIGNATURES.values()))


def _register_buffer_compatibly(module: Module, name: str, value, persistent: bool) -> None:
    """``module.register_buffer(name, value, persistent)``, also for subclasses that override
    ``register_buffer`` with the older two-argument signature (torch keeps this compatibility path)."""
    register = module.register_buffer
    if getattr(register, "__func__", None) is Module.register_buffer \
            or "persistent" in inspect.signature(register).parameters:
        register(name, value, persistent)
    elif persistent:
        register(name, value)
    else:
        raise RuntimeError("Registering a non-persistent buffer on a Module subclass that implements "
                           "register_buffer() without the persistent argument is not allowed.")


class Module:
    """Base class of all modules: holds parameters, buffers and child modules, and runs forward with hooks.

    Subclasses call ``super().__init__()`` first, then assign parameters, buffers and submodules as
    attributes; ``__setattr__`` files each into the right dictionary.
    """

    dump_patches: bool = False

    _version: int = 1
    """Stored for each module in ``state_dict()._metadata``; bump it when the saved state changes shape, and
    read ``local_metadata.get("version")`` in ``_load_from_state_dict`` to load older checkpoints."""

    training: bool
    _parameters: dict[str, Optional[Parameter]]
    _buffers: dict[str, Optional[np.ndarray]]
    _non_persistent_buffers_set: set[str]
    _backward_pre_hooks: dict[int, Callable]
    _backward_hooks: dict[int, Callable]
    _is_full_backward_hook: Optional[bool]
    _forward_hooks: dict[int, Callable]
    _forward_hooks_with_kwargs: dict[int, bool]
    _forward_hooks_always_called: dict[int, bool]
    _forward_pre_hooks: dict[int, Callable]
    _forward_pre_hooks_with_kwargs: dict[int, bool]
    _state_dict_hooks: dict[int, Callable]
    _state_dict_pre_hooks: dict[int, Callable]
    _load_state_dict_pre_hooks: dict[int, Callable]
    _load_state_dict_post_hooks: dict[int, Callable]
    _modules: dict[str, Optional[Module]]
    call_super_init: bool = False

    # ------------------------------------------------------------------ construction and calling

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Create the module's empty state.

        Every attribute is set with ``object.__setattr__``, skipping ``Module.__setattr__``: its dispatch
        only matters for parameters, modules and buffers, so for this plain state it would be pure overhead
        (a plain value would just fall through to ``object.__setattr__`` after the lookups).
        """
        if self.call_super_init is False and kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'"
            )
        if self.call_super_init is False and args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        set_state = super().__setattr__
        set_state("training", True)
        set_state("_parameters", {})
        set_state("_buffers", {})
        set_state("_non_persistent_buffers_set", set())
        set_state("_backward_pre_hooks", OrderedDict())
        set_state("_backward_hooks", OrderedDict())
        set_state("_is_full_backward_hook", None)
        set_state("_forward_hooks", OrderedDict())
        set_state("_forward_hooks_with_kwargs", OrderedDict())
        set_state("_forward_hooks_always_called", OrderedDict())
        set_state("_forward_pre_hooks", OrderedDict())
        set_state("_forward_pre_hooks_with_kwargs", OrderedDict())
        set_state("_state_dict_hooks", OrderedDict())
        set_state("_state_dict_pre_hooks", OrderedDict())
        set_state("_load_state_dict_pre_hooks", OrderedDict())
        set_state("_load_state_dict_post_hooks", OrderedDict())
        set_state("_modules", {})
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward: Callable[..., Any] = _forward_unimplemented

    def _wrapped_call_impl(self, *args, **kwargs):
        # Looked up on the instance so that a subclass (or a learner) can replace ``_call_impl``.
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """Run forward between the pre-hooks and hooks; with no hook registered anywhere, just forward.

        Backward hooks are wired here too: full ones (and backward pre-hooks) through a ``BackwardHook`` that
        wraps the tensors going in (after the forward pre-hooks) and coming out (after the forward hooks);
        non-full ones on the ``grad_fn`` of the output's first tensor.
        """
        forward_call = self.forward
        if not (self._backward_hooks or self._backward_pre_hooks or self._forward_hooks or self._forward_pre_hooks
                or _global_backward_pre_hooks or _global_backward_hooks
                or _global_forward_hooks or _global_forward_pre_hooks):
            return forward_call(*args, **kwargs)

        result = None
        called_always_called_hooks = set()

        def inner():
            nonlocal result, args, kwargs
            full_backward_hooks, non_full_backward_hooks = [], []
            backward_pre_hooks = []
            if self._backward_pre_hooks or _global_backward_pre_hooks:
                backward_pre_hooks = self._get_backward_pre_hooks()
            if self._backward_hooks or _global_backward_hooks:
                full_backward_hooks, non_full_backward_hooks = self._get_backward_hooks()

            if _global_forward_pre_hooks or self._forward_pre_hooks:
                for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                    if hook_id in self._forward_pre_hooks_with_kwargs:
                        args_kwargs_result = hook(self, args, kwargs)
                        if args_kwargs_result is not None:
                            if isinstance(args_kwargs_result, tuple) and len(args_kwargs_result) == 2:
                                args, kwargs = args_kwargs_result
                            else:
                                raise RuntimeError(
                                    "forward pre-hook must return None or a tuple "
                                    f"of (new_args, new_kwargs), but got {args_kwargs_result}."
                                )
                    else:
                        args_result = hook(self, args)
                        if args_result is not None:
                            args = args_result if isinstance(args_result, tuple) else (args_result,)

            backward_hook = None
            if full_backward_hooks or backward_pre_hooks:
                backward_hook = BackwardHook(self, full_backward_hooks, backward_pre_hooks)
                args = backward_hook.setup_input_hook(args)

            result = forward_call(*args, **kwargs)

            if _global_forward_hooks or self._forward_hooks:
                for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                    if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                        called_always_called_hooks.add(hook_id)
                    if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                        hook_result = hook(self, args, kwargs, result)
                    else:
                        hook_result = hook(self, args, result)
                    if hook_result is not None:
                        result = hook_result

            if backward_hook is not None:
                if not isinstance(result, (np.ndarray, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple "
                                  f"of Tensors but received {type(result)}", stacklevel=2)
                result = backward_hook.setup_output_hook(result)

            if non_full_backward_hooks:
                self._register_non_full_backward_hooks(non_full_backward_hooks, args, result)
            return result

        try:
            return inner()
        except Exception:
            # always_call hooks that forward (or an earlier hook) kept from running run now; what they raise
            # is reported as a warning so the original error still propagates. Like torch, the global ones
            # get (module, args, result) even when registered with_kwargs.
            for hook_id, hook in _global_forward_hooks.items():
                if hook_id in _global_forward_hooks_always_called and hook_id not in called_always_called_hooks:
                    try:
                        hook_result = hook(self, args, result)
                        if hook_result is not None:
                            result = hook_result
                    except Exception as e:
                        warnings.warn("global module forward hook with ``always_call=True`` raised an exception "
                                      f"that was silenced as another error was raised in forward: {str(e)}",
                                      stacklevel=2)
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called and hook_id not in called_always_called_hooks:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook_result = hook(self, args, kwargs, result)
                        else:
                            hook_result = hook(self, args, result)
                        if hook_result is not None:
                            result = hook_result
                    except Exception as e:
                        warnings.warn("module forward hook with ``always_call=True`` raised an exception "
                                      f"that was silenced as another error was raised in forward: {str(e)}",
                                      stacklevel=2)
            raise

    __call__: Callable[..., Any] = _wrapped_call_impl

    # ------------------------------------------------------------------ attribute dispatch

    def __getattr__(self, name: str) -> Any:
        """Called only when normal lookup fails: look in ``_parameters``, ``_buffers``, ``_modules``."""
        state = self.__dict__
        if "_parameters" in state:
            parameters = state["_parameters"]
            if name in parameters:
                return parameters[name]
        if "_buffers" in state:
            buffers = state["_buffers"]
            if name in buffers:
                return buffers[name]
        if "_modules" in state:
            modules = state["_modules"]
            if name in modules:
                return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        """File ``value`` under the dictionary its type asks for, removing ``name`` from the others.

        Parameter -> ``_parameters``; Module -> ``_modules``; Buffer, or any array under the name of an
        existing buffer -> ``_buffers``; anything else -> ``__dict__``. A name already holding a parameter
        or module only accepts another of the same kind, or None.
        """

        def remove_from(*dicts_or_sets) -> None:
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(modulecraft.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = self._run_registration_hooks(_global_module_registration_hooks, name, value)
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(modulecraft.nn.Module or None expected)")
                modules[name] = self._run_registration_hooks(_global_module_registration_hooks, name, value)
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, np.ndarray):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(modulecraft.nn.Buffer, numpy.ndarray or None expected)")
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    _register_buffer_compatibly(self, name, value, persistent)
                else:
                    super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            super().__delattr__(name)

    def __dir__(self):
        """Class attributes, instance attributes, and the names of parameters, submodules and buffers."""
        keys = [*dir(self.__class__), *self.__dict__, *self._parameters, *self._modules, *self._buffers]
        # Numbered children of containers ("0", "1", ...) are not valid identifiers.
        return sorted(key for key in keys if not key[0].isdigit())

    # ------------------------------------------------------------------ registration

    def _run_registration_hooks(self, hooks: dict, name: str, value: Any) -> Any:
        for hook in hooks.values():
            output = hook(self, name, value)
            if output is not None:
                value = output
        return value

    def _check_member_name(self, kind: str, container: str, name: str) -> None:
        """The checks register_buffer and register_parameter share, with torch's messages for `kind`."""
        if container not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        elif not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        elif "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        elif name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        elif hasattr(self, name) and name not in self.__dict__[container]:
            raise _name_taken(name)

    def register_buffer(self, name: str, tensor: Optional[np.ndarray], persistent: bool = True) -> None:
        """Add an array that is module state but not a parameter (e.g. BatchNorm's running mean).

        The module keeps ``tensor`` itself, as torch does: an ``nn.Buffer`` stays one (so assigning it under
        a second name registers a second buffer), and registration hooks can put attributes on it. Unlike
        torch's (a plain Tensor with a flag), our ``nn.Buffer`` is a class of its own, ``type()`` shows it.

        Non-persistent buffers (``persistent=False``) are left out of the ``state_dict``; a ``None`` buffer
        is registered but skipped by conversions and the ``state_dict``.
        """
        self._check_member_name("buffer", "_buffers", name)
        if tensor is not None and not isinstance(tensor, np.ndarray):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(numpy.ndarray or None required)")
        self._buffers[name] = self._run_registration_hooks(_global_buffer_registration_hooks, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Add a parameter (or a ``None`` placeholder, skipped by traversal and the state_dict)."""
        self._check_member_name("parameter", "_parameters", name)

        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(modulecraft.nn.Parameter or None required)")
        else:
            self._parameters[name] = self._run_registration_hooks(
                _global_parameter_registration_hooks, name, param)

    def add_module(self, name: str, module: Optional[Module]) -> None:
        """Add a child module, reachable as an attribute of that name."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        elif not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        elif hasattr(self, name) and name not in self._modules:
            raise _name_taken(name)
        elif "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        elif name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = self._run_registration_hooks(_global_module_registration_hooks, name, module)

    def register_module(self, name: str, module: Optional[Module]) -> None:
        """Alias for :meth:`add_module`."""
        self.add_module(name, module)

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` ("" is the module itself); AttributeError if none."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target``; with ``strict`` only replace an existing one."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError("`" + "module" + f"` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target``; AttributeError if there is none."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> np.ndarray:
        """The buffer at the dotted path ``target``; AttributeError if there is none."""
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(mod, buffer_name)
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

    def get_extra_state(self) -> Any:
        """Override (with :meth:`set_extra_state`) to store non-array state under ``<prefix>_extra_state``."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state: Any) -> None:
        """Override (with :meth:`get_extra_state`) to restore what ``get_extra_state`` saved."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # ------------------------------------------------------------------ traversal

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate: bool = True):
        """Yield ``(qualified name, member)`` over this module (and descendants), each array once by default.

        Arrays are unhashable, so "seen" is tracked by ``id`` (the objects stay alive in the modules).
        """
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield module_prefix + ("." if module_prefix else "") + k, v

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _name, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(name, parameter)`` pairs in ``named_modules`` order; a shared parameter once unless asked."""
        yield from self._named_members(lambda module: module._parameters.items(),
                                       prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[np.ndarray]:
        for _name, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(name, buffer)`` pairs, persistent or not, in ``named_modules`` order."""
        yield from self._named_members(lambda module: module._buffers.items(),
                                       prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def children(self) -> Iterator[Module]:
        for _name, module in self.named_children():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Immediate children; a module registered under two names is yielded once (the first name)."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self, remove_duplicate: bool = True) -> Iterator[Module]:
        for _name, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_modules(self, memo: Optional[set[Module]] = None, prefix: str = "", remove_duplicate: bool = True):
        """Pre-order depth-first walk: this module, then each child's subtree in registration order.

        ``memo`` holds the modules already yielded, so a module reachable along two paths comes once, under
        the first path (unless ``remove_duplicate=False``).
        """
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                submodule_prefix = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    # ------------------------------------------------------------------ modes and conversion

    def train(self, mode: bool = True) -> Module:
        """Set ``training`` on this module and every descendant (Dropout and BatchNorm read it)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        """Same as ``train(False)``."""
        return self.train(False)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every child subtree first, then on this module (post-order)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn, recurse=True):
        """Replace every parameter, its grad, and every buffer by ``fn(array)`` (children first).

        ``fn`` runs on parameters and their grads under ``no_grad`` (so it may change them in place), on
        buffers in the caller's grad mode, as in torch.

        As in torch, ``fn`` runs for every occurrence of a shared parameter, and a parameter keeps its
        identity when ``fn`` keeps its shape and dtype (the values are copied back into it). Unlike torch, a
        dtype or shape change gives a *new* Parameter object, since numpy arrays cannot change dtype in
        place (see ``_ParameterConversion``); shared parameters stay shared. Hold on to the module, not to
        old parameter objects, across ``float()``/``double()``/``to()``.
        """
        from modulecraft.autograd.grad_mode import no_grad

        if not isinstance(fn, _ParameterConversion):
            fn = _ParameterConversion(fn)
        if recurse:
            for module in self.children():
                module._apply(fn)
        with no_grad():  # as torch: ``fn`` may change a parameter (or its grad) in place without recording it
            for key, param in self._parameters.items():
                if param is not None:
                    self._parameters[key] = fn.parameter(param)
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)  # a new buffer object each time, as in torch
        return self

    def _cast_floating(self, dtype, *, complex_too: bool = False) -> Module:
        kinds = "fc" if complex_too else "f"
        dtype = np.dtype(dtype)
        return self._apply(lambda t: t.astype(dtype) if t.dtype.kind in kinds and t.dtype != dtype else t)

    def float(self) -> Module:
        """Cast floating-point parameters and buffers to float32 (new arrays, see ``_apply``)."""
        return self._cast_floating(np.float32)

    def double(self) -> Module:
        """Cast floating-point parameters and buffers to float64 (new arrays, see ``_apply``)."""
        return self._cast_floating(np.float64)

    def half(self) -> Module:
        """Cast floating-point parameters and buffers to float16 (new arrays, see ``_apply``)."""
        return self._cast_floating(np.float16)

    def cpu(self) -> Module:
        """numpy arrays always live in host memory: nothing to move."""
        return self

    def share_memory(self) -> Module:
        """Refused: torch moves every parameter and buffer into memory shared between processes, in place; a
        numpy array cannot change its memory, and new arrays would not be the ones an optimizer holds. As torch,
        an uninitialized lazy parameter or buffer is refused first, with torch's message."""
        if any(is_lazy(t) for t in itertools.chain(self.parameters(), self.buffers())):
            raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
                               "initialize the parameters before calling `module.share_memory()`.")
        raise NotImplementedError("modulecraft cannot share a module's memory between processes: numpy arrays "
                                  "cannot be moved into shared memory in place. Train in one process, or pass "
                                  "state_dict() to the other processes.")

    def to(self, *args, **kwargs) -> Module:
        """``to(dtype)``, ``to(array)`` (its dtype), ``to("cpu")`` or ``to("cpu", dtype)``.

        The arguments follow torch's three signatures (see ``_parse_to``). Floating and complex arrays take
        the dtype; the others are left alone. There are no devices in numpy, so only ``"cpu"`` (or None) is
        accepted as one.
        """
        device, dtype, _non_blocking = _parse_to(*args, **kwargs)
        if device is not None and device.split(":")[0] != "cpu":
            raise ValueError(f"modulecraft keeps every array in host memory: device must be 'cpu', got {device!r}")
        if dtype is None:
            return self
        if dtype.kind not in "fc":
            raise TypeError("nn.Module.to only accepts floating point or complex "
                            f"dtypes, but got desired dtype={dtype}")
        return self._cast_floating(dtype, complex_too=True)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter: ``False`` freezes them (backward leaves their ``grad``
        alone, and gradients still flow through the module to its inputs). Buffers are not touched."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``grad``: to None by default (the next backward makes a new array), or
        with ``set_to_none=False`` fill the same array with zeros in place.

        torch also detaches a grad that is part of a graph; ours are always plain ndarrays (see
        ``modulecraft.Tensor.grad``), so there is nothing to detach.
        """
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad[...] = 0

    # ------------------------------------------------------------------ hooks

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """``hook(module, args) -> None or new args`` before forward (a non-tuple result is wrapped).

        With ``with_kwargs``: ``hook(module, args, kwargs) -> None or (new_args, new_kwargs)``. ``prepend``
        puts it ahead of this module's other pre-hooks (global ones still run first).
        """
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """``hook(module, args, output) -> None or new output`` after forward.

        With ``with_kwargs``: ``hook(module, args, kwargs, output)``. ``always_call`` runs it even when
        forward raises. ``prepend`` puts it ahead of this module's other hooks (global ones still run first).
        """
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_output) -> None or new grad_output`` when the gradients of this module's
        outputs are known, before the gradients of its inputs are computed.

        A returned tuple (one entry per output, None where an output is not a tensor) replaces grad_output
        for the rest of backward, parameters included. ``prepend`` puts it ahead of this module's other
        pre-hooks (global ones still run first). Do not modify inputs or outputs in place with hooks set.
        """
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def _fix_backward_kind(self, full: bool) -> None:
        if self._is_full_backward_hook is (not full):
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a "
                               "single Module. Please use only one of them.")
        self._is_full_backward_hook = full

    def register_backward_hook(self, hook):
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the ``grad_fn`` of the output's first tensor.

        It sees only the last operation of forward (its gradients with respect to *that* operation's
        inputs), so what it gets depends on how forward is computed; ``_call_impl`` warns when it can tell
        that gradients are missing. Use :meth:`register_full_backward_hook`. One module cannot have both kinds.
        """
        self._fix_backward_kind(full=False)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_input, grad_output) -> None or new grad_input`` once the gradients of this
        module's inputs are computed.

        Both are tuples with one entry per positional input/output (None for non-tensors and for inputs
        that get no gradient); keyword arguments are not seen. A returned tuple replaces the gradients that
        flow on into the inputs (not the parameters' ``.grad``, already computed). If no input requires
        grad, the hook fires with all-None grad_input (and a warning) and must return None. The gradients are
        plain ndarrays, like ``.grad`` (torch's are Tensors): backward records no graph in modulecraft.
        """
        self._fix_backward_kind(full=True)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def _get_backward_hooks(self):
        """The (full, non-full) backward hooks of a call, global ones first; one of the two lists is empty
        unless the global and local kinds differ."""
        full_backward_hooks: list[Callable] = []
        non_full_backward_hooks: list[Callable] = []
        if _global_is_full_backward_hook is True:
            full_backward_hooks += _global_backward_hooks.values()
        elif _global_is_full_backward_hook is False:
            non_full_backward_hooks += _global_backward_hooks.values()
        if self._is_full_backward_hook is True:
            full_backward_hooks += self._backward_hooks.values()
        elif self._is_full_backward_hook is False:
            non_full_backward_hooks += self._backward_hooks.values()
        return full_backward_hooks, non_full_backward_hooks

    def _get_backward_pre_hooks(self):
        return [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    def _register_non_full_backward_hooks(self, hooks, args, result) -> None:
        """Put the non-full hooks on the ``grad_fn`` of the output's first tensor (looking into tuples,
        lists and dicts), and warn if that node cannot give them every gradient. A result outside any
        graph (a plain ndarray, no ``grad_fn``) gets no hook, as in torch."""
        var = result
        while not isinstance(var, np.ndarray):
            var = next(v for v in var.values() if isinstance(v, np.ndarray)) if isinstance(var, dict) else var[0]
        grad_fn = getattr(var, "grad_fn", None)
        if grad_fn is not None:
            for hook in hooks:
                grad_fn.register_hook(_WrappedHook(hook, self))
            self._maybe_warn_non_full_backward_hook(args, result, grad_fn)

    def _maybe_warn_non_full_backward_hook(self, inputs, result, grad_fn) -> None:
        """torch's FutureWarnings for the cases where a non-full hook misses some gradients."""
        advice = "Please use register_full_backward_hook to get the documented behavior."
        if isinstance(result, np.ndarray):
            result = (result,)
        elif not (isinstance(result, tuple) and all(isinstance(r, np.ndarray) for r in result)):
            warnings.warn("Using non-full backward hooks on a Module that does not return a single Tensor or a "
                          "tuple of Tensors is deprecated and will be removed in future versions. This hook will "
                          f"be missing some of the grad_output. {advice}", FutureWarning, stacklevel=2)
            return
        if isinstance(inputs, np.ndarray):
            inputs = (inputs,)
        elif not (isinstance(inputs, tuple) and all(isinstance(i, np.ndarray) for i in inputs)):
            warnings.warn("Using non-full backward hooks on a Module that does not take as input a single "
                          "Tensor or a tuple of Tensors is deprecated and will be removed in future versions. "
                          f"This hook will be missing some of the grad_input. {advice}",
                          FutureWarning, stacklevel=2)
            return
        out_grad_fn = {fn for fn in (getattr(r, "grad_fn", None) for r in result) if fn is not None}
        if len(out_grad_fn) == 0 or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
            warnings.warn("Using a non-full backward hook when outputs are nested in python data structure is "
                          "deprecated and will be removed in future versions. This hook will be missing some "
                          "grad_output.", FutureWarning, stacklevel=2)
        elif len(out_grad_fn) > 1:
            warnings.warn("Using a non-full backward hook when outputs are generated by different autograd Nodes "
                          "is deprecated and will be removed in future versions. This hook will be missing some "
                          f"grad_output. {advice}", FutureWarning, stacklevel=2)
        else:
            inputs_grad_fn = {fn for fn in (getattr(i, "grad_fn", None) for i in inputs) if fn is not None}
            if inputs_grad_fn != {edge[0] for edge in grad_fn.next_functions}:
                warnings.warn("Using a non-full backward hook when the forward contains multiple autograd Nodes "
                              "is deprecated and will be removed in future versions. This hook will be missing "
                              f"some grad_input. {advice}", FutureWarning, stacklevel=2)

    # ------------------------------------------------------------------ state_dict

    def _register_state_dict_hook(self, hook):
        """The older post-hook: ``hook(module, state_dict, prefix, local_metadata) -> None or state_dict``.

        A returned dictionary replaces the result, but only when this is the module ``state_dict`` was
        called on (torch keeps this quirk for compatibility).
        """
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was "
                               "previously registered via register_state_dict_post_hook")
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata) -> None``; may edit the state_dict in place."""
        hook._from_public_api = True
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars) -> None`` before this module saves its state."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        """Put this module's own parameters and persistent buffers (not its children's) into ``destination``."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else _detached(param)
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else _detached(buf)
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ``OrderedDict`` of every parameter and persistent buffer, keyed by dotted name.

        The values share memory with the module's arrays: plain ndarray views, or the Parameter/Buffer
        objects themselves with ``keep_vars=True``. ``result._metadata[module_prefix]`` holds each module's
        ``{"version": _version}`` for backward-compatible loading.
        """
        if args:
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning, stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()

        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata

        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            hook_result = hook(self, destination, prefix, local_metadata)
            if not getattr(hook, "_from_public_api", False):
                if hook_result is not None:
                    destination = hook_result
            elif hook_result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """Like :meth:`register_load_state_dict_pre_hook`, but the hook gets the module only if asked."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = _WrappedHook(hook, self if with_module else None)
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) -> None``, run before this module loads its part of a state_dict."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys) -> None``; it may edit the key lists in place (strict sees that)."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """Copy this module's own entries out of ``state_dict`` (children are loaded separately).

        Problems are appended to the three lists rather than raised, so one load reports all of them.
        Override this (and bump ``_version``) to load old checkpoints: ``local_metadata.get("version")`` is
        the version they were saved with, and ``state_dict`` is a private copy you may edit.
        """
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)

        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, np.ndarray):
                error_msgs.append(f'While copying the parameter named "{key}", expected numpy.ndarray '
                                  f"from checkpoint but received {type(input_param)}")
                continue
            param_is_lazy = is_lazy(param)
            if not param_is_lazy and param.ndim == 0 and input_param.shape == (1,):
                input_param = input_param[0]
            if not param_is_lazy and input_param.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                                  f"from checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                if assign:
                    if isinstance(param, Parameter):
                        if isinstance(input_param, Parameter):
                            input_param.requires_grad = param.requires_grad
                        else:
                            input_param = Parameter(input_param, param.requires_grad)
                    setattr(self, name, input_param)
                else:
                    _copy(param, input_param)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{np.ndarray.shape.__get__(param)} and whose dimensions in the checkpoint are "
                                  f"{input_param.shape}, an exception occurred : {ex.args}.")

        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)

        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:  # an entry of a submodule: the child must exist
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Copy ``state_dict``'s arrays into this module and its descendants; return the incompatible keys.

        ``strict`` makes missing and unexpected keys an error; shape mismatches always are. All problems
        are reported together in one RuntimeError ("Error(s) in loading state_dict for X:", one per line).
        ``assign=True`` puts the checkpoint's arrays themselves into the module instead of copying values
        (a Parameter keeps the module's ``requires_grad``).

        As in torch, a load that fails has already copied every entry that fit: the error says what did not,
        and the module is left half-loaded (load into a copy first if you need all or nothing).
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list[str] = []
        unexpected_keys: list[str] = []
        error_msgs: list[str] = []

        # A private copy that _load_from_state_dict overrides may edit.
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                         missing_keys, unexpected_keys, error_msgs)
            if module._modules:
                by_child = _split_by_child(local_state_dict, len(prefix))
                for name, child in module._modules.items():
                    if child is not None:
                        load(child, by_child.get(name, {}), prefix + name + ".")
            incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible_keys) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be modified, "
                        "it should be done inplace.")

        load(self, state_dict)
        del load  # the inner function refers to itself: without this, every load leaves a reference cycle

        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ------------------------------------------------------------------ copying and pickling

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Objects pickled before a hook table existed get an empty one.
        for name in ("_backward_pre_hooks", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                     "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_state_dict_hooks",
                     "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                super().__setattr__(name, OrderedDict())
        if "_non_persistent_buffers_set" not in self.__dict__:
            super().__setattr__("_non_persistent_buffers_set", set())
        if "_is_full_backward_hook" not in self.__dict__:
            super().__setattr__("_is_full_backward_hook", None)

    # ------------------------------------------------------------------ repr

    def _get_name(self):
        return self.__class__.__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses (one or several lines); override it in layers."""
        return ""

    def __repr__(self) -> str:
        """``Name(extra)`` on one line, or the extra lines and ``(child): repr`` lines indented inside."""
        extra_repr = self.extra_repr()
        extra_lines = extra_repr.split("\n") if extra_repr else []
        child_lines = ["(" + key + "): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"
