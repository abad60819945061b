"""Step through a mechanism of ``nn.Module`` one event at a time, with Next / Back / Reset.

Three steppers share one shape. The steps are plain data computed from the module by duck typing (the same code
walks a ``torch.nn`` model and a ``modulecraft.nn`` model): the DFS of ``named_modules``, the events of one
``__call__``, and the fate of each ``state_dict`` entry on ``load_state_dict``. Each step lights up a module on the
tree drawing. In JupyterLab a stepper shows as a widget with buttons; anywhere else (nbconvert, slides, ``print``,
tests) it shows as the static sequence of its steps, so an exported notebook still tells the whole story.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from html import escape

from . import introspect, style, timeline
from .render import Drawing
from .structure import ModuleTree
from .tree import RowMark, TreeDrawer, TreeOptions, draw_tree

ROOT_LABEL = "(root)"


def _label(qualname: str) -> str:
    """How a qualified name reads in captions: the root's empty prefix gets a visible name."""
    return repr(qualname) if qualname else ROOT_LABEL


def _node_names(module) -> dict[int, str]:
    """The tree drawing's node name of each distinct module: where ``named_modules`` first meets it."""
    return {id(node.module): qualname for qualname, node in ModuleTree(module).nodes.items()}


# --------------------------------------------------------------------------------------------------------------
# The DFS of named_modules
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DfsStep:
    """``named_modules`` reaches ``module`` at ``prefix``: it either yields it or finds it in the memo already."""

    prefix: str
    module: object
    node: str  # the tree node lit for this step (a shared module is drawn once, at its first name)
    yielded: bool
    memo: tuple[str, ...]  # node names of the modules in the memo after this step, in insertion order

    def describe(self) -> str:
        kind = type(self.module).__name__
        if self.yielded:
            return f"yield ({self.prefix!r}, {kind})"
        return (f"skip {_label(self.prefix)}: this {kind} is already in the memo (met as {_label(self.node)}), "
                "so neither it nor its children are yielded again")


def step_named_modules(module, remove_duplicate: bool = True) -> list[DfsStep]:
    """Every module ``module.named_modules(remove_duplicate=...)`` reaches, in its pre-order DFS order.

    Like torch's generator: a module found in the memo is skipped with its whole subtree, ``None`` children are
    passed over silently, and with ``remove_duplicate=False`` nothing enters the memo, so a shared module is
    yielded once per path.
    """
    node_names = _node_names(module)
    memo: dict[int, str] = {}
    steps: list[DfsStep] = []

    def visit(current, prefix):
        node = node_names[id(current)]
        if id(current) in memo:
            steps.append(DfsStep(prefix, current, node, yielded=False, memo=tuple(memo.values())))
            return
        if remove_duplicate:
            memo[id(current)] = node
        steps.append(DfsStep(prefix, current, node, yielded=True, memo=tuple(memo.values())))
        for name, child in introspect.children(current):
            visit(child, introspect.join(prefix, name))

    visit(module, "")
    return steps


# --------------------------------------------------------------------------------------------------------------
# The events of one __call__
# --------------------------------------------------------------------------------------------------------------


WHAT_RUNS = {
    timeline.GLOBAL_PRE_HOOK: "global forward pre-hook runs",
    timeline.PRE_HOOK: "forward pre-hook runs",
    timeline.FORWARD_START: "forward starts",
    timeline.FORWARD_END: "forward returns",
    timeline.FORWARD_HOOK: "forward hook runs",
    timeline.GLOBAL_FORWARD_HOOK: "global forward hook runs",
}


@dataclass(frozen=True)
class CallStep:
    """One event of a ``__call__``: in which module, what runs (a hook, or ``forward`` starting or returning)."""

    node: str  # qualified name of the module (a shared module is drawn once, at its first name)
    kind: str  # one of modulecraft.viz.timeline.KINDS
    hook: str | None = None  # the hook's __qualname__, for hook events

    def describe(self) -> str:
        return f"{_label(self.node)}: {WHAT_RUNS[self.kind]}" + (f" ({self.hook})" if self.hook else "")


