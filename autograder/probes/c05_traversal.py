"""Chapter 5's tests: walking the module tree."""
import types

import numpy as np

from modulecraft import nn

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "named_modules": "modulecraft.nn.modules.module:Module.named_modules",
    "_named_members": "modulecraft.nn.modules.module:Module._named_members",
    "named_children": "modulecraft.nn.modules.module:Module.named_children",
    "get_submodule": "modulecraft.nn.modules.module:Module.get_submodule",
    "predicted_apply_order": "modulecraft.exercises.c05_traversal:predicted_apply_order",
    "train": "modulecraft.nn.modules.module:Module.train",
    "eval": "modulecraft.nn.modules.module:Module.eval",
    "apply": "modulecraft.nn.modules.module:Module.apply",
    "_apply": "modulecraft.nn.modules.module:Module._apply",
}

# While grading, the reference's walks call the learner's: named_parameters goes through the learner's
# named_modules, and children() (behind train, apply, _apply and the prediction) through their named_children.
BUILDS_ON = {
    "c05_named_members": ["c05_named_modules"],
    "c05_predict_apply": ["c05_children_and_get_submodule"],
    "c05_modes_and_apply": ["c05_children_and_get_submodule"],
    "c05_apply_fn": ["c05_children_and_get_submodule"],
}


def names(pairs):
    return [name for name, _ in pairs]


# -- fixtures: modules whose mechanism under test is the learner's ----------------------------------------------
def node_class(yours):
    """A module whose walk is the learner's; its children are given as keyword arguments."""
    class Node(nn.Module):
        named_modules = yours.named_modules

        def __init__(self, **children):
            super().__init__()
            for name, child in children.items():
                setattr(self, name, child)
    return Node


def walker_class(yours):
    """A container whose member walks (named_parameters, named_buffers) go through the learner's _named_members."""
    class Walker(nn.Module):
        _named_members = yours._named_members

        def __init__(self, *layers):
            super().__init__()
            for index, layer in enumerate(layers):
                self.add_module(str(index), layer)
    return Walker


def nav_class(yours):
    """A module whose named_children and get_submodule are the learner's."""
    class Nav(nn.Module):
        named_children = yours.named_children
        get_submodule = yours.get_submodule

        def __init__(self, **children):
            super().__init__()
            for name, child in children.items():
                setattr(self, name, child)
    return Nav


def switch_class(yours):
    """A labelled module whose train, eval and apply are the learner's; children given in order."""
    class Switch(nn.Module):
        train, eval, apply = yours.train, yours.eval, yours.apply

        def __init__(self, label="", *children):
            super().__init__()
            self.label = label
            for index, child in enumerate(children):
                self.add_module(str(index), child)
    return Switch


def convertible_class(yours):
    """A module with a float weight, a float buffer, an integer buffer and children; its _apply is the learner's."""
    class Convertible(nn.Module):
        _apply = yours._apply

        def __init__(self, *children):
            super().__init__()
            self.weight = nn.Parameter(np.ones(2, dtype=np.float32))
            self.register_buffer("mean", np.zeros(2, dtype=np.float32))
            self.register_buffer("count", np.zeros((), dtype=np.int64))
            for index, child in enumerate(children):
                self.add_module(str(index), child)
    return Convertible


class Visitor(nn.Module):
    """A labelled module built from the reference only (the prediction's trees)."""

    def __init__(self, label, *children):
        super().__init__()
        self.label = label
        for index, child in enumerate(children):
            self.add_module(str(index), child)


def labels_visited(root):
    seen = []
    root.apply(lambda module: seen.append(module.label))
    return seen


def is_generator(value):
    return isinstance(value, types.GeneratorType)


# -- exercise 1: named_modules ----------------------------------------------------------------------------------
@probe("c05_named_modules_visible")
def named_modules_visible(yours, draw, check):
    Node = node_class(yours)
    a, x, y, b, z = draw.names(5)
    hint = "see 5.2: yield the module first, then each child's whole walk, joining names with dots."
    check("pre-order names of a small tree of Nodes",
          lambda: names(Node(**{a: Node(**{x: Node(), y: Node()}), b: Node()}).named_modules()), hint=hint)
    check("the first pair is the root itself",
          lambda: (lambda root: next(iter(root.named_modules()))[1] is root)(Node(**{a: Node()})),
          hint="see 5.2: the root is yielded first, under the name `prefix`.")
    leaf = Node()
    tree = Node(**{a: Node(**{x: Node(), y: leaf}), b: Node(**{z: leaf})})
    check("a shared leaf is listed once, under the first name the walk meets", lambda: names(tree.named_modules()),
          hint="see 'Shared modules and the memo': remember what you yielded in `memo` and skip it later.")
    check("remove_duplicate=False lists the shared leaf twice",
          lambda: names(tree.named_modules(remove_duplicate=False)),
          hint="see 'Shared modules and the memo': add to the memo only when remove_duplicate is true, and pass it on.")


