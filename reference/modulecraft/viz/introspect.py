"""Duck-typed access to a module tree.

Every drawing reads modules through these functions only, so the same call draws a ``modulecraft.nn`` model
(numpy arrays) and a real ``torch.nn`` model (tensors) without importing torch: both keep their state in the
same private attributes (``_parameters``, ``_buffers``, ``_modules``, ``_forward_hooks``, ...).
"""

from __future__ import annotations

import functools
import math
import sys
from types import ModuleType

# Module-level dicts of global forward hooks, named as in torch/nn/modules/module.py.
GLOBAL_PRE_HOOKS = "_global_forward_pre_hooks"
GLOBAL_FORWARD_HOOKS = "_global_forward_hooks"


def join(prefix: str, name: str) -> str:
    """The qualified name of ``name`` under ``prefix``, as ``named_modules`` spells it."""
    return f"{prefix}.{name}" if prefix else name


def children(module) -> list[tuple[str, object]]:
    """Registered submodules in registration order (``None`` placeholders skipped, like ``named_children``)."""
    return [(name, child) for name, child in module._modules.items() if child is not None]


def own_parameters(module) -> list[tuple[str, object]]:
    """Parameters registered on this module itself (not on its children)."""
    return [(name, p) for name, p in module._parameters.items() if p is not None]


def own_buffers(module) -> list[tuple[str, object, bool]]:
    """Buffers registered on this module itself, as ``(name, buffer, persistent)``."""
    non_persistent = getattr(module, "_non_persistent_buffers_set", set())
    return [(name, b, name not in non_persistent) for name, b in module._buffers.items() if b is not None]


def is_lazy(array) -> bool:
    """True for an uninitialised (lazy) parameter or buffer; its shape is not known yet.

    torch's ``UninitializedParameter`` refuses even ``.shape``, so this looks at the class names only.
    """
    return _is_lazy_class(type(array))


@functools.cache
def _is_lazy_class(cls: type) -> bool:
    """Cached per class: a big tree asks about thousands of arrays of a handful of classes."""
    return any(base.__name__.startswith("Uninitialized") for base in cls.__mro__)


def shape_of(array) -> tuple[int, ...] | None:
    """The shape as a plain tuple, or None for a lazy array."""
    return None if is_lazy(array) else tuple(int(n) for n in array.shape)


def numel(array) -> int:
    """Number of elements; 0 for a lazy array (nothing is allocated yet)."""
    shape = shape_of(array)
    return 0 if shape is None else math.prod(shape)


def dtype_name(array) -> str:
    """``float32`` for both ``torch.float32`` and ``numpy.dtype('float32')``."""
    return str(array.dtype).removeprefix("torch.")


def requires_grad(array) -> bool:
    """Parameters carry ``requires_grad``; plain arrays (numpy buffers) do not and count as False."""
    return bool(getattr(array, "requires_grad", False))


def module_namespace(module) -> ModuleType | None:
    """The Python module that defines this module's ``Module`` base class (where global hooks live)."""
    for cls in type(module).__mro__:
        if cls.__name__ == "Module":
            return sys.modules.get(cls.__module__)
    return None


def global_hook_dicts(module) -> dict[str, dict]:
    """The global forward pre-hook and forward hook dicts for this module's framework (empty if absent)."""
    namespace = module_namespace(module)
    return {
        "pre": getattr(namespace, GLOBAL_PRE_HOOKS, {}),
        "forward": getattr(namespace, GLOBAL_FORWARD_HOOKS, {}),
    }


def local_hook_dicts(module) -> dict[str, dict]:
    """This module's own forward pre-hook and forward hook dicts."""
    return {
        "pre": getattr(module, "_forward_pre_hooks", {}),
        "forward": getattr(module, "_forward_hooks", {}),
    }


def hook_counts(hook_dicts: dict[str, dict]) -> dict[str, int]:
    """How many hooks each dict holds: ``{"pre": n, "forward": m}``."""
    return {kind: len(hooks) for kind, hooks in hook_dicts.items()}


def extra_repr(module) -> str:
    """The module's ``extra_repr()``, or an empty string when it has none."""
    method = getattr(module, "extra_repr", None)
    return method() if callable(method) else ""