def step_call(module, *inputs, **kwargs) -> list[CallStep]:
    """The events of ``module(*inputs, **kwargs)``, in the order they happen (the module is really called once)."""
    trace = timeline.trace_calls(module, *inputs, **kwargs)
    return [CallStep(event.module, event.kind, hook) for event, hook in zip(trace.events, trace.hook_names)]


# --------------------------------------------------------------------------------------------------------------
# The fate of each state_dict entry on load_state_dict
# --------------------------------------------------------------------------------------------------------------

LOADED, MISSING, UNEXPECTED, SIZE_MISMATCH, NOT_AN_ARRAY, REFUSED, TAKEN, FORGIVEN = (
    "loaded", "missing", "unexpected", "size mismatch", "not an array", "refused", "taken", "forgiven")
EXTRA_STATE = "_extra_state"


@dataclass(frozen=True)
class LoadStep:
    """What ``load_state_dict`` did with one key, while handling the module at ``module``."""

    key: str
    module: str  # qualified name of the module whose _load_from_state_dict decided
    node: str  # the tree node lit for this step (a shared module is drawn once, at its first name)
    outcome: str  # one of the outcomes above
    reason: str
    shapes: tuple | None = None  # (checkpoint's shape, model's shape) for a SIZE_MISMATCH

    def describe(self) -> str:
        return f"{self.key!r}: {self.outcome} — {self.reason}"


def _local_state(module) -> dict[str, tuple[str, object]]:
    """What this module itself loads: ``name -> (kind, array)``, parameters first, then persistent buffers."""
    state = {name: ("parameter", p) for name, p in introspect.own_parameters(module)}
    state.update({name: ("buffer", b) for name, b, persistent in introspect.own_buffers(module) if persistent})
    return state


def _overrides_set_extra_state(module) -> bool:
    """True when the module's class replaces ``Module.set_extra_state`` (then ``_extra_state`` is loaded)."""
    base = next((cls for cls in type(module).__mro__ if cls.__name__ == "Module"), None)
    return getattr(type(module), "set_extra_state", None) is not getattr(base, "set_extra_state", None)


def _unexpected_reason(module, qualname: str, prefix: str, key: str) -> str:
    if not key.startswith(prefix):
        return f"reported by {_label(qualname)}"
    rest = key[len(prefix):].split(".", 1)
    if len(rest) > 1:
        return f"{_label(qualname)} has no submodule named {rest[0]!r}"
    name = rest[0]
    if name in getattr(module, "_non_persistent_buffers_set", ()):
        return f"{name!r} is a non-persistent buffer of {_label(qualname)}: not part of the state_dict"
    if name in module._parameters or name in module._buffers:
        return f"{name!r} is None on {_label(qualname)}, so nothing can receive it"
    return f"{_label(qualname)} has no parameter or buffer named {name!r}"


@dataclass
class _Call:
    """One observed call of a module's ``_load_from_state_dict``: its dictionary before and after, what it reported."""

    module: object
    prefix: str
    own: dict  # _local_state before the call (assign=True may replace the objects, not the names)
    before: dict
    after: dict
    missing: list
    unexpected: list
    errors: list


