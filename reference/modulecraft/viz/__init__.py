"""Drawings of the module mechanisms: trees, DFS order, hooks, state_dict diffs (torch.nn modules work too)."""

from .render import DotNotFoundError, Drawing
from .tree import draw_tree

__all__ = ["DotNotFoundError", "Drawing", "draw_tree"]
