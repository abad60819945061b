"""Drawings of the module mechanisms: trees, DFS order, hooks, state_dict diffs (torch.nn modules work too)."""

from .diff import LoadReport, check_state_dict, draw_state_dict_diff
from .render import DotNotFoundError, Drawing
from .steppers import CallStepper, DfsStepper, LoadStepper, step_call, step_load_state_dict, step_named_modules
from .timeline import Event, Trace, trace_calls
from .tree import draw_tree

__all__ = [
    "CallStepper", "DfsStepper", "DotNotFoundError", "Drawing", "Event", "LoadReport", "LoadStepper", "Trace",
    "check_state_dict", "draw_state_dict_diff", "draw_tree", "step_call", "step_load_state_dict",
    "step_named_modules", "trace_calls",
]
