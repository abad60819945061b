"""Whose code trains the capstone's model: the learner's mechanisms or modulecraft's, one switch per mechanism.

The capstone (chapter 13) trains on nothing but what the learner wrote in the chapters before. `MECHANISMS` lists
each mechanism of the training path, with the learner's names for it (the names of their chapters' solutions) and
where modulecraft keeps the same code (`"modulecraft.module:Qualname"`, the strings the chapters' probe modules put
in `YOURS`). The notebook holds one line per mechanism, `WHOSE = {"state_dict (7)": "mine", ...}`, and `use(WHOSE,
globals())` puts the learner's functions and classes in place of modulecraft's. A learner with a gap switches that
one line to `"reference"`: nothing else falls back on modulecraft's code.

`observe()` then watches which code actually runs while training (every Python call, through `sys.setprofile`:
the mechanisms, the rest of the notebook, what the course gives and the libraries, each call in one row), so
that the notebook prints what ran, not what the switches claim. `reference_only()` puts modulecraft's own code back
for a while: the chapters' self-tests compare the learner's code with modulecraft's, and must not compare the
learner's with itself.

Grading reads the switches from the notebook's text (`read_whose`), never from the kernel: see `autograder`.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import sys
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

MODULE = "modulecraft.nn.modules.module"

# mechanism -> {the learner's name (as in their chapter): where modulecraft keeps the same code}. Each name appears
# once; a target may serve several mechanisms (see `ROUTES`). Chapter 10's elementwise formulas (`add_gradients` ...
# `exp_backward`) are no row: the training path never runs them. Batch norm's backward is derived in the capstone.
MECHANISMS: dict[str, dict[str, str]] = {
    "construction and attributes (1-4)": {
        "module_init": f"{MODULE}:Module.__init__",
        "module_setattr": f"{MODULE}:Module.__setattr__",
        "module_getattr": f"{MODULE}:Module.__getattr__",
        "add_module": f"{MODULE}:Module.add_module",
        "register_parameter": f"{MODULE}:Module.register_parameter",
        "register_buffer": f"{MODULE}:Module.register_buffer",
    },
    "tree walks and modes (5)": {
        "named_modules": f"{MODULE}:Module.named_modules",
        "_named_members": f"{MODULE}:Module._named_members",
        "named_children": f"{MODULE}:Module.named_children",
        "train": f"{MODULE}:Module.train",
        "eval": f"{MODULE}:Module.eval",
    },
    "forward hooks in _call_impl (6)": {
        "register_forward_pre_hook": f"{MODULE}:Module.register_forward_pre_hook",
        "register_forward_hook": f"{MODULE}:Module.register_forward_hook",
        "_call_impl": f"{MODULE}:Module._call_impl",
    },
    "state_dict (7)": {
        "_save_to_state_dict": f"{MODULE}:Module._save_to_state_dict",
        "state_dict": f"{MODULE}:Module.state_dict",
        "load_state_dict": f"{MODULE}:Module.load_state_dict",
    },
    "lazy modules (8)": {
        "materialize": "modulecraft.nn.parameter:UninitializedTensorMixin.materialize",
        "_infer_parameters": "modulecraft.nn.modules.lazy:LazyModuleMixin._infer_parameters",
        "_lazy_load_hook": "modulecraft.nn.modules.lazy:LazyModuleMixin._lazy_load_hook",
        "initialize_parameters": "modulecraft.nn.modules.linear:LazyLinear.initialize_parameters",
    },
    "autograd recording (10)": {
        "_recording": "modulecraft.nn.functional:_recording",
        "edges": "modulecraft.autograd.tensor:edges",
    },
    "engine (10)": {
        "_dependencies": "modulecraft.autograd.engine:_dependencies",
        "accumulate_grad": "modulecraft.autograd.graph:AccumulateGrad.backward",
        "_walk": "modulecraft.autograd.engine:_walk",
    },
    "backward formulas (10)": {
        "validate_outputs": "modulecraft.autograd.engine:validate_outputs",
        "unbroadcast": "modulecraft.autograd.engine:unbroadcast",
        "mm_gradients": "modulecraft.autograd.ops.linalg:mm_gradients",
        "t_backward": "modulecraft.nn.functional:TBackward0.backward",
        "relu_backward": "modulecraft.nn.functional:ReluBackward0.backward",
        "sum_backward": "modulecraft.autograd.ops.reductions:SumBackward0.backward",
        "mean_backward": "modulecraft.autograd.ops.reductions:MeanBackward0.backward",
        "log_softmax_backward": "modulecraft.nn.functional:LogSoftmaxBackward0.backward",
        "nll_loss_backward": "modulecraft.nn.functional:NllLossBackward0.backward",
        "addmm_backward": "modulecraft.nn.functional:AddmmBackward0.backward",
    },
    "batch norm's backward (13)": {
        "batch_norm_backward": "modulecraft.nn.functional:NativeBatchNormBackward0.backward",
    },
    "backward hooks in _call_impl (11)": {
        "BackwardHookFunction": "modulecraft.nn.modules._functions:BackwardHookFunction",
        "call_impl": f"{MODULE}:Module._call_impl",
        "zero_grad": f"{MODULE}:Module.zero_grad",
    },
    "optimizer (12)": {
        "SGD": "modulecraft.optim.sgd:SGD",
        "optimizer_state_dict": "modulecraft.optim.optimizer:Optimizer.state_dict",
    },
}

MINE, REFERENCE = "mine", "reference"


def _has_backward_hooks(module) -> bool:
    registry = sys.modules[MODULE]
    return bool(module._backward_hooks or module._backward_pre_hooks or registry._global_backward_hooks
                or registry._global_backward_pre_hooks)


# A target several learner names stand for: which name handles a call. Modulecraft's `_call_impl` does both halves;
# the learner wrote its forward-hook half in chapter 6 (`_call_impl`) and its backward-hook wiring in chapter 11
# (`call_impl`, which runs the forward hooks too).
ROUTES: dict[str, Callable[..., str]] = {
    f"{MODULE}:Module._call_impl": lambda module, *args, **kwargs:
        "call_impl" if _has_backward_hooks(module) else "_call_impl",
}


def yours() -> dict[str, str]:
    """Every learner name of the table and its target (what the capstone's probe module puts in `YOURS`)."""
    return {name: target for names in MECHANISMS.values() for name, target in names.items()}


def switched(whose: dict[str, str]) -> set[str]:
    """The mechanisms that run modulecraft's code under `whose`: those not set to "mine", and those that share a
    target with one of them (modulecraft's code for that target is there, so it counts as theirs too)."""
    result = {mechanism for mechanism in MECHANISMS if whose.get(mechanism, MINE) != MINE}
    kept = {target for mechanism in result for target in MECHANISMS[mechanism].values()}
    return result | {mechanism for mechanism, names in MECHANISMS.items() if kept & set(names.values())}


def read_whose(source: str) -> dict[str, str]:
    """`WHOSE` as written in a cell's text (a literal dict; its entries naming a mechanism and "mine" or
    "reference"); anything else reads as {} (every mechanism "mine")."""
    try:
        assignments = [node for node in ast.parse(source).body if isinstance(node, ast.Assign)
                       and [ast.unparse(target) for target in node.targets] == ["WHOSE"]]
        value = ast.literal_eval(assignments[0].value) if assignments else {}
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if k in MECHANISMS and v in (MINE, REFERENCE)}


