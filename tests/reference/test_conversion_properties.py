"""Property: a dtype conversion rebuilds parameters (numpy must) but keeps exactly the same sharing."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from modulecraft import nn


@st.composite
def tied_trees(draw):
    """A random tree of Linear-holding modules, some of which reuse another's weight or a whole submodule."""
    size = draw(st.integers(1, 7))
    parents = [draw(st.integers(0, child - 1)) for child in range(1, size)]
    ties = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=3))
    aliases = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=2))
    modules = [nn.Linear(2, 2) for _ in range(size)]
    for child, parent in enumerate(parents, start=1):
        modules[parent].add_module(f"c{child}", modules[child])
    for source, target in ties:
        modules[target].weight = modules[source].weight
    for holder, held in aliases:
        if holder < held:  # only downward, so the graph stays acyclic
            modules[holder].add_module(f"alias{held}", modules[held])
    return modules[0]


def slots(root):
    """Every (module path, parameter name) slot with the identity group it belongs to."""
    groups, result = {}, []
    for path, module in root.named_modules(remove_duplicate=False):
        for name, param in module._parameters.items():
            result.append((path, name, groups.setdefault(id(param), len(groups))))
    return result


@settings(max_examples=60, deadline=None)
@given(tied_trees(), st.sampled_from([np.float64, np.float16]))
def test_conversion_keeps_the_sharing_pattern_and_the_values(root, dtype):
    before = slots(root)
    values = {name: np.array(p, dtype=np.float64) for name, p in root.named_parameters(remove_duplicate=False)}
    root.to(dtype)
    assert slots(root) == before
    for name, param in root.named_parameters(remove_duplicate=False):
        assert type(param) is nn.Parameter and param.dtype == dtype
        assert np.allclose(param.astype(np.float64), values[name], atol=1e-2)
