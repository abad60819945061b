"""Properties on random module graphs (the differential suite's generator): drawings and predictions vs torch.

A random graph has shared modules (aliases), tied parameters and every kind of buffer, built identically on torch
and modulecraft (``differential.test_properties.build``).
"""

import re

from differential.backends import backend
from differential.test_properties import CORRUPTIONS, build, corrupt, graph_specs
from hypothesis import given, settings
from hypothesis import strategies as st

from modulecraft.viz import check_state_dict, draw_tree, trace_calls
from modulecraft.viz.structure import ModuleTree

from .test_diff import torch_verdict

SETTINGS = settings(max_examples=25, deadline=None)
LIBRARIES = ["torch", "modulecraft"]


def count(source: str, kind: str) -> int:
    """How many nodes or edges of the DOT source carry the class ``kind`` (module, tree, shared-module, ...)."""
    return len(re.findall(rf'\bclass="?{kind}\b', source))


@SETTINGS
@given(graph_specs())
def test_tree_counts_follow_the_registrations(spec):
    for name in LIBRARIES:
        root = build(backend(name), spec)[0]
        source = draw_tree(root).source
        distinct = list(root.modules())
        registrations = sum(len([c for c in m._modules.values() if c is not None]) for m in distinct)
        own_parameters = sum(len([p for p in m._parameters.values() if p is not None]) for m in distinct)
        assert count(source, "module") == len(distinct)
        assert count(source, "tree") == len(distinct) - 1
        assert count(source, "shared-module") == registrations - (len(distinct) - 1)
        assert count(source, "shared-parameter") == own_parameters - len(list(root.parameters()))


@SETTINGS
@given(graph_specs())
def test_same_drawing_on_both_libraries(spec):
    torch_root, our_root = (build(backend(name), spec)[0] for name in LIBRARIES)
    assert draw_tree(torch_root, order="dfs").source == draw_tree(our_root, order="dfs").source
    tree = ModuleTree(our_root)
    assert [node.qualname for node in tree.nodes.values()] == [name for name, _ in our_root.named_modules()]


@SETTINGS
@given(graph_specs(), st.lists(st.sampled_from(CORRUPTIONS), max_size=3),
       st.lists(st.integers(0, 50), min_size=3, max_size=3))
def test_load_prediction_matches_torch(spec, corruptions, choices):
    torch_lib = backend("torch")
    torch_state = build(torch_lib, spec, seed=1)[0].state_dict()
    corrupt(torch_lib, torch_state, corruptions, choices)
    missing, unexpected, mismatched = torch_verdict(build(torch_lib, spec)[0], torch_state)
    for name in LIBRARIES:
        lib = backend(name)
        state = build(lib, spec, seed=1)[0].state_dict()
        corrupt(lib, state, corruptions, choices)
        report, _ = check_state_dict(build(lib, spec)[0], state)
        assert (report.missing_keys, report.unexpected_keys) == (missing, unexpected), name
        assert [key for key, _, _ in report.size_mismatches] == mismatched, name


@SETTINGS
@given(graph_specs())
def test_traced_calls_match_between_libraries(spec):
    traces = [trace_calls(build(backend(name), spec)[0], 0) for name in LIBRARIES]
    assert traces[0].events == traces[1].events
    starts = [event.module for event in traces[0].events if event.kind == "forward_start"]
    assert starts[0] == "" and len(starts) == len([e for e in traces[0].events if e.kind == "forward_end"])

