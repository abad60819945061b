"""The tamper guard that runs inside a grading kernel (imported there; keep it free of heavy imports).

The grader inserts a cell running `install()` before the first cell of the notebook, a `snapshot()` cell after
each locked course cell (so the modules it binds, `np`, `nn`, ..., are known) and a `verify(nonce)` cell before
each test cell. `install()` records the identity of everything a test relies on (builtins such as
`AssertionError` and `isinstance`, numpy's comparison functions, the `modulecraft.checks` helpers, the modules in
`sys.modules`); `verify` prints one line `modulecraft-guard <nonce> ok` or `... tampered: <what>`. The nonce is
chosen by the grader per test cell, so student code that ran earlier cannot print that line in advance; a
missing, repeated or altered line is itself reported as tampering.

Limit: code in the kernel can in principle reach and rewrite this module too; the guard catches replacing,
patching or wrapping what tests rely on, objects that compare equal to anything, and trace/profile hooks,
which covers the ways seen in practice to fake a pass from inside a notebook.
"""
import builtins
import sys
import types

MARK = "modulecraft-guard"
WATCHED_NUMPY = ("allclose", "isclose", "array_equal", "array_equiv", "all", "any", "equal", "asarray", "array",
                 "ndarray", "testing", "isfinite", "isnan", "shape", "ndim", "dtype", "float32", "float64")
REBOUND = {"input", "raw_input", "getpass"}
WATCHED_MODULES = ("builtins", "numpy", "numpy.testing", "modulecraft", "modulecraft.nn", "modulecraft.checks")


class _Stranger:
    """Compares equal to nothing honest: a fresh object of a private class."""


class Guard:
    def __init__(self, cell_deadline=None):
        import numpy  # the tests' numpy, imported before any student code runs
        try:
            import modulecraft.checks as checks
        except ImportError:
            checks = None
        self.stdout_write = sys.stdout.write
        self.stdout_flush = sys.stdout.flush
        self.modules = {name: sys.modules.get(name) for name in WATCHED_MODULES}
        self.watched = {}
        # `builtins._` changes with every displayed value and ipykernel rebinds `input` for every request:
        # the other public names, plus the import/class machinery.
        self._watch(builtins, "builtins", [n for n in vars(builtins) if not n.startswith("_") and n not in REBOUND]
                    + ["__import__", "__build_class__"])
        self._watch(numpy, "numpy", WATCHED_NUMPY)
        self._watch(numpy.testing, "numpy.testing", [n for n in dir(numpy.testing) if n.startswith("assert")])
        if checks is not None:
            self._watch(checks, "modulecraft.checks", [n for n in vars(checks) if not n.startswith("_")])
        self._watch(sys, "sys", ["settrace", "setprofile", "stdout", "modules"])
        self._watch(type(sys.stdout), "sys.stdout's type", ["write", "flush"])
        self._watch(Guard, "the guard", ["verify", "_problems", "_report", "snapshot"])
        self.bound_modules = {}  # names bound to modules by the course's locked cells
        if cell_deadline:
            _stop_cells_after(cell_deadline)
        self.ipython = _ipython_hooks()  # after our own hooks: only others' count as tampering

    def _watch(self, owner, owner_name, names):
        for name in names:
            if hasattr(owner, name):
                self.watched[f"{owner_name}.{name}"] = (owner, name, getattr(owner, name))

    def snapshot(self, namespace):
        """Remember the modules the course's cells bound to names (`np`, `nn`, ...)."""
        for name, value in namespace.items():
            if isinstance(value, types.ModuleType) and not name.startswith("_"):
                self.bound_modules.setdefault(name, value)

    def verify(self, nonce, namespace):
        problems = self._problems(namespace)
        self._report(nonce, problems)

    def _problems(self, namespace):
        missing = object()
        problems = [f"{label} was replaced" for label, (owner, name, original) in self.watched.items()
                    if getattr(owner, name, missing) is not original]
        problems += [f"sys.modules[{name!r}] was replaced" for name, module in self.modules.items()
                     if module is not None and sys.modules.get(name) is not module]
        problems += [f"the name {name!r} no longer refers to the module {module.__name__}"
                     for name, module in self.bound_modules.items() if namespace.get(name) is not module]
        now = _ipython_hooks()
        problems += [f"IPython's {name} were changed" for name, value in self.ipython.items() if now.get(name) != value]
        if sys.gettrace() is not None:
            problems.append("a trace function is installed (sys.settrace)")
        if sys.getprofile() is not None:
            problems.append("a profile function is installed (sys.setprofile)")
        problems += [f"{kind} {name!r} compares equal to anything" for kind, name in _always_equal(namespace)]
        return problems

    def _report(self, nonce, problems):
        verdict = "ok" if not problems else "tampered: " + "; ".join(sorted(set(problems)))
        self.stdout_write(f"{MARK} {nonce} {verdict}\n")
        self.stdout_flush()


def _always_equal(namespace):
    """Student objects and classes whose `==` says True to an object they cannot know."""
    stranger = _Stranger()
    found = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type):
            if value.__module__ != "__main__" or "__eq__" not in vars(value):
                continue
            try:
                instance = value.__new__(value)
            except Exception:
                continue
            kind = "class"
        elif type(value).__module__ == "__main__":
            instance, kind = value, "object"
        else:
            continue
        try:
            if (instance == stranger) is True or bool(instance == stranger):
                found.append((kind, name))
        except Exception:
            pass
    return found


def _ipython_hooks():
    """IPython's ways of rewriting or swallowing a cell: input/AST transformers, custom exception handlers,
    pre-execution callbacks. Stored as identities, so that appending to a list shows."""
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    shell = get_ipython()
    if shell is None:
        return {}
    manager = shell.input_transformer_manager
    return {
        "custom exception handlers": tuple(shell.custom_exceptions),
        "input transformers": tuple(map(id, [*shell.input_transformers_post, *manager.cleanup_transforms,
                                             *manager.line_transforms, *manager.token_transformers])),
        "AST transformers": tuple(map(id, shell.ast_transformers)),
        "pre-run callbacks": tuple(map(id, [*shell.events.callbacks.get("pre_run_cell", []),
                                            *shell.events.callbacks.get("pre_execute", [])])),
        "traceback handlers": (id(type(shell).showtraceback), id(vars(shell).get("showtraceback")),
                               id(type(shell).run_cell), id(vars(shell).get("run_cell"))),
    }


def _stop_cells_after(seconds):
    """Raise KeyboardInterrupt in a cell still running `seconds` after it started.

    The grader interrupts a cell at the time limit with SIGINT, which a cell can ignore; nbclient then gives up
    on the whole notebook. Raised from a timer thread into the main thread, the KeyboardInterrupt ends such a
    cell too, so the rest of the notebook is still graded."""
    import ctypes
    import threading

    main = threading.main_thread().ident
    timers = []

    def interrupt():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), ctypes.py_object(KeyboardInterrupt))

    def start(*_):
        timers.append(threading.Timer(seconds, interrupt))
        timers[-1].daemon = True
        timers[-1].start()

    def stop(*_):
        while timers:
            timers.pop().cancel()

    shell = _shell()
    shell.events.register("pre_run_cell", start)
    shell.events.register("post_run_cell", stop)


def _shell():
    from IPython import get_ipython
    return get_ipython()


def install(cell_deadline=None):
    """Called by the grader's first cell, before any student code."""
    return Guard(cell_deadline)
