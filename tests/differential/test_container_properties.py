"""Hypothesis: random sequences of edits on the five containers, replayed on both libraries.

After every edit the keys, the member types and the repr must match torch's (renumbering, negative indices, slices
with steps, index errors, ParameterDict's sorting of plain dicts, tensors turned into Parameters). Only ModuleList.insert outside 0..len is left out: torch's result there is an accident
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


class Values:
    """Distinct values of a kind: the n-th made has size (or value) n, so reprs show which one went where."""

    def __init__(self, lib):
        self.lib, self.made = lib, 0

    def __call__(self, kind):
        self.made += 1
        return {"Linear": lambda n: self.lib.nn.Linear(1, n), "tensor": lambda n: self.lib.ones(n),
                "Parameter": lambda n: self.lib.Parameter(self.lib.zeros(n)), "int": lambda n: n,
                "str": lambda n: f"s{n}"}[kind](self.made)


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
    value = Values(lib)

    def layer():
        return value("Linear")

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


values = st.sampled_from(["tensor", "Parameter", "int", "str"])
PARAMETER_DICT_EDITS = st.one_of(
    st.tuples(st.just("set"), keys, values), st.tuples(st.just("delete"), keys), st.tuples(st.just("pop"), keys),
    st.tuples(st.just("popitem")), st.tuples(st.just("setdefault"), keys, values),
    st.tuples(st.just("update pairs"), st.lists(st.tuples(keys, values), max_size=3)),
    st.tuples(st.just("update dict"), st.dictionaries(keys, values, max_size=3)),
    st.tuples(st.just("or"), st.dictionaries(keys, values, max_size=2)),
    st.tuples(st.just("fromkeys"), st.lists(keys, max_size=3)), st.tuples(st.just("copy")),
    st.tuples(st.just("reversed")), st.tuples(st.just("clear")), st.tuples(st.just("get"), keys),
)
PARAMETER_LIST_EDITS = st.one_of(
    st.tuples(st.just("append"), values), st.tuples(st.just("extend"), st.lists(values, max_size=2)),
    st.tuples(st.just("iadd"), st.lists(values, max_size=2)), st.tuples(st.just("set"), indices, values),
    st.tuples(st.just("get"), indices | slices),
)


def parameter_container_state(container):
    return (list(container.keys()) if hasattr(container, "keys") else len(container), repr(container),
            [name for name, _ in container.named_parameters()], [type(v) for v in
                                                                  (container.values() if hasattr(container, "keys")
                                                                   else container)])


def apply_parameter_dict_edit(container, edit, value):
    kind, *args = edit
    if kind == "set":
        container[args[0]] = value(args[1])
    elif kind == "delete":
        del container[args[0]]
    elif kind in ("pop", "get"):
        return getattr(container, kind)(args[0])
    elif kind == "popitem":
        return container.popitem()
    elif kind == "setdefault":
        return container.setdefault(args[0], value(args[1]))
    elif kind == "update pairs":
        container.update([(key, value(v)) for key, v in args[0]])
    elif kind == "update dict":
        container.update({key: value(v) for key, v in args[0].items()})
    elif kind == "or":
        return parameter_container_state(container | {key: value(v) for key, v in args[0].items()})
    elif kind == "fromkeys":
        return parameter_container_state(container.fromkeys(args[0]))
    elif kind == "copy":
        return parameter_container_state(container.copy())
    elif kind == "reversed":
        return list(reversed(container))
    elif kind == "clear":
        container.clear()
    return None


def apply_parameter_list_edit(container, edit, value):
    kind, *args = edit
    if kind == "append":
        return container.append(value(args[0])) is container
    if kind == "extend":
        return container.extend([value(v) for v in args[0]]) is container
    if kind == "iadd":
        container += [value(v) for v in args[0]]
    elif kind == "set":
        container[args[0]] = value(args[1])
    elif kind == "get":
        member = container[args[0]]
        return parameter_container_state(member) if isinstance(args[0], slice) else member
    return None


def replay_parameters(lib, container_name, edits):
    value = Values(lib)
    container = getattr(lib.nn, container_name)()
    apply = apply_parameter_dict_edit if container_name == "ParameterDict" else apply_parameter_list_edit
    trace = []
    for edit in edits:
        outcome = []
        failure = raises(lambda: outcome.append(apply(container, edit, value)))
        trace.append((repr(edit), failure, outcome, parameter_container_state(container)))
    return observe(trace, lib, oracle=lib.name == "torch")


@EDIT_SETTINGS
@given(st.lists(PARAMETER_DICT_EDITS, max_size=8))
def test_parameter_dict_edits_match_torch(edits):
    assert replay_parameters(backend("modulecraft"), "ParameterDict", edits) == \
        replay_parameters(backend("torch"), "ParameterDict", edits)


@EDIT_SETTINGS
@given(st.lists(PARAMETER_LIST_EDITS, max_size=8))
def test_parameter_list_edits_match_torch(edits):
    assert replay_parameters(backend("modulecraft"), "ParameterList", edits) == \
        replay_parameters(backend("torch"), "ParameterList", edits)
