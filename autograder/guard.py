"""The tamper guard that runs inside a grading kernel (imported there; keep it free of heavy imports).

nbgrader scores a test cell from its outputs, which code in the kernel can write or suppress. The guard gives
the grader evidence that code in the kernel cannot counterfeit without being caught:

- The grader's first cell calls `install()`, before any student code. It reads a per-notebook key from a file
  the grader put in the kernel's folder (and deletes it), and registers an audit hook (`sys.addaudithook`:
  Python code cannot remove or replace it) that holds the key and every snapshot in its closure. Nothing else
  refers to them: there is no guard object in the notebook's namespace. What the hook runs (its constants,
  which are frozen, the checks' methods, the test for process memory) is bound when it is made: replacing a
  name of this module or a method of its classes, even for a moment, changes nothing the hook does, and is
  reported by the next cell event.
- Cells are talked to the hook through `sys.audit("modulecraft.guard", what, nonce)`. Each test cell starts
  with a "verify" line, which prints one line `modulecraft-guard <nonce> ok|tampered: <what> <hmac>` before the
  test's first line runs; each test cell ends with a "passed" line that checks again (a patch that a thread, a
  callback or a timer would undo after the test is still in place there) and prints `modulecraft-guard <nonce>
  passed|tampered: <what> <hmac>`, reached only if no statement of the test raised. The grader scores a test
  cell as failed unless its own signed "passed" line is there, whatever else the cell printed, displayed or
  hid (`integrity.CollectGuard`). A last guard cell checks once more at the end of the notebook.
- What could reach the key (the garbage collector's object lists, other threads' frames, trace and profile
  functions, ctypes' audited memory access, /proc/*/mem; and frames or code objects while the hook runs student
  code, e.g. an `__eq__` it probes) is refused, and the hook forgets its key first: from then on nothing is
  signed, so the grader holds the submission for review. The key is held by OpenSSL's HMAC object (C), whose
  methods student code cannot patch.

Hidden tests must not reach the learner, not even while they run: as a test cell starts (IPython's
pre_run_cell, which knows a test cell by its first line), and again once it is in the history and compiled (its
"verify" line, the first to run, before any line of the test), the guard removes its text from everywhere the
kernel keeps the running cell's text: the input history (`In`, `_ih`, `_i*`, the history manager's lists,
cache and `_i00`), the ExecutionInfo (`displayhook.exec_result`, later `last_execution_result`), the request
that carried it (`kernel.get_parent()`, `shell.parent_header`) and linecache (so the instructor's traceback of a
failing test cell shows no source lines). Code of the notebook that looks at frames or code objects while a
test cell runs (`sys._getframe`, `inspect.currentframe`, `traceback.extract_stack`, a traceback's frames, a
generator's frame, a function's `__code__`) is reported; the watch ends with IPython's post_run_cell, and the
same event raised by the notebook's code while a test runs is reported instead. The grader also removes outputs
that quote hidden tests (`integrity`, `feedback`).

"verify" and "passed" report as tampering: replaced builtins, numpy functions, `modulecraft.checks` helpers,
`sys` hooks and modules; changed methods of the classes IPython, ipykernel, modulecraft and this guard run on
(class level) and of their live objects (instance level); IPython's cell rewriting and exception hooks,
pre/post-run callbacks and map of the cells' file names; another audit hook; changed code of library functions;
what can run code later at a time of its own: `gc.callbacks`, a Python signal handler (which also receives the
running frame; the guard's own DEADLINE_SIGNAL handler, changed in any way), a thread the notebook started that
is still running (counted by the interpreter, however it was started: `_thread` directly, or taken off
threading's list); a ctypes union made by the notebook; an FFI loaded into a kernel that had none; and classes
created since `install()` whose instances compare equal to values they cannot know (always-equal objects,
whatever their names; a comparison answering None, as typing stubs do, is no answer). New classes are looked for
among the objects the garbage collector tracks, which `install()` leaves holding only what is made after it (it
freezes the rest: a few thousand objects to search, not every class alive), and among the direct subclasses of
`object` and `type` (a C extension's own types, an FFI's, are never tracked); a notebook that freezes its objects
as well takes the guard's marker class along, and every class alive is walked instead. A name given to this
module is reported too: it would shadow a builtin the checks call.

Limits (CPython cannot confine code within one process):
- A patch that student code makes and undoes within one test cell, between two checks, is not seen (e.g. a
  replaced `np.allclose` that puts the original back when it is called); nor a thread of a class claiming a
  library's module name (a library's thread class may be made after `install()`, as it is first needed); nor an
  always-equal class that the notebook lets the garbage collector take (`gc.collect()`) before the next check;
  nor a `__ne__` answering None.
- Code in the kernel can read and write any memory without an audit event, so code written to find the key
  (or the hook's state) in memory could sign a forged verdict. numpy alone does it: an array made from an
  object's `__array_interface__` (any address, even on a SimpleNamespace) or by `as_strided` (any offset).
  The key is dropped as code naming these is compiled (RAW_MEMORY), before it runs; code that makes the names
  as it runs (`getattr` with a computed string) is not seen. The refusal of /proc/*/mem goes by the path as
  written: `/proc/self/task/<id>/mem`, `//proc/self/mem`, a symbolic link or a `dir_fd` get past it (the audit
  event shows neither the link's target nor the dir_fd), where the kernel is dumpable: not when grading as root
  (a kernel that changed user is not: its /proc files are root's).
  ctypes adds calls to any C function. In a kernel that has an FFI loaded at `install()` (today's, whose fork
  server imported numpy with ctypes available), only ctypes' audited access (`string_at`, `from_address`,
  `addressof`, `PyObj_FromPtr`) is refused and unions made by the notebook reported; `memmove`, `cast`,
  `c_char_p(address).value` and `ctypes.pythonapi` calls are not audited by CPython 3.11. In a kernel that
  has none (no `_ctypes`/`_cffi_backend` type alive, whatever `sys.modules` says), every later import of one is
  refused, with an ImportError saying what to do, and one found loaded anyway is reported.
"""
import _thread
import builtins
import gc
import itertools
import operator
import os
import signal
import sys
import threading
import time
import types

