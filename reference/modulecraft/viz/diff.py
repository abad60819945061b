"""``draw_state_dict_diff``: what ``load_state_dict`` would say, drawn on the module tree.

The verdict comes from ``steppers.step_load_state_dict``, which applies the rules of ``Module.load_state_dict``
(torch 2.13) key by key without loading anything: every path to a shared module is visited, each module compares
the keys under its prefix with its parameters and persistent buffers (a lazy parameter accepts any shape; a
1-element vector loads into a scalar), and a key is unexpected at the deepest module whose prefix it carries.
Custom ``_load_from_state_dict`` overrides and load hooks are not run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from . import introspect, style
from .render import Drawing
from .steppers import LOADED, MISSING, NOT_AN_ARRAY, ROW_STATUS, SIZE_MISMATCH, UNEXPECTED, LoadStep
from .steppers import step_load_state_dict
from .structure import ModuleTree
from .tree import RowMark, TreeDrawer, TreeOptions


@dataclass
class LoadReport:
    """The keys ``load_state_dict`` would report, in the order it would report them."""

    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    size_mismatches: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # key, checkpoint, model shape
    not_arrays: list[str] = field(default_factory=list)  # keys whose value is no tensor / ndarray
    loaded_keys: list[str] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        """True when ``load_state_dict(strict=True)`` would succeed."""
        return not (self.missing_keys or self.unexpected_keys or self.size_mismatches or self.not_arrays)


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


def check_state_dict(module, state_dict: Mapping) -> tuple[LoadReport, dict[str, dict[str, RowMark]]]:
    """Predict ``module.load_state_dict(state_dict)``; also return the row marks per drawn module."""
    steps = step_load_state_dict(module, state_dict)
    report = LoadReport()
    lists = {LOADED: report.loaded_keys, MISSING: report.missing_keys, UNEXPECTED: report.unexpected_keys,
             NOT_AN_ARRAY: report.not_arrays}
    for step in steps:
        if step.outcome == SIZE_MISMATCH:
            model_entry = _entry(module, step)
            report.size_mismatches.append((step.key, introspect.shape_of(state_dict[step.key]),
                                           introspect.shape_of(model_entry)))
        else:
            lists[step.outcome].append(step.key)
    return report, row_marks(steps, lambda _, step: "" if step.outcome == LOADED else f"{step.outcome}: {step.reason}")


def _entry(module, step: LoadStep):
    """The parameter or buffer of the model that ``step.key`` names."""
    for name in filter(None, step.module.split(".")):
        module = module._modules[name]
    name = step.key.removeprefix(f"{step.module}.") if step.module else step.key
    return module._parameters.get(name, module._buffers.get(name))


def draw_state_dict_diff(module, state_dict: Mapping, *, depth: int | None = None, collapse: Iterable[str] = (),
                         direction: str = "TB", legend: bool = True, font_size: float | None = None) -> Drawing:
    """Draw ``module``'s tree with each state entry coloured by what loading ``state_dict`` would do to it.

    Green rows load, red ones are missing from the state_dict, orange ones have a different shape in the
    checkpoint, purple rows are unexpected keys, drawn at the module where ``load_state_dict`` would meet them.
    The returned drawing carries the prediction as ``.report`` (a ``LoadReport``).
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
    return "load_state_dict(strict=True) would fail: " + ", ".join(counts)
