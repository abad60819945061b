"""Turning what a scenario saw into comparable plain data, and the `differential` test decorator.

A scenario `def test_x(lib): ...` returns a trace: any nesting of lists, tuples, dicts and observed values. `observe`
maps the trace of each library onto plain Python data after this documented normalisation, and the decorator asserts
the two are equal:

- tensors and arrays become ("Parameter" or "array", dtype name, shape, values), the values equal within float32
  precision (relative 1e-5; NaN equals NaN);
- dtypes become their numpy name (`torch.float32` and `numpy.float32` are both "float32"); in strings, torch's
  `torch.float32` / `torch.FloatTensor` spellings are rewritten the same way (reprs of ParameterList/Dict), and
  shapes written `torch.Size([3, 2])` become Python's `(3, 2)` (load_state_dict's size-mismatch lines);
- modules become ("module", class name); classes become their name, with torch.Tensor / numpy.ndarray /
  modulecraft.Tensor all "array", and so is modulecraft's `nn.Buffer` class (torch's `nn.Buffer(t)` returns a plain
  Tensor carrying a flag; ours is a Tensor subclass: pinned in test_documented_differences.py);
- a namedtuple keeps its type name and fields (`_IncompatibleKeys`), dicts keep their type and key order;
- `raises(fn, *phrases)` records the exception type and which of the key phrases its (normalised) message
  contains. On torch every phrase must be present (otherwise the scenario is wrong, not the library), so a missing
  phrase in modulecraft shows up as a difference. `raises(fn, whole_message=True)` compares the entire normalised
  message instead, where its exact layout is the contract (load_state_dict's error report).

Anything else is refused, so no scenario compares something by accident (e.g. by `repr` of an object).
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import types
from collections import OrderedDict

import numpy as np

from .backends import backend

_TORCH_DTYPE_SPELLINGS = {
    "torch.FloatTensor": "float32",
    "torch.DoubleTensor": "float64",
    "torch.HalfTensor": "float16",
    "torch.LongTensor": "int64",
}
_TORCH_DTYPE_IN_TEXT = re.compile(r"torch\.(float16|float32|float64|int64|bool)\b|" +
                                  "|".join(re.escape(k) for k in _TORCH_DTYPE_SPELLINGS))
_TORCH_SIZE_IN_TEXT = re.compile(r"torch\.Size\(\[([0-9, ]*)\]\)")


def _as_tuple_text(dims: str) -> str:
    return str(tuple(int(d) for d in dims.split(",") if d.strip()))


def normalise_text(text: str) -> str:
    text = _TORCH_SIZE_IN_TEXT.sub(lambda m: _as_tuple_text(m.group(1)), text)
    return _TORCH_DTYPE_IN_TEXT.sub(lambda m: m.group(1) or _TORCH_DTYPE_SPELLINGS[m.group(0)], text)


class Raised:
    """The outcome of a call expected to fail: exception type and which key phrases its message holds."""

    def __init__(self, error: BaseException | None, phrases: tuple[str, ...], whole_message: bool):
        self.error = error
        self.whole_message = whole_message
        first_arg = error.args[0] if error is not None and error.args else ""
        self.message = normalise_text(str(first_arg))
        self.phrases = phrases

    def observed(self, oracle: bool):
        if self.error is None:
            return ("no exception", self.phrases)
        if self.whole_message:
            return (type(self.error).__name__, self.message)
        missing = [p for p in self.phrases if p not in self.message]
        assert not (oracle and missing), f"scenario bug: torch's message {self.message!r} lacks {missing}"
        return (type(self.error).__name__, tuple(p for p in self.phrases if p not in missing))


def raises(call, *phrases: str, whole_message: bool = False) -> Raised:
    """Call `call()` and record how it fails (or that it did not)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the type is part of what is compared
        return Raised(error, phrases, whole_message)
    return Raised(None, phrases, whole_message)


def _dtype_name(dtype) -> str:
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else np.dtype(dtype).name