MARK = "modulecraft-guard"
EVENT = "modulecraft.guard"
SNAPSHOT = f"# {MARK}: snapshot"  # the grader's last line of a locked course cell (a comment: displays no less)
KEY_FILE = ".modulecraft-guard-key"  # in the kernel's working folder, read and deleted by install()
WATCHED_NUMPY = ("allclose", "isclose", "array_equal", "array_equiv", "all", "any", "equal", "asarray", "array",
                 "ndarray", "testing", "isfinite", "isnan", "shape", "ndim", "dtype", "float32", "float64")
AUDIT_CALL = f"__import__('sys').audit({EVENT!r}, "  # how the grader's lines start (`integrity._audit`)
VERIFY_LINE = AUDIT_CALL + "'verify', "  # how a test cell starts
REBOUND = {"input", "raw_input", "getpass"}  # ipykernel rebinds these for every request
WATCHED_MODULES = ("builtins", "numpy", "numpy.testing", "modulecraft", "modulecraft.nn", "modulecraft.checks",
                   "autograder.guard")
# What could rewrite or fake a test cell's run. What only hides output (sys.stdout, the display hooks) cannot
# forge a pass: a test cell passes only with its signed "passed" line, which its own last line prints.
WATCHED_SYS = ("settrace", "setprofile", "audit", "modules")
# Packages whose classes the tests and IPython's execution path run on: their methods must not change.
TRUSTED_PACKAGES = ("IPython", "ipykernel", "jupyter_client", "comm", "zmq", "traitlets", "modulecraft",
                    "autograder")
# What reaches the guard's frames, closures or memory at any time, and what does while it runs student code.
# Frozen, and bound by the hook when it is made: names of this module can be replaced (and put back before the
# next check), what the hook holds cannot.
EXPOSING = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                      "sys.settrace", "sys.setprofile", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle",
                      "ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer",
                      "ctypes.addressof", "ctypes.PyObj_FromPtr"})
