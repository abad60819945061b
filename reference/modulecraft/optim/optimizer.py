"""The base class of every optimizer: parameter groups, per-parameter state, hooks, state_dicts.

Mirrors ``torch.optim.Optimizer`` (2.13): the same attributes (``defaults``, ``param_groups``, ``state``),
checks and messages, and the same ``state_dict`` format, so a torch optimizer's ``state_dict`` with its
tensors turned into numpy arrays loads into ours and continues identically (and back).

What numpy changes: the parameters must be ``modulecraft.Tensor``s (a ``Parameter`` is one); a plain
``np.ndarray`` has no ``.grad`` and cannot be a dictionary key (``state`` is keyed by parameter, as
torch's is), so it is refused with a hint. There is one implementation per optimizer: ``foreach``,
``fused`` and ``capturable`` choose between torch's kernels, are kept in the param groups for the
``state_dict``'s sake and change nothing here; ``differentiable=True`` (autograd through the step
itself) is refused: our autograd has no higher-order gradients.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any

import numpy as np

from modulecraft.autograd.grad_mode import enable_grad
from modulecraft.autograd.tensor import Tensor, version_counter
from modulecraft.utils.hooks import RemovableHandle

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook", "required"]

_global_optimizer_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_optimizer_post_hooks: OrderedDict[int, Callable] = OrderedDict()


class _RequiredParameter:
    """The default of an option every param group must set itself (torch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj: Any) -> str:
    """``torch.typename`` for non-tensors: the qualified class name, without ``builtins.``."""
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _parameter_values(param: Tensor) -> np.ndarray:
    """The parameter's memory as a plain array to update in place, its version counted as one change.

    torch updates under ``no_grad`` with in-place tensor operations, which count versions (so a graph that
    saved the old values refuses to backpropagate); writing through a plain view counts the same change
    for a fraction of the cost of our ``Tensor``'s in-place operators, which matters for many small layers.
    """
    version_counter(param)[0] += 1
    return param.view(np.ndarray)


def _one_element(value: Any) -> Any:
    """A 1-element array hyper-parameter (a tensor ``lr`` of shape (1, 1)...) as a 0-d array, as torch uses it as
    a scalar: it then scales a parameter of any shape. Anything else unchanged."""
    return value.reshape(()) if isinstance(value, np.ndarray) and value.ndim != 0 else value


def _loss_of(closure: Callable[[], float] | None) -> float | None:
    """What ``closure`` returns, evaluated with grad mode on (as torch's ``step`` does), or None."""
    if closure is None:
        return None
    with enable_grad():
        return closure()


