"""Grad mode: whether operations on tensors that require grad record a graph (torch.autograd.grad_mode).

The flag is per thread, as torch's is. ``no_grad``, ``enable_grad`` and ``set_grad_enabled`` work as context
managers and as decorators, as torch's ``_DecoratorContextManager`` does:

* ``@no_grad`` and ``@enable_grad`` work with or without parentheses (``no_grad(fn)`` decorates ``fn``);
* a decorated generator function runs each of its steps in the mode (the caller's code between steps does not);
* a decorated ``async def`` function is called in the mode, which only creates the coroutine: its body runs
  later, when awaited, in the caller's mode (torch does the same);
* decorating a class warns (``FutureWarning``) and gives a function that constructs it in the mode.

``set_grad_enabled(False)`` also takes effect right away when called as a function, as torch's does.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


class _GradState(threading.local):
    enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    """Whether operations currently record a graph."""
    return state.enabled


def _in_mode(make_context, generator_function):
    """A generator function whose every step (start, send, throw, close) runs inside ``make_context()``."""

    @functools.wraps(generator_function)
    def stepped(*args, **kwargs):
        generator = generator_function(*args, **kwargs)
        try:
            with make_context():
                response = generator.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_context():
                        generator.close()
                    raise
                except BaseException as error:
                    with make_context():
                        response = generator.throw(error)
                else:
                    with make_context():
                        response = generator.send(request)
        except StopIteration as finished:
            return finished.value

    return stepped


class _GradModeContext:
    """Base of the grad-mode switches: a context manager that is also a decorator."""

    _target: bool

    def __enter__(self) -> None:
        self._previous = state.enabled
        state.enabled = self._target

    def __exit__(self, exc_type, exc, tb) -> None:
        state.enabled = self._previous

    def __call__(self, func):
        if inspect.isclass(func):
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should only "
                          "decorate functions or methods. To preserve the current behavior of class decoration, you "
                          "can directly decorate the `__init__` method and nothing else.", FutureWarning,
                          stacklevel=2)
            cls = func
            func = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731  (what torch returns)
        if inspect.isgeneratorfunction(func):
            return _in_mode(self.clone, func)

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return decorated

    def clone(self):
        return self.__class__()


class _BareDecoratorContext(_GradModeContext):
    """A switch without arguments, so also usable as ``@no_grad`` (no parentheses) or ``no_grad(fn)``."""

    def __new__(cls, func=None):
        if func is None:
            return super().__new__(cls)
        return cls()(func)

    def __init__(self, func=None) -> None:
        pass


class no_grad(_BareDecoratorContext):
    """Operations inside do not record a graph (their results have no ``grad_fn``)."""

    _target = False


class enable_grad(_BareDecoratorContext):
    """Turn recording back on inside a ``no_grad`` region."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: at once when constructed, and back to the previous mode on exit."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not "
                            f"{type(mode).__name__}")
        self._previous = state.enabled
        self._target = mode
        state.enabled = mode

    def __enter__(self) -> None:
        state.enabled = self._target  # already switched in __init__; again here, as torch's

    def __call__(self, func):
        state.enabled = self._previous  # used as a decorator: switch only while the function runs
        return super().__call__(func)

    def clone(self):
        return self.__class__(self._target)

    def __repr__(self) -> str:
        return f"modulecraft.autograd.grad_mode.set_grad_enabled(mode={self._target})"