EXPOSING_WHILE_ACTIVE = frozenset({"sys._getframe", "object.__getattr__"})
FRAME_WRAPPERS = ("inspect", "traceback")  # modules through which a cell commonly reaches frames
CODE_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
# Checked as each test cell starts and again at its end, before "passed" is signed: a patch that a thread, a
# callback or a timer would undo after the test's checks is still there at its end.
CHECKED_AT = frozenset({"verify", "passed"})
IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: classes nobody can patch
HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: classes made at run time (a C extension's own types are not)
# The foreign function interfaces: the extensions (by their types' __module__) and every module name whose
# import would load one. Once loaded, an extension stays in memory whatever sys.modules says.
FFI_EXTENSIONS = frozenset({"_ctypes", "_cffi_backend"})
FFI_MODULES = FFI_EXTENSIONS | {"ctypes", "cffi"}
FFI_REFUSED = ("ctypes (and packages built on it, such as scipy and scikit-learn) is not available while grading: "
               "graded code can use numpy only; import such packages in a cell that is skipped while grading, under "
               "`if not os.environ.get(\"MODULECRAFT_GRADING\"):`, as the course's comparisons with torch are")
# numpy's ways to an array at any address, unchecked: an object's `__array_interface__` or `__array_struct__`, and
# `as_strided` (any offset from an array). The key is dropped as code naming one is compiled (a cell, exec, eval,
# compile, a file the notebook imports; not the libraries'), before it runs: what it could read signs nothing.
RAW_MEMORY = (b"__array_interface__", b"__array_struct__", b"as_strided")
RAW_MEMORY_NAMED = ("compiling code that names numpy's raw memory access (__array_interface__, __array_struct__, "
                    "as_strided), which reads and writes any memory of the kernel")
# Sent to the main thread by the guard's cell-deadline thread (`signal.pthread_kill`): a real-time signal no
# library uses, whose Python handler (the guard's) ends an overdue cell with KeyboardInterrupt.
DEADLINE_SIGNAL = signal.SIGRTMAX
DEADLINE_REACHED = "the cell's time limit was reached"  # the message of that KeyboardInterrupt (the grader's sign)


class _Stranger:
    """Compares equal to nothing honest: a fresh object of a private class."""


def install(cell_deadline=None):
    """Called by the grader's first cell, before any student code; returns nothing on purpose."""
    import _hashlib

    try:
        with open(KEY_FILE, "rb") as file:
            key = file.read()
        os.unlink(KEY_FILE)
    except OSError:
        key = None  # not graded by our grader (e.g. run by hand): nothing will be signed
    if cell_deadline:
        _stop_cells_after(cell_deadline)  # its thread starts before the checks' snapshot of threads
    shell = _shell()
    if shell is not None:
        shell.events.register("pre_run_cell", _before_cell)
        shell.events.register("post_run_cell", _after_cell)
    checks = _Checks()
    if checks.ffi_free:  # keep it so: a hook of its own, holding no secret (its traceback reaches the notebook)
        for name in FFI_MODULES:  # a None entry (the server's) fails an import without a word, or not at all
            if name in sys.modules and sys.modules[name] is None:  # (Cython's `import ctypes` gets None)
                del sys.modules[name]
        sys.addaudithook(_refuse_ffi_imports())
    sign = _hashlib.hmac_new(key, digestmod="sha256") if key else None
    sys.addaudithook(_hook(sign, checks, sys.stdout.write, sys.stdout.flush))


def _refuse_ffi_imports(ffi=FFI_MODULES, message=FFI_REFUSED, split=str.split):
    """An audit hook that fails every later import of an FFI (ctypes, cffi) with an ImportError saying why:
    `import`, `importlib`, `imp` and `_imp.create_dynamic` (a spec of any name whose last part names the
    extension's init function) all raise the audit event "import" with the module's name before loading it."""

    def refuse(event, args):
        if event == "import" and not ffi.isdisjoint(split(args[0], ".")):
            raise ImportError(message, name=args[0])

    return refuse


def _library_folders():
    """Where the libraries' own files are (Python, the environment, the grader and the reference package of this
    repository), as path prefixes, as given and resolved."""
    import modulecraft
    folders = {sys.prefix, sys.base_prefix, os.path.dirname(__file__), os.path.dirname(modulecraft.__path__[0])}
    return tuple({os.path.join(path, "") for folder in folders for path in (folder, os.path.realpath(folder))})


def _is_library_file(filename, libraries, kind=type, is_a=issubclass, starts=str.startswith):
    """Whether compile was given the text of a library's file (by an import): its path under a library folder.
    Cells, exec and eval have other names ("<string>", IPython's cell files)."""
    return is_a(kind(filename), str) and starts(filename, libraries)


def _names_raw_memory(source, names=RAW_MEMORY, kind=type, is_a=issubclass, encode=str.encode, join=bytes.join,
                      contains=bytes.__contains__):
    """Whether source text (as given to compile) names numpy's raw memory access. What it calls is bound as
    defaults, and base-class methods read a subclass of str or bytes (whose own methods are the notebook's). An
    AST is not searched: the text it was parsed from was. (A name the code computes as it runs is not seen.)"""
    if is_a(kind(source), str):
        source = encode(source, "utf-8", "surrogateescape")
    elif is_a(kind(source), (bytes, bytearray, memoryview)):
        source = join(b"", [source])
    else:
        return False
    for name in names:
        if contains(source, name):
            return True
    return False


def _before_cell(info):
    """IPython's pre_run_cell, before any callback the notebook may have added: the cell's ExecutionInfo (which
    holds its text) is made, the history not yet written."""
    sys.audit(EVENT, "before", info, "")


def _after_cell(result=None):
    """IPython's post_run_cell: the cell has ended (with or without an error). After a course cell (one that
    ends with SNAPSHOT), remember the modules it bound to names."""
    sys.audit(EVENT, "after", None, "")
    text = getattr(getattr(result, "info", None), "raw_cell", None)
    if type(text) is str and SNAPSHOT in text:
        sys.audit(EVENT, "snapshot", None, "")


def _hook(sign, checks, write, flush):
    """The audit hook: the only holder of the signing key (inside `sign`) and of the snapshots (`checks`)."""
    state = {"sign": sign, "active": False, "lost": None, "test": None, "running": False, "inspecting": False}
    # What the hook runs, bound now: the notebook can replace this module's names and its classes' methods
    # (and put them back before the next check), not what the closure holds. The checks report such changes.
    mark, event_name, exposing, while_active, code_attributes, checked_at, is_process_memory = (
        MARK, EVENT, EXPOSING, EXPOSING_WHILE_ACTIVE, CODE_ATTRIBUTES, CHECKED_AT, _is_process_memory)
    names_raw_memory, is_library_file, raw_memory_named, libraries = (
        _names_raw_memory, _is_library_file, RAW_MEMORY_NAMED, _library_folders())
    problems_now, scrub, running_cell, snapshot, guard_changes, from_a_cell, outside_the_cells, found = (
        checks.problems, checks.scrub, checks.running_cell, checks.snapshot, checks.guard_changes,
        checks.called_from_a_cell, checks.outside_the_cells, checks.found)
    about_to_test = _test_about_to_run
    collecting, stop_collecting, collect_again, tracked_objects = gc.isenabled, gc.disable, gc.enable, gc.get_objects

    def drop_key(why):
        state["sign"] = None
        state["lost"] = state["lost"] or why

    def report(nonce, verdict):
        line = f"{mark} {nonce} {verdict}"
        if state["sign"] is None:
            line += f" unsigned: the guard's key was dropped after {state['lost'] or 'an unknown event'}"
        else:
            signer = state["sign"].copy()
            signer.update(line.encode())
            line += " " + signer.hexdigest()
            del signer
        write(line + "\n")
        flush()

    def inspecting(look):
        """`look()` at the stack: our own look at frames raises the frame events again, let through."""
        state["inspecting"] = True
        try:
            return look()
        finally:
            state["inspecting"] = False

    def cell_event(what, nonce, args):
        """What a test cell's first and last lines, the last guard cell or IPython (after a cell) ask for."""
        found.extend(problem for problem in guard_changes() if problem not in found)
        if what in ("verify", "passed"):
            problems = problems_now(inspecting(tracked_objects)) if what in checked_at else []
            clean = "ok" if what == "verify" else "passed"
            report(nonce, "tampered: " + "; ".join(sorted(set(problems))) if problems else clean)
        if what == "verify":
            state["test"] = args[2][::-1]  # the test cell's "passed" nonce: how to find it in the history
            if state["test"] and scrub(state["test"], running_cell()):
                state["running"] = True  # the test cell's text is gone before any line of the test runs
        elif what == "before":  # a test cell's ExecutionInfo and request are emptied before anything sees them
            test = about_to_test(nonce)
            if test:
                state["test"], state["running"] = test, scrub(test, nonce)
        elif what == "after" and state["running"]:
            if inspecting(outside_the_cells):
                scrub(state["test"], None)
                state["test"], state["running"] = None, False
            else:
                found.append("the notebook's code raised the guard's end of a cell while a test ran")
        elif what == "snapshot":
            snapshot()

    def handle(event, args):
        """What to refuse (a message), after dropping the key; None to let the event through."""
        if event == event_name:
            # No garbage collection while the guard checks: a class the notebook made and dropped (an
            # always-equal result) is still there to be seen, not taken by the check's own allocations.
            was_collecting = collecting()
            stop_collecting()
            try:
                cell_event(args[0], args[1], args)
            finally:
                if was_collecting:
                    collect_again()
        elif event in exposing:
            drop_key(event)
            return f"{event} is not available in a graded notebook"
        elif state["test"] and event in while_active and inspecting(from_a_cell):
            found.append(f"the notebook's code looked at frames or code ({event}) during a test")
        elif event == "compile" and names_raw_memory(args[0]) and not is_library_file(args[1], libraries):
            drop_key(raw_memory_named)  # and let it run: held for review, it can sign nothing
        elif event == "open" and is_process_memory(args[0]):
            drop_key(f"opening {args[0]!r}")
            return "the kernel's memory is not available in a graded notebook"
        elif event == "sys.addaudithook":
            found.append("another audit hook was added")
        elif event in ("object.__setattr__", "object.__delattr__") and args[1] in code_attributes:
            module = getattr(args[0], "__module__", None)
            if isinstance(module, str) and module.split(".")[0] in (*TRUSTED_PACKAGES, "numpy", "builtins"):
                found.append(f"the code of {module}.{getattr(args[0], '__qualname__', '?')} was changed")
        return None

    def hook(event, args):
        if state["inspecting"]:  # only our own frame walk runs (plain dict and str operations)
            return
        if state["active"]:  # code the guard called (a probed __eq__, a path's __fspath__, a patched write)
            if event in exposing or event in while_active:
                drop_key(f"{event} while the guard was checking")
                raise RuntimeError(f"{event} is not available in a graded notebook")
            return
        # No exception may leave this function while the key is held: its traceback would hold this frame.
        state["active"] = True
        try:
            refusal = handle(event, args)
        except BaseException:
            drop_key(f"an error in the guard while handling {event}")
            return
        finally:
            state["active"] = False
        if refusal:
            raise RuntimeError(refusal)

    return hook


def _is_process_memory(path, fspath=os.fspath, kind=type, decode=bytes.decode, split=str.split, count=len):
    """Whether `open` was asked for a process's memory (`path` as given: str, bytes, a path object or an fd).
    What it calls is bound as defaults: replacing a function of `os` or a builtin must not open the way."""
    if kind(path) is int:
        return False
    path = fspath(path)  # may run a path object's __fspath__: the hook is active, frames are refused
    if kind(path) is bytes:
        path = decode(path, "utf-8", "surrogateescape")
    parts = split(path, "/")
    return count(parts) >= 4 and parts[1] == "proc" and parts[3] in ("mem", "map_files", "pagemap")


def _test_about_to_run(info, verify=VERIFY_LINE, kind=type, starts=str.startswith, cut=str.partition,
                       split=str.rsplit):
    """The "passed" nonce of the test cell whose ExecutionInfo is `info` (its first line, the verify line, holds
    it reversed), or None for any other cell."""
    text = getattr(info, "raw_cell", None)  # an ExecutionInfo is IPython's (checked), not the notebook's
    if kind(text) is not str or not starts(text, verify):
        return None
    first_line = cut(text, "\n")[0]
    return split(first_line, "'", 2)[-2][::-1] if first_line.count("'") >= 8 else None


def _holds(text, nonce):
    return type(text) is str and nonce in text  # a str subclass could run the notebook's code on `in`


class _Checks:
    """Snapshots taken by install() and compared by each verify."""

    def __init__(self):
        import numpy  # the tests' numpy, imported before any student code runs
        try:
            import modulecraft.checks as course_checks
        except ImportError:
            course_checks = None
        self.found = []  # tampering seen as it happened (by the hook)
        self.builtins = vars(builtins)
        self.builtin_originals = {n: v for n, v in self.builtins.items()
                                  if not n.startswith("_") and n not in REBOUND}
        self.builtin_originals.update(__import__=builtins.__import__, __build_class__=builtins.__build_class__)
        self.guard_module = vars(sys.modules[__name__])
        self.guard_originals = dict(self.guard_module)
        self.guard_classes = [(cls, dict(vars(cls))) for cls in (_Checks, _ClassDict)]
        self.watched = {}
        self._watch(numpy, "numpy", WATCHED_NUMPY)
        self._watch(numpy.testing, "numpy.testing", [n for n in dir(numpy.testing) if n.startswith("assert")])
        if course_checks is not None:
            self._watch(course_checks, "modulecraft.checks", [n for n in vars(course_checks) if not n.startswith("_")])
        self._watch(sys, "sys", WATCHED_SYS)
        self.modules = {name: sys.modules.get(name) for name in WATCHED_MODULES}
        self.classes = _all_classes()
        self.class_dicts = {cls: _ClassDict(cls) for cls in self.classes.values()
                            if _is_trusted(cls) and not cls.__flags__ & IMMUTABLE_TYPE}
        self.class_keys, self.class_values = _flat_items(self.class_dicts)
        self.shell = _shell()
        self.cells = getattr(getattr(self.shell, "compile", None), "_filename_map", {})  # cells' file names
        self.main_thread = _thread.get_ident()  # install() runs in a cell
        self.namespace = self.shell.user_ns if self.shell is not None else {}
        self.machinery = {id(obj): (obj, _behaviour(obj)) for obj in _machinery(self.shell)}
        self.ipython = _ipython_hooks(self.shell)
        self.bound_modules = {}  # names bound to modules by the course's locked cells
        # What can run code later, at a time of its own (undoing a patch after a test's checks).
        # threading's own list of its threads (the dict itself: rebinding the module's name changes nothing here),
        # and the interpreter's count of running threads, however started (`_thread` too).
        self.listed_threads, self.running_threads, self.pause = threading._active, _thread._count, time.sleep
        self.main_thread_object, self.dummy_thread = threading.main_thread(), threading._DummyThread
        self.threads = {id(thread): thread for thread in dict.values(self.listed_threads)}  # by id: no __eq__ runs
        self.gc_callbacks = tuple(map(id, gc.callbacks))
        self.signal_handlers = _signal_handlers()
        ffi = _ffi_types(self.classes.values())
        self.ffi_free = not ffi  # whether this process never loaded an FFI (nothing reads memory through one)
        self.ctypes_unions = _ctypes_unions(ffi)
        self.honest = {}  # classes made since install() that compare honestly (see _always_equal)
        # From now on the garbage collector's lists hold only objects made since (the older ones are frozen), a
        # few thousand to search for new classes instead of every class alive. A marker class tells whether the
        # notebook froze objects too (gc.freeze() takes it along): then every class alive is walked again.
        gc.freeze()
        self.marker = type("young", (), {})
        self.classes[id(self.marker)] = self.marker

    def _watch(self, owner, owner_name, names):
        for name in names:
            if hasattr(owner, name):
                self.watched[f"{owner_name}.{name}"] = (owner, name, getattr(owner, name))

    def guard_changes(self):
        """This module's names and its classes' methods that were replaced (plain dict and identity checks)."""
        changed = [f"the guard's {name} was replaced" for name, value in self.guard_originals.items()
                   if self.guard_module.get(name) is not value]
        changed += [f"the guard's module was given the name {name!r}"
                    for name in _added_names(self.guard_module, self.guard_originals)]
        return changed + [f"the guard's {cls.__qualname__}.{name} was replaced" for cls, before in self.guard_classes
                          for name, value in before.items() if vars(cls).get(name) is not value]

    def is_ours(self, thread):
        """Whether `thread` runs only our code: a thread class of the kernel's libraries run as is (e.g. zmq's
        garbage collector, started when a cell prints much, its class made as it is first needed). (The guard's
        cell deadline is a thread started before the snapshot.)"""
        return _is_trusted(type(thread)) and getattr(thread, "_target", None) is None

    def new_threads(self):
        """Threads running that were not at install(), and not ours: those in threading's list, then a count of
        those missing from it (started with `_thread` directly, or taken off the list). A thread of threading's
        leaves the list a moment before it stops counting: a count that stays up is one that runs."""
        listed = {id(thread): thread for thread in dict.values(self.listed_threads)
                  if thread is not self.main_thread_object and type(thread) is not self.dummy_thread}
        found = [f"thread {thread.name!r}, started by the notebook, is running" for key, thread in listed.items()
                 if self.threads.get(key) is not thread and not self.is_ours(thread)]
        for _ in range(50):
            unlisted = self.running_threads() - len(listed)
            if unlisted <= 0:
                return found
            self.pause(0.001)
        return found + [f"{unlisted} thread(s) unknown to threading (started with _thread, or taken off its list) "
                        "running"]

    def called_from_a_cell(self, frame_at=sys._getframe):
        """Whether the code that raised the current audit event (directly or through `inspect`/`traceback`) is
        a cell's: frame 0 is this method, 1 `inspecting`, 2 `handle`, 3 `hook`, 4 the caller."""
        frame = frame_at(4)
        for _ in range(3):  # plain dict and str operations only: no code of the notebook may run here
            if frame is None:
                return False
            if self.is_a_cell(frame):
                return True
            if dict.get(frame.f_globals, "__name__") not in FRAME_WRAPPERS:
                return False
            frame = frame.f_back
        return False

    def outside_the_cells(self, frame_at=sys._getframe, thread=_thread.get_ident):
        """Whether the current event comes from the main thread with no cell's code running (IPython's
        post_run_cell, not the notebook's code raising the guard's event while a test runs)."""
        frame = frame_at(0)
        while frame is not None:
            if self.is_a_cell(frame):
                return False
            frame = frame.f_back
        return thread() == self.main_thread

    def is_a_cell(self, frame):
        filename = frame.f_code.co_filename
        return type(filename) is not str or dict.__contains__(self.cells, filename)

    def running_cell(self):
        """The ExecutionInfo of the cell running now (IPython's, which holds its text), or None."""
        result = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)
        return getattr(result, "info", None)

    def scrub(self, nonce, info):
        """Forget the test cell holding `nonce` (its last line names it) wherever the kernel keeps the text of
        the running cell: its ExecutionInfo (`info`), the input history (`In`,
        `_ih`, `_i*`, the history manager's lists and cache), the request that carried it, and linecache.
        Whether any of them held it (the cell is the test cell)."""
        import linecache
        found = False
        for name in ("raw_cell", "transformed_cell"):
            if info is not None and _holds(getattr(info, name, None), nonce):
                setattr(info, name, "")
                found = True
        if self.shell is not None:
            manager = self.shell.history_manager
            for history in (manager.input_hist_parsed, manager.input_hist_raw):
                for index, text in enumerate(history):
                    if _holds(text, nonce):
                        history[index], found = "", True
            manager.db_input_cache[:] = [entry for entry in manager.db_input_cache
                                         if not any(_holds(text, nonce) for text in entry)]
            for name in ("_i00", "_i", "_ii", "_iii"):
                if _holds(getattr(manager, name, None), nonce):
                    setattr(manager, name, "")
            for name, value in list(self.namespace.items()):
                if name.startswith("_i") and _holds(value, nonce):
                    self.namespace[name] = ""
            kernel = getattr(self.shell, "kernel", None)
            for request in (getattr(self.shell, "parent_header", None), kernel and kernel.get_parent("shell")):
                content = request.get("content") if type(request) is dict else None
                if type(content) is dict and _holds(content.get("code"), nonce):
                    content["code"], found = "", True
        for name, entry in list(linecache.cache.items()):  # the cells' entries: not the libraries' files
            if type(name) is str and dict.__contains__(self.cells, name) and len(entry) > 2 \
                    and nonce in "".join(entry[2]):
                del linecache.cache[name]
                found = True
        return found

    def snapshot(self):
        """Remember the modules the course's cells bound to names (`np`, `nn`, ...)."""
        for name, value in list(self.namespace.items()):
            if isinstance(value, types.ModuleType) and not name.startswith("_"):
                self.bound_modules.setdefault(name, value)

    def problems(self, tracked):
        """What was tampered with; `tracked`: the objects the garbage collector tracks (made since install())."""
        # First what everything below relies on, without calling any of it: builtins and this module.
        changed = [f"builtins.{name} was replaced" for name, value in self.builtin_originals.items()
                   if self.builtins.get(name) is not value]
        if changed or self.guard_changes():
            return changed + self.guard_changes()
        missing = object()
        problems = list(self.found)
        problems += [f"{label} was replaced" for label, (owner, name, original) in self.watched.items()
                     if getattr(owner, name, missing) is not original]
        problems += [f"sys.modules[{name!r}] was replaced" for name, module in self.modules.items()
                     if module is not None and sys.modules.get(name) is not module]
        problems += [f"the name {name!r} no longer refers to the module {module.__name__}"
                     for name, module in self.bound_modules.items() if self.namespace.get(name) is not module]
        if not self.class_dicts_unchanged():
            problems += [f"{cls.__module__}.{cls.__qualname__}.{name} was changed"
                         for cls, before in self.class_dicts.items() for name in before.changed_methods(cls)]
        problems += [f"{type(obj).__name__}.{name} was changed on its instance"
                     for obj, before in self.machinery.values() for name in _changed(before, _behaviour(obj))]
        if self.shell is not None and getattr(self.shell.compile, "_filename_map", None) is not self.cells:
            problems.append("IPython's map of the cells' file names was replaced")
        now = _ipython_hooks(self.shell)
        problems += [f"IPython's {name} were changed" for name, value in self.ipython.items() if now.get(name) != value]
        problems += ["gc.callbacks were changed"] * (tuple(map(id, gc.callbacks)) != self.gc_callbacks)
        problems += self.new_threads()
        problems += [f"a handler for signal {number} was set" for number, handler in _signal_handlers().items()
                     if handler is not self.signal_handlers.get(number)
                     and (callable(handler) or number == DEADLINE_SIGNAL)]
        new_classes = [cls for key, cls in self.classes_now(tracked).items() if key not in self.classes]
        problems += [f"the notebook made the ctypes union {cls.__qualname__!r} (it reads any memory)"
                     for cls in new_classes if issubclass(cls, self.ctypes_unions)]
        if self.ffi_free:
            problems += [f"the FFI {name} was loaded into the kernel"
                         for name in sorted({cls.__module__ for cls in _ffi_types(new_classes)})]
        problems += [f"class {name!r} compares equal to anything" for name in _always_equal(new_classes, self.honest)]
        return problems

    def class_dicts_unchanged(self, same=operator.is_, each=map):
        """Whether every watched class dict holds what it held, identity for identity: one pass over all of them
        (most checks find nothing changed; otherwise each class is compared on its own)."""
        keys, values = _flat_items(self.class_dicts)
        return (len(keys) == len(self.class_keys) and len(values) == len(self.class_values)
                and all(each(same, keys, self.class_keys)) and all(each(same, values, self.class_values)))

    def classes_now(self, tracked):
        """Every class made since install(), and others: the classes among `tracked` and the direct subclasses of
        `object` and `type` (a C extension's own types are never tracked; an FFI's include some of those), or, if
        the marker is not among `tracked` (the notebook froze objects), every class alive."""
        found = _classes_among(tracked)
        if id(self.marker) not in found:
            return _all_classes()
        for base in (object, type):
            subclasses = type.__subclasses__(base)
            found.update(zip(map(id, subclasses), subclasses))
        return found


