"""Weight initialisation with numpy's random generator (the parts of ``torch.nn.init`` our layers use).

All randomness comes from one module-level ``numpy.random.Generator``; ``manual_seed`` reseeds it so runs
repeat. The numbers differ from torch's (different generators); the distributions are the same.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["generator", "manual_seed", "uniform_", "zeros_", "ones_", "kaiming_uniform_"]

_generator = np.random.default_rng()


def generator() -> np.random.Generator:
    """The generator all of modulecraft's randomness (initialisers, Dropout) draws from."""
    return _generator


def manual_seed(seed: int) -> None:
    """Reseed the generator every initialiser draws from."""
    global _generator
    _generator = np.random.default_rng(seed)


def uniform_(array: np.ndarray, a: float = 0.0, b: float = 1.0) -> np.ndarray:
    """Fill ``array`` in place with values drawn from U(a, b)."""
    array[...] = _generator.uniform(a, b, size=array.shape)
    return array


def zeros_(array: np.ndarray) -> np.ndarray:
    array[...] = 0
    return array


def ones_(array: np.ndarray) -> np.ndarray:
    array[...] = 1
    return array


def _fan_in(array: np.ndarray) -> int:
    if array.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    return array.shape[1] * int(np.prod(array.shape[2:], dtype=np.int64))


def kaiming_uniform_(array: np.ndarray, a: float = 0.0) -> np.ndarray:
    """He-uniform init for a leaky-ReLU slope ``a`` (fan_in mode), as torch's default for Linear weights."""
    if array.size == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return array
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = math.sqrt(3.0) * gain / math.sqrt(_fan_in(array))
    return uniform_(array, -bound, bound)
