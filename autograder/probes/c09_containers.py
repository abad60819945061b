"""Chapter 9's tests: the containers' list and dict interfaces."""
from collections import OrderedDict

import numpy as np

from modulecraft import nn

from . import Reference, probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own containers call the learner's.
YOURS = {
    "sequential_getitem": "modulecraft.nn.modules.container:Sequential.__getitem__",
    "sequential_delitem": "modulecraft.nn.modules.container:Sequential.__delitem__",
    "sequential_append": "modulecraft.nn.modules.container:Sequential.append",
    "sequential_extend": "modulecraft.nn.modules.container:Sequential.extend",
    "sequential_add": "modulecraft.nn.modules.container:Sequential.__add__",
    "sequential_iadd": "modulecraft.nn.modules.container:Sequential.__iadd__",
    "sequential_insert": "modulecraft.nn.modules.container:Sequential.insert",
    "modulelist_repr": "modulecraft.nn.modules.container:ModuleList.__repr__",
    "parameterlist_setitem": "modulecraft.nn.modules.container:ParameterList.__setitem__",
    "parameterlist_append": "modulecraft.nn.modules.container:ParameterList.append",
    "update_from_pairs": "modulecraft.nn.modules.container:_update_pairs",
    "moduledict_update": "modulecraft.nn.modules.container:ModuleDict.update",
    "parameterdict_update": "modulecraft.nn.modules.container:ParameterDict.update",
}

# Layers to draw fixtures from: each call makes a new module object.
LAYERS = (nn.ReLU, nn.Identity, nn.Dropout, lambda: nn.Linear(2, 2), lambda: nn.Linear(1, 3))


# -- fixtures: containers whose graded methods are the learner's -----------------------------------------------
def my_sequential(yours):
    class MySequential(nn.Sequential):
        __getitem__ = yours.sequential_getitem
        __delitem__ = yours.sequential_delitem
    return MySequential


def grow_sequential(yours):
    class GrowSequential(nn.Sequential):
        append = yours.sequential_append
        extend = yours.sequential_extend
        __add__ = yours.sequential_add
        __iadd__ = yours.sequential_iadd
    return GrowSequential


def insert_sequential(yours):
    class InsertSequential(nn.Sequential):
        insert = yours.sequential_insert
    return InsertSequential


def my_module_list(yours):
    class MyModuleList(nn.ModuleList):
        __repr__ = yours.modulelist_repr
    return MyModuleList


def my_parameter_list(yours):
    class MyParameterList(nn.ParameterList):
        __setitem__ = yours.parameterlist_setitem
        append = yours.parameterlist_append
    return MyParameterList


def my_parameter_dict(yours):
    class MyParameterDict(nn.ParameterDict):
        update = yours.parameterdict_update
    return MyParameterDict


def my_module_dict(yours):
    class MyModuleDict(nn.ModuleDict):
        update = yours.moduledict_update
    return MyModuleDict


class Labelled:
    """Modules drawn under names, so that what a container holds can be told by identity, as plain data."""

    def __init__(self, draw, count):
        self.names = draw.names(count)
        self.modules = [draw.choice(LAYERS)() for _ in self.names]
        self._by_id = {id(m): name for m, name in zip(self.modules, self.names)}

    def label(self, module, name):
        """Name one more module of the fixture."""
        self._by_id[id(module)] = name
        return module

    def of(self, module):
        return self._by_id.get(id(module), "another object (a copy, or not a module of the fixture)")

    def layout(self, container):
        """The (key, module's name) pairs of `container._modules`."""
        return [(key, self.of(child)) for key, child in container._modules.items()]

    def after(self, make, action):
        """The layout of `make()` after `action(container)`."""
        container = make()
        action(container)
        return self.layout(container)


def delete(idx):
    def action(container):
        del container[idx]
    return action


# -- Exercise 1: predict, then run (graded on its form only: a constant answer cannot be graded securely) -------
@probe("c09_predict_keys_visible")
def predict_keys_visible(yours, draw, check):
    check("your prediction: keys_of_slice and keys_after_del are lists of strings",
          lambda: all(isinstance(keys, list) and all(isinstance(k, str) for k in keys)
                      for keys in (_prediction(yours, "keys_of_slice", ["?"]),
                                   _prediction(yours, "keys_after_del", ["?"]))),
          hint="see 9.2 and 9.3: assign lists such as [\"...\", \"...\"].")


