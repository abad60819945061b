"""Chapter 2's tests: attribute dispatch (`__setattr__`, `__getattr__`, `__delattr__`, `__dir__`) and `add_module`.

Each exercise's tests run where its test cells stand, before the later exercises are written; while grading, the
kernel's modulecraft has none of this chapter's methods, so a probe goes through nothing but the exercise it tests:
fixtures are filled by writing the containers directly (`vars(module)["_parameters"][name] = ...`), children have
no attributes of their own (`nn.Module()`, `nn.Identity()`), and where the reference's registration methods ask
`hasattr(self, name)` (which ends in `__getattr__`, exercise 3) the module under test answers with
`attribute_missing`, which finds nothing, as `__getattr__` finds nothing for those names.
"""

from modulecraft import nn
from modulecraft.exercises.c02_setattr_dispatch import CONTAINERS, KINDS, where
from modulecraft.nn.modules import module as module_impl

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.judging.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "module_setattr": "modulecraft.nn.modules.module:Module.__setattr__",
    "module_getattr": "modulecraft.nn.modules.module:Module.__getattr__",
    "module_delattr": "modulecraft.nn.modules.module:Module.__delattr__",
    "module_dir": "modulecraft.nn.modules.module:Module.__dir__",
    "add_module": "modulecraft.nn.modules.module:Module.add_module",
    "prediction": "modulecraft.exercises.c02_setattr_dispatch:prediction",
}


def parameter(draw):
    return nn.Parameter(draw.array(draw.int(1, 3)))


def attribute_missing(self, name):
    """`__getattr__` for fixtures: no name of a probe's scenario is found there (none is a registered member when
    `hasattr` asks), so the fixture does not need the learner's `module_getattr`."""
    raise AttributeError(name)


def with_method(yours, method: str, learner_name: str, draw):
    """A module class, under a drawn name, whose `method` is the learner's `learner_name`."""
    return type(draw.name().capitalize(), (nn.Module,), {"__getattr__": attribute_missing,
                                                         method: getattr(yours, learner_name)})


def registration_hooks(*hooks):
    """Register global module-registration hooks; returns their handles (remove them in `finally`)."""
    return [module_impl.register_module_module_registration_hook(hook) for hook in hooks]


def remove(handles):
    for handle in handles:
        handle.remove()


# -- exercise 2: module_setattr ---------------------------------------------------------------------------------
@probe("c02_module_setattr_visible")
def module_setattr_visible(yours, draw, check):
    Dispatching = with_method(yours, "__setattr__", "module_setattr", draw)
    module = Dispatching()
    weight, child, plain = draw.names(3)
    hint = "follow the decision list of section 2.2"
    for name, value in [(weight, parameter(draw)), (child, nn.Module()), (plain, draw.name())]:
        check(f"Where {name!r} lives after assigning a {type(value).__name__} to it",
              lambda: (setattr(module, name, value), where(module, name))[1], hint=hint)
    exclusion = "step 1 removes the name from __dict__, _buffers and _modules before register_parameter (section 2.3)"
    replacement = parameter(draw)
    check(f"Where {child!r} lives after assigning a Parameter over the child module",
          lambda: (setattr(module, child, replacement), where(module, child))[1], hint=exclusion)
    check(f"Assigning a plain array to the parameter {weight!r}",
          lambda: setattr(module, weight, draw.array(2)), phrase=f"as parameter '{weight}'",
          hint="step 2: only a Parameter or None may replace a parameter")


