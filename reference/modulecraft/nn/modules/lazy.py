"""``LazyModuleMixin``: modules whose parameter shapes are inferred from their first input."""

from __future__ import annotations

import itertools
from typing import Any, Optional

import numpy as np

from modulecraft.nn.parameter import Buffer, is_lazy

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    """Mix in before a layer class to create its parameters on the first call instead of in ``__init__``.

    The layer starts with ``UninitializedParameter``/``UninitializedBuffer`` placeholders. Two hooks do the
    rest: a with_kwargs forward pre-hook (``_infer_parameters``) calls ``initialize_parameters(*args,
    **kwargs)`` on the first call, then removes both hooks and turns the module into ``cls_to_become``
    (e.g. ``LazyLinear`` -> ``Linear``); a load_state_dict pre-hook (``_lazy_load_hook``) materialises the
    placeholders to the checkpoint's shapes, so an initialised state loads into a lazy module. The
    placeholders themselves go into a ``state_dict`` as they are (see ``module._detached``).
    """

    cls_to_become: Optional[type] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs) -> None:
        """Materialise each placeholder whose checkpoint entry has a shape, so the values can be copied in."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None:
                input_param = state_dict[key]
                if is_lazy(param) and not is_lazy(input_param):
                    param.materialize(input_param.shape)
        self._unwrap_materialized_buffers()

    def _unwrap_materialized_buffers(self) -> None:
        """Store materialised buffers as plain ndarrays, as torch's become plain Tensors.

        numpy cannot turn an object into a plain ``np.ndarray`` in place, so ``UninitializedBuffer``
        materialises into a ``Buffer``; the module then keeps a plain view of the same memory.
        """
        for name, buf in self._buffers.items():
            if type(buf) is Buffer:
                self._buffers[name] = buf.view(np.ndarray)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialise the placeholders from the first input (each lazy layer implements this)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None) -> None:
        """The first-call pre-hook: initialise, check nothing is left lazy, remove both hooks, change class."""
        kwargs = kwargs if kwargs else {}
        module.initialize_parameters(*args, **kwargs)
        module._unwrap_materialized_buffers()
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
