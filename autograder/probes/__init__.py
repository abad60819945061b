"""The chapters' tests as probes: they observe the learner's code in the kernel; the verdict is made elsewhere.

A test cell of a chapter (visible or hidden) holds one line, `run_tests("<its grade id>")`, and the chapter's
probe module here (`c05_traversal.py` for chapter 5) holds what that cell tests: a function registered with
`@probe("<grade id>")` that builds inputs from a seeded `draw`, calls the learner's code and records what it
saw with `check(what, thunk, hint=...)`. A probe never states an expected value: it only observes.

The same probe runs twice, with the same seed:

- on the learner's code (`yours`: the names the learner defined in the notebook), in the notebook's kernel;
- on the reference (`yours`: the objects `YOURS` names in `modulecraft`), wherever the verdict is made.

Learning in JupyterLab (no grading), both run in the learner's kernel on a fixed seed, and the cell prints each
check as what / expected / got / hint. While grading, the kernel has no reference for these names at all
(`autograder.judging.answer_key` removes them from its copy of modulecraft), the seed is the grader's, unknown in
advance and written into each test cell's line as the grader runs it (`graded_line`), and the cell only displays
its observations; the grader's own process runs the probes on the reference and compares
(`autograder.judging.verdicts`). Nothing the kernel does can turn a wrong observation into a pass: forging the right
observations takes computing them, for inputs drawn from a seed nobody could know before.

Every probe must make at least one check whose result depends on the seed through the mechanism tested (the
course tests prove it for every cell: two seeds give different expected observations).
"""
from __future__ import annotations

import ast
import importlib
import json
import math
import pkgutil
import random
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

LEARNING_SEED = 0  # the seed of the visible tests the learner runs in JupyterLab
MIME = "application/vnd.modulecraft.observations+json"
MAX_TEXT = 2000  # characters kept of a string or an exception message
MAX_ITEMS = 2000  # elements kept of a container or an array
MAX_DEPTH = 12
MAX_NODES = 20_000  # values pictured per observation: what a grader compares stays small whatever code returns

_PROBES: dict[str, Callable] = {}


# -- writing probes ---------------------------------------------------------------------------------------------
def probe(grade_id: str):
    """Register the decorated function `f(yours, draw, check)` as the probe of test cell `grade_id`."""
    def register(function):
        _PROBES[grade_id] = function
        return function
    return register


class NotWritten(Exception):
    """The learner has not defined a name the probe needs (its exercise cell did not run, or was not written)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class Learners:
    """The learner's names, as the notebook defined them (the kernel's `__main__`)."""

    def __init__(self, namespace: dict):
        self._namespace = namespace

    def __getattr__(self, name: str):
        try:
            return self._namespace[name]
        except KeyError:
            raise NotWritten(name) from None


class Reference:
    """What the reference keeps under the learner's names: `YOURS` resolved in the whole `modulecraft`."""

    def __init__(self, yours: dict[str, str]):
        self._yours = yours

    def __getattr__(self, name: str):
        try:
            return resolve(self._yours[name])
        except KeyError:
            raise NotWritten(name) from None


def resolve(target: str):
    """`"package.module:Class.method"` -> the object (a method as the plain function its class holds)."""
    module_name, _, qualname = target.partition(":")
    found = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = vars(found)[part] if isinstance(found, type) else getattr(found, part)
    return found