@probe("c02_module_setattr_hidden")
def module_setattr_hidden(yours, draw, check):
    D = with_method(yours, "__setattr__", "module_setattr", draw)
    m = D()
    head, w, stat, fresh, swap = draw.names(5)
    plain, number, values = draw.name(), draw.int(2, 99), [draw.array(2) for _ in range(4)]

    def assign(name, value):
        setattr(m, name, value)
        return where(m, name)
    check(f"Where {head!r} lives after a plain value, then a Module", lambda: (setattr(m, head, plain),
                                                                              assign(head, nn.Module()))[1],
          hint="step 3 removes it from __dict__ before filing the module (section 2.3)")
    check(f"Where {head!r} lives after None replaced the child, and whether it holds None",
          lambda: [assign(head, None), vars(m)["_modules"].get(head, "missing") is None],
          hint="step 4: None may replace a child module; the name stays in _modules")
    check(f"Assigning {number} to the child module {head!r}",
          lambda: (setattr(m, head, nn.Module()), setattr(m, head, number)), phrase=f"as child module '{head}'",
          hint="step 4: only a Module or None may replace a child module")
    check(f"Where {w!r} lives after a Parameter, then None, and whether it holds None",
          lambda: (setattr(m, w, parameter(draw)), [assign(w, None), vars(m)["_parameters"].get(w, 0) is None])[1],
          hint="step 2: None may replace a parameter")

    def non_persistent():
        vars(m)["_buffers"][stat] = values[0]
        vars(m)["_non_persistent_buffers_set"].add(stat)
        return assign(stat, values[1])
    check(f"Where the non-persistent buffer {stat!r} lives after a plain array is assigned to it", non_persistent,
          hint="step 5 keeps its persistence: persistent = name not in self._non_persistent_buffers_set")
    check(f"Assigning a list to the buffer {stat!r}", lambda: setattr(m, stat, values[2].tolist()),
          phrase=f"as buffer '{stat}'",
          hint="step 5 checks the value itself, with its own message \"cannot assign 'list' as buffer "
               "'<name>' (...)\" (section 2.2)")
    check(f"Where {stat!r} lives after a Module is assigned over the buffer", lambda: assign(stat, nn.Module()),
          hint="step 3 also removes the name from _buffers and _non_persistent_buffers_set")
    check(f"Where {fresh!r} lives after assigning nn.Buffer(..., persistent=False)",
          lambda: assign(fresh, nn.Buffer(values[3], persistent=False)),
          hint="step 5: an nn.Buffer brings its own persistence")

    early_hint = "read the containers with self.__dict__.get: the module may not be initialised yet (section 2.2)"

    class Early(nn.Module):
        __setattr__ = yours.module_setattr
        __getattr__ = attribute_missing

        def __init__(self, value):
            self.early = value
            super().__init__()
    check(f"A plain value {plain!r} assigned before Module.__init__(): what vars(module)['early'] holds",
          lambda: vars(Early(plain))["early"], hint=early_hint)
    check("A Parameter assigned before Module.__init__()", lambda: Early(parameter(draw)),
          phrase="cannot assign parameters before", hint=early_hint)
    check("A Module assigned before Module.__init__()", lambda: Early(nn.Module()),
          phrase="cannot assign module before", hint=early_hint)

    replacement, seen = nn.Identity(), []

    def hooked():
        handles = registration_hooks(
            lambda module, name, value: seen.append([name, type(value).__name__]) or (
                replacement if value is not None else None),
            lambda module, name, value: seen.append(["second", value is replacement]))
        try:
            setattr(m, swap, nn.Module())
            setattr(m, swap, None)
        finally:
            remove(handles)
        return seen
    check(f"What two global module-registration hooks saw while a Module, then None, was assigned to {swap!r} "
          "(name and type; 'second' and whether it got the first hook's module)", hooked,
          hint="run each hook(self, name, value) in order, for a Module (step 3) and for None over a child (step 4), "
               "each seeing what the previous one returned (section 2.2)")

    def replaced():
        handles = registration_hooks(lambda module, name, value: replacement)
        try:
            setattr(m, swap, nn.Module())
        finally:
            remove(handles)
        return vars(m)["_modules"].get(swap) is replacement
    check("The stored child is what a registration hook returned", replaced,
          hint="a global module-registration hook's return value replaces the module that is stored (step 3)")

    taken = draw.name()

    def module_over_parameter():
        setattr(m, taken, parameter(draw))
        setattr(m, taken, nn.Module())
    check(f"Assigning a Module to {taken!r}, which is already a parameter", module_over_parameter,
          phrase=f"as parameter '{taken}'",
          hint="step 2 comes before step 3: a name that is already a parameter takes only a Parameter or None, "
               "even when the value is a Module; the parameter must stay (section 2.2)")