@probe("c05_named_modules_hidden")
def named_modules_hidden(yours, draw, check):
    Node = node_class(yours)
    p, hole, q = draw.names(3)
    gap = Node(**{p: Node()})
    gap.add_module(hole, None)
    gap.add_module(q, Node())
    check("A child registered as None must be skipped.", lambda: names(gap.named_modules()),
          hint="see 5.2, step 3: skip None children.")
    prefix, a, b = draw.names(3)
    check("The root is named `prefix` and the children's names start with `prefix.`.",
          lambda: names(Node(**{a: Node(**{b: Node()})}).named_modules(prefix=prefix)),
          hint="see 5.2: the root's name is `prefix`; a child's is `prefix + '.' + name` below the root.")
    c, first, second, again = draw.names(4)
    inner = Node(**{c: Node()})
    outer = Node(**{first: inner, second: Node(**{again: inner})})
    check("A shared subtree must be skipped as a whole when the walk meets it again.",
          lambda: names(outer.named_modules()),
          hint="see 'Shared modules and the memo': a module in the memo yields nothing, not even its children.")
    check("With remove_duplicate=False every path is listed.",
          lambda: names(outer.named_modules(remove_duplicate=False)),
          hint="see 'Shared modules and the memo': pass remove_duplicate on to the children's walks.")
    kept, dropped = draw.names(2)
    excluded = Node()
    root = Node(**{dropped: excluded, kept: Node()} if draw.coin() else {kept: Node(), dropped: excluded})
    check("Modules already in a memo passed by the caller must be skipped.",
          lambda: names(root.named_modules(memo={excluded})),
          hint="see 'Shared modules and the memo': use the caller's memo when one is given.")
    child, back = draw.names(2)
    loop = Node(**{child: Node()})
    loop._modules[child].add_module(back, loop)
    check("The memo must also stop a walk that comes back to an ancestor.", lambda: names(loop.named_modules()),
          hint="see 'Shared modules and the memo': the root goes into the memo before its children are walked.")
    body, lin, head, scale = draw.names(4)
    linear = nn.Linear(2, 2)
    mixed = Node(**{body: Node(**{lin: linear}), head: linear})
    setattr(mixed, scale, nn.Parameter(np.ones(1, dtype=np.float32)))
    check("Yield the modules themselves; a Linear shared by two parents comes once, under its first path.",
          lambda: (lambda pairs: [names(pairs), [module is linear for _, module in pairs],
                                  pairs[0][1] is mixed])(list(mixed.named_modules())),
          hint="see 5.2: yield (name, module) with the module object itself.")
    check("named_modules must be a generator (use yield).", lambda: is_generator(Node().named_modules()),
          hint="see Exercise 1: write it as a generator.")


# -- exercise 2: _named_members ---------------------------------------------------------------------------------
def tied_walker(Walker, draw_bias):
    walker = Walker(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 3, bias=draw_bias))
    walker._modules["2"].weight = walker._modules["0"].weight
    return walker


@probe("c05_named_members_visible")
def named_members_visible(yours, draw, check):
    Walker = walker_class(yours)
    bias = draw.coin()
    prefix = draw.name() if draw.coin() else ""
    hint = "see 5.3: walk named_modules, ask get_members_fn at each module, skip None and values already yielded."
    check("named_parameters of Walker(Linear, BatchNorm1d, Linear) with a tied weight",
          lambda: names(tied_walker(Walker, bias).named_parameters(prefix=prefix)), hint=hint)
    check("named_parameters(remove_duplicate=False) lists the tied weight under both names",
          lambda: names(tied_walker(Walker, bias).named_parameters(prefix=prefix, remove_duplicate=False)),
          hint="see 5.3: only remember values in the memo when remove_duplicate is true.")
    check("named_buffers goes through the same walk",
          lambda: names(tied_walker(Walker, bias).named_buffers(prefix=prefix)), hint=hint)