class Draw:
    """Inputs drawn from the seed: the same on both runs of a probe, unknown before grading."""

    WORDS = ("stem", "body", "head", "proj", "gate", "core", "tail", "mix", "enc", "dec", "blk", "trunk", "neck",
             "arm", "leg", "root", "twig", "bud", "leaf", "seed")

    def __init__(self, seed: int, grade_id: str):
        self.random = random.Random(f"{seed}:{grade_id}")
        self.numpy = np.random.default_rng(self.random.getrandbits(64))
        self._used: set[str] = set()

    def int(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return self.random.randint(low, high)

    def choice(self, options):
        return self.random.choice(list(options))

    def sample(self, options, k: int) -> list:
        return self.random.sample(list(options), k)

    def shuffled(self, items) -> list:
        items = list(items)
        self.random.shuffle(items)
        return items

    def coin(self) -> bool:
        return self.random.random() < 0.5

    def name(self) -> str:
        """A fresh identifier (a word and a number), never one drawn before by this probe."""
        while True:
            name = f"{self.choice(self.WORDS)}{self.int(0, 99)}"
            if name not in self._used:
                self._used.add(name)
                return name

    def names(self, k: int) -> list[str]:
        return [self.name() for _ in range(k)]

    def array(self, *shape: int, dtype=np.float32, low: float = -2.0, high: float = 2.0) -> np.ndarray:
        """Values with two decimals (exact in any float dtype's printing), in [low, high]."""
        return np.round(self.numpy.uniform(low, high, size=shape), 2).astype(dtype)


@dataclass
class Check:
    """One observation and how to judge and explain it (the judging fields are read from the grader's own run)."""

    what: str
    observed: Any
    hint: str = ""
    close: bool = False
    phrase: str | None = None


class Enough(BaseException):
    """A probe's run has the check it was run for (`run_probe`'s `until`): the probe stops there. Not an Exception,
    so that no handler of a probe or of the code it runs takes it for a failure."""


@dataclass
class Run:
    grade_id: str
    checks: list[Check] = field(default_factory=list)
    until: Callable[[int, Check], bool] | None = None  # see `run_probe`

    def check(self, what: str, thunk: Callable[[], Any], *, hint: str = "", close: bool = False,
              phrase: str | None = None) -> None:
        """Observe `thunk()`: its value, or the exception it raised. `close`: arrays compared with a tolerance;
        `phrase`: an exception counts when its type matches and its message contains this phrase."""
        self.checks.append(Check(what, observe(thunk), hint, close, phrase))
        if self.until is not None and self.until(len(self.checks) - 1, self.checks[-1]):
            raise Enough


def observe(thunk: Callable[[], Any]):
    """What `thunk()` did, as plain JSON data."""
    try:
        value = thunk()
    except NotWritten as missing:
        return {"missing": missing.name}
    except RecursionError:
        return {"raised": "RecursionError", "message": "maximum recursion depth exceeded (does your code call "
                "modulecraft's own version of what you write? While grading, that calls yours again)"}
    except Exception as error:  # noqa: BLE001 - whatever the learner's code raised is the observation
        raised = {"raised": _type_name(error), "message": _text(_safe_str(error))}
        where = _raised_in(error)
        return raised | {"in": where} if where else raised
    try:
        return {"value": encode(value, budget=[MAX_NODES])}
    except RecursionError:
        return {"raised": "RecursionError", "message": "the result is too large or nests too deeply to compare"}


def _raised_in(error: BaseException) -> str | None:
    """The notebook's top-level name (function or class) whose code raised `error` last, if any: when a test fails
    in code of another exercise than its own, the feedback names that exercise."""
    where, traceback = None, error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_globals.get("__name__") == "__main__":
            where = traceback.tb_frame.f_code.co_qualname.split(".", 1)[0]
        traceback = traceback.tb_next
    return where


def run_probe(grade_id: str, yours, seed: int, until: Callable[[int, Check], bool] | None = None) -> Run:
    """Run the probe of `grade_id` on `yours`, with inputs drawn from `seed`; with `until`, only up to the first check
    (its index, the check) for which it is true: the checks before it are those of the whole run, each probe's inputs
    drawn as they come."""
    function = find(grade_id)
    run = Run(grade_id, until=until)
    from modulecraft.nn.init import manual_seed
    manual_seed(seed % 2**32)
    np.random.seed(seed % 2**32)
    try:
        function(yours, Draw(seed, grade_id), run.check)
    except NotWritten as missing:  # a fixture needed a name the notebook does not define: the checks stop here
        run.checks.append(Check("the tests' set-up", {"missing": missing.name}))
    except Enough:
        pass
    return run


def find(grade_id: str) -> Callable:
    """The probe of test cell `grade_id` (every probe module imported once, the first time one is missing)."""
    if grade_id not in _PROBES:
        for name in _module_names():
            importlib.import_module(f"{__name__}.{name}")
    if grade_id not in _PROBES:
        chapter = grade_id.split("_", 1)[0].removeprefix("c")
        raise LookupError(f"no test is called {grade_id!r} any more: this notebook comes from an older version of "
                          f"its chapter. Your work here is kept; the course's current version of chapter {chapter} is "
                          "next to it, with `.updated` in its name (copy your answers over).") from None
    return _PROBES[grade_id]


def _module_names() -> list[str]:
    """The chapters' probe modules: on disk, and those already imported (a grading kernel gets them imported by its
    forkserver, and cannot list their folder)."""
    loaded = {name.rsplit(".", 1)[1] for name in sys.modules if name.startswith(__name__ + ".")}
    return sorted({info.name for info in pkgutil.iter_modules(__path__)} | loaded)


def chapter_module(chapter: str):
    """The probe module of a chapter: by its folder name (`05_traversal`: module `c05_traversal`, or the module
    named after the same topic), its own name, or its grade-id prefix (`c05`)."""
    names = _module_names()
    topic = chapter.split("_", 1)[1] if "_" in chapter else None
    key = chapter.split("_", 1)[0]
    key = key if key.startswith("c") else "c" + key
    for wanted in (lambda name: name in (chapter, "c" + chapter),
                   lambda name: topic is not None and name.split("_", 1)[-1] == topic,
                   lambda name: name.split("_", 1)[0] == key):
        found = [name for name in names if wanted(name)]
        if found:
            return importlib.import_module(f"{__name__}.{found[0]}")
    raise LookupError(f"no probes for chapter {chapter!r} in {__name__}")


def yours_of(chapter: str) -> dict[str, str]:
    """The learner's names of `chapter` (folder name or grade-id prefix) and where the reference keeps each."""
    return getattr(chapter_module(chapter), "YOURS", {})


def grade_ids(chapter: str) -> list[str]:
    """The test cells `chapter`'s probe module has probes for."""
    module = chapter_module(chapter)
    return [grade_id for grade_id, function in _PROBES.items() if function.__module__ == module.__name__]


# -- the test cell's one line ----------------------------------------------------------------------------------
def run_tests(grade_id: str, seed: int | None = None) -> None:
    """What a test cell does: while grading (the grader's `seed`), display the observations; while learning, judge
    them here."""
    namespace = sys.modules["__main__"].__dict__
    if seed is not None:
        observed = run_probe(grade_id, Learners(namespace), seed)
        from IPython.display import display
        display({MIME: {"grade_id": grade_id, "observed": [c.observed for c in observed.checks]}}, raw=True)
        return
    observed = run_probe(grade_id, Learners(namespace), LEARNING_SEED)
    from modulecraft import mechanisms
    with mechanisms.reference_only():  # the capstone may have put the learner's code in modulecraft (`use`)
        expected = run_probe(grade_id, Reference(yours_of(find(grade_id).__module__.rsplit(".", 1)[1])), LEARNING_SEED)
    failures, blank = [], blank_classes(namespace)
    for check, wanted in zip(expected.checks, observed.checks):
        seen = wanted.observed
        if isinstance(seen, dict) and seen.get("missing") in blank:
            seen = {"raised": "NotImplementedError", "message": ""}  # the same verdict as a blank function's
        mark = "ok  " if agrees(check, seen) else "FAIL"
        print(f"{mark} {check.what}")
        if mark == "FAIL":
            failures.append(explain(check, seen, show_expected=True))
    if failures:
        raise AssertionError("\n".join(failures))


def blank_classes(namespace: dict) -> set[str]:
    """The classes a cell the learner ran still leaves blank: the class body raises NotImplementedError, so its name
    is never defined (IPython's history of inputs, `_ih`, says which class statements ran, the last one counting)."""
    blank = set()
    for source in namespace.get("_ih", []):
        try:
            statements = ast.parse(source).body
        except (SyntaxError, ValueError):
            continue
        for node in statements:
            if isinstance(node, ast.ClassDef):
                raises = any(isinstance(s, ast.Raise) and _names_not_implemented(s.exc) for s in node.body)
                (blank.add if raises else blank.discard)(node.name)
    return {name for name in blank if name not in namespace}


def _names_not_implemented(exception) -> bool:
    called = exception.func if isinstance(exception, ast.Call) else exception
    return isinstance(called, ast.Name) and called.id == "NotImplementedError"


def graded_line(grade_id: str, seed: int) -> str:
    """The line the grader runs in place of the text of test cell `grade_id`: no name of the notebook's involved, and
    the seed exists in the kernel from the moment this cell runs."""
    return f'__import__("autograder.probes").probes.run_tests({grade_id!r}, seed={seed})'


# -- judging ----------------------------------------------------------------------------------------------------
def agrees(expected: Check, observed) -> bool:
    """Whether the learner's observation matches the reference's under the check's rule."""
    wanted = expected.observed
    if not isinstance(observed, dict) or "missing" in observed:
        return False
    if "raised" in wanted:
        if observed.get("raised") != wanted["raised"]:
            return False
        if expected.phrase is not None:
            return expected.phrase in str(observed.get("message", ""))
        return observed.get("message") == wanted["message"]
    if "value" not in observed:
        return False
    return same(wanted["value"], observed["value"], expected.close)


def same(a, b, close: bool) -> bool:
    if isinstance(a, list) and isinstance(b, list) and a[:1] == b[:1] == ["array"]:
        if a[1:3] != b[1:3]:  # dtype and shape
            return False
        x, y = np.array(a[3], dtype=object), np.array(b[3], dtype=object)
        if close:
            try:
                return bool(np.allclose(x.astype(float), y.astype(float), rtol=1e-4, atol=1e-5, equal_nan=True))
            except (TypeError, ValueError):
                return False
        return a[3] == b[3]
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, close) for x, y in zip(a, b))
    if close and isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def explain(expected: Check, observed, *, show_expected: bool, exercises: dict[str, str] | None = None,
            exercise: str | None = None) -> str:
    """The feedback of a failed check: what was checked, what the learner's code did, the hint; the expected
    value only where the learner may see it (learning, on the fixed seed). `exercises`: which exercise defines
    each of the notebook's names, to point a missing one to it, or an error raised in another exercise's code
    than the test's own (`exercise`) to that one."""
    got = describe(observed)
    if isinstance(observed, dict) and "missing" in observed:
        name = observed["missing"]
        where = f"{exercises[name]}, whose cell defines it" if exercises and name in exercises else \
            "the exercise that defines it"
        return (f"{expected.what}\n  Got:  `{name}` is not defined. Run {where} (and the cells above it), then "
                "this test again.")
    lines = [expected.what]
    if show_expected:
        lines.append(f"  Expected: {describe(expected.observed, expected.phrase)}")
    lines.append(f"  Got:      {got}")
    raised_in = observed.get("in") if isinstance(observed, dict) else None
    if exercises and isinstance(raised_in, str) and exercises.get(raised_in, exercise) != exercise:
        lines.append(f"  Raised in your `{raised_in}`, {exercises[raised_in]}, which this test uses: fix it first.")
    if expected.hint:
        lines.append(f"  Hint: {expected.hint}")
    return "\n".join(lines)