def _observe(call: _Call, node: str) -> list[LoadStep]:
    """The steps one call of ``_load_from_state_dict`` amounts to, read off what it did to its dictionary and lists."""
    qualname, prefix, class_name = call.prefix[:-1], call.prefix, type(call.module).__name__
    steps = []

    def add(key, outcome, reason, shapes=None):
        steps.append(LoadStep(key, qualname, node, outcome, reason, shapes))

    for key, value in call.before.items():  # entries an override or a load pre-hook renamed or removed
        if key not in call.after:
            moved = next((new for new, held in call.after.items() if held is value and new not in call.before), None)
            add(key, TAKEN, f"renamed to {moved!r} by {class_name}'s _load_from_state_dict or a load pre-hook"
                if moved else f"removed by {class_name}'s _load_from_state_dict or a load pre-hook")
    reported = set()
    for name, (kind, target) in call.own.items():
        key = prefix + name
        said = [message for message in call.errors if f"for {key}:" in message or f'named "{key}"' in message]
        if key in call.missing:
            add(key, MISSING, f"the model's {kind} has no entry in the checkpoint")
        elif said and said[0].startswith("size mismatch"):
            add(key, SIZE_MISMATCH, f"the checkpoint's shape {introspect.shape_of(call.after[key])} differs from "
                f"the {kind}'s shape {introspect.shape_of(target)} in the model",
                (introspect.shape_of(call.after[key]), introspect.shape_of(target)))
        elif said:
            add(key, NOT_AN_ARRAY if "from checkpoint but received" in said[0] else REFUSED, said[0])
        elif key in call.after:
            put = "" if key in call.before and call.before[key] is call.after[key] else (
                f", after {class_name}'s _load_from_state_dict or a load pre-hook put it there")
            add(key, LOADED, f"copied into the {kind} {name!r} of {_label(qualname)}{put}")
        reported.add(key)
    extra_key = prefix + EXTRA_STATE
    if _overrides_set_extra_state(call.module) and extra_key in call.after and extra_key not in call.missing:
        add(extra_key, LOADED, f"passed to set_extra_state of {_label(qualname)}")
        reported.add(extra_key)
    for key in call.missing:
        if key not in reported:
            add(key, MISSING, "the module defines set_extra_state" if key == extra_key
                else f"reported missing by {class_name}'s _load_from_state_dict")
    for key in call.unexpected:
        add(key, UNEXPECTED, "the module does not define set_extra_state" if key == extra_key
            else _unexpected_reason(call.module, qualname, prefix, key))
    for message in call.errors:
        if not any(message is step.reason for step in steps) and not any(
                step.shapes and f"for {step.key}:" in message for step in steps):
            add("", REFUSED, message)
    return steps


def step_load_state_dict(module, state_dict) -> list[LoadStep]:
    """What ``module.load_state_dict(state_dict)`` does, key by key, observed on a deep copy of the module.

    The real load runs on the copy, so every override of ``_load_from_state_dict``, load pre-hook (lazy
    modules' included) and post-hook has its say; each module's ``_load_from_state_dict`` is wrapped to record
    its dictionary before and after and what it added to the missing / unexpected / error lists. The order is
    torch's: the root first, then each child's subtree (every registration of a shared module is visited);
    within a module, entries renamed or removed by it come first, then its parameters and persistent buffers,
    its extra state, the other keys it reports missing, the keys it cannot place. Keys a load post-hook removes
    from the lists come last, as ``FORGIVEN``.
    """
    try:
        model = copy.deepcopy(module)
    except Exception as error:
        raise TypeError(f"cannot show load_state_dict on this {type(module).__name__}: the load runs on a deep copy "
                        f"(so the module itself is not changed), and copy.deepcopy failed with "
                        f"{type(error).__name__}: {error}. Make the module copyable (e.g. __deepcopy__) first."
                        ) from error
    node_names = _node_names(model)
    calls: list[_Call] = []
    lists: list[list] = []

    def observed(current, original):
        def load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs, *args, **kwargs):
            counts = len(missing_keys), len(unexpected_keys), len(error_msgs)
            before, own = dict(state_dict), _local_state(current)
            lists[:] = [missing_keys, unexpected_keys]
            try:
                original(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs,
                         *args, **kwargs)
            finally:
                calls.append(_Call(current, prefix, own, before, dict(state_dict), missing_keys[counts[0]:],
                                   unexpected_keys[counts[1]:], error_msgs[counts[2]:]))
        return load_from_state_dict

    distinct, stack = {}, [model]
    while stack:
        current = stack.pop()
        if id(current) not in distinct:
            distinct[id(current)] = current
            current._load_from_state_dict = observed(current, current._load_from_state_dict)
            stack.extend(child for _, child in introspect.children(current))
    try:
        model.load_state_dict(state_dict, strict=False)
    except RuntimeError as error:
        if not str(error).startswith("Error(s) in loading state_dict"):
            raise
    steps = [step for call in calls for step in _observe(call, node_names[id(call.module)])]
    final_missing, final_unexpected = lists if lists else ([], [])
    for outcome, final in ((MISSING, final_missing), (UNEXPECTED, final_unexpected)):
        for step in [step for step in steps if step.outcome == outcome and step.key not in final]:
            steps.append(LoadStep(step.key, step.module, step.node, FORGIVEN,
                                  f"removed from the {outcome} keys by a load_state_dict post-hook"))
    return steps