@probe("c05_named_members_hidden")
def named_members_hidden(yours, draw, check):
    Walker = walker_class(yours)
    inner = [nn.Linear(2, 2), nn.BatchNorm1d(2)][::1 if draw.coin() else -1]
    deep = Walker(Walker(*inner))
    check("named_parameters must reach every depth: walk named_modules(prefix=...), not only the direct children.",
          lambda: names(deep.named_parameters()),
          hint="see 5.3: walk every module of named_modules, not only the direct children.")
    scale, prefix = draw.names(2)
    own = Walker(nn.Linear(2, 2))
    setattr(own, scale, nn.Parameter(np.ones(2, dtype=np.float32)))
    check("recurse=False must list only the module's own members.",
          lambda: names(own.named_parameters(recurse=False)),
          hint="see 5.3: with recurse=False, the modules are only [(prefix, self)].")
    check("Names must start with the prefix, then the qualified module name.",
          lambda: names(own.named_parameters(prefix=prefix)),
          hint="see 5.3: pass prefix on to named_modules.")
    shared_layer = nn.Linear(2, 2)
    twice = Walker(*[shared_layer] * draw.int(2, 3))
    check("A shared layer's parameters are listed once.", lambda: names(twice.named_parameters()),
          hint="see 5.3: a value already yielded is skipped.")
    check("remove_duplicate=False must reach the shared layer twice and list its parameters twice.",
          lambda: names(twice.named_parameters(remove_duplicate=False)),
          hint="see 5.3: pass remove_duplicate on to named_modules, and only then remember values.")
    empty = draw.name()
    holes = Walker(nn.Linear(2, 2, bias=False))
    holes.register_buffer(empty, None)
    holes.register_buffer(draw.name(), np.zeros(1))
    check("Members registered as None must be skipped.",
          lambda: [names(holes.named_parameters()), names(holes.named_buffers())],
          hint="see 5.3: skip None values.")
    walker = tied_walker(Walker, draw.coin())
    originals = [walker._modules["0"]._parameters["weight"], walker._modules["0"]._parameters["bias"]]
    check("Yield the members themselves, not copies.",
          lambda: [any(value is original for original in originals)
                   for _, value in walker.named_parameters()][:2],
          hint="see 5.3: yield the value get_members_fn gave.")


# -- exercise 3: named_children and get_submodule ---------------------------------------------------------------
def nav_model(Nav, draw_names):
    first, gap, second, head, scale, linear = draw_names
    shared = Nav(**{linear: nn.Linear(2, 2)})
    model = Nav(**{first: shared})
    model.add_module(gap, None)
    setattr(model, second, shared)
    setattr(model, head, nn.Linear(2, 1))
    setattr(model, scale, nn.Parameter(np.ones(1, dtype=np.float32)))
    return model


@probe("c05_children_and_get_submodule_visible")
def children_visible(yours, draw, check):
    Nav = nav_class(yours)
    drawn = draw.names(6)
    first, gap, second, head, scale, linear = drawn
    missing = draw.name()
    check("named_children of Nav(first=shared, gap=None, second=shared, head=Linear)",
          lambda: names(nav_model(Nav, drawn).named_children()),
          hint="see 5.4: skip None, and skip a child already yielded (a memo set of modules).")
    model = nav_model(Nav, drawn)
    check(f"get_submodule('{first}.{linear}') returns that very Linear object",
          lambda: model.get_submodule(f"{first}.{linear}") is model._modules[first]._modules[linear],
          hint="see 5.4: follow the dotted path one getattr at a time and return the module you reach.")
    check(f"get_submodule('{first}.{missing}'): a missing step names the module where it failed",
          lambda: nav_model(Nav, drawn).get_submodule(f"{first}.{missing}"),
          hint="see 5.4: name the module where the step failed, with _get_name().",
          phrase=f"Nav has no attribute `{missing}`")
    check(f"get_submodule('{scale}'): a parameter is not a module",
          lambda: nav_model(Nav, drawn).get_submodule(scale),
          hint="see 5.4: after getattr, check isinstance(..., nn.Module).", phrase=f"`{scale}` is not an nn.Module")


