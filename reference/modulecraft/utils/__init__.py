"""Helpers shared by ``modulecraft.nn`` (mirrors the parts of ``torch.utils`` the course needs)."""

from modulecraft.utils import hooks

__all__ = ["hooks"]
