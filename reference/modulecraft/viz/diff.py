"""``draw_state_dict_diff``: what ``load_state_dict`` would say, drawn on the module tree.

The verdict is observed, not predicted: ``steppers.step_load_state_dict`` runs the module's own
``load_state_dict`` on a deep copy, with every ``_load_from_state_dict`` override, load pre-hook and post-hook,
and records what each module did. So a model that renames keys while loading, upgrades old checkpoints or
materialises lazy parameters is drawn as it really loads, and the drawing never disagrees with the error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import style
from .render import Drawing
from .steppers import FORGIVEN, LOADED, MISSING, NOT_AN_ARRAY, REFUSED, SIZE_MISMATCH, TAKEN, UNEXPECTED
from .steppers import row_marks, step_load_state_dict
from .structure import ModuleTree
from .tree import RowMark, TreeDrawer, TreeOptions


@dataclass
class LoadReport:
    """What ``load_state_dict`` reported, in its order (``missing_keys`` / ``unexpected_keys`` after post-hooks)."""

    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    size_mismatches: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # key, checkpoint, model shape
    not_arrays: list[str] = field(default_factory=list)  # keys whose value is no tensor / ndarray
    refused: list[str] = field(default_factory=list)  # the other error messages (e.g. from an override)
    loaded_keys: list[str] = field(default_factory=list)
    taken_keys: list[str] = field(default_factory=list)  # renamed or removed by a module while it loaded
    forgiven_keys: list[str] = field(default_factory=list)  # dropped from the key lists by a post-hook

    @property
    def compatible(self) -> bool:
        """True when ``load_state_dict(strict=True)`` succeeds."""
        return not (self.missing_keys or self.unexpected_keys or self.size_mismatches or self.not_arrays
                    or self.refused)


def check_state_dict(module, state_dict: Mapping) -> tuple[LoadReport, dict[str, dict[str, RowMark]]]:
    """What ``module.load_state_dict(state_dict)`` does (run on a copy); also the row marks per drawn module."""
    steps = step_load_state_dict(module, state_dict)
    report = LoadReport()
    lists = {LOADED: report.loaded_keys, MISSING: report.missing_keys, UNEXPECTED: report.unexpected_keys,
             NOT_AN_ARRAY: report.not_arrays, TAKEN: report.taken_keys, FORGIVEN: report.forgiven_keys}
    for step in steps:
        if step.outcome == SIZE_MISMATCH:
            report.size_mismatches.append((step.key, *step.shapes))
        elif step.outcome == REFUSED:
            report.refused.append(step.reason)
        else:
            lists[step.outcome].append(step.key)
    for key in report.forgiven_keys:
        for kept in (report.missing_keys, report.unexpected_keys):
            if key in kept:
                kept.remove(key)
    drawn = [step for step in steps if step.key]  # an error naming no key has no row to colour
    return report, row_marks(drawn, lambda _, step: "" if step.outcome == LOADED else f"{step.outcome}: {step.reason}")


def draw_state_dict_diff(module, state_dict: Mapping, *, depth: int | None = None, collapse: Iterable[str] = (),
                         direction: str = "TB", legend: bool = True, font_size: float | None = None) -> Drawing:
    """Draw ``module``'s tree with each state entry coloured by what loading ``state_dict`` does to it.

    Green rows load, red ones are missing from the state_dict, orange ones have a different shape in the
    checkpoint (or were refused), purple rows are unexpected keys, drawn at the module where ``load_state_dict``
    meets them; grey rows are keys a module renamed or removed while loading, or a post-hook forgave. The load
    runs on a deep copy (``module`` is untouched); the drawing carries its result as ``.report``.
    """
    report, marks = check_state_dict(module, state_dict)
    options = TreeOptions(depth=depth, collapse=frozenset(collapse), direction=direction, legend=legend,
                          font_size=style.font_size(font_size))
    drawing = TreeDrawer(ModuleTree(module), options, row_marks=marks).draw()
    drawing.attr(label=_summary(report))
    drawing.report = report
    return drawing


def _summary(report: LoadReport) -> str:
    if report.compatible:
        return f"load_state_dict would load all {len(report.loaded_keys)} entries"
    counts = [f"{len(report.missing_keys)} missing", f"{len(report.unexpected_keys)} unexpected",
              f"{len(report.size_mismatches)} size mismatch(es)"]
    if report.not_arrays:
        counts.append(f"{len(report.not_arrays)} not an array")
    if report.refused:
        counts.append(f"{len(report.refused)} other error(s)")
    return "load_state_dict(strict=True) would fail: " + ", ".join(counts)