@probe("c05_children_and_get_submodule_hidden")
def children_hidden(yours, draw, check):
    Nav = nav_class(yours)
    drawn = draw.names(6)
    first, gap, second, head, scale, linear = drawn
    model = nav_model(Nav, drawn)
    check("named_children must be a generator (use yield).", lambda: is_generator(model.named_children()),
          hint="see Exercise 3: write named_children as a generator.")
    check("named_children must yield the child modules themselves.",
          lambda: [child is model._modules[name] for name, child in model.named_children()],
          hint="see 5.4: yield (name, child) with the child object itself.")
    check("the children of a module without children", lambda: names(Nav().named_children()),
          hint="see 5.4: a module without children yields nothing.")
    a, b = draw.names(2)
    twice = Nav(**{a: nn.ReLU()})
    twice.add_module(b, twice._modules[a])
    twice.add_module(draw.name(), nn.Dropout())
    check("children() goes through named_children: a child registered twice must come once.",
          lambda: len(list(twice.children())), hint="see 5.4: keep a memo set of the children yielded.")
    check("get_submodule('') returns the module itself.", lambda: model.get_submodule("") is model,
          hint="see 5.4: '' is the module itself.")
    alias, inner = draw.names(2)

    class Aliased(Nav):
        pass
    setattr(Aliased, alias, property(lambda self: self._modules[first]))
    aliased = Aliased(**{first: Nav(**{inner: nn.Linear(1, 1)})})
    check(f"get_submodule('{alias}.{inner}') through a property",
          lambda: aliased.get_submodule(f"{alias}.{inner}") is aliased._modules[first]._modules[inner],
          hint="see 5.4: each step is a getattr (not a _modules lookup): a property that returns a module counts.")
    missing = draw.name()
    for path, hint in [(f"{head}.weight", "see 5.4: a parameter is not an nn.Module."),
                       (f"{head}.{missing}", "see 5.4: name the module where the step failed, with _get_name()."),
                       (f"{first}.{linear}.in_features", "see 5.4: a number is not an nn.Module.")]:
        check(f"get_submodule('{path}') raises AttributeError",
              lambda path=path: model.get_submodule(path), hint=hint)


# -- exercise 4: predict apply's order --------------------------------------------------------------------------
def visitor_tree(draw):
    """A small tree of Visitors with one module under two parents, its shape and labels drawn."""
    labels = iter(draw.names(8))
    shared = Visitor(next(labels), *[Visitor(next(labels)) for _ in range(draw.int(0, 1))])
    left = [Visitor(next(labels)) for _ in range(draw.int(0, 2))]
    left.insert(draw.int(0, len(left)), shared)
    right = [shared] + [Visitor(next(labels)) for _ in range(draw.int(0, 1))]
    branches = [Visitor(next(labels), *left), Visitor(next(labels), *draw.shuffled(right))]
    return Visitor(next(labels), *draw.shuffled(branches))


@probe("c05_predict_apply_visible")
def predict_apply_visible(yours, draw, check):
    """Its form only (0 points): run here, an order would tell the answer before the text does."""
    tree = visitor_tree(draw)
    labels = {module.label for module in tree.modules()}

    def form():
        predicted = yours.predicted_apply_order(tree)
        return isinstance(predicted, list) and all(label in labels for label in predicted)
    check("your predicted_apply_order(tree) returns a list of labels of the tree's modules (its form only: the "
          "order itself is graded when you submit)", form,
          hint="return a list of module.label strings, one per call of fn you predict, reading label and "
               "children() of each module (never calling apply).")


@probe("c05_predict_apply_hidden")
def predict_apply_hidden(yours, draw, check):
    trees = [visitor_tree(draw) for _ in range(3)]
    for tree in trees:
        check("the order in which tree.apply(fn) calls fn, on a tree you have not seen",
              lambda tree=tree: list(yours.predicted_apply_order(tree)),
              hint="read apply's four lines again: children first (post-order), and no memo shared across the tree "
                   "(named_modules' memo skips `shared` the second time; apply does not).")


