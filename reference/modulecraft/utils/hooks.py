"""Handles that remove a registered hook again (mirrors ``torch.utils.hooks.RemovableHandle``)."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any


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
