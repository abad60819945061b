"""``draw_state_dict_diff``: what ``load_state_dict`` would say, drawn on the module tree.

The keys are checked with the rules of ``Module.load_state_dict`` (torch 2.13): the walk visits every path
(a shared module is loaded once per path), each module compares the keys under its prefix with its parameters
and persistent buffers (a lazy parameter accepts any shape; a 1-element vector loads into a scalar), and a key is
unexpected at the deepest module whose prefix it carries but which has no entry or child of that name.
Nothing is loaded. Custom ``_load_from_state_dict`` overrides, load hooks and extra state are not simulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import introspect, style
from .render import Drawing
from .structure import ModuleTree
from .tree import RowMark, TreeDrawer, TreeOptions


@dataclass
class LoadReport:
    """The keys ``load_state_dict`` would report, in the order it would report them."""

    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    size_mismatches: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # key, checkpoint, model shape
    loaded_keys: list[str] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        """True when ``load_state_dict(strict=True)`` would succeed."""
        return not (self.missing_keys or self.unexpected_keys or self.size_mismatches)


def check_state_dict(module, state_dict: Mapping) -> tuple[LoadReport, dict[str, dict[str, RowMark]]]:
    """Predict ``module.load_state_dict(state_dict)``; also return the row marks per drawn module."""
    tree = ModuleTree(module)
    primary = {id(node.module): node.qualname for node in tree.nodes.values()}
    report = LoadReport()
    marks: dict[str, dict[str, RowMark]] = {}

    def mark(prefix: str, submodule, name: str, status: str, note: str) -> None:
        qualname = primary.get(id(submodule), "")
        here = prefix.removesuffix(".") == qualname  # else: a second path to a shared module, named in full
        marks.setdefault(qualname, {})[name if here else prefix + name] = RowMark(status, note)

    def load(submodule, keys: list[str], prefix: str) -> None:
        local = {name: value for name, value in introspect.own_parameters(submodule)}
        local.update({name: value for name, value, persistent in introspect.own_buffers(submodule) if persistent})
        for name, value in local.items():
            key = prefix + name
            if key not in keys:
                report.missing_keys.append(key)
                mark(prefix, submodule, name, "missing", "missing: not in the state_dict")
                continue
            model_shape, checkpoint_shape = introspect.shape_of(value), introspect.shape_of(state_dict[key])
            if model_shape == () and checkpoint_shape == (1,):
                checkpoint_shape = ()  # load_state_dict accepts a 1-element vector for a scalar
            if model_shape is not None and checkpoint_shape != model_shape:
                report.size_mismatches.append((key, checkpoint_shape, model_shape))
                mark(prefix, submodule, name, "mismatch",
                     f"size mismatch: checkpoint {style.format_shape(checkpoint_shape)}, "
                     f"model {style.format_shape(model_shape)}")
                continue
            report.loaded_keys.append(key)
            mark(prefix, submodule, name, "loads", "" if model_shape is not None else
                 f"loads and materialises the lazy entry as {style.format_shape(checkpoint_shape)}")
        for key in keys:
            head, dot, _ = key[len(prefix):].partition(".")
            if (head not in submodule._modules) if dot else (head not in local):
                report.unexpected_keys.append(key)
                mark(prefix, submodule, key[len(prefix):], "unexpected",
                     "unexpected: no parameter, persistent buffer or submodule of that name")
        for name, child in introspect.children(submodule):
            child_prefix = f"{prefix}{name}."
            load(child, [key for key in keys if key.startswith(child_prefix)], child_prefix)

    load(module, [key for key in state_dict if isinstance(key, str)], "")
    return report, marks


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
    return (f"load_state_dict(strict=True) would fail: {len(report.missing_keys)} missing, "
            f"{len(report.unexpected_keys)} unexpected, {len(report.size_mismatches)} size mismatch(es)")
