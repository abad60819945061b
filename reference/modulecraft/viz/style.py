"""Font, colours and small HTML-label helpers shared by every drawing.

``dot`` measures text with the fonts fontconfig finds and the browser draws it with its own, so both must use
the same font or table cells get gaps: DejaVu Sans ships with Debian (``fonts-dejavu-core``) and most Linux
desktops, and is matplotlib's default.
"""

from __future__ import annotations

import os
from html import escape

# Where DejaVu Sans is missing (e.g. a conda env on macOS), both sides fall back to their generic sans-serif.
FONT = "DejaVu Sans,sans-serif"
FONT_SIZE = 11  # points
FONT_SIZE_VARIABLE = "MODULECRAFT_VIZ_FONTSIZE"  # e.g. 20 for projector decks, without touching the notebooks

COLOURS = {
    "node": "#eef3fb",
    "node_eval": "#e4e4e4",
    "border": "#4a6fa5",
    "highlight": "#e8590c",
    "order": "#1c3d6e",
    "order_number": "#e8590c",
    "parameter": "#ffffff",
    "buffer": "#fdf3dc",
    "muted": "#666666",
    "pre_hook": "#7048e8",
    "forward_hook": "#0c8599",
    "eval": "#555555",
    "lazy": "#c2255c",
    "shared": "#868e96",
    "shared_parameter": "#9c36b5",
    "collapsed": "#495057",
    "duplicate": "#e03131",
    "missing": "#ffc9c9",
    "unexpected": "#d0bfff",
    "mismatch": "#ffd8a8",
    "loads": "#d3f9d8",
}

# What each mark means, shown in the legend: (chip text, or None for a colour swatch; colour; meaning).
STATE_LEGEND = {  # by how draw_tree lists parameters and buffers
    "table": [
        (None, COLOURS["parameter"], "parameter: shape, dtype, requires_grad"),
        (None, COLOURS["buffer"], "buffer (○ = non-persistent, not in state_dict)"),
    ],
    "summary": [
        (None, COLOURS["parameter"], "parameters: name shape (dtype if not float32, 'no grad' if frozen)"),
        (None, COLOURS["buffer"], "buffers: name shape (○ = non-persistent, not in state_dict)"),
    ],
    "none": [],
}
LEGEND = [
    ("pre", COLOURS["pre_hook"], "forward pre-hooks registered here"),
    ("fwd", COLOURS["forward_hook"], "forward hooks registered here"),
    ("eval", COLOURS["eval"], "module in eval mode (grey)"),
    ("lazy", COLOURS["lazy"], "uninitialised (lazy) parameter"),
    ("- - ▸", COLOURS["shared"], "second path to a shared module / parameter"),
]
LOAD_LEGEND = [
    (None, COLOURS["loads"], "loads from the state_dict"),
    (None, COLOURS["missing"], "missing key"),
    (None, COLOURS["mismatch"], "size mismatch"),
    (None, COLOURS["unexpected"], "unexpected key"),
    (None, COLOURS["node_eval"], "taken by a module's own loading, or forgiven by a post-hook"),
]


def font_size(requested: float | None = None) -> float:
    """The base font size: ``requested`` if given, else $MODULECRAFT_VIZ_FONTSIZE, else 11 points."""
    if requested is not None:
        return float(requested)
    configured = os.environ.get(FONT_SIZE_VARIABLE, "").strip()
    if not configured:
        return FONT_SIZE
    try:
        return float(configured)
    except ValueError:
        raise ValueError(f"{FONT_SIZE_VARIABLE}={configured!r} is not a number of points (try 20)") from None


def text(value: object) -> str:
    """Escape a value for an HTML-like graphviz label."""
    return escape(str(value), quote=True)


def font(content: str, *, colour: str | None = None, size: float | None = None, bold=False, italic=False) -> str:
    if bold:
        content = f"<B>{content}</B>"
    if italic:
        content = f"<I>{content}</I>"
    attributes = (f' COLOR="{colour}"' if colour else "") + (f' POINT-SIZE="{size:g}"' if size else "")
    return f"<FONT{attributes}>{content}</FONT>" if attributes else content


def cell(content: str, **attributes: object) -> str:
    """One ``<TD>``; keyword arguments become upper-case attributes (``bgcolor=`` -> ``BGCOLOR=``)."""
    rendered = "".join(f' {key.upper()}="{value}"' for key, value in attributes.items() if value is not None)
    return f"<TD{rendered}>{content}</TD>"


def table(rows: list[str], **attributes: object) -> str:
    """A borderless ``<TABLE>`` of ``rows`` (each a string of cells)."""
    defaults = {"border": 0, "cellborder": 0, "cellspacing": 0, "cellpadding": 2}
    rendered = "".join(f' {key.upper()}="{value}"' for key, value in {**defaults, **attributes}.items())
    body = "".join(f"<TR>{row}</TR>" for row in rows)
    return f"<TABLE{rendered}>{body}</TABLE>"


def wrapped(entries: list[str], width: int) -> str:
    """``entries`` joined by commas, in left-aligned lines of about ``width`` characters (escaped)."""
    lines = [""]
    for entry in entries:
        if lines[-1] and len(lines[-1]) + len(entry) > width:
            lines.append("")
        lines[-1] += (", " if lines[-1] else "") + entry
    return '<BR ALIGN="LEFT"/>'.join(map(text, lines))


def html_label(content: str) -> str:
    """Mark ``content`` as an HTML-like label (graphviz's ``<...>`` quoting)."""
    return f"<{content}>"


def chip(label: str, colour: str, size: float) -> str:
    """A small coloured tag such as ``pre ×2`` or ``eval``."""
    return font(text(label), colour=colour, size=size, bold=True)


def legend_label(font_size: float, entries: list[tuple[str | None, str, str]]) -> str:
    small = font_size * 0.85
    rows = [cell(font("legend", bold=True, size=small), colspan=2, align="left")]
    for sample, colour, meaning in entries:
        swatch = cell("", bgcolor=colour, border=1, width=14) if sample is None else cell(chip(sample, colour, small))
        rows.append(swatch + cell(font(text(meaning), size=small), align="left"))
    return html_label(table(rows, cellspacing=2, border=1, color=COLOURS["shared"], bgcolor="white"))


def format_count(n: int) -> str:
    return f"{n:,}"


def format_shape(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return "uninitialised"
    return "×".join(map(str, shape)) if shape else "scalar"
