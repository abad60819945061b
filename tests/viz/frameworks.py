"""torch.nn and modulecraft.nn behind one small interface, so each test runs on both."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Framework:
    name: str
    nn: ModuleType
    zeros: Callable  # shape -> float32 array of that framework
    array: Callable  # numpy array -> array of that framework


def torch_framework() -> Framework:
    import torch
    return Framework("torch", torch.nn, lambda *shape: torch.zeros(*shape),
                     lambda values: torch.as_tensor(np.asarray(values, dtype=np.float32)))


def modulecraft_framework() -> Framework:
    from modulecraft import nn
    return Framework("modulecraft", nn, lambda *shape: np.zeros(shape, dtype=np.float32),
                     lambda values: np.asarray(values, dtype=np.float32))