def describe(observation, phrase: str | None = None) -> str:
    """An observation in words, as short as it can be said."""
    if not isinstance(observation, dict):
        return "nothing (the test did not report)"
    if "missing" in observation:
        return f"`{observation['missing']}` is not defined"
    if "raised" in observation:
        name, message = observation["raised"], str(observation.get("message", ""))
        if name == "NotImplementedError" and not message:
            return "NotImplementedError: not written yet (the exercise cell still raises NotImplementedError)"
        if phrase is not None:
            return f"{name} mentioning {phrase!r}"
        return f"{name}: {message}" if message else f"{name} (with an empty message)"
    if "value" in observation:
        return _short(show(observation["value"]))
    return "nothing (the test did not report)"


# -- observations as JSON data ----------------------------------------------------------------------------------
def encode(value, depth: int = 0, budget: list[int] | None = None):
    """A plain-data picture of `value` that keeps what tests compare: types, orders, array dtypes and values.

    Objects other than plain data are pictured by their type's name only: a probe reduces them to plain data
    (names, `is` comparisons, shapes) before checking. Past MAX_DEPTH levels or MAX_NODES values in all (the
    `budget` left), RecursionError."""
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise RecursionError
    kind = type(value)
    if value is None:
        return None
    if kind is bool:
        return value
    if kind is int:
        return ["int", str(value)[:MAX_TEXT]]
    if kind is float:
        return value if math.isfinite(value) else ["float", repr(value)]
    if kind is str:
        return ["str", _text(value)]
    if isinstance(value, np.ndarray):
        flat = np.asarray(value).ravel()[:MAX_ITEMS]
        items = [x if isinstance(x, (bool, int, str)) or x is None else float(x) if isinstance(x, float) and
                 math.isfinite(x) else repr(x) for x in flat.tolist()]
        return ["array", str(value.dtype), list(value.shape), items, kind.__name__]
    if isinstance(value, np.generic):
        return ["scalar", str(value.dtype), _text(repr(value.item()))]
    if kind in (list, tuple, set, frozenset):
        items = list(value)[:MAX_ITEMS]
        if kind in (set, frozenset):
            items = sorted(items, key=lambda item: json.dumps(encode(item, depth + 1, budget), sort_keys=True))
        return [kind.__name__, [encode(item, depth + 1, budget) for item in items]]
    if kind is dict:
        return ["dict", [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)]
                     for k, v in list(value.items())[:MAX_ITEMS]]]
    if isinstance(value, type):
        return ["type", _text(value.__qualname__)]
    return ["object", _text(_type_name(value))]


