"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``.

Children are stored in ``_modules`` (parameters in ``_parameters``) under their string index or key, so
traversal, ``state_dict`` and repr treat them like any attribute. The list-like containers renumber
after a deletion so the keys stay ``"0"``, ``"1"``, ...

In the parameter containers' repr torch writes ``Parameter containing: [torch.float32 of size 3]``
(ParameterList) and ``[torch.FloatTensor of size 3]`` (ParameterDict); we write numpy's dtype name in
both, ``Parameter containing: [float32 of size 3]``.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections import abc as container_abcs
from itertools import chain, islice
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from modulecraft.nn.modules.module import Module, _addindent
from modulecraft.nn.parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(container: Module, idx) -> str:
    """The string key of integer index ``idx`` (negative counts from the end) in a list-like container."""
    idx = operator.index(idx)
    if not (-len(container) <= idx < len(container)):
        raise IndexError(f"index {idx} is out of range")
    if idx < 0:
        idx += len(container)
    return str(idx)


def _renumber(container: Module) -> None:
    """Re-key ``_modules`` as 0..n-1 in order, after a deletion left a gap."""
    container._modules = OrderedDict(zip(map(str, range(len(container._modules))), container._modules.values()))


def _without_digit_keys(keys: list[str]) -> list[str]:
    return [key for key in keys if not key.isdigit()]


def _as_parameter(value: Any) -> Any:
    """Arrays put into a parameter container become Parameters (sharing memory); other objects stay as given."""
    if isinstance(value, np.ndarray) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _parameter_line(key, value) -> str:
    if isinstance(value, np.ndarray):
        size = "x".join(str(size) for size in value.shape)
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{value.dtype} of size {size}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class Sequential(Module):
    """Calls its children in order, each on the previous one's output.

    ``Sequential(a, b)`` names them "0", "1"; ``Sequential(OrderedDict(name=module, ...))`` keeps names.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = operator.index(idx)
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        return next(islice(iterator, idx % size, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._get_item_by_idx(self._modules.keys(), idx), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._get_item_by_idx(self._modules.keys(), idx))
        _renumber(self)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {str(type(other))} is given.")
        return Sequential().extend(self).extend(other)

    def __iadd__(self, other) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {str(type(other))} is given.")
        offset = len(self)
        for i, module in enumerate(other):
            self.add_module(str(i + offset), module)
        return self

    def _check_factor(self, other) -> None:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other: int) -> Sequential:
        """The same child modules (not copies) repeated ``other`` times."""
        self._check_factor(other)
        combined = Sequential()
        for offset, module in enumerate(chain.from_iterable([self] * other)):
            combined.add_module(str(offset), module)
        return combined

    __rmul__ = __mul__

    def __imul__(self, other: int) -> Sequential:
        self._check_factor(other)
        originals = list(self)
        for offset, module in enumerate(originals * (other - 1), start=len(self)):
            self.add_module(str(offset), module)
        return self

    def __dir__(self):
        return _without_digit_keys(super().__dir__())

    def pop(self, key) -> Module:
        v = self[key]
        del self[key]
        return v

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not (-n <= index <= n):
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        for layer in sequential:
            self.append(layer)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of registered submodules; not callable itself (it has no forward)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[_abs_index(self, idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, _abs_index(self, idx), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, _abs_index(self, idx))
        _renumber(self)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def __repr__(self) -> str:
        """Runs of identical consecutive child reprs fold into one line: ``(0-2): 3 x Linear(...)``."""
        reprs = [repr(item) for item in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list[list] = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for start, end, block in runs:
            line = f"({start}): {block}" if start == end else f"({start}-{end}): {end - start + 1} x {block}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return _without_digit_keys(super().__dir__())

    def insert(self, index: int, module: Module) -> None:
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key) -> Module:
        v = self[key]
        del self[key]
        return v

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self


def _update_pairs(container: Module, pairs, what: str) -> None:
    """Insert ``(key, value)`` pairs one by one, with torch's errors for malformed elements."""
    for j, pair in enumerate(pairs):
        if not isinstance(pair, container_abcs.Iterable):
            raise TypeError(f"{what} update sequence element #{j} should be Iterable; is" + type(pair).__name__)
        if not len(pair) == 2:
            raise ValueError(f"{what} update sequence element #{j} has length {len(pair)}; 2 is required")
        container[pair[0]] = pair[1]


class ModuleDict(Module):
    """An ordered dictionary of registered submodules (keys are attribute names)."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        if not isinstance(modules, container_abcs.Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        if isinstance(modules, (OrderedDict, ModuleDict, container_abcs.Mapping)):
            for key, module in modules.items():
                self[key] = module
        else:
            _update_pairs(self, modules, "ModuleDict")


class ParameterList(Module):
    """A list of registered parameters; arrays put in become Parameters (sharing memory)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, _abs_index(self, idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, _abs_index(self, idx), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self):
        return _without_digit_keys(super().__dir__())

    def append(self, value: Any) -> ParameterList:
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, container_abcs.Iterable) or isinstance(values, np.ndarray):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_parameter_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dictionary of registered parameters; arrays put in become Parameters (sharing memory)."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key: str) -> str:
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is "
                            f"not a string (type is '{type(key).__name__}'). Open an issue on "
                            "github if you need non-string keys.")
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, self._key_to_attr(key), _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameter objects."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        for k in self._keys.copy():
            del self[k]

    def pop(self, key: str) -> Any:
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last inserted ``(key, parameter)``."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Insert from a mapping or pairs; a plain (unordered) mapping is inserted in sorted key order."""
        if not isinstance(parameters, container_abcs.Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, parameter in parameters.items():
                self[key] = parameter
        elif isinstance(parameters, container_abcs.Mapping):
            for key, parameter in sorted(parameters.items()):
                self[key] = parameter
        else:
            _update_pairs(self, parameters, "ParameterDict")

    def extra_repr(self) -> str:
        return "\n".join(_parameter_line(k, p) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        copy = self.copy()
        copy.update(other)
        return copy

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        copy = other.copy()
        copy.update(self)
        return copy

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self