def _classes_among(objects, kind=type, ident=id, keep=itertools.compress,
                   is_metaclass=type.__dict__["__subclasscheck__"].__get__(type)):
    """The classes among `objects` (those whose type is a subclass of type), by id. Only their types are read and
    type's own subclass check is called: no code of theirs runs (`isinstance` would ask an object for its
    `__class__`; a metaclass could answer `==`, `hash` or `issubclass` its own way)."""
    classes = list(keep(objects, map(is_metaclass, map(kind, objects))))
    return dict(zip(map(ident, classes), classes))


def _signal_handlers(numbers=tuple(int(number) for number in signal.valid_signals()
                                    if number not in (signal.SIGKILL, signal.SIGSTOP))):
    """Python's handler of each signal (a function set by `signal.signal` runs whenever the signal comes)."""
    return {number: signal.getsignal(number) for number in numbers}


def _ffi_types(classes, flags=type.__dict__["__flags__"].__get__, module=type.__dict__["__module__"].__get__):
    """The types of a loaded FFI extension among `classes`: static types (not made at run time) of its module.
    Read with type's own getters: a class's metaclass could answer otherwise."""
    return [cls for cls in classes if not flags(cls) & HEAP_TYPE and module(cls) in FFI_EXTENSIONS]


def _ctypes_unions(ffi_types):
    """What a ctypes union derives from: a union of a pointer and an integer reads any address, unaudited.
    (Other ctypes types are made by libraries as they load, e.g. scikit-learn's threadpoolctl.)"""
    return tuple(cls for cls in ffi_types if cls.__name__ == "Union" and cls.__module__ == "_ctypes")