# -- exercise 3: module_getattr ---------------------------------------------------------------------------------
@probe("c02_module_getattr_visible")
def module_getattr_visible(yours, draw, check):
    Reading = with_method(yours, "__getattr__", "module_getattr", draw)
    reader = Reading()
    missing, weight, count, fc = draw.names(4)
    check(f"Reading the missing attribute {missing!r}", lambda: getattr(reader, missing),
          hint="raise AttributeError with torch's message: hasattr() and the registration methods rely on it "
               "(section 2.4)")
    state = vars(reader)
    state["_parameters"][weight] = parameter(draw)
    state["_buffers"][count] = draw.array(1)
    state["_modules"][fc] = nn.Module()
    for name, container in [(weight, "_parameters"), (count, "_buffers"), (fc, "_modules")]:
        check(f"reader.{name} is the object stored in {container}",
              lambda: getattr(reader, name) is state[container][name], hint="section 2.4")


@probe("c02_module_getattr_hidden")
def module_getattr_hidden(yours, draw, check):
    R = with_method(yours, "__getattr__", "module_getattr", draw)
    bare = object.__new__(R)  # __init__ never ran: no containers
    weight, default, empty, shadow = draw.name(), draw.name(), draw.name(), draw.name()
    check(f"Reading {weight!r} on a module whose __init__ never ran", lambda: getattr(bare, weight),
          hint="module_getattr recursed or failed on a module without containers; read them through "
               "self.__dict__ (section 2.4)")
    check(f"getattr(module, {weight!r}, {default!r}) on a module whose __init__ never ran",
          lambda: getattr(bare, weight, default), hint="getattr(obj, name, default) must work: raise AttributeError")
    r = R()
    vars(r)["_buffers"][empty] = None
    check(f"A buffer {empty!r} registered as None reads as None", lambda: getattr(r, empty) is None,
          hint="a buffer registered as None must read as None, not raise")
    vars(r)["_parameters"][shadow] = "from _parameters"
    vars(r)["_buffers"][shadow] = "from _buffers"
    vars(r)["_modules"][shadow] = "from _modules"
    check(f"Reading {shadow!r}, held by _parameters, _buffers and _modules at once", lambda: getattr(r, shadow),
          hint="look in _parameters first, then _buffers, then _modules (section 2.4)")


# -- exercise 4: module_delattr ---------------------------------------------------------------------------------
@probe("c02_module_delattr_visible")
def module_delattr_visible(yours, draw, check):
    Deleting = with_method(yours, "__delattr__", "module_delattr", draw)
    model = Deleting()
    fc, weight, note = draw.names(3)
    state = vars(model)
    state["_modules"][fc] = nn.Module()
    state["_parameters"][weight] = parameter(draw)
    state[note] = draw.name()
    for name in draw.shuffled([fc, weight, note]):
        check(f"Where {fc!r}, {weight!r} and {note!r} live after del model.{name}",
              lambda: (delattr(model, name), [where(model, each) for each in (fc, weight, note)])[1],
              hint="delete from the container that holds the name, and fall back to object.__delattr__ for a "
                   "plain attribute (section 2.5)")


