"""Drawings of the module mechanisms: trees, DFS order, hooks, state_dict diffs (torch.nn modules work too)."""

from .diff import LoadReport, check_state_dict, draw_state_dict_diff
from .render import DotNotFoundError, Drawing
from .timeline import Event, Trace, trace_calls
from .tree import draw_tree

__all__ = [
    "DotNotFoundError", "Drawing", "Event", "LoadReport", "Trace", "check_state_dict", "draw_state_dict_diff",
    "draw_tree", "trace_calls",
]
