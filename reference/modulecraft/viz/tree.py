"""``draw_tree``: the registration tree of a module, one node per distinct module.

Each node shows the qualified name (as ``named_modules`` yields it), the class, its own parameters and buffers,
and the parameter total of its subtree. Shared modules and parameters are drawn once; their other paths are
dashed edges. Subtrees can be cut by depth or collapsed by name, and identical sibling blocks folded as "× N".
Node names are the qualified names ("." for the root; SVG ids add ``mc-``), so drawings are stable and the SVG can
be queried in the browser.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from . import introspect, style
from .render import Drawing
from .structure import ModuleTree, TreeNode

COLUMNS = 4  # of a state table: name | shape | dtype | requires_grad (or buffer kind)
STATE_STYLES = ("auto", "table", "summary", "none")
TABLE_LIMIT = 100  # state="auto": tables up to this many drawn modules, one-line summaries above
SUMMARY_WIDTH = 60  # characters per line of a state summary before it wraps


def node_name(qualname: str) -> str:
    """The stable graphviz node name of the module at ``qualname`` ("." for the root).

    ``:`` is escaped (as ``%3A``) because graphviz's ``edge()`` reads ``a:b`` as port ``b`` of node ``a``;
    a ModuleDict key may contain one.
    """
    return (qualname or ".").replace("%", "%25").replace(":", "%3A")


def svg_id(qualname: str) -> str:
    """The ``id`` of the module's ``<g>`` element in the SVG (prefixed: JupyterLab's page has ids of its own)."""
    return "mc-" + (qualname or ".")


def line(content: str, **attributes: object) -> str:
    """A line of a node's label: the label is a one-column table, which dot sizes without solving for spans."""
    return style.cell(content, align="left", **attributes)


@dataclass(frozen=True)
class RowMark:
    """A status drawn on one state entry of a module (used by the state_dict diff): colour key and note."""

    status: str  # a key of style.COLOURS: "loads", "missing", "mismatch", "unexpected"
    note: str = ""


@dataclass(frozen=True)
class TreeOptions:
    """What ``draw_tree`` was asked for (see its docstring), checked once here for every drawing built on it."""

    depth: int | None = None
    collapse: frozenset[str] = frozenset()
    fold_repeats: bool = False
    order: str | None = None
    extra_repr: bool = False
    state: str = "auto"
    direction: str = "TB"
    legend: bool = True
    highlight: frozenset[str] = frozenset()
    font_size: float = style.FONT_SIZE

    def __post_init__(self):
        if self.state not in STATE_STYLES:
            raise ValueError(f"state must be one of {STATE_STYLES}, not {self.state!r}")
        if self.order not in (None, "dfs"):
            raise ValueError(f"order must be None or 'dfs', not {self.order!r}")
        if self.direction not in ("TB", "LR"):
            raise ValueError(f"direction must be 'TB' (top to bottom) or 'LR' (left to right), not {self.direction!r}")
        if self.depth is not None and self.depth < 0:
            raise ValueError(f"depth must be None or >= 0, not {self.depth}")


@dataclass(eq=False)
class Shown:
    """A node that is drawn, with what it stands for: a collapsed subtree, or a run of folded siblings."""

    node: TreeNode
    hidden: list[TreeNode] = field(default_factory=list)
    folded: list[TreeNode] = field(default_factory=list)