def _added_names(module, originals, kind=type):
    """Names given to the guard's module since install(): one would shadow a builtin its checks call. A key that
    is not exactly a str is reported as such, unhashed (its `__hash__` would be the notebook's code)."""
    return [name if kind(name) is str else "(a key that is not a str)" for name in module
            if kind(name) is not str or name not in originals]


def _changed(before, after):
    return sorted(name for name in before.keys() | after.keys() if before.get(name) is not after.get(name))


class _ClassDict:
    """A class's dict as it was: what it held (kept alive, so that no id in it can be reused) and its methods."""

    def __init__(self, cls):
        self.held = dict(vars(cls))
        self.methods = _methods(cls)

    def changed_methods(self, cls, same=operator.is_):
        """The names of the methods that changed since. Most classes are unchanged, which takes comparing ids
        only; one whose data changed (e.g. a counter) is compared method by method."""
        now, held = vars(cls), self.held
        if len(now) == len(held) and all(map(same, now, held)) and all(map(same, now.values(), held.values())):
            return []
        return _changed(self.methods, _methods(cls))


def _flat_items(class_dicts, chain=itertools.chain.from_iterable, values=types.MappingProxyType.values):
    """The keys and the values of the dicts of the classes `class_dicts` holds, each in one list."""
    now = list(map(vars, class_dicts))
    return list(chain(now)), list(chain(map(values, now)))


