"""Handles that remove a registered hook again, and the machinery of a module's full backward hooks
(mirrors ``torch.utils.hooks``: ``RemovableHandle``, ``BackwardHook``).

A utility below the autograd package and ``nn`` (both use ``RemovableHandle``): it imports neither of them.
"""

from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np


class RemovableHandle:
    """Remove the hook stored under ``self.id`` from its dictionary (and from the ``extra_dict`` ones).

    Every handle draws a fresh, increasing ``id`` from a class-wide counter, so ids are unique across all
    modules and the global registries; hook dictionaries are keyed by these ids and keep insertion order,
    which is the firing order. The dictionaries are held through weak references: a handle never keeps a
    deleted module's hooks alive. ``extra_dict`` names the side tables (e.g. ``_forward_hooks_with_kwargs``)
    whose entry for the same id must disappear together with the hook.
    """

    id: int
    next_id: int = 0

    def __init__(self, hooks_dict: Any, *, extra_dict: Any = None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.extra_dict_ref: tuple = ()
        if isinstance(extra_dict, dict):
            self.extra_dict_ref = (weakref.ref(extra_dict),)
        elif isinstance(extra_dict, list):
            self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self) -> None:
        """Delete the hook (and its flags); calling it twice, or after the module died, is harmless."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            table = ref()
            if table is not None and self.id in table:
                del table[self.id]

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state) -> None:
        hooks_dict = state[0]
        # A handle whose dictionary is gone keeps pointing at an empty, already dead dictionary.
        self.hooks_dict_ref = weakref.ref(OrderedDict() if hooks_dict is None else hooks_dict)
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        extra = state[2] if len(state) > 2 else ()
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra if d is not None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.remove()


class BackwardHook:
    """Runs a module's full backward hooks and backward pre-hooks (mirrors ``torch.utils.hooks.BackwardHook``).

    ``_call_impl`` passes the module's positional inputs through :meth:`setup_input_hook` before forward and
    its output through :meth:`setup_output_hook` after. Each sends the tensors among them through one
    identity node (``BackwardHookFunctionBackward``), so that backward crosses a node where the module's
    outputs end and another where its inputs begin. The hook on the output node sees grad_output first: the
    pre-hooks run there and may replace it. The hook on the input node then sees grad_input and calls the
    full hooks with both, each of which may replace grad_input. Non-tensor positions show up as None.

    The identity node comes from ``modulecraft.nn.modules._functions``, which hands itself over as ``functions``
    when imported (this utility imports nothing from nn): its ``BackwardHookFunction`` is read there at each call,
    so a class put in its place (a learner's) is the one used; its ``is_grad_enabled`` says whether to record.
    """

    functions: Any = None  # modulecraft.nn.modules._functions, set by that module

    def __init__(self, module, user_hooks, user_pre_hooks) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None  # set by the output node's hook, consumed by the input node's
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None

    @staticmethod
    def _pack_with_none(indices, values, size) -> tuple:
        """A tuple of ``size`` entries with ``values`` at ``indices`` and None elsewhere."""
        if len(indices) == size:  # every position holds a tensor (the common case): the indices are 0, 1, ...
            return tuple(values)
        packed = [None] * size
        for index, value in zip(indices, values, strict=True):
            packed[index] = value
        return tuple(packed)

    @staticmethod
    def _unpack_none(indices, values) -> tuple:
        if len(indices) == len(values):  # no None to take out
            return tuple(values)
        return tuple([values[index] for index in indices])

    def _set_user_hook(self, grad_fn) -> None:
        def hook(grad_input, _):
            if self.grad_outputs is None:
                return None  # the gradient reached the inputs without passing through the outputs
            packed = result = self._pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, result, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(result):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                       f"got {len(out)}, but expected {len(result)}")
                result = out
            self.grad_outputs = None
            if result is packed:  # no hook replaced grad_input: the node's gradients go on as they are
                return None
            return self._unpack_none(self.input_tensors_index, result)

        grad_fn.register_hook(hook)

    def _apply_on_tensors(self, fn, args):
        """Send the arrays among ``args`` through ``BackwardHookFunction`` and call ``fn`` on its node.

        Returns ``args`` with those arrays replaced, and their positions; ``(args, None)`` when none of them
        requires grad or grad mode is off (nothing will flow back through them).
        """
        tensors_idx, tensors, requires_grad = [], [], False
        for index, arg in enumerate(args):
            if isinstance(arg, np.ndarray):  # a plain ndarray is a tensor that does not require grad
                tensors_idx.append(index)
                tensors.append(arg)
                requires_grad = requires_grad or getattr(arg, "_requires_grad", False)
        functions = BackwardHook.functions
        if not (requires_grad and functions.is_grad_enabled()):
            return args, None
        new_tensors = functions.BackwardHookFunction.apply(*tensors)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input Tensors.")
        for tensor in new_tensors:  # the first output recorded by the identity node carries it
            grad_fn = getattr(tensor, "grad_fn", None)
            if grad_fn is not None and grad_fn.name() == "BackwardHookFunctionBackward":
                break
        else:
            raise RuntimeError("Error while setting up backward hooks. Please open an issue with a code sample to "
                               "reproduce this.")
        fn(grad_fn)
        if type(args) is tuple and len(tensors) == len(args):  # the common case: all of them are tensors
            return tuple(new_tensors), tensors_idx
        arg_list = list(args)
        for index, value in zip(tensors_idx, new_tensors, strict=True):
            arg_list[index] = value
        return (tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)), tensors_idx

    def setup_input_hook(self, args):
        """Wrap the positional inputs; their node's hook will call the full backward hooks."""
        result, input_idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return result

    def setup_output_hook(self, args):
        """Wrap the output (a tensor or a tuple); their node's hook runs the pre-hooks."""
        def fn(grad_fn) -> None:
            def hook(_, grad_output):
                self.grad_outputs = self._pack_with_none(self.output_tensors_index, grad_output, self.n_outputs)
                for user_pre_hook in self.user_pre_hooks:
                    hook_grad_outputs = user_pre_hook(self.module, self.grad_outputs)
                    if hook_grad_outputs is None:
                        continue
                    if len(hook_grad_outputs) != len(self.grad_outputs):
                        raise RuntimeError("Backward pre hook returned an invalid number of grad_output, got "
                                           f"{len(hook_grad_outputs)}, but expected {len(self.grad_outputs)}")
                    self.grad_outputs = hook_grad_outputs
                if self.input_tensors_index is None:
                    # No input requires grad: no input node will fire, so the full hooks are called here. The
                    # warning points past this hook and the engine's six frames (_call_node, _run_node, _walk,
                    # run_backward, backward, Tensor.backward), at the caller of .backward().
                    warnings.warn("Full backward hook is firing when gradients are computed with respect to "
                                  "module outputs since no inputs require gradients. See "
                                  "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                                  "#torch.nn.Module.register_full_backward_hook for more details.", stacklevel=8)
                    grad_inputs = (None,) * self.n_inputs
                    for user_hook in self.user_hooks:
                        result = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if result is not None and not (isinstance(result, tuple)
                                                       and all(el is None for el in result)):
                            raise RuntimeError("Backward hook for Modules where no input requires gradient "
                                               "should always return None or None for all gradients.")
                return self._unpack_none(self.output_tensors_index, self.grad_outputs)

            grad_fn.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        result, output_idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        return result if is_tuple else result[0]