def draw_tree(
    module,
    *,
    depth: int | None = None,
    collapse: Iterable[str] = (),
    fold_repeats: bool = False,
    order: str | None = None,
    extra_repr: bool = False,
    state: str = "auto",
    direction: str = "TB",
    legend: bool = True,
    highlight: Iterable[str] | str = (),
    font_size: float | None = None,
) -> Drawing:
    """Draw the registration tree of ``module`` (a ``modulecraft.nn`` or ``torch.nn`` module).

    depth: draw modules down to this depth (root = 0); deeper subtrees collapse into their ancestor.
    collapse: qualified names of modules drawn as one node that says how many modules and parameters it hides.
    fold_repeats: fold consecutive identical siblings (same class, config, shapes, children) into one "× N" node.
    order: ``"dfs"`` numbers each node in the order ``named_modules()`` visits it.
    extra_repr: add each module's ``extra_repr()`` under its class.
    state: how each module's own parameters and buffers are listed. ``"table"``: a row each (name, shape, dtype,
        requires_grad); ``"summary"``: a line of parameters and one of buffers, ``name shape`` plus the dtype when
        not float32 and "no grad" when frozen (about half the pieces of text dot has to measure, so big trees
        draw faster); ``"none"``; ``"auto"`` (default): tables up to 100 drawn modules, summaries above.
    direction: ``"TB"`` (top to bottom) or ``"LR"`` (left to right).
    highlight: qualified name(s) of modules to outline.
    font_size: base font size in points (default 11, or $MODULECRAFT_VIZ_FONTSIZE: larger for a projector).
    """
    options = TreeOptions(
        depth=depth, collapse=frozenset(collapse), fold_repeats=fold_repeats, order=order, extra_repr=extra_repr,
        state=state, direction=direction, legend=legend,
        highlight=frozenset([highlight] if isinstance(highlight, str) else highlight),
        font_size=style.font_size(font_size),
    )
    return TreeDrawer(ModuleTree(module), options).draw()