def _methods(cls):
    """A class's own functions and descriptors (not its data, e.g. a counter of handles)."""
    return {name: value for name, value in vars(cls).items() if callable(value) or hasattr(value, "__get__")}


def _all_classes(subclasses=type.__subclasses__):
    """Every class alive, by id (found from `object` down through subclasses, named or not)."""
    found = {id(object): object}
    stack = [object]
    pop, push = stack.pop, stack.append
    while stack:
        for sub in subclasses(pop()):
            key = id(sub)
            if key not in found:
                found[key] = sub
                push(sub)
    return found


def _is_trusted(cls):
    module = vars(cls).get("__module__")
    return isinstance(module, str) and module.split(".")[0] in TRUSTED_PACKAGES


def _machinery(shell):
    """The live objects that turn a cell's text into the code that runs (patched, they could run other code)."""
    if shell is None:
        return []
    return [obj for obj in (shell, shell.compile, shell.input_transformer_manager, getattr(shell, "kernel", None))
            if obj is not None]


def _behaviour(obj):
    """An object's own callables (instance attributes and traitlets values): what patching it replaces."""
    own = dict(getattr(obj, "__dict__", {}))
    own.update(own.get("_trait_values", {}))
    return {name: value for name, value in own.items()
            if callable(value) and not isinstance(value, type) and not name.startswith("__")}