# -- exercise 5: train, eval and apply --------------------------------------------------------------------------
def switch_tree(Switch, draw_layout):
    """A Switch tree with a Linear, a Dropout, a BatchNorm1d and one module whose train() refuses training mode,
    and the list of its modules (pre-order, as built: the probe reads their flags without walking the tree)."""
    class AlwaysEval(Switch):
        def train(self, mode=True):
            return Switch.train(self, False)
    frozen_at, plain = draw_layout
    layers = [nn.BatchNorm1d(2)] + [Switch(f"s{i}") for i in range(plain)]
    layers.insert(frozen_at % (len(layers) + 1), AlwaysEval("frozen"))
    linear, dropout = nn.Linear(2, 2), nn.Dropout()
    body = Switch("body", linear, dropout)
    root = Switch("root", body, *layers)
    return root, [root, body, linear, dropout, *layers]


def flags(pair):
    return [module.training for module in pair[1]]


def after(pair, action):
    """`action(root)`, then the flags of the tree."""
    action(pair[0])
    return flags(pair)


@probe("c05_modes_and_apply_visible")
def modes_visible(yours, draw, check):
    Switch = switch_class(yours)
    layout = (draw.int(0, 3), draw.int(0, 2))
    check("eval() returns the module itself", lambda: (lambda m: m.eval() is m)(switch_tree(Switch, layout)[0]),
          hint="see 5.5: eval() is `return self.train(False)`.")
    check("after eval(), every module in the tree has training == False",
          lambda: after(switch_tree(Switch, layout), lambda root: root.eval()),
          hint="see 5.5: eval() must switch the whole tree: `return self.train(False)`.")
    check("after train(), every module has training == True except the one whose train() refuses",
          lambda: after(switch_tree(Switch, layout), lambda root: (root.eval(), root.train())),
          hint="see 5.5: switch each child with child.train(mode), so that a child's own train() runs.")
    word = draw.choice(["yes", "no", "on"])
    check(f"train('{word}') is refused", lambda: Switch().train(word),
          hint="see 5.5: check isinstance(mode, bool) first.", phrase="training mode is expected to be boolean")
    a, a0, a1, b = draw.names(4)
    tree = Switch("root", Switch(a, Switch(a0), Switch(a1)), Switch(b))
    check("apply visits the children before their parent (post-order)", lambda: labels_visited(tree),
          hint="see 5.6: call child.apply(fn) for every child first, then fn(self).")
    check("apply returns the module itself", lambda: tree.apply(lambda module: None) is tree,
          hint="see 5.6: apply returns self.")


@probe("c05_modes_and_apply_hidden")
def modes_hidden(yours, draw, check):
    Switch = switch_class(yours)
    layout = (draw.int(0, 3), draw.int(0, 2))
    pair = switch_tree(Switch, layout)
    model = pair[0]
    check("train(True) must return self.", lambda: model.train(True) is model, hint="see 5.5: return self.")
    for bad in (1, 0, None):
        check(f"train({bad!r}) must raise ValueError: only a bool is accepted.", lambda bad=bad: model.train(bad),
              hint="see 5.5: check isinstance(mode, bool) first.", phrase="training mode is expected to be boolean")
    check("A refused train() call must not change any mode.", lambda: flags(pair),
          hint="see 5.5: check the mode before you set anything.")
    calls = []

    class Counting(Switch):
        def train(self, mode=True):
            calls.append(mode)
            return Switch.train(self, mode)
    children = draw.int(1, 3)
    check("eval() must go through train(False), so that each child's own train() runs.",
          lambda: (Switch("root", *[Counting(f"c{i}") for i in range(children)]).eval(), calls)[1],
          hint="see 5.5: eval() is `return self.train(False)`, and train calls child.train(mode).")
    s, left, right, root = draw.names(4)
    shared = Switch(s)
    both = Switch(root, Switch(left, shared), Switch(right, shared))
    check("apply has no memo: a module shared by two parents is visited once under each of them.",
          lambda: labels_visited(both), hint="see 5.6: apply walks children() at each module, without a memo.")
    depth_labels = draw.names(draw.int(3, 5))
    deep = Switch(depth_labels[-1])
    for label in reversed(depth_labels[:-1]):
        deep = Switch(label, deep)
    check("apply must recurse to every depth.", lambda: labels_visited(deep),
          hint="see 5.6: each child's apply calls its own children's apply.")
    only = draw.name()
    check("A module without children must still be visited.", lambda: labels_visited(Switch(only)),
          hint="see 5.6: fn(self) is called after the (possibly empty) loop over the children.")


