"""``trace_calls``: the order in which hooks and ``forward`` fire through one call of a nested model.

The hooks already registered (global and local; forward pre-hooks, forward hooks, backward pre-hooks and
backward hooks) are wrapped in place for the duration of the call, so the trace records them firing in the order
``_call_impl`` and the autograd engine really use; each module's ``forward`` is shadowed by an instance attribute
that records its start and end. Given ``backward=``, the backward pass runs inside the same trace, so forward
and backward hooks land in one picture. ``_call_impl`` takes the backward hooks it wires at forward time, which
is why they are wrapped for the forward call too. Everything is restored afterwards, also when the call raises.
The trace draws as a matplotlib timeline with one lane per module.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

from . import introspect, style
from .render import inline_svg
from .structure import ModuleTree

GLOBAL_PRE_HOOK = "global_pre_hook"
PRE_HOOK = "pre_hook"
FORWARD_START = "forward_start"
FORWARD_END = "forward_end"
FORWARD_HOOK = "forward_hook"
GLOBAL_FORWARD_HOOK = "global_forward_hook"
BACKWARD_START = "backward_start"  # on the root's lane: the moment ``.backward()`` is called
GLOBAL_BACKWARD_PRE_HOOK = "global_backward_pre_hook"
BACKWARD_PRE_HOOK = "backward_pre_hook"
BACKWARD_HOOK = "backward_hook"
GLOBAL_BACKWARD_HOOK = "global_backward_hook"
KINDS = (GLOBAL_PRE_HOOK, PRE_HOOK, FORWARD_START, FORWARD_END, FORWARD_HOOK, GLOBAL_FORWARD_HOOK, BACKWARD_START,
         GLOBAL_BACKWARD_PRE_HOOK, BACKWARD_PRE_HOOK, BACKWARD_HOOK, GLOBAL_BACKWARD_HOOK)

# (hook dict kind, global?) -> event kind
HOOK_KINDS = {("pre", True): GLOBAL_PRE_HOOK, ("pre", False): PRE_HOOK,
              ("forward", True): GLOBAL_FORWARD_HOOK, ("forward", False): FORWARD_HOOK,
              ("backward_pre", True): GLOBAL_BACKWARD_PRE_HOOK, ("backward_pre", False): BACKWARD_PRE_HOOK,
              ("backward", True): GLOBAL_BACKWARD_HOOK, ("backward", False): BACKWARD_HOOK}

# The backward hook dicts, named as in torch/nn/modules/module.py (both libraries use these names).
GLOBAL_BACKWARD_DICTS = {"backward_pre": "_global_backward_pre_hooks", "backward": "_global_backward_hooks"}
LOCAL_BACKWARD_DICTS = {"backward_pre": "_backward_pre_hooks", "backward": "_backward_hooks"}

BACKWARD_COLOUR = "#c92a2a"
MARKERS = {  # kind -> (matplotlib marker, colour)
    GLOBAL_PRE_HOOK: ("<", style.COLOURS["pre_hook"]),
    PRE_HOOK: ("o", style.COLOURS["pre_hook"]),
    FORWARD_HOOK: ("o", style.COLOURS["forward_hook"]),
    GLOBAL_FORWARD_HOOK: (">", style.COLOURS["forward_hook"]),
    GLOBAL_BACKWARD_PRE_HOOK: ("<", BACKWARD_COLOUR),
    BACKWARD_PRE_HOOK: ("s", BACKWARD_COLOUR),
    BACKWARD_HOOK: ("D", BACKWARD_COLOUR),
    GLOBAL_BACKWARD_HOOK: (">", BACKWARD_COLOUR),
}


class Event(NamedTuple):
    """One step of a call: which module (qualified name) and what happened (one of ``KINDS``)."""

    module: str
    kind: str


@dataclass
class Trace:
    """The recorded events of one call, the hook behind each event, the lanes, and the call's result."""

    lanes: list[str]
    events: list[Event] = field(default_factory=list)
    hook_names: list[str | None] = field(default_factory=list)  # parallel to events (hook_label); None for forwards
    output: object = field(default=None, repr=False)

    def record(self, module: str, kind: str, hook_name: str | None = None) -> None:
        if module not in self.lanes:
            self.lanes.append(module)
        self.events.append(Event(module, kind))
        self.hook_names.append(hook_name)

    def draw(self, font_size: float | None = None):
        """A matplotlib ``Figure``: one lane per module (top: root), time runs left to right.

        A bar spans each ``forward`` from start to end; markers show hooks firing (named above them).
        """
        import matplotlib.pyplot as plt  # imported here: importing pyplot registers Jupyter's inline display

        size = style.font_size(font_size)
        lanes = [lane for lane in self.lanes if any(event.module == lane for event in self.events)]
        row = {lane: index for index, lane in enumerate(lanes)}
        figure, axes = plt.subplots(figsize=(max(6.0, 0.5 * len(self.events) + 2), 0.6 * len(lanes) + 1.4))
        plt.close(figure)  # returned, not left for pyplot to show a second time
        open_calls: dict[str, list[int]] = {}
        for step, (event, hook_name) in enumerate(zip(self.events, self.hook_names)):
            y = row[event.module]
            if event.kind == FORWARD_START:
                open_calls.setdefault(event.module, []).append(step)
            elif event.kind == FORWARD_END:
                start = open_calls[event.module].pop()
                axes.broken_barh([(start, step - start)], (y - 0.18, 0.36), color=style.COLOURS["node"],
                                 edgecolor=style.COLOURS["border"])
                axes.text((start + step) / 2, y, "forward", ha="center", va="center", fontsize=size * 0.75)
            elif event.kind == BACKWARD_START:
                axes.axvline(step, color=BACKWARD_COLOUR, linestyle="--", linewidth=1)
                axes.annotate(".backward()", (step, -0.6), ha="center", fontsize=size * 0.7, color=BACKWARD_COLOUR)
            else:
                marker, colour = MARKERS[event.kind]
                axes.plot(step, y, marker=marker, color=colour, markersize=size * 0.8, linestyle="none")
                axes.annotate(hook_name or event.kind, (step, y), xytext=(0, size * 0.9), textcoords="offset points",
                              ha="center", fontsize=size * 0.7, color=colour, rotation=20)
        axes.set_yticks(range(len(lanes)), [lane or "(root)" for lane in lanes], fontsize=size)
        axes.set_ylim(len(lanes) - 0.4, -0.8)
        axes.set_xlim(-0.8, len(self.events) - 0.2)
        axes.set_xlabel("event order", fontsize=size)
        axes.tick_params(axis="x", labelsize=size * 0.8)
        axes.grid(axis="y", color="#dddddd")
        axes.set_axisbelow(True)
        for kind, (marker, colour) in MARKERS.items():
            axes.plot([], [], marker=marker, color=colour, linestyle="none", label=kind.replace("_", " "))
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=size * 0.75, frameon=False)
        figure.tight_layout()
        return figure

    def _repr_html_(self) -> str:
        buffer = io.StringIO()
        self.draw().savefig(buffer, format="svg")
        return f'<div class="modulecraft-timeline" style="overflow:auto">{inline_svg(buffer.getvalue())}</div>'