def show(data) -> str:
    """An encoded value written back the way Python would print it."""
    if data is None or isinstance(data, (bool, float)):
        return repr(data)
    tag, *rest = data
    if tag == "int":
        return rest[0]
    if tag in ("float",):
        return rest[0]
    if tag == "str":
        return repr(rest[0])
    if tag in ("list", "tuple", "set", "frozenset"):
        inner = ", ".join(show(item) for item in rest[0])
        return {"list": f"[{inner}]", "tuple": f"({inner}{',' if len(rest[0]) == 1 else ''})",
                "set": f"{{{inner}}}" if inner else "set()", "frozenset": f"frozenset({{{inner}}})"}[tag]
    if tag == "dict":
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in rest[0]) + "}"
    if tag == "array":
        dtype, shape, items, kind = rest
        values = ", ".join(map(str, items[:8])) + (", ..." if len(items) > 8 else "")
        return f"{kind}(shape={tuple(shape)}, dtype={dtype}) [{values}]"
    if tag == "scalar":
        return f"{rest[1]} ({rest[0]})"
    if tag == "type":
        return f"<class {rest[0]}>"
    if tag == "object":
        return f"a {rest[0]} object"
    return repr(data)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def _text(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " ..."


def _type_name(value) -> str:
    return type.__dict__["__name__"].__get__(type(value))


def _safe_str(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - a learner's exception whose __str__ fails still has a type
        return ""
    return text if type(text) is str else ""
