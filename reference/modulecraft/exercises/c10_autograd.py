"""Chapter 10's gradient checker: how a backward formula is checked without trusting any formula."""
import numpy as np


def numeric_gradient(f, x, eps=1e-6):
    """The gradient of the scalar function ``f`` at ``x`` by central differences, in float64 (a float32 step of
    1e-6 would be lost in rounding). ``x`` itself is never changed."""
    x = np.array(x, dtype=np.float64)
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        gradient[index] = (f(x + step) - f(x - step)) / (2 * eps)
    return gradient
