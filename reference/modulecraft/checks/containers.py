"""Where a name lives inside a module: the question behind every attribute-dispatch check."""

from __future__ import annotations

from typing import Any

CONTAINERS = ("__dict__", "_parameters", "_modules", "_buffers", "_non_persistent_buffers_set")


def containers_holding(module: Any, name: str) -> list[str]:
    """The containers of ``module`` that hold ``name``, in a fixed order.

    A correctly dispatched name is in exactly one of ``__dict__``, ``_parameters``, ``_modules`` and
    ``_buffers`` (plus ``_non_persistent_buffers_set`` for a non-persistent buffer). Reads ``vars(module)``
    directly so that neither ``__getattr__`` nor ``__getattribute__`` of the module is involved.
    """
    state = vars(module)
    holding = ["__dict__"] if name in state else []
    holding += [key for key in CONTAINERS[1:] if name in state.get(key, ())]
    return holding
