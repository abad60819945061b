"""modulecraft.checks: the feedback of visible tests says what was expected, what happened, and where to read."""
from __future__ import annotations

import numpy as np
import pytest

from modulecraft import checks, nn


def feedback_of(call) -> str:
    with pytest.raises(AssertionError) as failure:
        call()
    return str(failure.value)


def test_expect_passes_on_equal_values_and_explains_a_difference():
    checks.expect("a list", ["a", "b"], ["a", "b"], "hint")
    message = feedback_of(lambda: checks.expect("The names", ["b"], ["a"], "see section 2.1"))
    assert message == "The names\n  Expected: ['a']\n  Got:      ['b']\n  Hint: see section 2.1"


@pytest.mark.parametrize(("got", "expected"), [
    (True, 1),                                                    # bool is not int: training must be True
    (np.zeros(2, dtype=np.float64), np.zeros(2, dtype=np.float32)),  # dtype matters
    (np.zeros((1, 2)), np.zeros(2)),                              # shape matters
    ([1, 2], np.array([1, 2])),                                   # a list is not an array
])
def test_expect_is_strict_about_types_dtypes_and_shapes(got, expected):
    assert "Expected" in feedback_of(lambda: checks.expect("value", got, expected, "hint"))


def test_expect_shows_arrays_with_shape_and_dtype():
    message = feedback_of(lambda: checks.expect("w", np.ones(2, dtype=np.float64), np.ones(2, dtype=np.float32), "h"))
    assert "ndarray(shape=(2,), dtype=float32)" in message and "dtype=float64" in message


def test_expect_call_turns_an_exception_of_the_learners_code_into_feedback():
    message = feedback_of(lambda: checks.expect_call("f(3)", lambda: 1 / 0, 7, "see section 1.4"))
    assert "Expected: 7" in message and "Got:      ZeroDivisionError: division by zero" in message
    assert checks.expect_call("f(3)", lambda: 7, 7, "hint") is None  # a displayed number would be partial credit
    assert "Expected: no exception" in feedback_of(lambda: checks.expect_call("setattr", lambda: {}["x"], None, "h"))


def test_call_returns_the_result_or_turns_an_exception_into_feedback():
    assert checks.call("train_epoch", lambda: [1.5], "hint") == [1.5]
    message = feedback_of(lambda: checks.call("train_epoch", lambda: {}["x"], "see section 12.3"))
    assert "train_epoch" in message and "Expected: no exception" in message and "KeyError" in message
    assert "see section 12.3" in message


def test_expect_raises_checks_the_type_and_the_phrase():
    def fail(exception):
        def call():
            raise exception
        return call

    error = checks.expect_raises("x", fail(KeyError("attribute 'x' already exists")), KeyError, "h", "already")
    assert isinstance(error, KeyError)
    assert "Got:      no exception (returned 5)" in feedback_of(
        lambda: checks.expect_raises("x", lambda: 5, KeyError, "h"))
    assert "Got:      TypeError: nope" in feedback_of(
        lambda: checks.expect_raises("x", fail(TypeError("nope")), KeyError, "h"))
    assert "Expected: KeyError mentioning 'exists'" in feedback_of(
        lambda: checks.expect_raises("x", fail(KeyError("other")), KeyError, "h", phrase="exists"))


def test_containers_holding_reads_the_instance_state_directly():
    module = nn.Module()
    module.weight = nn.Parameter(np.ones(1, dtype=np.float32))
    module.register_buffer("mask", np.ones(1), persistent=False)
    module.child = nn.Identity()
    module.note = "plain"
    assert checks.containers_holding(module, "weight") == ["_parameters"]
    assert checks.containers_holding(module, "mask") == ["_buffers", "_non_persistent_buffers_set"]
    assert checks.containers_holding(module, "child") == ["_modules"]
    assert checks.containers_holding(module, "note") == ["__dict__"]
    assert checks.containers_holding(module, "missing") == []
    object.__setattr__(module, "child", "stale")
    assert checks.containers_holding(module, "child") == ["__dict__", "_modules"]
    assert checks.containers_holding(object.__new__(nn.Module), "weight") == []