class TreeDrawer:
    """Decides what is shown, then writes nodes and edges into a ``Drawing``."""

    def __init__(self, tree: ModuleTree, options: TreeOptions, row_marks: dict[str, dict[str, RowMark]] | None = None):
        self.tree = tree
        self.options = options
        self.shown: dict[str, Shown] = {}
        self.standin: dict[str, str] = {}  # hidden qualname -> the shown node that stands for it
        self.collapsed = self._resolve("collapse", options.collapse)
        self._choose(tree.root)
        # a highlighted or marked module inside a collapsed or folded part shows on the node that stands for it
        self.highlighted = {self.visible(qualname) for qualname in self._resolve("highlight", options.highlight)}
        self.row_marks: dict[str, dict[str, RowMark]] = {}
        for qualname, marks in (row_marks or {}).items():
            shown = self.visible(qualname)
            inside = not shown or qualname == shown or qualname.startswith(shown + ".")
            relative = qualname[len(shown):].lstrip(".") if inside else qualname
            for name, mark in marks.items():
                self.row_marks.setdefault(shown, {})[introspect.join(relative, name)] = mark
        self.state = options.state
        if self.state == "auto":  # row marks (a state_dict diff) are drawn on table rows
            self.state = "table" if self.row_marks or len(self.shown) <= TABLE_LIMIT else "summary"

    def _resolve(self, option: str, paths: frozenset[str]) -> set[str]:
        """Qualified names for the paths given to an option (a second path names the shared module's node)."""
        resolved, unknown = set(), []
        for path in paths:
            try:
                resolved.add(self.tree.resolve(path))
            except KeyError:
                unknown.append(path)
        if unknown:
            raise KeyError(f"{option}= names no registered submodule: {sorted(unknown)}; "
                           f"named_modules() yields {sorted(self.tree.nodes)[:10]}...")
        return resolved

    # -- what is shown ---------------------------------------------------------------------------------------
    def _choose(self, node: TreeNode) -> None:
        shown = self.shown[node.qualname] = Shown(node)
        depth_cut = self.options.depth is not None and node.depth >= self.options.depth
        if node.children and (depth_cut or node.qualname in self.collapsed):
            shown.hidden = self.tree.descendants(node)
            self._hide(shown.hidden, behind=node)
            return
        for run in self._runs(node.children):
            self._choose(run[0])
            self.shown[run[0].qualname].folded = run if len(run) > 1 else []
            for other in run[1:]:
                self._hide([other, *self.tree.descendants(other)], behind=run[0])

    def _hide(self, nodes: list[TreeNode], behind: TreeNode) -> None:
        for hidden in nodes:
            self.standin[hidden.qualname] = behind.qualname

    def _runs(self, nodes: list[TreeNode]) -> list[list[TreeNode]]:
        """Consecutive identical siblings grouped (when folding), else one group per node."""
        runs: list[list[TreeNode]] = []
        for node in nodes:
            if (self.options.fold_repeats and runs
                    and self.tree.signature(runs[-1][0].module) == self.tree.signature(node.module)):
                runs[-1].append(node)
            else:
                runs.append([node])
        return runs

    def visible(self, qualname: str) -> str:
        """The shown node that stands for ``qualname`` (itself when shown)."""
        return qualname if qualname in self.shown else self.standin[qualname]

    # -- drawing ---------------------------------------------------------------------------------------------
    def draw(self) -> Drawing:
        size = self.options.font_size
        graph = Drawing(
            name="module_tree",
            graph_attr={"rankdir": self.options.direction, "fontname": style.FONT, "fontsize": f"{size:g}",
                        "nodesep": "0.25", "ranksep": "0.35", "labelloc": "t",
                        "ordering": "out",  # children left to right in registration order, as named_modules
                        "newrank": "true"},  # same ranks on a tree; the old ranker is quadratic in the node count
            node_attr={"fontname": style.FONT, "fontsize": f"{size:g}", "shape": "box",
                       "style": "rounded,filled", "color": style.COLOURS["border"], "margin": "0.06,0.04"},
            edge_attr={"fontname": style.FONT, "fontsize": f"{size * 0.8:g}", "color": style.COLOURS["border"],
                       "arrowsize": "0.6"},
        )
        note = self._global_hooks_note()
        if note:
            graph.attr(label=note)
        if self.options.legend:
            entries = style.STATE_LEGEND[self.state] + style.LEGEND + (style.LOAD_LEGEND if self.row_marks else [])
            graph.node("legend", label=style.legend_label(size, entries), shape="plain", style="solid", id="mc-legend",
                       **{"class": "legend"})
        for shown in self.shown.values():
            self._draw_node(graph, shown)
        self._draw_edges(graph)
        return graph

    def _global_hooks_note(self) -> str:
        counts = introspect.hook_counts(introspect.global_hook_dicts(self.tree.root_module))
        if not any(counts.values()):
            return ""
        return (f"global hooks (fire around every module's forward): {counts['pre']} pre-hook(s), "
                f"{counts['forward']} forward hook(s)")

    def _draw_node(self, graph: Drawing, shown: Shown) -> None:
        node = shown.node
        module = node.module
        classes = ["module"]
        attributes = {"fillcolor": style.COLOURS["node"]}
        if not getattr(module, "training", True):
            classes.append("eval")
            attributes["fillcolor"] = style.COLOURS["node_eval"]
        if node.duplicate_of is not None:
            classes.append("duplicate")
        if shown.hidden:
            classes.append("collapsed")
        if shown.folded:
            classes.append("folded")
        if shown.hidden or shown.folded:
            attributes["peripheries"] = "2"
        if node.qualname in self.highlighted:
            classes.append("highlighted")
            attributes.update(color=style.COLOURS["highlight"], penwidth="3")
        graph.node(node_name(node.qualname), label=self._label(shown), id=svg_id(node.qualname),
                   **{"class": " ".join(classes)}, **attributes)

    def _label(self, shown: Shown) -> str:
        """The node's HTML table: heading, marks, extra_repr, state, then what it folds or hides and totals."""
        node, small = shown.node, self.options.font_size * 0.85
        rows = [line(self._heading(node))]
        chips = self._chips(shown, small)
        if chips:
            rows.append(line("  ".join(chips)))
        described = introspect.extra_repr(node.module) if self.options.extra_repr else ""
        if described:
            shortened = described if len(described) <= 60 else described[:57] + "..."
            rows.append(line(style.font(style.text(shortened), colour=style.COLOURS["muted"], size=small)))
        rows.extend(self._state_lines(node, small))
        if shown.folded:
            identical = f"{shown.folded[0].qualname} … {shown.folded[-1].qualname} are identical"
            rows.append(line(style.font(style.text(identical), size=small, colour=style.COLOURS["muted"])))
        total, lazy = self.tree.parameter_total(node)
        if shown.hidden:
            own = sum(introspect.numel(p) for _, p in introspect.own_parameters(node.module))
            hidden = f"▸ collapsed: {len(shown.hidden)} modules, {style.format_count(total - own)} parameters hidden"
            rows.append(line(style.font(style.text(hidden), size=small, colour=style.COLOURS["collapsed"], bold=True)))
        if total or lazy:
            totals = f"Σ {style.format_count(total)} parameters" + (" + lazy" if lazy else "")
            if shown.folded:
                totals += f" each, × {len(shown.folded)}"
            rows.append(line(style.font(style.text(totals), size=small)))
        return style.html_label(style.table(rows))

    def _heading(self, node: TreeNode) -> str:
        """``[DFS number]  qualified name  Class``."""
        title = style.font(style.text(node.qualname or "(root)"), bold=True) + "  " + style.text(
            type(node.module).__name__)
        if self.options.order == "dfs":
            number = style.font(str(node.order), colour=style.COLOURS["order_number"], bold=True,
                                size=self.options.font_size * 1.25)
            title = f"{number}  {title}"
        return title

    def _chips(self, shown: Shown, size: float) -> list[str]:
        module = shown.node.module
        chips = []
        if shown.node.duplicate_of is not None:
            first = shown.node.duplicate_of or "(root)"
            chips.append(style.chip(f"yielded again (first as {first})", style.COLOURS["duplicate"], size))
        if shown.folded:
            chips.append(style.chip(f"× {len(shown.folded)}", style.COLOURS["order"], size * 1.15))
        if not getattr(module, "training", True):
            chips.append(style.chip("eval", style.COLOURS["eval"], size))
        counts = introspect.hook_counts(introspect.local_hook_dicts(module))
        if counts["pre"]:
            chips.append(style.chip(f"pre ×{counts['pre']}", style.COLOURS["pre_hook"], size))
        if counts["forward"]:
            chips.append(style.chip(f"fwd ×{counts['forward']}", style.COLOURS["forward_hook"], size))
        if any(introspect.is_lazy(p) for _, p in introspect.own_parameters(module)):
            chips.append(style.chip("lazy", style.COLOURS["lazy"], size))
        return chips

    def _state_lines(self, node: TreeNode, size: float) -> list[str]:
        """The module's own parameters and buffers as lines of its label: a nested table, or summaries."""
        if self.state == "summary":
            return self._state_summary(node, size)
        if self.state == "table" and (rows := self._state_rows(node, size)):
            return [style.cell(style.table(rows), cellpadding=0)]
        return []

    def _state_rows(self, node: TreeNode, size: float) -> list[str]:
        """A row per own parameter and buffer (name | shape | dtype | kind), then rows for marks with no entry."""
        marks = dict(self.row_marks.get(node.qualname, {}))
        rows = []
        for index, (name, parameter) in enumerate(introspect.own_parameters(node.module)):
            owner = self.tree.tied_to(node.qualname, name, parameter)
            if owner is not None:  # registered first elsewhere (or under another name)
                cells = [(style.font(style.text(f"shared with {owner.path}"), italic=True),
                          {"colspan": COLUMNS - 1, "align": "left"})]
            else:
                cells = self._array_cells(parameter, "grad" if introspect.requires_grad(parameter) else "no grad", size)
            rows += self._state_row(style.text(name), f"p{index}", cells, style.COLOURS["parameter"],
                                    marks.pop(name, None), size)
        for name, buffer, persistent in introspect.own_buffers(node.module):
            cells = self._array_cells(buffer, "buffer" if persistent else "○ non-persistent", size)
            rows += self._state_row(style.font(style.text(name), italic=True), None, cells, style.COLOURS["buffer"],
                                    marks.pop(name, None), size)
        for name, mark in marks.items():  # marked entries the module does not have (unexpected keys)
            rows += self._state_row(style.text(name), None, [("", {"colspan": COLUMNS - 1})],
                                    style.COLOURS["parameter"], mark, size)
        return rows

    def _state_summary(self, node: TreeNode, size: float) -> list[str]:
        """A line of parameters and a line of buffers, each ``name shape`` plus only what is unusual."""
        parameters = []
        for name, parameter in introspect.own_parameters(node.module):
            owner = self.tree.tied_to(node.qualname, name, parameter)
            if owner is not None:
                parameters.append(f"{name} shared with {owner.path}")
            else:
                parameters.append(self._summary_entry(name, parameter)
                                  + ("" if introspect.requires_grad(parameter) else " no grad"))
        buffers = [("" if persistent else "○ ") + self._summary_entry(name, buffer)
                   for name, buffer, persistent in introspect.own_buffers(node.module)]
        return [line(style.font(style.wrapped(entries, SUMMARY_WIDTH), size=size, italic=italic), bgcolor=colour)
                for entries, italic, colour in [(parameters, False, style.COLOURS["parameter"]),
                                                (buffers, True, style.COLOURS["buffer"])] if entries]

    @staticmethod
    def _summary_entry(name: str, array) -> str:
        """``name shape``, and the dtype when it is not the usual float32."""
        dtype = introspect.dtype_name(array)
        return f"{name} {style.format_shape(introspect.shape_of(array))}" + ("" if dtype == "float32" else f" {dtype}")

    @staticmethod
    def _array_cells(array, kind: str, size: float) -> list[tuple[str, dict]]:
        """``shape | dtype | kind`` cells as ``(content, attributes)``; a lazy array has no shape yet."""
        shape = (style.chip("uninitialised", style.COLOURS["lazy"], size) if introspect.is_lazy(array)
                 else style.text(style.format_shape(introspect.shape_of(array))))
        return [(shape, {"align": "left"}), (style.text(introspect.dtype_name(array)), {}), (kind, {})]

    @staticmethod
    def _state_row(label: str, port: str | None, cells: list[tuple[str, dict]], background: str,
                   mark: RowMark | None, size: float) -> list[str]:
        """One entry's row, coloured by its status when marked, with the mark's note in a row under it."""
        colour = style.COLOURS[mark.status] if mark else background
        row = "".join(style.cell(content, bgcolor=colour, **attributes)
                      for content, attributes in [(label, {"align": "left", "port": port}), *cells])
        if mark is None or not mark.note:
            return [row]
        note = style.cell(style.font(style.text(mark.note), size=size), colspan=COLUMNS, align="left",
                          bgcolor=colour)
        return [row, note]

    def _draw_edges(self, graph: Drawing) -> None:
        for qualname, shown in self.shown.items():
            parent = shown.node.parent
            if parent is not None:
                graph.edge(node_name(parent.qualname), node_name(qualname), id=f"mc-tree-{qualname}",
                           **{"class": "tree"})
        for shared in self.tree.shared_modules:
            if shared.parent not in self.shown:
                continue
            graph.edge(node_name(shared.parent), node_name(self.visible(shared.target)), label=style.text(shared.path),
                       style="dashed", color=style.COLOURS["shared"], fontcolor=style.COLOURS["shared"],
                       constraint="false", id=f"mc-shared-{shared.path}", **{"class": "shared-module"})
        for qualname in self.shown:
            self._draw_shared_parameters(graph, qualname)

    def _draw_shared_parameters(self, graph: Drawing, qualname: str) -> None:
        module = self.shown[qualname].node.module
        for index, (name, parameter) in enumerate(introspect.own_parameters(module)):
            owner = self.tree.tied_to(qualname, name, parameter)
            if owner is None:
                continue
            tail, head = node_name(qualname), node_name(self.visible(owner.qualname))
            if self.state == "table":
                tail += f":p{index}"
                if owner.qualname in self.shown:
                    names = [n for n, _ in introspect.own_parameters(self.tree.nodes[owner.qualname].module)]
                    head += f":p{names.index(owner.name)}"
            graph.edge(tail, head, style="dashed", color=style.COLOURS["shared_parameter"], constraint="false",
                       id=f"mc-shared-{introspect.join(qualname, name)}", **{"class": "shared-parameter"})