@probe("c02_module_delattr_hidden")
def module_delattr_hidden(yours, draw, check):
    Del = with_method(yours, "__delattr__", "module_delattr", draw)
    m = Del()
    cache, kept, never_set = draw.names(3)
    vars(m)["_buffers"].update({cache: draw.array(1), kept: draw.array(1)})
    vars(m)["_non_persistent_buffers_set"].update({cache, kept})
    check(f"Where the non-persistent buffer {cache!r} lives after del",
          lambda: (delattr(m, cache), where(m, cache))[1],
          hint="discard it from _non_persistent_buffers_set too (section 2.5)")
    check(f"Where the other non-persistent buffer {kept!r} lives", lambda: where(m, kept),
          hint="del removes only the name deleted (section 2.5)")
    check(f"Deleting the unknown attribute {never_set!r}", lambda: delattr(m, never_set), phrase=never_set,
          hint="deleting an unknown attribute must raise AttributeError (object.__delattr__, section 2.5)")
    both = draw.name()
    vars(m)["_parameters"][both] = parameter(draw)
    vars(m)["_modules"][both] = nn.Module()
    check(f"Where {both!r}, held by both _parameters and _modules, lives after one del",
          lambda: (delattr(m, both), where(m, both))[1],
          hint="one del removes the name from one container only, the first that holds it in __getattr__'s order "
               "(_parameters, then _buffers, then _modules); the other entry stays (section 2.5)")


# -- exercise 5: module_dir -------------------------------------------------------------------------------------
@probe("c02_module_dir_visible")
def module_dir_visible(yours, draw, check):
    Listing = with_method(yours, "__dir__", "module_dir", draw)
    listing = Listing()
    fc, steps = draw.names(2)
    vars(listing)["_modules"][fc] = nn.Module()
    vars(listing)["_buffers"][steps] = draw.array(1)
    check("dir(module) returns a list", lambda: type(dir(listing)).__name__, hint="section 2.5")
    check(f"Which of {fc!r}, {steps!r}, 'forward' and 'training' dir(module) lists",
          lambda: [name for name in (fc, steps, "forward", "training") if name in dir(listing)],
          hint="combine the class attributes, __dict__ and the three containers, _buffers included (section 2.5)")
    check("module_dir(module) returns a sorted list",
          lambda: (lambda own: own == sorted(own))(list(listing.__dir__())), hint="return sorted(...) (section 2.5)")


@probe("c02_module_dir_hidden")
def module_dir_hidden(yours, draw, check):
    L = with_method(yours, "__dir__", "module_dir", draw)
    listing = L()
    weight, number = draw.name(), str(draw.int(0, 9))
    vars(listing)["_modules"][number] = nn.Module()
    vars(listing)["_parameters"][weight] = parameter(draw)
    object.__setattr__(listing, "forward", lambda x: x)
    check(f"Whether the child {number!r} is listed", lambda: number in dir(listing),
          hint="names starting with a digit are not valid attribute names: drop them (section 2.5)")
    check(f"Whether the parameter {weight!r} is listed", lambda: weight in dir(listing),
          hint="parameters belong in dir() too (section 2.5)")
    check("How many times 'forward' is listed (a class and an instance attribute)",
          lambda: dir(listing).count("forward"),
          hint="Module.__dir__ keeps duplicates and dir() only sorts what __dir__ returns, so do not use a set "
               "(section 2.5)")
    check("Everything dir(module) lists", lambda: dir(listing),
          hint="the class attributes, __dict__, _parameters, _modules and _buffers, without names starting with a "
               "digit, sorted (section 2.5)")