# -- exercise 6: _apply -----------------------------------------------------------------------------------------
def convertible_tree(Convertible, shape):
    """A tree of Convertibles (`shape`: a nested list, one list per child) and its modules by qualified name, as
    built (the probe reads their arrays without walking the tree)."""
    modules = {}

    def build(spec, prefix):
        module = Convertible(*[build(child, f"{prefix}{index}.") for index, child in enumerate(spec)])
        modules[prefix] = module
        return module
    return build(shape, ""), modules


def arrays(modules):
    """[(label, array)] of every parameter and buffer of `modules`, read from their containers."""
    return [(prefix + key, value) for prefix, module in modules.items()
            for container in ("_parameters", "_buffers") for key, value in vars(module)[container].items()]


def state_dtypes(modules):
    return {label: None if value is None else str(value.dtype) for label, value in sorted(arrays(modules))}


def tree_shape(draw):
    return [[] for _ in range(draw.int(0, 1))] + [[[]] for _ in range(draw.int(1, 2))]


@probe("c05_apply_fn_visible")
def apply_fn_visible(yours, draw, check):
    Convertible = convertible_class(yours)
    shape = tree_shape(draw)

    def order_of_apply():
        tree, modules = convertible_tree(Convertible, shape)
        labels = {id(value): label for label, value in arrays(modules)}
        order = []
        tree._apply(lambda array: order.append(labels.get(id(array), "?")) or array)
        return order
    check("the order in which _apply calls fn on a tree of Convertibles", order_of_apply,
          hint="see 5.7 and the exercise's steps: children first, then own parameters, then own buffers.")
    check("dtypes after double() of a tree of Convertibles (the integer buffers keep their dtype)",
          lambda: (lambda tree, modules: (tree.double(), state_dtypes(modules))[1])(
              *convertible_tree(Convertible, shape)),
          hint="see 5.7: convert parameters and buffers, in this module and (recursively) in its children.")
    conversion = draw.choice(["double", "half"])

    def converted_parameter():
        module = Convertible()
        module.weight.requires_grad_(False)
        getattr(module, conversion)()
        return type(module.weight).__name__, module.weight.requires_grad, type(module._parameters["weight"]).__name__
    check(f"a frozen weight after {conversion}(): (its type, requires_grad, type in _parameters)",
          converted_parameter, hint="see the exercise, step 2: store nn.Parameter(applied, param.requires_grad).")


@probe("c05_apply_fn_hidden")
def apply_fn_hidden(yours, draw, check):
    Convertible = convertible_class(yours)
    module = Convertible()
    weight, count = module.weight, module.count
    check("_apply must return self.", lambda: module._apply(lambda array: array) is module,
          hint="see the exercise, step 4: return self.")
    check("When fn returns the array it was given, the module must keep that very object.",
          lambda: [module.weight is weight, module.count is count],
          hint="see the exercise, step 2: if applied is param, leave the entry alone.")
    dtype = draw.choice([np.float64, np.float16])
    child = Convertible()
    outer = Convertible(child)
    check("recurse=False must convert only the module's own parameters and buffers.",
          lambda: (outer._apply(lambda a: a.astype(dtype), recurse=False),
                   state_dtypes({"": outer, "0.": child}))[1],
          hint="see the exercise, step 1: only recurse when recurse is true.")
    bias, empty = draw.names(2)
    holes = Convertible()
    holes.register_parameter(bias, None)
    holes.register_buffer(empty, None)
    check("double() with None entries: None parameters and buffers are skipped.",
          lambda: (holes.double(), state_dtypes({"": holes}))[1],
          hint="see the exercise, steps 2 and 3: skip None entries.")
    value = float(draw.int(1, 9))
    graded = Convertible()
    graded.weight.grad = np.full(2, value, dtype=np.float32)
    check("A parameter's grad is converted with it: grad = fn(param.grad).",
          lambda: (graded.double(), (str(graded.weight.grad.dtype), graded.weight.grad.tolist()))[1],
          hint="see the exercise, step 2: give the new parameter fn(param.grad) as its grad.")
    copies = draw.int(2, 3)
    twice = Convertible()
    leaf = Convertible()
    for name in draw.names(copies):
        twice.add_module(name, leaf)
    calls = []
    check("Recurse through self.children(): a child registered several times is converted once.",
          lambda: (twice._apply(lambda array: calls.append(1) or array), len(calls))[1],
          hint="see 5.4 and the exercise, step 1: self.children() yields a child registered twice once.")