@probe("c09_predict_keys_hidden")
def predict_keys_hidden(yours, draw, check):
    check("your prediction: decoder_still_an_attribute is True or False",
          lambda: isinstance(_prediction(yours, "decoder_still_an_attribute", True), bool),
          hint="see 9.3: assign True or False.")


def _prediction(yours, name, form):
    """The learner's prediction; on the reference, a value of the right form (the reference predicts nothing)."""
    return form if isinstance(yours, Reference) else getattr(yours, name)


# -- Exercise 2: indexing and deleting -------------------------------------------------------------------------
@probe("c09_sequential_indexing_visible")
def sequential_indexing_visible(yours, draw, check):
    n = draw.int(3, 5)
    fixture = Labelled(draw, n)
    made = lambda: my_sequential(yours)(*fixture.modules)  # noqa: E731
    hint = "see 9.2: a slice gives self.__class__(OrderedDict(selected (key, module) pairs)); an integer is a position."
    check(f"mine[i] for i = 0 .. {n - 1}, on MySequential of {n} modules (each named by identity)",
          lambda: [fixture.of(made()[i]) for i in range(n)], hint=hint)
    check(f"mine[i] for i = -1 .. -{n}: negative indices count from the end",
          lambda: [fixture.of(made()[-i]) for i in range(1, n + 1)], hint=hint)
    check(f"mine[{n}] on {n} modules", lambda: made()[n], hint=hint, phrase=f"index {n} is out of range")
    start = draw.int(1, n - 1)
    check(f"type and keys of mine[{start}:]", lambda: (type(made()[start:]).__name__, list(made()[start:]._modules)),
          hint="see 9.2: a slice returns a new container of the same class, keeping the old keys.")
    check(f"mine[{start}:] holds the same module objects, not copies",
          lambda: [fixture.of(m) for m in made()[start:]._modules.values()],
          hint="see 9.2: put the modules themselves in the OrderedDict; do not copy them.")
    hint = ("see 9.3: delattr the selected keys, then renumber the keys after deleting: rebuild _modules as '0', "
            "'1', ... over the remaining modules.")
    first = draw.int(0, n - 2)
    check(f"keys after del s[{first}] (and the modules they point at)", lambda: fixture.after(made, delete(first)),
          hint=hint)
    check("keys and modules left after del s[-1]", lambda: fixture.after(made, delete(-1)), hint=hint)
    stop = draw.int(2, n)
    check(f"keys and modules left after del s[0:{stop}]", lambda: fixture.after(made, delete(slice(0, stop))),
          hint=hint)


