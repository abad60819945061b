"""Grad mode: whether operations on tensors that require grad record a graph (torch.autograd.grad_mode).

The flag is per thread, as torch's is. ``no_grad``, ``enable_grad`` and ``set_grad_enabled`` work as context
managers and as decorators; ``set_grad_enabled(False)`` also takes effect right away when called as a
function, as torch's does.
"""

from __future__ import annotations

import functools
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


class _GradState(threading.local):
    enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    """Whether operations currently record a graph."""
    return state.enabled


class _GradModeContext:
    """Base of the grad-mode switches: a context manager that is also a decorator."""

    _target: bool

    def __enter__(self) -> None:
        self._previous = state.enabled
        state.enabled = self._target

    def __exit__(self, exc_type, exc, tb) -> None:
        state.enabled = self._previous

    def __call__(self, func):
        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return decorated

    def clone(self):
        return self.__class__()


class no_grad(_GradModeContext):
    """Operations inside do not record a graph (their results have no ``grad_fn``)."""

    _target = False


class enable_grad(_GradModeContext):
    """Turn recording back on inside a ``no_grad`` region."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: at once when constructed, and back to the previous mode on exit."""

    def __init__(self, mode: bool) -> None:
        self._previous = state.enabled
        self._target = bool(mode)
        state.enabled = self._target

    def __enter__(self) -> None:
        pass  # already switched in __init__, as torch's

    def __call__(self, func):
        state.enabled = self._previous  # used as a decorator: switch only while the function runs
        return super().__call__(func)

    def clone(self):
        return self.__class__(self._target)