# -- putting the learner's code in place ---------------------------------------------------------------------------
@dataclass
class _Installed:
    """What an installation changed: (owner, attribute, modulecraft's object, the object put there), to undo and
    redo."""

    places: list[tuple[Any, str, Any, Any]] = field(default_factory=list)
    originals: dict[str, Any] = field(default_factory=dict)  # target -> modulecraft's object
    namespace: dict = field(default_factory=dict)
    mine: set[str] = field(default_factory=set)  # the mechanisms whose learner code is in place

    def put(self, replaced: bool) -> None:
        for owner, attribute, original, installed in self.places:
            setattr(owner, attribute, installed if replaced else original)


_installed = _Installed()


def _owner_and_attribute(target: str) -> tuple[Any, str]:
    module_name, _, qualname = target.partition(":")
    owner = importlib.import_module(module_name)
    *path, attribute = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, attribute


def _original(target: str):
    """Modulecraft's own object for `target`, even while the learner's is in place."""
    if target in _installed.originals:
        return _installed.originals[target]
    owner, attribute = _owner_and_attribute(target)
    return vars(owner)[attribute] if isinstance(owner, type) else getattr(owner, attribute)


def _places(target: str, original) -> list[tuple[Any, str]]:
    """Where modulecraft holds `original`: a method in its class; a function or class in every module of modulecraft
    that imported it (`from modulecraft.autograd.tensor import edges` keeps its own reference)."""
    owner, attribute = _owner_and_attribute(target)
    if isinstance(owner, type):
        return [(owner, attribute)]
    return [(module, name) for module_name, module in list(sys.modules.items())
            if module_name.split(".")[0] == "modulecraft" and isinstance(module, types.ModuleType)
            for name, value in list(vars(module).items()) if value is original]


