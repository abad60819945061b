"""Grad-mode switches as decorators and ``Module._apply``'s grad mode, against torch.autograd.grad_mode."""

import asyncio
import warnings

import numpy as np
import pytest
import torch

import modulecraft

LIBRARIES = {"torch": torch, "modulecraft": modulecraft}


def _both(scenario):
    """``scenario(lib)`` on both libraries: the traces must be equal."""
    theirs, ours = scenario(torch), scenario(modulecraft)
    assert ours == theirs
    return ours


def test_no_grad_and_enable_grad_decorate_without_parentheses_and_when_called_on_a_function():
    def scenario(lib):
        @lib.no_grad
        def bare():
            return lib.is_grad_enabled()

        def enabled():
            return lib.is_grad_enabled()

        called_on = lib.enable_grad(enabled)
        with lib.no_grad():
            inside = called_on()
        return bare(), lib.no_grad(enabled)(), inside, bare.__name__, lib.is_grad_enabled()

    assert _both(scenario) == (False, False, True, "bare", True)


def test_set_grad_enabled_decorates_with_a_mode_and_refuses_a_function():
    def scenario(lib):
        @lib.set_grad_enabled(False)
        def off():
            return lib.is_grad_enabled()

        with pytest.raises(TypeError, match="must be bool") as raised:
            lib.set_grad_enabled(off)
        return off(), lib.is_grad_enabled(), str(raised.value)

    _both(scenario)


def test_every_step_of_a_decorated_generator_runs_in_the_mode():
    def scenario(lib):
        seen = []

        @lib.no_grad()
        def steps():
            received = yield lib.is_grad_enabled()
            seen.append(("sent", received, lib.is_grad_enabled()))
            try:
                yield lib.is_grad_enabled()
            except ValueError:
                seen.append(("thrown", lib.is_grad_enabled()))
                yield "after throw"
            finally:
                seen.append(("closed", lib.is_grad_enabled()))

        generator = steps()
        seen.append(("first", next(generator), lib.is_grad_enabled()))
        seen.append(("second", generator.send(7), lib.is_grad_enabled()))
        seen.append(("throw", generator.throw(ValueError("x"))))
        generator.close()

        @lib.no_grad
        def returns():
            yield 1
            return "value"

        def delegate():
            return (yield from returns())

        outcome = list(delegate())
        return seen, outcome, lib.is_grad_enabled()

    _both(scenario)


def test_a_decorated_coroutine_runs_its_body_in_the_callers_mode_as_torchs():
    """torch's decorator only wraps the call that creates the coroutine; the body runs when awaited."""
    def scenario(lib):
        @lib.no_grad()
        async def body():
            await asyncio.sleep(0)
            return lib.is_grad_enabled()

        return asyncio.run(body())

    assert _both(scenario) is True


def test_decorating_a_class_warns_and_constructs_it_in_the_mode():
    def scenario(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            @lib.no_grad()
            class Made:
                def __init__(self, value):
                    self.value, self.enabled = value, lib.is_grad_enabled()

        made = Made(3)
        return ([(w.category, str(w.message), w.filename == __file__) for w in caught], isinstance(Made, type),
                made.value, made.enabled)

    assert _both(scenario)[1:] == (False, 3, False)


def test_apply_runs_its_function_on_parameters_under_no_grad():
    def scenario(lib):
        model = lib.nn.Linear(2, 2)
        model.weight.grad = np.zeros((2, 2), np.float32) if lib is modulecraft else torch.zeros(2, 2)
        modes = []

        def double_in_place(t):
            modes.append(lib.is_grad_enabled())
            if lib is torch:
                return t.mul_(2)
            np.multiply(t, 2, out=t)
            return t

        model._apply(double_in_place)
        return modes, model.weight.requires_grad, model.weight.grad_fn is None

    assert _both(scenario) == ([False, False, False], True, True)
