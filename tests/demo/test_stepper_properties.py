"""The steppers on random module graphs (aliases, tied parameters, buffers of every kind) against torch.

The graphs and checkpoint corruptions are the differential suite's (tests/differential/test_properties.py).
"""

from hypothesis import given
from hypothesis import strategies as st

from differential.backends import backend
from differential.test_properties import CORRUPTIONS, PROPERTY_SETTINGS, build, corrupt, graph_specs

from .test_stepper_sequences import assert_dfs_steps_match, assert_load_steps_match

TORCH = backend("torch")


@PROPERTY_SETTINGS
@given(graph_specs(), st.booleans())
def test_dfs_steps_on_random_graphs(spec, remove_duplicate):
    assert_dfs_steps_match(build(TORCH, spec)[0], remove_duplicate)


@PROPERTY_SETTINGS
@given(graph_specs(), st.lists(st.sampled_from(CORRUPTIONS), max_size=3),
       st.lists(st.integers(0, 50), min_size=3, max_size=3))
def test_load_steps_on_random_graphs_and_checkpoints(spec, corruptions, choices):
    checkpoint = build(TORCH, spec, seed=1)[0].state_dict()
    corrupt(TORCH, checkpoint, corruptions, choices)
    assert_load_steps_match(build(TORCH, spec)[0], checkpoint)