def use(whose: dict[str, str], namespace: dict) -> None:
    """Put the learner's definitions (from `namespace`, the notebook's globals) in place of modulecraft's for every
    mechanism `whose` sets to "mine" (and not sharing modulecraft's code with one set to "reference": `switched`, as
    when grading). Running it again first undoes the previous call. A mechanism whose names are not all defined
    stays modulecraft's, and a NameError says which name is missing and which line to switch."""
    global _installed
    _installed.put(replaced=False)
    _installed, gaps = _install({mechanism: REFERENCE if mechanism in switched(whose) else MINE
                                 for mechanism in _checked(whose)}, namespace)
    if gaps:
        raise NameError("\n".join(
            f"`{'`, `'.join(names)}` not defined: paste your chapter's solution above and run it, or switch the "
            f"line {mechanism!r}: {MINE!r} of WHOSE to {REFERENCE!r} (until then, modulecraft's code runs for it here, "
            "and while grading there is none)"
            for mechanism, names in gaps.items()))


@contextlib.contextmanager
def installed(whose: dict[str, str], namespace: dict):
    """`use` inside the block only (what was in place before comes back after it); yields the names missing, by
    mechanism, instead of raising."""
    global _installed
    before = _installed
    before.put(replaced=False)
    _installed, gaps = _install(whose, namespace)
    try:
        yield gaps
    finally:
        _installed.put(replaced=False)
        _installed = before
        before.put(replaced=True)


def also(mechanism: str) -> dict[str, str]:
    """A `WHOSE` with the learner's code where `use` put it, and for `mechanism` too (what a test of `mechanism`
    runs on: in a grading kernel modulecraft has no code of its own for the other mechanisms either)."""
    return {other: MINE if other == mechanism or other in _installed.mine else REFERENCE for other in MECHANISMS}


def _checked(whose: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(whose) - set(MECHANISMS))
    if unknown or any(value not in (MINE, REFERENCE) for value in whose.values()):
        raise ValueError(f"WHOSE must map each of {list(MECHANISMS)} to 'mine' or 'reference' "
                         f"(unknown: {unknown or 'none'}, values: {sorted(set(whose.values()))})")
    return {mechanism: whose.get(mechanism, MINE) for mechanism in MECHANISMS}


def _install(whose: dict[str, str], namespace: dict) -> tuple[_Installed, dict[str, list[str]]]:
    """Put the learner's code in place for each mechanism `whose` sets to "mine" (modulecraft's own must be there);
    what was done, and the names missing. A target several mechanisms share runs, for each call, the code of the
    mechanism `ROUTES` picks: the learner's where that one is in place, modulecraft's otherwise."""
    whose = _checked(whose)
    missing = {mechanism: [name for name in names if name not in namespace]
               for mechanism, names in MECHANISMS.items() if whose[mechanism] == MINE}
    done = _Installed(namespace=namespace, mine={mechanism for mechanism, gaps in missing.items() if not gaps})
    mine = {name: namespace[name] for mechanism in done.mine for name in MECHANISMS[mechanism]}
    for target in {target for names in MECHANISMS.values() for target in names.values()}:
        original = done.originals[target] = _original(target)
        names = [name for name, named in yours().items() if named == target]
        if not set(names) & set(mine):
            continue
        if len(names) == 1:
            replacement = mine[names[0]]
        elif target in ROUTES:
            replacement = _routed(ROUTES[target], {name: mine.get(name, original) for name in names})
        else:
            raise LookupError(f"{target} stands for several names, {names}, and has no route between them")
        done.places += [(owner, attribute, original, replacement) for owner, attribute in _places(target, original)]
    done.put(replaced=True)
    return done, {mechanism: names for mechanism, names in missing.items() if names}


def _routed(route: Callable[..., str], implementations: dict[str, Callable]) -> Callable:
    def routed(*args, **kwargs):
        return implementations[route(*args, **kwargs)](*args, **kwargs)
    return routed


@contextlib.contextmanager
def reference_only():
    """Modulecraft's own code in place of the learner's inside the block (the learner's again after it)."""
    _installed.put(replaced=False)
    try:
        yield
    finally:
        _installed.put(replaced=True)


# -- watching which code runs --------------------------------------------------------------------------------------
def _codes(obj) -> list[types.CodeType]:
    """The code objects that run when `obj` is called: a function's own (decorators unwrapped) and those defined in it
    (closures, comprehensions), or those of every function a class defines itself (inherited ones are someone
    else's)."""
    if isinstance(obj, type):
        return [code for value in vars(obj).values() if not isinstance(value, type) for code in _codes(value)]
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if callable(obj) and hasattr(inspect.unwrap(obj), "__code__"):
        return _nested(inspect.unwrap(obj).__code__)
    return []


def _nested(code: types.CodeType) -> list[types.CodeType]:
    return [code, *(inner for const in code.co_consts if isinstance(const, types.CodeType) for inner in _nested(const))]


YOURS, GIVEN, LIBRARIES = "your notebook's other code", "given by the course (modulecraft)", \
    "numpy, Python's library and Jupyter"


