"""Dispatch tables from numpy's entry points to the differentiable implementations in this package.

``UFUNCS`` maps a ufunc (``np.add``...) to ``rule(inputs, raw_inputs)``; ``FUNCTIONS`` maps a numpy function
(``np.sum``...) to a function taking the same arguments as numpy's. Only consulted while a graph is
being recorded; everything else goes to numpy unchanged.
"""

UFUNCS: dict = {}
FUNCTIONS: dict = {}


def implements(*numpy_functions):
    """Register the decorated function as the differentiable version of ``numpy_functions``."""

    def register(rule):
        for function in numpy_functions:
            FUNCTIONS[function] = rule
        return rule

    return register