# -- exercise 6: add_module -------------------------------------------------------------------------------------
def error_of(call) -> list:
    """[type name, message] of what `call()` raised, or [None, None]."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the learner's exception is the observation
        return [type(error).__name__, str(error)]
    return [None, None]


@probe("c02_add_module_visible")
def add_module_visible(yours, draw, check):
    Adding = with_method(yours, "add_module", "add_module", draw)
    adding = Adding()
    encoder, head, left, right = draw.names(4)
    layer = nn.Identity()
    check(f"adding.add_module({encoder!r}, layer), then whether _modules[{encoder!r}] is that layer",
          lambda: (adding.add_module(encoder, layer), vars(adding)["_modules"].get(encoder) is layer),
          hint="check, then store the module object itself in self._modules[name] (section 2.6)")
    check(f"Children after register_module({head!r}, None)",
          lambda: (adding.register_module(head, None), list(vars(adding)["_modules"]))[1],
          hint="None keeps a child slot, like a None parameter; register_module calls your add_module (section 2.6)")
    dotted = f"{left}.{right}"
    check(f"adding.add_module({dotted!r}, nn.Identity())", lambda: adding.add_module(dotted, nn.Identity()),
          phrase=f'contain ".", got: {dotted}', hint="a dot would break prefixes such as a.b.weight (section 2.6)")
    check("adding.add_module('forward', nn.Identity())", lambda: adding.add_module("forward", nn.Identity()),
          phrase="attribute 'forward' already exists",
          hint="refuse a name where hasattr(self, name) and name not in self._modules: a child called forward "
               "would be hidden by the method (section 2.6)")


@probe("c02_add_module_hidden")
def add_module_hidden(yours, draw, check):
    Adding = with_method(yours, "add_module", "add_module", draw)
    a = Adding()
    left, right, text, number = draw.name(), draw.name(), draw.name(), draw.int(0, 99)
    for name, value in draw.shuffled([
            (f"{left}.{right}", text), (number, text), (number, nn.Identity()), ("training", None),
            ("", nn.Identity())]):
        shown = "nn.Identity()" if value is not None and not isinstance(value, str) else repr(value)
        check(f"add_module({name!r}, {shown}): the error (type, message)",
              lambda: error_of(lambda: a.add_module(name, value)),
              hint="the checks of section 2.6 run in that order, with those messages: the module's type first")
    child, hooked = draw.name(), draw.name()
    first, second = nn.Identity(), nn.Identity()
    check(f"Re-adding the existing child name {child!r}: the error, and whether the new child replaced the old",
          lambda: (a.add_module(child, first), [error_of(lambda: a.add_module(child, second)),
                                                vars(a)["_modules"].get(child) is second])[1],
          hint="re-adding an existing child name replaces the child (section 2.6)")
    seen, replacement = [], nn.Identity()

    def with_hooks():
        handles = registration_hooks(
            lambda m, name, module: seen.append(["first", name]) or replacement,
            lambda m, name, module: seen.append(["second", module is replacement]))
        try:
            return error_of(lambda: a.add_module(hooked, nn.Identity()))
        finally:
            remove(handles)
    check("add_module with two global registration hooks: the error, if any", with_hooks, hint="section 2.6")
    check("What the hooks saw ('second': whether it got the first hook's module)", lambda: list(seen),
          hint="run each hook(self, name, module) in order, each seeing the module an earlier hook returned "
               "(section 2.6)")
    check("The stored child is what a registration hook returned",
          lambda: vars(a)["_modules"].get(hooked) is replacement,
          hint="a registration hook's return value replaces the module that is stored (section 2.6)")


# -- exercise 1: predict, then run ------------------------------------------------------------------------------


@probe("c02_predict_filing_visible")
def predict_filing_visible(yours, draw, check):
    pairs = draw.sample([(a, b) for a in KINDS for b in KINDS], 4)

    def form():
        answers = [yours.prediction(first, second) for first, second in pairs]
        return all(answer in ("TypeError", "KeyError") or isinstance(answer, list) and set(answer) <= set(CONTAINERS)
                   for answer in answers)
    check("prediction(first, second) returns a list of container names, or 'TypeError' or 'KeyError'", form,
          hint="name the containers '__dict__', '_parameters', '_modules', '_buffers', "
               "'_non_persistent_buffers_set' (exercise 1)")


@probe("c02_predict_filing_hidden")
def predict_filing_hidden(yours, draw, check):
    for first in draw.shuffled(KINDS):
        seconds = draw.shuffled(KINDS)
        check(f"[prediction({first!r}, second) for second in {seconds}]",
              lambda: [yours.prediction(first, second) for second in seconds],
              hint="the decision list of section 2.2, step by step: a Parameter removes the name from everywhere "
                   "else; only None may replace a parameter or a child; an nn.Buffer needs a name that is free or "
                   "already a buffer; an array or None keeps a buffer's persistence")