@dataclass
class Observed:
    """Every Python call that started while the `observe()` block ran, each counted once in one row: per mechanism
    and side ("yours", "reference"), and the rest by who wrote the code that ran (`rest`: (group, where) -> calls,
    where the group is one of YOURS, GIVEN, LIBRARIES and `where` the notebook's top-level name, modulecraft's module
    or the library's package)."""

    calls: Counter = field(default_factory=Counter)
    rest: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # (group, where) -> Counter of the functions that ran there

    def table(self) -> str:
        rows = [(m, self.calls[m, "yours"], self.calls[m, "reference"]) for m in MECHANISMS]
        for group in (YOURS, GIVEN, LIBRARIES):
            rows.append((group, None, None))
            for (_, where), n in sorted(((place, n) for place, n in self.rest.items() if place[0] == group),
                                        key=lambda item: -item[1]):
                if group == YOURS:
                    rows.append((f"  {where}", n, None))
                else:
                    (busiest, _), = self.examples[group, where].most_common(1)
                    rows.append((f"  {where} (most: {busiest.split('.<locals>')[0]})", None, n))
        width = max(len(label) for label, _, _ in rows)
        lines = [f"{'whose code ran':<{width}}  {'yours (calls)':>13}  {'not yours (calls)':>17}"]
        lines += [f"{label:<{width}}  {'' if mine is None else mine:>13}  {'' if theirs is None else theirs:>17}"
                  for label, mine, theirs in rows]
        mechanisms_mine = sum(self.calls[m, "yours"] for m in MECHANISMS)
        notebook = sum(n for (group, _), n in self.rest.items() if group == YOURS)
        total = self.total()
        lines.append(f"in all {total} calls, {mechanisms_mine + notebook} of them yours "
                     f"({100 * (mechanisms_mine + notebook) / max(total, 1):.0f} %): {mechanisms_mine} in your "
                     f"mechanisms, {notebook} in the rest of your notebook")
        return "\n".join(lines)

    def total(self) -> int:
        return sum(self.calls.values()) + sum(self.rest.values())

    def whose(self) -> dict[str, str]:
        """Per mechanism, whose code ran: "yours", "reference", "both" or "none"."""
        sides = {m: [side for side in ("yours", "reference") if self.calls[m, side]] for m in MECHANISMS}
        return {m: "both" if len(ran) == 2 else ran[0] if ran else "none" for m, ran in sides.items()}


def _place(frame) -> tuple[str, str]:
    """(group, where) of the code a frame runs, outside the mechanisms: the notebook's (`__main__`) by its top-level
    name, modulecraft's by module, anything else by its top package."""
    module = frame.f_globals.get("__name__") or "?"
    if module == "__main__":
        name = frame.f_code.co_qualname.split(".", 1)[0]
        return YOURS, "the cells' own code" if name.startswith("<") else name
    if module.split(".")[0] == "modulecraft":
        return GIVEN, module
    return LIBRARIES, module.split(".")[0]


@contextlib.contextmanager
def observe(observed: Observed | None = None):
    """Count, while the block runs, every Python call that starts (through `sys.setprofile`), whoever called it:
    into the learner's code or modulecraft's for each mechanism, and every other call by who wrote what ran (see
    `Observed`). `observed`: counts to go on adding to (a training path that spans several cells)."""
    sides: dict[types.CodeType, tuple[str, str]] = {}
    for mechanism, names in MECHANISMS.items():
        for name, target in names.items():
            for code in _codes(_original(target)):
                sides[code] = (mechanism, "reference")
            if mechanism in _installed.mine:
                for code in _codes(_installed.namespace[name]):
                    sides[code] = (mechanism, "yours")
    observed = observed if observed is not None else Observed()
    counts: dict[types.CodeType, int] = {}
    places: dict[types.CodeType, tuple[str, str]] = {}  # (mechanism, side), or (group, where) (see `_place`)
    first_resume: dict[types.CodeType, int] = {}  # a generator's frame enters again at each `next`: count its start

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code.co_flags & GENERATORS and first_resume.setdefault(code, frame.f_lasti) != frame.f_lasti:
            return
        try:
            counts[code] += 1
        except KeyError:  # the first call of this code
            counts[code] = 1
            places[code] = sides.get(code) or _place(frame)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield observed
    finally:
        sys.setprofile(previous)
        for leaving in (sys._getframe(), sys._getframe(1)):  # this generator resumed, by the block's __exit__
            if leaving.f_code in counts:
                counts[leaving.f_code] -= 1
        for code, n in ((code, n) for code, n in counts.items() if n):
            if code in sides:
                observed.calls[places[code]] += n
            else:
                observed.rest[places[code]] += n
                observed.examples.setdefault(places[code], Counter())[code.co_qualname] += n


GENERATORS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