def _type_name(cls: type) -> str:
    if cls is np.ndarray or (cls.__module__ in ("torch", "modulecraft.autograd.tensor") and cls.__name__ == "Tensor") \
            or (cls.__module__ == "modulecraft.nn.parameter" and cls.__name__ == "Buffer"):
        return "array"
    return cls.__name__


class Numbers:
    """The values of an array, equal to another's within float32 precision (the libraries may round differently)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __eq__(self, other) -> bool:
        if not isinstance(other, Numbers) or self.array.shape != other.array.shape:
            return False
        if self.array.dtype.kind == "f" or other.array.dtype.kind == "f":
            return np.allclose(self.array, other.array, rtol=1e-5, atol=1e-6, equal_nan=True)
        return np.array_equal(self.array, other.array)

    def __repr__(self) -> str:
        return repr(np.round(self.array, 4).tolist() if self.array.dtype.kind == "f" else self.array.tolist())


def _observe_tensor(value, lib):
    kind = "Parameter" if isinstance(value, lib.Parameter) else "array"
    array = lib.to_numpy(value)
    return (kind, _dtype_name(value.dtype), tuple(array.shape), Numbers(array.copy()))


def observe(value, lib, oracle: bool):
    """Plain, comparable data for `value` as seen through `lib` (see the module docstring)."""
    def recurse(v):
        return observe(v, lib, oracle)

    if isinstance(value, Raised):
        return value.observed(oracle)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, {f: recurse(getattr(value, f)) for f in value._fields})
    if isinstance(value, (list, tuple, types.GeneratorType)):
        return [recurse(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(recurse(v) for v in value))
    if isinstance(value, dict):
        kind = "OrderedDict" if isinstance(value, OrderedDict) else "dict"
        return (kind, [(recurse(k), recurse(v)) for k, v in value.items()])
    if isinstance(value, lib.nn.Module):
        return ("module", type(value).__name__)
    if isinstance(value, type):
        return _type_name(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype) or type(value).__name__ == "dtype":
        return _dtype_name(value)
    if isinstance(value, lib.TensorBase):
        if lib.is_lazy(value):
            return ("uninitialized", type(value).__name__)
        return _observe_tensor(value, lib)
    if isinstance(value, lib.RemovableHandle):
        return "RemovableHandle"
    raise TypeError(f"the trace holds a {type(value).__name__}; observe something explicit instead")


def first_difference(expected, actual, path="trace") -> str:
    """Where two observed traces first differ, so a failure says what to look at."""
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)) and type(expected) is type(actual):
        for index, (e, a) in enumerate(zip(expected, actual)):
            if e != a:
                return first_difference(e, a, f"{path}[{index}]")
        if len(expected) != len(actual):
            return f"{path}: torch has {len(expected)} items, modulecraft {len(actual)}"
    if isinstance(expected, dict) and isinstance(actual, dict) and expected.keys() == actual.keys():
        return next(first_difference(expected[k], actual[k], f"{path}[{k!r}]") for k in expected
                    if expected[k] != actual[k])
    return f"{path}:\n  torch:       {expected!r}\n  modulecraft: {actual!r}"


def differential(scenario):
    """Make `scenario(lib, ...) -> trace` a test that runs it on torch, then on modulecraft, and compares the traces.

    Further parameters of the scenario stay pytest parameters (fixtures, parametrize). With the environment variable
    DIFFERENTIAL_ORACLE_ONLY=1 only torch runs, to validate new scenarios before the implementation exists.
    """
    @functools.wraps(scenario)
    def test(*args, **kwargs):
        torch_lib = backend("torch")
        expected = observe(scenario(torch_lib, *args, **kwargs), torch_lib, oracle=True)
        if os.environ.get("DIFFERENTIAL_ORACLE_ONLY"):
            return
        ours = backend("modulecraft")
        actual = observe(scenario(ours, *args, **kwargs), ours, oracle=False)
        assert actual == expected, first_difference(expected, actual)

    signature = inspect.signature(scenario)
    test.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    return test