@probe("c09_sequential_indexing_hidden")
def sequential_indexing_hidden(yours, draw, check):
    n = draw.int(3, 5)
    fixture = Labelled(draw, n)
    named = lambda: my_sequential(yours)(OrderedDict(zip(fixture.names, fixture.modules)))  # noqa: E731
    hint = "see 9.2: a position among the values of _modules, even when the keys are names."
    middle = draw.int(1, n - 2)
    check(f"named[{middle}] and named[-1] on a MySequential built from an OrderedDict of names",
          lambda: (fixture.of(named()[middle]), fixture.of(named()[-1])), hint=hint)
    check(f"keys of named[{middle}:]: the keys of a slice are the old keys (here the names)",
          lambda: list(named()[middle:]._modules), hint="see 9.2: a slice keeps the old keys.")
    check("named[::-1]: its type and the modules it holds, in order",
          lambda: (lambda s: (type(s).__name__, [fixture.of(m) for m in s]))(named()[::-1]),
          hint="see 9.2: a slice is a new container of the same class holding the same modules.")
    check("named[np.int64(0)]: a numpy integer is an index (operator.index)",
          lambda: fixture.of(named()[np.int64(0)]), hint="see 9.2: turn the index into an int with operator.index.")
    for bad in (-n - 1, n):
        check(f"named[{bad}] on {n} modules must raise IndexError (the range check)", lambda bad=bad: named()[bad],
              hint="see 9.2: accept -len(self) <= idx < len(self) only.", phrase=f"index {bad} is out of range")
    check(f"named[{fixture.names[0]!r}]: a Sequential is indexed by position (operator.index raises TypeError)",
          lambda: named()[fixture.names[0]], hint="see 9.2: idx = operator.index(idx).", phrase="")
    extra = nn.Identity()

    def delete_then_add(container):
        del container[0]
        container.add_module(str(len(container)), extra)
    check(f"after del s[0] and s.add_module(str(len(s)), x) on {n} modules: (key, module) pairs",
          lambda: [(key, "x" if child is extra else fixture.of(child))
                   for key, child in (lambda s: (delete_then_add(s), s)[1])(my_sequential(yours)(*fixture.modules))
                   ._modules.items()],
          hint="see 9.3: the next key is str(len(s)), so renumber after deleting.")
    check(f"del named[{middle}] on a Sequential built from an OrderedDict removes the module at that position and "
          "renumbers", lambda: fixture.after(named, delete(middle)), hint="see 9.3: find the key by position.")
    step = draw.int(2, 3)
    check(f"del s[1::{step}] removes positions 1, {1 + step}, ..., then renumbers",
          lambda: fixture.after(lambda: my_sequential(yours)(*fixture.modules), delete(slice(1, None, step))),
          hint="see 9.3: delattr every key of list(self._modules.keys())[idx].")
    check(f"del s[{n + 1}] on {n} modules must raise IndexError (find the key by position, with its check)",
          lambda: fixture.after(lambda: my_sequential(yours)(*fixture.modules), delete(n + 1)),
          hint="see 9.3: self._get_item_by_idx(self._modules.keys(), idx) checks the range.", phrase="out of range")


# -- Exercise 3: growing ------------------------------------------------------------------------------------------
class Growth:
    """Named modules to grow containers with, and the learner's GrowSequential."""

    def __init__(self, yours, draw):
        self.yours = yours
        self.fixture = Labelled(draw, 5)
        # a child with parameters and children of its own
        self.encoder = self.fixture.label(nn.Sequential(nn.Linear(2, 3), nn.ReLU()), "encoder")
        self.a, self.b, self.c, self.d, self.e = self.fixture.modules

    def grow(self, *modules):
        return grow_sequential(self.yours)(*modules)

    def layout(self, container):
        return self.fixture.layout(container)


@probe("c09_sequential_growth_visible")
def sequential_growth_visible(yours, draw, check):
    g = Growth(yours, draw)
    a, b, c = g.a, g.b, g.c
    size = draw.int(1, 3)
    start = [g.encoder, g.d, g.e][:size]
    check(f"GrowSequential of {size} module(s) .append(a) returns the container itself",
          lambda: (lambda s: s.append(a) is s)(g.grow(*start)), hint="see 9.4: append returns self, so calls chain.")
    check(f"keys and children after GrowSequential of {size} module(s) .append(a)",
          lambda: g.layout((lambda s: (s.append(a), s)[1])(g.grow(*start))),
          hint="see 9.4: append uses the key str(len(self)), the number of children before it.")
    check("GrowSequential(encoder).extend([a, b]) returns the container itself",
          lambda: (lambda s: s.extend([a, b]) is s)(g.grow(g.encoder)), hint="see 9.4: extend returns self, like append.")
    check(f"keys and children after GrowSequential of {size} module(s) .extend([a, b, c])",
          lambda: g.layout((lambda s: (s.extend([a, b, c]), s)[1])(g.grow(*start))),
          hint="see 9.4: extend appends each module of the iterable, in order.")

    def added():
        left, right = g.grow(*start), nn.Sequential(a, b)
        return left, right, left + right
    check("left + right: (result is left, len(left), len(right)) for left = GrowSequential(...), "
          "right = Sequential(a, b)", lambda: (lambda l, r, s: (s is l, len(l), len(r)))(*added()),
          hint="see 9.4: + builds a new Sequential and leaves both operands unchanged (+= grows self).")
    check("type of left + right", lambda: type(added()[2]).__name__,
          hint="see 9.4: + builds a plain nn.Sequential(), not self.__class__() as a slice does.")
    check("keys and children of left + right", lambda: g.layout(added()[2]),
          hint="see 9.4: + appends the modules of self, then of other: the same objects (no copies), "
               "with keys that restart at '0'.")
    check("GrowSequential(encoder) + [a] must raise ValueError: add operator supports only objects of Sequential "
          "class", lambda: g.grow(g.encoder) + [a],
          hint="see 9.4: torch raises ValueError itself for an operand that is not a Sequential "
               "(returning NotImplemented would make Python raise TypeError).",
          phrase="add operator supports only objects of Sequential class")

    def grown_in_place():
        container = before = g.grow(*start)
        container += nn.Sequential(a, b)
        return container is before, g.layout(before)
    check("after block += Sequential(a, b): (block is still the same object, keys and children)", grown_in_place,
          hint="see 9.4: += adds other's modules to self itself under str(offset + i), offset = len(self) "
               "taken before the loop, and returns self: Python binds the name to what __iadd__ returns.")


