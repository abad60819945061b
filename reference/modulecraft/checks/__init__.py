"""Feedback for the visible tests of the course notebooks.

A visible test should tell a learner three things when it fails: what was checked and expected, what their
code did instead, and where in the chapter to read again. ``expect``, ``expect_call`` and ``expect_raises`` raise an
``AssertionError`` whose message has exactly those three parts, so nbgrader's feedback (which keeps only
``ErrorName: message``) stays useful.

Hidden tests do not use this module: they stay inline in the notebooks with plain ``assert`` statements, so
that nothing a learner's code replaces here can change a grade.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from modulecraft.checks.containers import containers_holding

__all__ = ["call", "containers_holding", "expect", "expect_call", "expect_raises", "feedback"]


def feedback(what: str, expected: Any, got: Any, hint: str) -> str:
    """The three-part message every failing visible test shows."""
    return f"{what}\n  Expected: {_show(expected)}\n  Got:      {_show(got)}\n  Hint: {hint}"


def expect(what: str, got: Any, expected: Any, hint: str) -> None:
    """Fail with feedback unless ``got`` equals ``expected`` (arrays: same shape, dtype and values)."""
    if not _equal(got, expected):
        raise AssertionError(feedback(what, expected, got, hint))


def expect_call(what: str, call: Callable[[], Any], expected: Any, hint: str) -> None:
    """Like ``expect(what, call(), ...)``, but an exception raised by ``call`` becomes feedback too.

    Returns nothing on purpose: a number displayed as a test cell's result is read by nbgrader as partial credit.
    """
    try:
        got = call()
    except Exception as error:
        wanted = "no exception" if expected is None else expected
        raise AssertionError(feedback(what, wanted, f"{type(error).__name__}: {error}", hint)) from None
    expect(what, got, expected, hint)


def call(what: str, call: Callable[[], Any], hint: str) -> Any:
    """``call()``'s result, for a test that goes on to check it; an exception becomes feedback naming ``what``.

    Assign the result (a test cell must not end with a displayed number: nbgrader reads it as partial credit).
    """
    try:
        return call()
    except Exception as error:
        raise AssertionError(feedback(what, "no exception", f"{type(error).__name__}: {error}", hint)) from None


def expect_raises(
    what: str,
    call: Callable[[], Any],
    exception: type[BaseException],
    hint: str,
    phrase: str | None = None,
) -> BaseException:
    """Fail with feedback unless ``call()`` raises ``exception`` whose message contains ``phrase``.

    Returns the raised exception so a test can look at it further.
    """
    wanted = exception.__name__ + (f" mentioning {phrase!r}" if phrase else "")
    try:
        result = call()
    except exception as error:
        if phrase is not None and phrase not in str(error):
            raise AssertionError(feedback(what, wanted, f"{type(error).__name__}: {error}", hint)) from None
        return error
    except Exception as error:  # a different exception is a wrong answer, not a crash of the check
        raise AssertionError(feedback(what, wanted, f"{type(error).__name__}: {error}", hint)) from None
    raise AssertionError(feedback(what, wanted, f"no exception (returned {_show(result)})", hint))


def _equal(got: Any, expected: Any) -> bool:
    if isinstance(got, np.ndarray) or isinstance(expected, np.ndarray):
        return (
            isinstance(got, np.ndarray)
            and isinstance(expected, np.ndarray)
            and got.shape == expected.shape
            and got.dtype == expected.dtype
            and bool(np.array_equal(got, expected))
        )
    return type(got) is type(expected) and got == expected or got is expected


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return f"{type(value).__name__}(shape={value.shape}, dtype={value.dtype}) {np.array2string(value, threshold=8)}"
    return repr(value)