# --------------------------------------------------------------------------------------------------------------
# Steppers: the steps, drawn, behind Next / Back / Reset (or as a static sequence without a widget frontend)
# --------------------------------------------------------------------------------------------------------------

# How each outcome is coloured, on the tree's rows and in the table (the colours of draw_state_dict_diff).
MAX_STATIC_FRAMES = 30  # frames drawn in the static sequence; a teaching model needs far fewer

ROW_STATUS = {LOADED: "loads", MISSING: "missing", UNEXPECTED: "unexpected", SIZE_MISMATCH: "mismatch",
              NOT_AN_ARRAY: "mismatch", REFUSED: "mismatch", TAKEN: "node_eval", FORGIVEN: "node_eval"}


class Stepper:
    """Next / Back / Reset over precomputed steps, each drawn as the module tree with one module lit.

    Every step names the module it lights (``step.node``); subclasses say what the panel beside the drawing
    shows so far (``panel``) and may draw more than the lit module (``drawing``). ``position`` is the current
    step; ``next()``, ``back()``, ``reset()`` move it (from code or from the widget's buttons) and the widget,
    when shown, follows.
    """

    title = "steps"

    def __init__(self, module, steps, *, font_size: float | None = None):
        if not steps:
            raise ValueError(f"nothing to step through: the {self.title} produced no steps")
        self.module = module
        self.steps = list(steps)
        self.font_size = font_size
        self.position = 0
        self._svgs: dict[Hashable, str] = {}  # one dot run per distinct drawing
        self._view = None

    # -- what a subclass says ---------------------------------------------------------------------------------
    def panel(self, position: int) -> str:
        """HTML beside the drawing at ``position``: what has happened so far."""
        raise NotImplementedError

    # -- moving -----------------------------------------------------------------------------------------------
    def go(self, position: int) -> None:
        self.position = min(max(position, 0), len(self.steps) - 1)
        if self._view is not None:
            self._view.show()

    def next(self) -> None:
        self.go(self.position + 1)

    def back(self) -> None:
        self.go(self.position - 1)

    def reset(self) -> None:
        self.go(0)

    @property
    def step(self):
        return self.steps[self.position]

    # -- drawing ----------------------------------------------------------------------------------------------
    def drawing(self, position: int) -> Drawing:
        """The tree with the module of step ``position`` lit."""
        return draw_tree(self.module, highlight=self.steps[position].node, legend=False, font_size=self.font_size)

    def drawing_key(self, position: int) -> Hashable:
        """Steps with equal keys share one drawing: by default, the steps that light the same module."""
        return self.steps[position].node

    def svg(self, position: int) -> str:
        key = self.drawing_key(position)
        if key not in self._svgs:
            self._svgs[key] = self.drawing(position).inline()
        return self._svgs[key]

    def caption(self, position: int) -> str:
        return f"step {position + 1} of {len(self.steps)}: {self.steps[position].describe()}"

    def frame_html(self, position: int) -> str:
        """One step as HTML: caption, drawing and panel side by side."""
        return (f'<div class="modulecraft-step" data-step="{position}">'
                f'<p style="font-weight:bold">{escape(self.caption(position))}</p>'
                '<div style="display:flex; gap:1.5em; align-items:flex-start; flex-wrap:wrap">'
                f'<div style="overflow:auto; max-width:100%">{self.svg(position)}</div>'
                f'<div class="modulecraft-panel">{self.panel(position)}</div></div></div>')

    # -- showing ----------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        return "\n".join([f"{type(self).__name__}: {self.title}, {len(self.steps)} steps",
                          *(f"{i + 1:>3}. {step.describe()}" for i, step in enumerate(self.steps))])

    def _repr_html_(self) -> str:
        """The static sequence: the steps one after the other (what nbconvert and slides show).

        Each frame costs a ``dot`` run, so a long sequence stops after ``MAX_STATIC_FRAMES`` and says so.
        """
        shown = min(len(self.steps), MAX_STATIC_FRAMES)
        frames = "".join(self.frame_html(position) for position in range(shown))
        more = len(self.steps) - shown
        rest = (f"<p>… and {more} more steps: <code>print()</code> the stepper to list them all, or step "
                "through them in JupyterLab.</p>" if more else "")
        return (f'<div class="modulecraft-stepper"><p><b>{escape(self.title)}</b>: {len(self.steps)} steps</p>'
                f'<div class="modulecraft-frames">{frames}</div>{rest}</div>')

    def _repr_mimebundle_(self, include=None, exclude=None, **_):
        """The widget where a frontend may show it, with the static sequence as the fallback for everyone else."""
        widget_view = self.widget()._repr_mimebundle_() if _in_a_kernel() else {}
        return {**widget_view, "text/plain": str(self), "text/html": self._repr_html_()}

    def widget(self):
        """The interactive view (ipywidgets): Back / Next / Reset, the lit tree, and the panel."""
        if self._view is None:
            self._view = _StepperView(self)
        return self._view.box