@probe("c09_sequential_growth_hidden")
def sequential_growth_hidden(yours, draw, check):
    g = Growth(yours, draw)
    a, b, c = g.a, g.b, g.c
    names = draw.names(3)
    named = lambda: g.grow(OrderedDict([(names[0], g.encoder), (names[1], a)]))  # noqa: E731
    check("keys and children after named.append(b) on a GrowSequential named " + ", ".join(names[:2]),
          lambda: g.layout((lambda s: (s.append(b), s)[1])(named())),
          hint="see 9.4: append uses the key str(len(self)), not the last key plus one.")
    check("GrowSequential(a).append('relu')", lambda: g.grow(a).append("relu"),
          hint="see 9.4: register with self.add_module, which checks the type (TypeError: str is not a Module "
               "subclass).", phrase="is not a Module subclass")

    def extended():
        long = g.grow(g.encoder)
        returned = long.extend(m for m in nn.Sequential(OrderedDict([(names[2], b), ("again", g.encoder)])))
        return returned is long, g.layout(long)
    check("s.extend(a generator over a named Sequential(b, encoder)): (returns s, keys and children)", extended,
          hint="see 9.4: extend accepts any iterable, a generator too: loop over it once, append each module "
               "(the same objects, a module may appear twice), and return self.")

    head = g.fixture.label(nn.Linear(3, draw.int(1, 4)), "head")

    def summed():
        left = g.grow(OrderedDict([(names[0], g.encoder)]))
        right = nn.Sequential(OrderedDict([(names[1], head)]))
        total = left + right
        return (type(total).__name__, g.layout(total), g.layout(left), g.layout(right),
                np.asarray(total(np.ones((4, 2), dtype=np.float32))).shape)
    check("left + right on named operands (encoder, then a Linear head): (type, keys and children, left and right "
          "afterwards, output shape)",
          summed, hint="see 9.4: + of named operands is a plain nn.Sequential keyed '0', '1' holding the same "
                       "modules, self's first; it leaves both operands unchanged.")
    check("left + left: its children, and left's afterwards",
          lambda: (lambda left: (g.layout(left + left), g.layout(left)))(g.grow(g.encoder, a)),
          hint="see 9.4: + reads self and other without changing either.")
    check("left + ModuleList([a])", lambda: g.grow(g.encoder) + nn.ModuleList([a]),
          hint="see 9.4: only a Sequential can be added.", phrase="add operator supports only objects of Sequential class")

    def parent_sees_it():
        block = g.grow(g.encoder)
        model = nn.Sequential(block, c)
        block += nn.Sequential(a)
        return block is model._modules["0"], g.layout(model._modules["0"])
    check("block += Sequential(a) on a block a parent model holds: (block is the parent's child, its layout)",
          parent_sees_it, hint="see 9.4: += must return self: the model holding block must see the new layer "
                               "(Python binds block to what __iadd__ returns).")
    extra = draw.int(1, 3)
    others = [a, b, c][:extra]

    def iadd_named():
        container = named()
        container += nn.Sequential(OrderedDict((f"k{i}", m) for i, m in enumerate(others)))
        return g.layout(container)
    check(f"named += a named Sequential of {extra} module(s): keys and children", iadd_named,
          hint="see 9.4: += registers other's modules under str(offset + i), offset = len(self) taken before the loop.")

    def add_list_in_place():
        block = g.grow(g.encoder, a)
        try:
            block += [b]
        finally:
            observed_length.append(len(block))
    observed_length = []
    check("block += [b]", add_list_in_place, hint="see 9.4: += makes the same type check as +.",
          phrase="add operator supports only objects of Sequential class")
    check("len(block) after block += [b] failed (it must raise before changing block)",
          lambda: observed_length[:1], hint="see 9.4: += makes the same type check as +, before adding anything.")