def _strangers():
    """Values of the kinds tests compare results with, two of each, that no honest object equals: random,
    away from 0 and 1 (what an uninitialised instance may hold)."""
    import numpy
    rng = numpy.random.default_rng()
    return [[_Stranger(), object()], [float(rng.uniform(2, 9)), float(rng.uniform(-9, -2))],
            [int(rng.integers(10**6, 10**9)), -int(rng.integers(10**6, 10**9))],
            [f"modulecraft-{rng.integers(10**9)}", f"guard-{rng.integers(10**9)}"],
            [tuple(rng.uniform(2, 9, 2)), list(rng.uniform(2, 9, 3))],
            [rng.uniform(2, 9, (2, 3)), rng.uniform(-9, -2, 4).astype(numpy.float32)]]


def _always_equal(classes, honest):
    """Names of `classes` whose instances say `==` to both values of some kind they cannot know. `honest`
    remembers the classes found honest with their `__eq__` and `__ne__` (held, so that their ids are not
    reused): each is probed again only once either changes."""
    found = []
    strangers = None
    for cls in classes:
        own = vars(cls)
        comparisons = (own.get("__eq__"), own.get("__ne__"))
        if comparisons[0] is None and comparisons[1] is None:
            continue
        seen = honest.get(id(cls))
        if seen is not None and seen[0] is cls and seen[1][0] is comparisons[0] and seen[1][1] is comparisons[1]:
            continue
        strangers = strangers or _strangers()
        instance = _instance_of(cls)
        if instance is not None and any(all(_equal(instance, stranger) for stranger in kind) for kind in strangers):
            found.append(cls.__qualname__)
        else:
            honest[id(cls)] = (cls, comparisons)
    return found


