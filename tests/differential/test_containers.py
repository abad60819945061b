"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (indexing, editing, renumbering, repr)."""

from collections import OrderedDict

from .models import set_values
from .observe import differential, raises


def snapshot(container):
    """What a container shows after an edit: its keys, member types and repr."""
    return list(container._modules) or list(container._parameters), list(container), repr(container)


def _layers(lib):
    return [lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Identity(), lib.nn.Dropout()]


@differential
def test_sequential_construction_indexing_and_forward(lib):
    seq = set_values(lib, lib.nn.Sequential(*_layers(lib)))
    named = lib.nn.Sequential(OrderedDict([("fc", lib.nn.Linear(2, 2)), ("act", lib.nn.ReLU())]))
    seq.eval()
    return [
        snapshot(seq), snapshot(named), len(seq), seq[0], seq[-1], seq[-4],
        snapshot(seq[1:3]), type(seq[1:3]), snapshot(named[1:]), named.act,
        raises(lambda: seq[4], "index 4 is out of range"),
        raises(lambda: seq[-5], "index -5 is out of range"),
        seq(lib.arange(3, 2)),
    ]


@differential
def test_sequential_editing_renumbers(lib):
    seq = lib.nn.Sequential(*_layers(lib))
    trace = []

    def edit(label, change):
        trace.append((label, change(), snapshot(seq)))

    edit("append returns self", lambda: seq.append(lib.nn.Linear(2, 3)) is seq)
    edit("del first", lambda: seq.__delitem__(0))
    edit("del slice", lambda: seq.__delitem__(slice(1, 3)))
    edit("insert in front", lambda: seq.insert(0, lib.nn.ReLU()) is seq)
    edit("insert negative", lambda: seq.insert(-1, lib.nn.Identity()) is seq)
    edit("extend", lambda: seq.extend([lib.nn.Dropout(0.1), lib.nn.ReLU()]) is seq)
    edit("pop", lambda: seq.pop(1))
    edit("setitem", lambda: seq.__setitem__(-1, lib.nn.Linear(3, 1)))
    edit("insert out of range", lambda: raises(lambda: seq.insert(10, lib.nn.ReLU()), "Index out of range: 10"))
    edit("add", lambda: snapshot(seq + lib.nn.Sequential(lib.nn.ReLU())))
    return trace


@differential
def test_module_list_repr_folds_repeated_blocks(lib):
    nn = lib.nn
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()] +
                           [nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 3)])
    nested = nn.ModuleList([nn.Sequential(nn.Linear(1, 1), nn.ReLU()) for _ in range(2)])
    return repr(blocks), repr(nested), repr(nn.ModuleList()), repr(nn.Sequential())


@differential
def test_module_list_indexing_and_editing(lib):
    nn = lib.nn
    items = nn.ModuleList(_layers(lib))
    trace = [snapshot(items), items[-1], snapshot(items[1:]), type(items[1:]), len(items),
             raises(lambda: items[7], "index 7 is out of range"),
             raises(lambda: items.extend(3), "ModuleList.extend should be called with an iterable, but got int"),
             raises(lambda: items(1), 'Module [ModuleList] is missing the required "forward" function')]

    def edit(label, change):
        trace.append((label, change(), snapshot(items)))

    edit("append returns self", lambda: items.append(nn.Linear(2, 3)) is items)
    edit("insert", lambda: items.insert(1, nn.Identity()))
    edit("del negative", lambda: items.__delitem__(-1))
    edit("del slice", lambda: items.__delitem__(slice(0, 4, 2)))
    edit("setitem", lambda: items.__setitem__(0, nn.Linear(1, 1)))
    edit("pop", lambda: items.pop(0))
    edit("extend returns self", lambda: items.extend([nn.ReLU()]) is items)
    edit("in-place add", lambda: items.__iadd__([nn.Identity()]) is items)
    edit("add", lambda: snapshot(items + nn.ModuleList([nn.ReLU()])))
    return trace