# -- Exercise 4: insert -------------------------------------------------------------------------------------------
@probe("c09_sequential_insert_visible")
def sequential_insert_visible(yours, draw, check):
    n = draw.int(2, 4)
    fixture = Labelled(draw, n + 1)
    new, existing = fixture.modules[-1], fixture.modules[:-1]

    def inserted(index):
        container = insert_sequential(yours)(*existing)
        returned = container.insert(index, new)
        return fixture.layout(container), returned is container
    check(f"(keys, modules) after InsertSequential of {n} modules .insert(0, x), and whether it returned self",
          lambda: inserted(0),
          hint="see 9.4: shifting from the front copies the same module into every later key; start from the end.")
    index = -draw.int(1, n)
    check(f"(keys, modules) after .insert({index}, x) on {n} modules", lambda: inserted(index),
          hint="see 9.4: a negative index counts from the end: use index + n.")


@probe("c09_sequential_insert_hidden")
def sequential_insert_hidden(yours, draw, check):
    n = draw.int(2, 4)
    fixture = Labelled(draw, n + 1)
    new, existing = fixture.modules[-1], fixture.modules[:-1]
    for index in (n + 1, -n - 1):
        check(f"insert({index}, x) on {n} modules must raise IndexError: Index out of range",
              lambda index=index: insert_sequential(yours)(*existing).insert(index, new),
              hint="see 9.4: accept -n <= index <= n (the range check).", phrase=f"Index out of range: {index}")
    check("insert(0, 'not a module') must raise AssertionError: module should be of type",
          lambda: insert_sequential(yours)(*existing).insert(0, "not a module"),
          hint="see 9.4: check isinstance(module, nn.Module) first.", phrase="module should be of type")
    back = -draw.int(1, n)
    check(f"insert({n}, x) then insert({back}, x) on {n} modules: the modules, in order",
          lambda: fixture.layout(insert_sequential(yours)(*existing).insert(n, new).insert(back, new)),
          hint="see 9.4: insert(n, x) appends at the end; a negative index counts from the end (index + n), "
               "and insert returns self so calls chain.")


# -- Exercise 5: ModuleList.__repr__ (given as behaviour only) ------------------------------------------------
def draw_stack(draw, runs):
    """Runs of equal layers (each run a new maker), as a list of fresh modules: one run of a single layer and one of
    several among them, whatever the seed, so that both kinds of line are always seen."""
    makers = [lambda: nn.ReLU(), lambda: nn.Identity(), lambda: nn.Dropout()]
    size = draw.int(1, 4), draw.int(1, 4)
    makers.append(lambda: nn.Linear(*size))
    chosen = []
    for _ in range(runs):
        maker = draw.choice([m for m in makers if not chosen or m is not chosen[-1][0]])
        chosen.append((maker, draw.int(1, 3)))
    single, several = draw.sample(range(runs), 2)
    chosen[single], chosen[several] = (chosen[single][0], 1), (chosen[several][0], draw.int(2, 3))
    return [maker() for maker, count in chosen for _ in range(count)]


FOLD_HINT = ("see 9.5: consecutive children whose reprs are the same text take one line, '(first-last): count x "
             "repr', count = last - first + 1")


