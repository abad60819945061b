"""Drawings of the module mechanisms: trees, DFS order, hooks, state_dict diffs (torch.nn modules work too).

Everything reads modules by duck typing (``_parameters``, ``_buffers``, ``_modules``, the hook dicts), so the same
calls draw a ``modulecraft.nn`` model and a real ``torch.nn`` one; nothing here imports torch.

- ``draw_tree(module, depth=, collapse=, fold_repeats=, order="dfs", extra_repr=, state=, highlight=,
  direction=, font_size=)``: the registration tree, one node per distinct module, shared modules and parameters
  drawn once with dashed second paths; parameter tables, or one-line summaries on trees of over 100 modules.
  Returns a ``graphviz.Digraph`` that JupyterLab shows as an inline ``<svg>``.
- ``draw_state_dict_diff(module, state_dict)``: the tree with each entry coloured by what ``load_state_dict``
  would do (loads, missing, size mismatch, unexpected); ``check_state_dict`` gives the same verdict as data.
- ``trace_calls(module, *inputs, backward=)``: hooks and forwards of one call (and of its backward), in firing
  order; ``.draw()`` is a matplotlib timeline with one lane per module.
- ``DfsStepper``, ``CallStepper``, ``LoadStepper``: the same mechanisms one step at a time (Next / Back / Reset).
- ``draw_graph(tensor, names=)``: the graph a forward pass recorded (nodes, edges, saved values, leaves);
  ``WalkStepper(tensor, walk=, names=)``: ``backward()`` one node at a time as a walk (yours, in chapter 10) runs it.

Graphviz's ``dot`` lays the drawings out. Without it, every drawing (any graphviz graph shown in a kernel) is shown
as text, the first with how to install ``dot``, so that a notebook still runs to its end; only ``Drawing.svg()``
raises ``DotNotFoundError``. ``MODULECRAFT_VIZ_FONTSIZE`` enlarges every drawing for a projector.
"""

from .autograd import WalkStepper, draw_graph
from .diff import LoadReport, check_state_dict, draw_state_dict_diff
from .render import DotNotFoundError, Drawing, show_graphs_as_text_without_dot
from .steppers import CallStepper, DfsStepper, LoadStepper, step_call, step_load_state_dict, step_named_modules
from .timeline import Event, Trace, trace_calls
from .tree import draw_tree

__all__ = [
    "CallStepper", "DfsStepper", "DotNotFoundError", "Drawing", "Event", "LoadReport", "LoadStepper", "Trace",
    "WalkStepper", "check_state_dict", "draw_graph", "draw_state_dict_diff", "draw_tree", "step_call",
    "step_load_state_dict",
    "step_named_modules", "trace_calls",
]

show_graphs_as_text_without_dot()
