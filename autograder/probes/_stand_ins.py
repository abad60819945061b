"""Stand-ins for learner names the reference has no counterpart of (a prediction, a class a chapter asks for).

A probe runs twice: on the learner's names and on `YOURS` resolved in the reference. A name outside `YOURS` (the
learner's `prediction`, chapter 0's `TinyMLP`) has nothing to resolve to, so on the reference side the probe uses
a stand-in built from the reference's own mechanisms (an `nn.Sequential` with the same children, the scenario of
a prediction run for real). On the learner's side the stand-in is never used.
"""
from __future__ import annotations

from . import Reference


class _StandIns:
    def __init__(self, yours: Reference, stand_ins: dict):
        self._yours, self._stand_ins = yours, stand_ins

    def __getattr__(self, name: str):
        if name in self._stand_ins:
            return self._stand_ins[name]
        return getattr(self._yours, name)


def with_stand_ins(yours, **stand_ins):
    """`yours`, completed with `stand_ins` when it is the reference side."""
    return _StandIns(yours, stand_ins) if isinstance(yours, Reference) else yours