@probe("c09_modulelist_repr_visible")
def modulelist_repr_visible(yours, draw, check):
    fresh, count = draw.choice([nn.ReLU, nn.Identity, nn.Dropout]), draw.int(2, 4)
    check(f"repr of MyModuleList of {count} separately built {fresh.__name__}() layers (different objects, equal "
          "reprs)", lambda: repr(my_module_list(yours)([fresh() for _ in range(count)])),
          hint=FOLD_HINT + "; equal reprs fold whether or not the children are the same object.")
    modules = draw_stack(draw, draw.int(2, 4))
    check(f"repr of MyModuleList of {len(modules)} layers, runs of equal ones among them",
          lambda: repr(my_module_list(yours)(modules)),
          hint=FOLD_HINT + "; a child that is not repeated keeps its own line '(i): repr'.")
    check("repr of an empty MyModuleList", lambda: repr(my_module_list(yours)()),
          hint="see 9.5: an empty list prints Name().")


@probe("c09_modulelist_repr_hidden")
def modulelist_repr_hidden(yours, draw, check):
    first, second = draw.sample([nn.ReLU, nn.Identity, nn.Dropout], 2)
    apart = [first(), second(), first()] + [second() for _ in range(draw.int(0, 2))]
    check("repr of [A, B, A, ...]: only consecutive equal reprs fold",
          lambda: repr(my_module_list(yours)(apart)),
          hint="see 9.5: only consecutive equal reprs fold; equal but not consecutive children stay separate.")
    width, outputs = draw.int(1, 4), draw.sample(range(1, 6), 2)
    same_class = [nn.Linear(width, outputs[0]) for _ in range(draw.int(1, 2))] + [nn.Linear(width, outputs[1])]
    check(f"repr of {len(same_class)} consecutive Linear layers whose out_features differ "
          f"({', '.join(str(m.out_features) for m in same_class)})", lambda: repr(my_module_list(yours)(same_class)),
          hint=FOLD_HINT + "; what folds is equal repr text, not equal classes (Linear(2, 3) and Linear(2, 4) "
                           "stay apart).")
    size = draw.int(1, 4)
    block = nn.Sequential(nn.Linear(size, size), nn.ReLU())
    copies = draw.int(2, 3)
    check(f"repr of [block] * {copies} + [Identity()] with block a two-layer Sequential",
          lambda: repr(my_module_list(yours)([block] * copies + [nn.Identity()])),
          hint="see 9.5: a multi-line child needs _addindent(line, 2) so its inner lines are indented "
               "(nested indentation).")
    modules = draw_stack(draw, draw.int(2, 3))
    check(f"repr of another MyModuleList of {len(modules)} layers in runs", lambda: repr(my_module_list(yours)(modules)),
          hint=FOLD_HINT + ".")


# -- Exercise 6: parameter containers and the dicts' update ------------------------------------------------------
def parameters_layout(container, named):
    """(key, what it holds) of `container._parameters`: a name of `named` when it is that very object, else the
    type and values of a new object."""
    by_id = {id(v): k for k, v in named.items()}
    return [(key, by_id.get(id(value), (type(value).__name__, np.asarray(value).tolist())))
            for key, value in container._parameters.items()]


@probe("c09_parameter_containers_visible")
def parameter_containers_visible(yours, draw, check):
    shared = nn.Parameter(draw.array(2))
    plain = draw.array(draw.int(1, 3))
    first_shared = draw.coin()
    values = [shared, plain] if first_shared else [plain, shared]
    hint = "see 9.6: "
    check("MyParameterList of a plain array and a Parameter: keys of _parameters and what each holds",
          lambda: parameters_layout(my_parameter_list(yours)(values), {"shared": shared}),
          hint=hint + "append grows _size, then self[new_index] = value; a plain array becomes a Parameter, "
                      "registered under its index string by setattr; an existing Parameter is kept by identity.")
    check("plist[i] is plist._parameters[str(i)] for each i, and len(plist)",
          lambda: (lambda pl: ([pl[i] is pl._parameters[str(i)] for i in range(len(pl))], len(pl)))(
              my_parameter_list(yours)(values)),
          hint=hint + "a plain array becomes a Parameter, registered under its index string by setattr.")
    keys = sorted(draw.names(3), reverse=True)  # never in sorted order: sorting them shows
    check(f"keys of MyParameterDict of a plain dict with keys {keys}",
          lambda: list(my_parameter_dict(yours)({k: draw_value for k, draw_value in zip(keys, [plain, shared, plain])})
                       .keys()),
          hint=hint + "ParameterDict inserts a plain dict's keys sorted (an OrderedDict keeps its order).")
    modules = [nn.ReLU(), nn.Identity(), nn.Dropout()]
    check(f"(keys, values are the same modules) of MyModuleDict of a plain dict with keys {keys}",
          lambda: (lambda d: (list(d.keys()), [d[k] is m for k, m in zip(keys, modules)]))(
              my_module_dict(yours)(dict(zip(keys, modules)))),
          hint=hint + "ModuleDict keeps a plain dict's order: no sorting there.")