def _check_kernel_flags(foreach: bool | None, fused: bool | None) -> None:
    """torch's refusal of two kernels at once (the flags choose nothing here, but the error is the same)."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


_HOOK_TABLES = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                "_optimizer_load_state_dict_post_hooks")


def _register(table: OrderedDict[int, Callable], hook: Callable, prepend: bool = False) -> RemovableHandle:
    """Store ``hook`` in ``table`` under a new handle's id, last in firing order or first if ``prepend``."""
    handle = RemovableHandle(table)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` before every optimizer's step."""
    return _register(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None`` after every optimizer's step."""
    return _register(_global_optimizer_post_hooks, hook)


def _with_step_hooks(step: Callable) -> Callable:
    """Wrap an optimizer's ``step`` so the pre-hooks (global first) and post-hooks (own first) run around it."""

    @functools.wraps(step)
    def hooked_step(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
        out = step(*args, **kwargs)
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    return hooked_step


class Optimizer:
    """Holds the parameters to update in ``param_groups`` and what each remembers between steps in ``state``.

    ``params`` is an iterable of parameters, of ``(name, parameter)`` pairs (``named_parameters()``), or of
    dicts, each a param group with its own options; options a group does not set come from ``defaults``.
    Subclasses implement ``step``; every ``step`` a subclass defines runs the step hooks around it.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_step_hooks(cls.__dict__["step"])

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        if defaults.get("differentiable"):
            raise NotImplementedError(
                "differentiable=True is not supported: modulecraft's autograd has no higher-order gradients, "
                "so the step cannot be differentiated; leave differentiable=False")
        self.defaults = defaults
        for table in _HOOK_TABLES:
            setattr(self, table, OrderedDict())
        if isinstance(params, np.ndarray):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + _typename(params))
        self.state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []

        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for table in _HOOK_TABLES:  # unpickled optimizers, and ones from before a kind of hook existed
            self.__dict__.setdefault(table, OrderedDict())
        self.defaults.setdefault("differentiable", False)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for index, group in enumerate(self.param_groups):  # a blank line between groups, as torch prints
            text += f"\nParameter Group {index}\n"
            text += "".join(f"    {key}: {group[key]}\n" for key in sorted(group) if key != "params")
        return text + ")"

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` to run before ``step``."""
        return _register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None`` to run after ``step``."""
        return _register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None`` to run when ``state_dict()`` starts (first if ``prepend``)."""
        return _register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> None or state_dict`` on what ``state_dict()`` returns."""
        return _register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> None or state_dict`` on what ``load_state_dict`` loads.

        The hook gets a shallow copy of the argument, and may edit it or return another one to load.
        """
        return _register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None`` to run once ``load_state_dict`` has loaded."""
        return _register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``, torch's format.

        Parameters are numbered in order across the groups; the per-parameter state dicts and arrays are
        the optimizer's own (not copies), as in torch: deep-copy the result to keep a snapshot.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        index_of: dict[int, int] = {}
        start = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {key: value for key, value in group.items() if key != "params"}
            for index, param in enumerate(group["params"], start):
                index_of.setdefault(id(param), index)
            packed["params"] = [index_of[id(param)] for param in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(group) for group in self.param_groups]
        packed_state = {(index_of[id(key)] if isinstance(key, Tensor) else key): value
                        for key, value in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            replaced = post_hook(self, state_dict)
            if replaced is not None:
                state_dict = replaced
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take over the state and group options of ``state_dict`` (from ``state_dict()``, ours or torch's).

        Saved indices are matched with this optimizer's parameters by position, group by group. Arrays in
        a parameter's state take the parameter's dtype when it is floating point (``step`` excepted), as
        torch casts them; an array that already has that dtype is used as it is, not copied.
        """
        state_dict = state_dict.copy()  # the pre-hooks may edit it; the caller's dict stays as it was
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            replaced = pre_hook(self, state_dict)
            if replaced is not None:
                state_dict = replaced
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(group["params"]) != len(saved["params"]) for group, saved in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")

        param_of = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in param_of:
                param = param_of[key]
                state[param] = _cast_state(param, value)
            else:  # state that belongs to no parameter is kept as it is (torch does, for old checkpoints)
                state[key] = value

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        self.__setstate__({"state": state,
                           "param_groups": [update_group(g, ng) for g, ng in zip(groups, saved_groups)]})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: ``grad = None`` (the default), or fill them with zeros in place."""
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    if set_to_none:
                        param.grad = None
                    else:
                        param.grad.fill(0)

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Update the parameters once from their ``.grad``; ``closure`` recomputes and returns the loss."""
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Append a group (a dict with ``params`` and any options); options it lacks come from ``defaults``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")

        params = param_group["params"]
        if isinstance(params, np.ndarray):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)

        names = [param[0] for param in param_group["params"] if isinstance(param, tuple)]
        param_group["params"] = [param[1] if isinstance(param, tuple) else param for param in param_group["params"]]
        if names:
            if len(names) != len(param_group["params"]):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                hint = (" (a plain np.ndarray cannot hold a gradient: wrap it in modulecraft.nn.Parameter)"
                        if isinstance(param, np.ndarray) else "")
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(param) + hint)
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        ids = [id(param) for param in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)

        taken: set[int] = set()
        for group in self.param_groups:
            taken.update(id(param) for param in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if not taken.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")

        self.param_groups.append(param_group)


def _cast_state(param: np.ndarray, value: Any, key: Any = None) -> Any:
    """A parameter's loaded state, arrays cast to the parameter's floating dtype (``step`` left alone)."""
    if isinstance(value, np.ndarray):
        if key == "step" or not np.issubdtype(param.dtype, np.floating):
            return value
        return value.astype(param.dtype, copy=False)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value
