"""Drawings of the backward half: the graph a forward pass recorded, and the engine's walk through it, step by step.

- ``draw_graph(tensor, names=)``: every node reachable from ``tensor.grad_fn`` (a torch tensor's too), its edges
  (one per input that needs a gradient, numbered by input; an input without one is counted in the node), what it
  saved for backward (or that backward freed it) and, for a leaf's ``AccumulateGrad``, the leaf (named from
  ``names``, such as ``dict(model.named_parameters())``).
- ``WalkStepper(tensor, walk=, names=)``: ``tensor.backward()`` run through a walk (modulecraft's ``engine._walk``
  unless given, so a learner's walk plugged into the engine is the one drawn) and watched from outside, one step per
  node the walk runs: which node, on which gradients, what it sends along its edges, the dependency counts as the
  walk has left them, which nodes have delivered all they wait for and not yet run, which have freed their saved
  values. Nothing of the walk is done again here: the counts are the walk's own dict, the gradients those its
  ``run_node`` calls carry.

Both draw with Graphviz's ``dot`` and show as text without it (see ``render``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import numpy as np

from . import style
from .render import Drawing
from .steppers import Stepper, _listing

STATUS_COLOURS = {"current": "#ffd8a8", "ran": style.COLOURS["node_eval"], "ready": style.COLOURS["loads"]}


FREED = "saved: freed"


def graph_nodes(root) -> list:
    """Every node reachable from ``root`` through ``next_functions``, each once, in breadth-first order."""
    found, queue = {root: None}, [root]
    for node in queue:
        for following, _ in node.next_functions:
            if following is not None and following not in found:
                found[following] = None
                queue.append(following)
    return list(found)


def _leaf_label(node, names: dict) -> str | None:
    variable = getattr(node, "variable", None)
    if variable is None:
        return None
    return names.get(id(variable), "leaf")


def node_label(node, names: dict) -> str:
    """How a node is called in captions: its name, and for an ``AccumulateGrad`` the leaf it fills."""
    leaf = _leaf_label(node, names)
    return f"AccumulateGrad({leaf})" if leaf is not None else node.name()


def _shape(value) -> str:
    return str(tuple(np.shape(value)))


def _saved(node) -> str:
    """What a node keeps for backward: the shapes of its saved arrays, 'freed', or nothing."""
    from modulecraft.autograd.graph import _FREED

    saved = getattr(node, "_saved", None)
    if saved is _FREED:
        return FREED
    arrays = [value for value in (saved or ()) if isinstance(value, np.ndarray)]
    return "saved: " + ", ".join(_shape(value) for value in arrays) if arrays else ""


def gradient_text(grad) -> str:
    """A gradient in a caption: its values when it has a few, else its shape."""
    if grad is None:
        return "None"
    values = np.asarray(grad)
    if values.size <= 4:
        return np.array2string(values, precision=3, separator=", ", suppress_small=True)
    return f"array of shape ({', '.join(map(str, values.shape))})"


def _names(names) -> dict:
    return {id(tensor): name for name, tensor in dict(names or {}).items()}


def draw_graph(tensor, names=None, *, status: dict | None = None, notes: dict | None = None,
               saved: dict | None = None, font_size: float | None = None) -> Drawing:
    """The recorded graph behind ``tensor``, gradients flowing from the top (the tensor) down to the leaves.

    ``names`` maps names to leaf tensors (``dict(model.named_parameters())``). ``status`` (node -> "current", "ran",
    "ready" or "waiting") colours nodes, ``notes`` (node -> text) adds a line under a node and ``saved`` (node ->
    text) says what it holds at that moment instead of now: the walk stepper's.
    """
    root = tensor.grad_fn
    if root is None:
        raise ValueError("nothing to draw: this tensor has no grad_fn (a leaf, or computed without recording)")
    names, status, notes, saved = _names(names), status or {}, notes or {}, saved or {}
    size = style.font_size(font_size)
    drawing = Drawing("autograd_graph", graph_attr={"rankdir": "TB", "nodesep": "0.3", "ranksep": "0.35"},
                      node_attr={"shape": "box", "style": "rounded,filled", "fontname": style.FONT,
                                 "fontsize": str(size), "color": style.COLOURS["border"],
                                 "fillcolor": style.COLOURS["node"]},
                      edge_attr={"fontname": style.FONT, "fontsize": str(size - 2), "color": style.COLOURS["muted"]})
    nodes = graph_nodes(root)
    ids = {node: f"n{index}" for index, node in enumerate(nodes)}
    drawing.node("tensor", f"a tensor of shape {_shape(tensor)}", shape="plaintext", style="")
    drawing.edge("tensor", ids[root], label=" grad 1" if int(np.prod(tensor.shape)) == 1 else " grad")
    for node in nodes:
        leaf = _leaf_label(node, names)
        lines = [f"<b>{escape(node.name())}</b>"]
        if leaf is not None:
            lines.append(escape(f"leaf {leaf}: {_shape(node.variable)}"))
        else:
            number = node._sequence_nr
            lines.append(f"sequence number {number() if callable(number) else number}")  # torch's is a method
        holds = saved[node] if node in saved else _saved(node)
        if holds:
            lines.append(escape(holds))
        without = sum(following is None for following, _ in node.next_functions)
        if without:
            lines.append(f"{without} input{'s' if without > 1 else ''} without gradient (None, 0)")
        if node in notes:
            lines.append(f"<i>{escape(notes[node])}</i>")
        fill = STATUS_COLOURS.get(status.get(node), style.COLOURS["node"])
        drawing.node(ids[node], "<" + "<br/>".join(lines) + ">", fillcolor=fill,
                     style="rounded,filled,dashed" if holds == FREED else "rounded,filled",
                     penwidth="2.5" if status.get(node) == "current" else "1",
                     color=style.COLOURS["highlight"] if status.get(node) == "current" else style.COLOURS["border"])
        several = len(node.next_functions) > 1
        for index, (following, output_nr) in enumerate(node.next_functions):
            if following is not None:
                label = f" {index}" + (f" (output {output_nr})" if output_nr else "")
                drawing.edge(ids[node], ids[following], label=label if several or output_nr else None)
    return drawing


class _WatchedCounts(dict):
    """The dependency counts handed to the walk: a dict like any other, whose every change is kept in order."""

    def __init__(self, counts: dict):
        super().__init__(counts)
        self.changes: list = []

    def __setitem__(self, node, count) -> None:
        self.changes.append((node, count))
        super().__setitem__(node, count)


@dataclass
class WalkStep:
    """The walk calls ``run_node(node, grads)`` (``node`` is None for the end of the walk)."""

    node: object
    label: str
    received: tuple
    counts: dict  # node -> edges it still waits for, as the walk left the counts when it called run_node
    ran: tuple  # nodes run before this one
    freed: tuple  # nodes whose saved values were freed before this call
    sent: list = field(default_factory=list)  # (label of the node at the edge's end, gradient) after it ran
    declined: bool = False

    def describe(self) -> str:
        if self.node is None:
            return f"the walk returned: {len(self.ran)} nodes ran, {len(self.freed)} freed their saved values"
        received = ", ".join(gradient_text(grad) for grad in self.received)
        if self.declined:
            return f"run_node({self.label}) on [{received}]: declined"
        sent = "; ".join(f"{gradient_text(grad)} to {target}" for target, grad in self.sent) or "nothing (a leaf)"
        return f"run_node({self.label}) on [{received}], which sends {sent}"


def step_walk(tensor, walk=None, names=None, retain_graph: bool = False) -> tuple[list, list, dict, dict]:
    """Run ``tensor.backward()`` through ``walk`` (the engine's ``_walk`` by default) and record each of its calls.

    Returns the steps, the graph's nodes, the dependency counts the walk was given and what each node had saved.
    The backward is real: the leaves' ``.grad`` fill up and, unless ``retain_graph``, the graph is freed.
    """
    from modulecraft.autograd import engine, grad_mode
    from modulecraft.autograd.graph import _FREED

    walk = engine._walk if walk is None else walk
    root_edge = tensor._edge()
    nodes = graph_nodes(root_edge[0])
    names = _names(names)
    labels = {node: node_label(node, names) for node in nodes}
    saved = {node: _saved(node) for node in nodes}
    counts = _WatchedCounts(engine._dependencies([root_edge[0]]))
    initial = dict(counts)
    steps: list[WalkStep] = []
    ran: list = []

    def freed() -> tuple:
        return tuple(node for node in nodes if getattr(node, "_saved", None) is _FREED)

    def run_node(node, grads):
        step = WalkStep(node, labels[node], tuple(None if g is None else np.array(g) for g in grads), dict(counts),
                        tuple(ran), freed())
        steps.append(step)
        sent = engine._run_node(node, grads)
        ran.append(node)
        if sent is None:
            step.declined = True
            return None
        step.sent = [(labels[following], None if grad is None else np.array(grad))
                     for (following, _), grad in zip(node.next_functions, sent) if following is not None]
        return sent

    with grad_mode.no_grad():
        walk([root_edge], [np.ones(tensor.shape, dtype=tensor.dtype)], counts, retain_graph, run_node)
    steps.append(WalkStep(None, "", (), dict(counts), tuple(ran), freed()))
    return steps, nodes, initial, saved


class WalkStepper(Stepper):
    """``tensor.backward()`` one node at a time, as a walk runs it: the graph with the running node lit, the nodes
    that ran greyed, those whose count reached 0 (ready) green, freed ones dashed; the counts beside it."""

    title = "backward(): the engine's walk, one node at a time"

    def __init__(self, tensor, walk=None, names=None, retain_graph: bool = False, *, font_size: float | None = None):
        self.names = names
        steps, self.nodes, self.initial, self.saved = step_walk(tensor, walk, names, retain_graph)
        self.tensor = tensor
        super().__init__(tensor, steps, font_size=font_size)

    def drawing_key(self, position: int):
        return position

    def _status(self, step: WalkStep) -> dict:
        status = {}
        for node in self.nodes:
            if node is step.node:
                status[node] = "current"
            elif node in step.ran:
                status[node] = "ran"
            elif step.counts.get(node, 0) == 0:
                status[node] = "ready"
        return status

    def _waits(self, node, step: WalkStep) -> str:
        total = self.initial.get(node, 0)
        return f"{total - step.counts.get(node, 0)} of {total} gradients in" if total else "a root"

    def drawing(self, position: int) -> Drawing:
        step = self.steps[position]
        notes = {node: self._waits(node, step) for node in self.nodes if node not in step.ran}
        if step.node is not None:
            notes[step.node] = "running on " + ", ".join(gradient_text(grad) for grad in step.received)
        saved = {node: FREED if node in step.freed else self.saved[node] for node in self.nodes}
        return draw_graph(self.tensor, self.names, status=self._status(step), notes=notes, saved=saved,
                          font_size=self.font_size)

    def panel(self, position: int) -> str:
        step = self.steps[position]
        status = self._status(step)
        labels = {node: node_label(node, _names(self.names)) for node in self.nodes}
        ready = [escape(labels[node]) for node in self.nodes if status.get(node) == "ready"]
        waiting = [escape(f"{labels[node]}: {self._waits(node, step)}") for node in self.nodes
                   if node not in status]
        done = [escape(labels[node]) for node in step.ran]
        freed = [escape(labels[node]) for node in step.freed]
        return (_listing(done, None, "ran so far") + _listing(ready, None, "count 0, not run yet (ready)")
                + _listing(waiting, None, "waiting") + _listing(freed, None, "saved values freed"))
