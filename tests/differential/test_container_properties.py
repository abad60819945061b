"""Hypothesis: random sequences of edits on Sequential, ModuleList and ModuleDict, replayed on both libraries.

After every edit the keys, the member types and the repr must match torch's (renumbering, negative indices, slices
with steps, index errors). Only ModuleList.insert outside 0..len is left out: torch's result there is an accident
(inserting at 5 into three modules leaves the keys 0, 1, 2, 5), not a behaviour to copy.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from .backends import backend
from .observe import observe, raises

EDIT_SETTINGS = settings(max_examples=40, deadline=None)

indices = st.integers(-6, 6)
slices = st.builds(slice, st.none() | indices, st.none() | indices, st.none() | st.sampled_from([1, 2, -1, 3]))
LIST_EDITS = st.one_of(
    st.tuples(st.just("append")), st.tuples(st.just("extend"), st.integers(0, 2)),
    st.tuples(st.just("insert"), indices), st.tuples(st.just("delete"), indices | slices),
    st.tuples(st.just("pop"), indices), st.tuples(st.just("set"), indices), st.tuples(st.just("get"), indices | slices),
)
keys = st.sampled_from(["a", "b", "c", "d"])
DICT_EDITS = st.one_of(
    st.tuples(st.just("set"), keys), st.tuples(st.just("delete"), keys), st.tuples(st.just("pop"), keys),
    st.tuples(st.just("update"), st.lists(keys, max_size=3)), st.tuples(st.just("clear")),
    st.tuples(st.just("get"), keys),
)


class Layers:
    """Distinct, recognisable layers: the n-th made is Linear(1, n), so reprs show which one went where."""

    def __init__(self, lib):
        self.lib, self.made = lib, 0

    def __call__(self):
        self.made += 1
        return self.lib.nn.Linear(1, self.made)


def apply_list_edit(container, edit, layer):
    kind, *args = edit
    if kind == "append":
        return container.append(layer()) is container
    if kind == "extend":
        return container.extend([layer() for _ in range(args[0])]) is container
    if kind == "insert":
        index = args[0]
        if type(container).__name__ == "ModuleList" and not 0 <= index <= len(container):
            return "skipped"
        return container.insert(index, layer())
    if kind == "delete":
        del container[args[0]]
    elif kind == "pop":
        return container.pop(args[0])
    elif kind == "set":
        container[args[0]] = layer()
    elif kind == "get":
        member = container[args[0]]
        return repr(member), type(member)
    return None


def apply_dict_edit(container, edit, layer):
    kind, *args = edit
    if kind == "set":
        container[args[0]] = layer()
    elif kind == "delete":
        del container[args[0]]
    elif kind == "pop":
        return container.pop(args[0])
    elif kind == "update":
        container.update([(key, layer()) for key in args[0]])
    elif kind == "clear":
        container.clear()
    elif kind == "get":
        return container[args[0]]
    return None


def replay(lib, container_name, edits):
    layer = Layers(lib)
    container = getattr(lib.nn, container_name)(*([[layer(), layer()]] if container_name == "ModuleList" else
                                                  [layer(), layer()] if container_name == "Sequential" else []))
    apply = apply_dict_edit if container_name == "ModuleDict" else apply_list_edit
    trace = []
    for edit in edits:
        outcome = []
        failure = raises(lambda: outcome.append(apply(container, edit, layer)))
        trace.append((repr(edit), failure, outcome, list(container._modules), repr(container)))
    return observe(trace, lib, oracle=lib.name == "torch")


@EDIT_SETTINGS
@given(st.sampled_from(["Sequential", "ModuleList"]), st.lists(LIST_EDITS, max_size=8))
def test_list_container_edits_match_torch(container_name, edits):
    assert replay(backend("modulecraft"), container_name, edits) == replay(backend("torch"), container_name, edits)


@EDIT_SETTINGS
@given(st.lists(DICT_EDITS, max_size=8))
def test_module_dict_edits_match_torch(edits):
    assert replay(backend("modulecraft"), "ModuleDict", edits) == replay(backend("torch"), "ModuleDict", edits)