def _in_a_kernel() -> bool:
    """True inside a Jupyter kernel, where a widget frontend may be listening (never in a plain interpreter)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _StepperView:
    """The ipywidgets face of a stepper; the stepper owns the position, the view only shows it."""

    def __init__(self, stepper: Stepper):
        import ipywidgets as widgets  # here: drawing without a widget frontend should not pay for it

        self.stepper = stepper
        self.buttons = {
            "back": widgets.Button(description="Back", icon="step-backward", tooltip="previous step"),
            "next": widgets.Button(description="Next", icon="step-forward", tooltip="next step",
                                   button_style="primary"),
            "reset": widgets.Button(description="Reset", icon="undo", tooltip="back to the first step"),
        }
        for name, button in self.buttons.items():
            button.on_click(lambda _, move=getattr(stepper, name): move())
            button.add_class(f"modulecraft-{name}")
        self.frame = widgets.HTML()
        self.box = widgets.VBox([widgets.HBox(list(self.buttons.values())), self.frame])
        self.box.add_class("modulecraft-stepper-widget")
        self.show()

    def show(self) -> None:
        position, last = self.stepper.position, len(self.stepper.steps) - 1
        self.buttons["back"].disabled = position == 0
        self.buttons["next"].disabled = position == last
        self.frame.value = self.stepper.frame_html(position)


def _listing(items: list[str], current: int | None = None, title: str = "") -> str:
    """A compact numbered list, the ``current`` item in bold."""
    rows = "".join(f"<li>{'<b>' + item + '</b>' if i == current else item}</li>" for i, item in enumerate(items))
    heading = f"<p><b>{escape(title)}</b></p>" if title else ""
    return f'{heading}<ol style="margin-top:0">{rows}</ol>'


class DfsStepper(Stepper):
    """``named_modules`` walking the tree: each module it reaches, what it yields, and the memo so far."""

    title = "named_modules(): pre-order DFS with a memo"

    def __init__(self, module, remove_duplicate: bool = True, *, font_size: float | None = None):
        super().__init__(module, step_named_modules(module, remove_duplicate), font_size=font_size)

    def panel(self, position: int) -> str:
        done = self.steps[:position + 1]
        yielded = [f"({escape(repr(s.prefix))}, {escape(type(s.module).__name__)})" for s in done if s.yielded]
        current = len(yielded) - 1 if self.steps[position].yielded else None
        memo = ", ".join(escape(_label(name)) for name in self.steps[position].memo) or "empty"
        return _listing(yielded, current, "yielded so far") + f"<p><b>memo</b>: {{{memo}}}</p>"


class CallStepper(Stepper):
    """One ``module(*inputs)`` call, event by event: global and local pre-hooks, forward, forward hooks."""

    title = "__call__: hooks and forward, in firing order"

    def __init__(self, module, *inputs, font_size: float | None = None, **kwargs):
        super().__init__(module, step_call(module, *inputs, **kwargs), font_size=font_size)

    def panel(self, position: int) -> str:
        events = [escape(step.describe()) for step in self.steps[:position + 1]]
        return _listing(events, position, "events so far")


def row_marks(steps: Iterable[LoadStep], note: Callable[[int, LoadStep], str]) -> dict[str, dict[str, RowMark]]:
    """``{node: {entry: mark}}`` for drawing load steps on the tree, with ``note(index, step)`` under each row.

    An entry is named relative to its module; one met on a second path to a shared module (drawn once, at its
    first name) is named in full.
    """
    marks: dict[str, dict[str, RowMark]] = {}
    for index, step in enumerate(steps):
        at_its_node = step.module == step.node
        entry = step.key.removeprefix(f"{step.module}.") if at_its_node and step.module else step.key
        marks.setdefault(step.node, {})[entry] = RowMark(ROW_STATUS[step.outcome], note(index, step))
    return marks


class LoadStepper(Stepper):
    """``load_state_dict`` key by key: where each entry lands, or why it is missing, unexpected or refused."""

    title = "load_state_dict(): where each entry goes"

    def __init__(self, module, state_dict, *, font_size: float | None = None):
        super().__init__(module, step_load_state_dict(module, state_dict), font_size=font_size)

    def drawing_key(self, position: int) -> Hashable:
        return position  # the rows fill with colour as the keys are handled

    def drawing(self, position: int) -> Drawing:
        """The tree with the handling module lit and each entry handled so far coloured by its outcome."""
        options = TreeOptions(highlight=frozenset([self.steps[position].node]), legend=False,
                              font_size=style.font_size(self.font_size))
        return TreeDrawer(ModuleTree(self.module), options, self._row_marks(position)).draw()

    def _row_marks(self, position: int) -> dict[str, dict[str, RowMark]]:
        """Each entry handled so far marked with its outcome; the current one also with its reason."""
        return row_marks(self.steps[:position + 1], lambda index, step: step.reason if index == position else "")

    def panel(self, position: int) -> str:
        rows = []
        for index, step in enumerate(self.steps[:position + 1]):
            weight = "bold" if index == position else "normal"
            rows.append(f'<tr style="background:{style.COLOURS[ROW_STATUS[step.outcome]]}; font-weight:{weight}">'
                        f'<td style="padding-right:1em"><code>{escape(step.key)}</code></td>'
                        f'<td style="padding-right:1em">{escape(step.outcome)}</td><td>{escape(step.reason)}</td></tr>')
        header = "".join(f'<th style="text-align:left; padding-right:1em">{name}</th>'
                         for name in ("key", "outcome", "why"))
        return f'<table style="border-collapse:collapse"><tr>{header}</tr>{"".join(rows)}</table>'