def _instance_of(cls):
    """An instance made without calling `__init__` (arrays need a shape: a view of one), or None."""
    import numpy
    try:
        return numpy.arange(2.0, 5.0).view(cls) if issubclass(cls, numpy.ndarray) else cls.__new__(cls)
    except Exception:
        return None


def _equal(instance, stranger):
    import numpy
    try:
        equal, unequal = instance == stranger, instance != stranger
        return (_answers(equal) and bool(numpy.all(equal))) or (_answers(unequal) and not bool(numpy.any(unequal)))
    except Exception:
        return False


def _answers(result):
    """Whether a comparison gave an answer: None is what typing stubs give (`def __eq__(self, other): ...`,
    e.g. narwhals' protocols, which scikit-learn imports), and no test passes on a None from `==`."""
    return result is not NotImplemented and result is not None


def _ipython_hooks(shell):
    """IPython's ways of rewriting or swallowing a cell: input/AST transformers, custom exception handlers,
    pre-execution callbacks. Stored as identities, so that appending to a list shows. (post_execute callbacks
    are not watched: matplotlib's inline backend adds one; what one undoes after a test is still patched when
    its end is checked.)"""
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
        "post-run callbacks": tuple(map(id, shell.events.callbacks.get("post_run_cell", []))),
    }


def _stop_cells_after(seconds, send=signal.pthread_kill, monotonic=time.monotonic):
    """End a cell still running `seconds` after it started with KeyboardInterrupt.

    The grader interrupts a cell at the time limit with SIGINT, which a cell can ignore (nbclient then gives up
    on the whole notebook) and which can land in the guard's hook (which then drops its key: a false hold). The
    grader sets `seconds` a little under its limit: a thread of the guard's sends its own DEADLINE_SIGNAL to the
    main thread (no FFI needed), whose handler raises KeyboardInterrupt(DEADLINE_REACHED) there: the cell ends
    first, even one that ignores SIGINT or is blocked in a system call (the signal interrupts it), and the rest
    is still graded.
    One thread, started here, before any code of the notebook (whose processes could fill the limit later):
    a cell's start only writes down its deadline. (A timer thread per cell cost most of the guard's time per
    cell: starting a thread waits until it runs.) The thread sleeps at most `seconds` at a time, so it is
    awake by any cell's deadline without being told of it.
    Not while the guard runs (in its audit hook, or code of the notebook its checks call, e.g. a slow `__eq__`):
    cut short there, it would drop its key and hold the notebook for review. The handler has the thread send
    the signal again a moment later, until the guard has returned: the cell ends in its own code."""
    main_thread = _thread.get_ident()  # install() runs in a cell
    wake = threading.Condition(threading.RLock())  # reentrant: the signal handler may interrupt a holder
    deadline = [None]  # when the running cell is ended (monotonic seconds), None between cells

    def watch():
        with wake:
            while True:
                due, now = deadline[0], monotonic()
                if due is not None and due <= now:
                    deadline[0] = None
                    send(main_thread, DEADLINE_SIGNAL)
                else:
                    wake.wait(seconds if due is None else due - now)

    def end_at(when):
        with wake:
            deadline[0] = when

    def start(*_):
        end_at(monotonic() + seconds)

    def stop(*_):
        end_at(None)

    def stop_the_cell(signum, frame, guard=__name__, name_of=dict.get, reached=DEADLINE_REACHED):
        while frame is not None:  # f_back and f_globals raise no audit event
            if name_of(frame.f_globals, "__name__") == guard:
                with wake:  # (sent again from here, the signal would come back at once, in this handler)
                    deadline[0] = monotonic() + 0.01
                    wake.notify()
                return
            frame = frame.f_back
        raise KeyboardInterrupt(reached)

    try:
        threading.Thread(target=watch, name="modulecraft-guard-deadline", daemon=True).start()
    except RuntimeError:  # no thread to be had: no deadline (the grader still interrupts cells at the limit)
        return
    signal.signal(DEADLINE_SIGNAL, stop_the_cell)
    shell = _shell()
    shell.events.register("pre_run_cell", start)
    shell.events.register("post_run_cell", stop)


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