@probe("c09_parameter_containers_hidden")
def parameter_containers_hidden(yours, draw, check):
    p = nn.Parameter(draw.array(2))
    q = nn.Parameter(draw.array(1))
    raw = draw.array(3)
    named = {"p": p, "q": q, "raw": raw}

    def appended():
        pl = my_parameter_list(yours)([p])
        returned = pl.append(raw)
        return (returned is pl, len(pl), type(pl[1]).__name__, np.shares_memory(pl[1], raw),
                parameters_layout(pl, {"p": p}))
    check("MyParameterList([p]).append(raw): (returns the list, len, type of [1], shares raw's memory, "
          "_parameters)", appended,
          hint="see 9.6: append grows _size, then self[new_index] = value, and returns self; a plain array becomes "
               "a Parameter (sharing memory), registered under its index string.")
    index = draw.choice([-1, 1])
    check(f"after plist[{index}] = q on MyParameterList([p, raw]): _parameters",
          lambda: (lambda pl: (pl.__setitem__(index, q), parameters_layout(pl, named))[1])(
              my_parameter_list(yours)([p, raw])),
          hint="see 9.6: key = _abs_index(self, idx); an existing Parameter is kept by identity.")
    keys = sorted(draw.names(3), reverse=True)  # never in sorted order: sorting them shows
    triples = list(zip(keys, [p, q, raw]))
    for make, label in ((OrderedDict, "an OrderedDict"), (list, "a list of pairs")):
        check(f"MyParameterDict({label} with keys {keys}): keys, and which values are the same objects",
              lambda make=make: (lambda d: (list(d.keys()), [d[k] is v for k, v in triples]))(
                  my_parameter_dict(yours)(make(triples))),
              hint="see 9.6: order kept for ordered inputs (only a plain dict is sorted); an existing Parameter is "
                   "kept by identity.")
    modules = [nn.ReLU(), nn.Identity(), nn.Dropout()]
    check(f"MyModuleDict(a list of pairs with keys {keys}): keys, and which values are the same modules",
          lambda: (lambda d: (list(d.keys()), [d[k] is m for k, m in zip(keys, modules)]))(
              my_module_dict(yours)(list(zip(keys, modules)))),
          hint="see 9.6: pairs are inserted in order, as the same module objects.")
    j = draw.int(0, 2)
    good = [(k, m) for k, m in zip(keys, modules)][:j]
    for maker, name in ((my_module_dict, "ModuleDict"), (my_parameter_dict, "ParameterDict")):
        good_values = good if name == "ModuleDict" else [(k, p) for k, _ in good]
        check(f"{name} from pairs whose element #{j} is ('a',)",
              lambda maker=maker, good_values=good_values: maker(yours)(good_values + [("a",)]),
              hint=f"see 9.6: '{name} update sequence element #{j} has length 1; 2 is required' (a ValueError).",
              phrase=f"{name} update sequence element #{j} has length 1; 2 is required")
        check(f"{name} from pairs whose element #{j} is 1",
              lambda maker=maker, good_values=good_values: maker(yours)(good_values + [1]),
              hint=f"see 9.6: '{name} update sequence element #{j} should be Iterable' (a TypeError).",
              phrase=f"{name} update sequence element #{j} should be Iterable")
        check(f"{name}(1)", lambda maker=maker: maker(yours)(1),
              hint="see 9.6: a non-iterable argument is a TypeError.",
              phrase="update should be called with an iterable of key/value pairs, but got int")