@differential
def test_module_dict(lib):
    nn = lib.nn
    layers = nn.ModuleDict({"fc": nn.Linear(2, 2), "act": nn.ReLU()})
    trace = [snapshot(layers), list(layers.keys()), list(layers.values()), list(layers.items()), "fc" in layers,
             len(layers), layers["act"], raises(lambda: layers["missing"], "missing"),
             raises(lambda: layers.update(3), "ModuleDict.update should be called with an iterable"),
             raises(lambda: layers.update([3]), "ModuleDict update sequence element #0 should be Iterable"),
             raises(lambda: layers.update([("a", nn.ReLU(), 1)]),
                    "ModuleDict update sequence element #0 has length 3; 2 is required")]

    def edit(label, change):
        trace.append((label, change(), snapshot(layers)))

    edit("setitem", lambda: layers.__setitem__("drop", nn.Dropout()))
    edit("update with pairs", lambda: layers.update([("id", nn.Identity()), ("fc", nn.Linear(2, 4))]))
    edit("update with a ModuleDict", lambda: layers.update(nn.ModuleDict({"z": nn.ReLU()})))
    edit("del", lambda: layers.__delitem__("act"))
    edit("pop", lambda: layers.pop("drop"))
    edit("clear", layers.clear)
    return trace


@differential
def test_parameter_list(lib):
    params = lib.nn.ParameterList([lib.Parameter(lib.zeros(3)), lib.zeros(2, 2)])
    trace = [snapshot(params), [type(p) for p in params], list(params.named_parameters()), len(params)]

    def edit(label, change):
        trace.append((label, change(), snapshot(params)))

    edit("append a tensor makes it a Parameter", lambda: params.append(lib.ones(1)) is params)
    edit("append a float64 parameter", lambda: params.append(lib.Parameter(lib.tensor([1.0], dtype=lib.float64))))
    edit("extend", lambda: params.extend([lib.Parameter(lib.ones(4))]) is params)
    edit("setitem", lambda: params.__setitem__(0, lib.Parameter(lib.ones(5))))
    edit("negative index", lambda: params[-1])
    edit("slice", lambda: snapshot(params[1:3]))
    return trace


@differential
def test_parameter_dict(lib):
    params = lib.nn.ParameterDict({"w": lib.Parameter(lib.zeros(3)), "b": lib.zeros(1)})
    ordered = lib.nn.ParameterDict(OrderedDict([("w", lib.zeros(1)), ("b", lib.zeros(1))]))
    trace = [snapshot(params), list(ordered.keys()), list(params.keys()), [type(v) for v in params.values()],
             list(params.named_parameters()), "w" in params, len(params),
             raises(lambda: params["missing"], "missing")]

    def edit(label, change):
        trace.append((label, change(), snapshot(params)))

    edit("setitem converts a tensor", lambda: params.__setitem__("s", lib.ones(2, 2)))
    edit("update", lambda: params.update({"u": lib.Parameter(lib.ones(1))}))
    edit("pop", lambda: params.pop("w"))
    edit("get with default", lambda: params.get("nope", None))
    edit("del", lambda: params.__delitem__("b"))
    return trace


@differential
def test_container_keys_are_validated_like_attribute_names(lib):
    nn = lib.nn
    return [
        raises(lambda: nn.ModuleDict({"a.b": nn.ReLU()}), 'module name can\'t contain ".", got: a.b'),
        raises(lambda: nn.ModuleDict({"training": nn.ReLU()}), "attribute 'training' already exists"),
        raises(lambda: nn.ModuleDict({"": nn.ReLU()}), 'module name can\'t be empty string ""'),
        raises(lambda: nn.ModuleDict({"x": 3}), "is not a Module subclass"),
        raises(lambda: nn.ModuleList([nn.ReLU(), 3]), "is not a Module subclass"),
    ]


@differential
def test_parameter_list_holds_other_objects_too(lib):
    params = lib.nn.ParameterList([1, "text", lib.zeros(2)])
    return repr(params), [type(p) for p in params], [name for name, _ in params.named_parameters()]