def trace_calls(module, *inputs, backward=None, **kwargs) -> Trace:
    """Call ``module(*inputs, **kwargs)`` once and record the order of hooks and forwards, module by module.

    ``backward``: a function of the output returning a scalar (``lambda out: out.sum()``); its ``.backward()``
    then runs inside the trace and the backward hooks' firing is recorded after a ``backward_start`` event.
    """
    tree = ModuleTree(module)
    names = {id(node.module): qualname for qualname, node in tree.nodes.items()}
    trace = Trace(lanes=list(tree.nodes))

    def name_of(submodule) -> str:
        return names.get(id(submodule), f"<unregistered {type(submodule).__name__}>")

    with _instrumented(module, tree, trace, name_of):
        trace.output = module(*inputs, **kwargs)
        if backward is not None:
            loss = backward(trace.output)
            trace.record("", BACKWARD_START)  # the root's lane
            loss.backward()
    return trace


@contextmanager
def _instrumented(root, tree: ModuleTree, trace: Trace, name_of):
    """Wrap every hook and shadow every ``forward`` so they record into ``trace``; undo it all on exit."""
    undo = []
    try:
        for kind, hooks in introspect.global_hook_dicts(root).items():
            undo.append(_wrap_hooks(hooks, lambda args: name_of(args[0]), HOOK_KINDS[kind, True], trace))
        namespace = introspect.module_namespace(root)
        for kind, attribute in GLOBAL_BACKWARD_DICTS.items():
            hooks = getattr(namespace, attribute, {})
            undo.append(_wrap_hooks(hooks, lambda args: name_of(args[0]), HOOK_KINDS[kind, True], trace))
        for qualname, node in tree.nodes.items():
            local_dicts = {**introspect.local_hook_dicts(node.module),
                           **{kind: getattr(node.module, attribute, {})
                              for kind, attribute in LOCAL_BACKWARD_DICTS.items()}}
            for kind, hooks in local_dicts.items():
                undo.append(_wrap_hooks(hooks, lambda args, qualname=qualname: qualname, HOOK_KINDS[kind, False],
                                        trace))
            undo.append(_shadow_forward(node.module, qualname, trace))
        yield
    finally:
        for restore in reversed(undo):
            restore()


def _wrap_hooks(hooks: dict, module_name, kind: str, trace: Trace):
    """Replace each hook in ``hooks`` (same key, so with_kwargs/always_call flags still apply) by a recorder;
    return the function that puts the originals back."""
    originals = dict(hooks)
    for key, hook in originals.items():
        hooks[key] = _recorder(hook, module_name, kind, trace)

    def restore():
        for key, hook in originals.items():
            if key in hooks:
                hooks[key] = hook
    return restore


def hook_label(hook) -> str:
    """A short name for a hook: ``my_hook``, ``LazyLinear._infer_parameters`` for a bound method."""
    name = getattr(hook, "__name__", type(hook).__name__)
    owner = getattr(hook, "__self__", None)
    return f"{type(owner).__name__}.{name}" if owner is not None else name


def _recorder(hook, module_name, kind: str, trace: Trace):
    name = hook_label(hook)

    def recorded(*args, **kwargs):
        trace.record(module_name(args), kind, name)
        return hook(*args, **kwargs)
    return recorded


def _shadow_forward(module, qualname: str, trace: Trace):
    """Put a recording ``forward`` in the instance ``__dict__`` (``_call_impl`` looks it up there first)."""
    had_own = "forward" in module.__dict__
    previous = module.__dict__.get("forward")
    forward = module.forward

    def recorded_forward(*args, **kwargs):
        trace.record(qualname, FORWARD_START)
        result = forward(*args, **kwargs)
        trace.record(qualname, FORWARD_END)
        return result

    module.__dict__["forward"] = recorded_forward

    def restore():
        if had_own:
            module.__dict__["forward"] = previous
        else:
            module.__dict__.pop("forward", None)
    return restore
