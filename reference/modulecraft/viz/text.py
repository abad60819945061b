"""A drawing as text, for machines without Graphviz's ``dot``: read the graph back from its DOT source.

Any graph the ``graphviz`` package writes can be shown this way (the module trees, and the course's own flowcharts):
each node's label becomes lines of text (an HTML-like label's table rows become lines, its cells columns), and the
edges become an indented tree walked from the nodes nothing points to. A node reached a second time is named with
"(above)" instead of being repeated; dashed edges (a second path to a shared module) are drawn ``┄▸``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"""
    (?P<newline>\n) | (?P<space>[ \t\r]+) | (?P<comment>//[^\n]*|/\*.*?\*/)
  | "(?P<quoted>(?:[^"\\]|\\.)*)" | (?P<html><) | (?P<arrow>->|--)
  | (?P<id>-?(?:\.\d+|\d+(?:\.\d*)?)|[A-Za-z_\x80-\uffff][\w\x80-\uffff]*) | (?P<punctuation>[\[\]{}=;,:])
""", re.VERBOSE | re.DOTALL)
_KEYWORDS = {"graph", "digraph", "subgraph", "node", "edge", "strict"}


class _Html(str):
    """An HTML-like string (``<...>`` in DOT), as opposed to a quoted or plain one."""


@dataclass
class _Node:
    name: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class _Edge:
    tail: str
    head: str
    attributes: dict[str, str]


def _html_string(source: str, start: int) -> tuple[str, int]:
    """The HTML-like string whose opening ``<`` is at ``start`` (angle brackets nest), and the index after it."""
    depth = 0
    for index in range(start, len(source)):
        depth += {"<": 1, ">": -1}.get(source[index], 0)
        if depth == 0:
            return source[start + 1:index], index + 1
    raise ValueError("an HTML-like label is not closed")


def _tokens(source: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pairs; names, quoted and HTML-like strings are all ``"id"`` (the last as ``_Html``)."""
    tokens, position = [], 0
    while position < len(source):
        if source[position] == "<":
            text, position = _html_string(source, position)
            tokens.append(("id", _Html(text)))
            continue
        match = _TOKEN.match(source, position)
        if match is None:
            raise ValueError(f"cannot read DOT source at {source[position:position + 20]!r}")
        position = match.end()
        kind = match.lastgroup
        if kind == "quoted":
            tokens.append(("id", re.sub(r'\\(["\\])', r"\1", match.group("quoted"))))
        elif kind == "id":
            tokens.append(("id", match.group("id")))
        elif kind in ("newline", "arrow", "punctuation"):
            tokens.append((kind, match.group(kind)))
    return tokens


def _statements(tokens: list[tuple[str, str]]):
    """Statements (lists of tokens) with their brace depth; ``graphviz`` writes one per line."""
    statement, depth = [], 0
    for kind, text in tokens:
        if kind == "newline" or text in (";", "{", "}"):
            if statement:
                yield depth, statement
            statement = []
            depth += {"{": 1, "}": -1}.get(text, 0)
        else:
            statement.append((kind, text))
    if statement:
        yield depth, statement


def _attributes(tokens: list[tuple[str, str]]) -> dict[str, str]:
    """``key=value`` pairs of an attribute list (the tokens between its brackets)."""
    return {tokens[index - 1][1]: tokens[index + 1][1] for index, (kind, text) in enumerate(tokens)
            if kind == "punctuation" and text == "="}


def _endpoint(tokens: list[tuple[str, str]], index: int) -> tuple[str, int]:
    """A node name in an edge, its ``:port`` (and ``:compass``) skipped."""
    name, index = tokens[index][1], index + 1
    while index + 1 < len(tokens) and tokens[index][1] == ":":
        index += 2
    return name, index


def parse(source: str) -> tuple[dict[str, str], dict[str, _Node], list[_Edge]]:
    """The graph's own attributes, its nodes (in the order they appear) and its edges, from DOT source."""
    graph: dict[str, str] = {}
    nodes: dict[str, _Node] = {}
    edges: list[_Edge] = []
    for depth, statement in _statements(_tokens(source)):
        bracket = next((i for i, (_, text) in enumerate(statement) if text == "["), len(statement))
        head, attributes = statement[:bracket], _attributes(statement[bracket + 1:-1])
        first = head[0][1] if head else ""
        if first in _KEYWORDS:
            if first == "graph" and depth == 1:
                graph.update(attributes)
            continue
        if len(head) == 3 and head[1][1] == "=":  # `label=...` on its own: an attribute of the (sub)graph
            if depth == 1:
                graph[first] = head[2][1]
            continue
        names, index = [], 0
        while index < len(head):
            name, index = _endpoint(head, index)
            names.append(name)
            index += 1  # over the edge operator
        for name in names:
            nodes.setdefault(name, _Node(name))
        if len(names) == 1:
            nodes[names[0]].attributes.update(attributes)
        edges += [_Edge(tail, head_name, attributes) for tail, head_name in zip(names, names[1:])]
    return graph, nodes, edges


def label_lines(label: str) -> list[str]:
    """A label as lines of text: table rows (and ``<BR/>``) break lines, cells are set two spaces apart."""
    if isinstance(label, _Html):
        text = re.sub(r"<BR\b[^>]*>|</TR\s*>", "\n", label, flags=re.IGNORECASE)
        text = re.sub(r"</TD\s*>", "  ", text, flags=re.IGNORECASE)
        text = html.unescape(re.sub(r"<[^>]*>", "", text))
    else:
        text = re.sub(r"\\[nlr]", "\n", label)
    return [line.strip() for line in text.splitlines() if line.strip()]


def render(source: str) -> str:
    """The graph in ``source`` (DOT, as ``graphviz`` writes it) as indented text."""
    graph, nodes, edges = parse(source)
    labels = {}
    for name, node in nodes.items():
        label = node.attributes.get("label", name)
        lines = label_lines(label) or [name]
        if "highlighted" in node.attributes.get("class", "").split():
            lines[0] += "  ◀"
        labels[name] = lines
    shown = {name for name, node in nodes.items() if "legend" not in node.attributes.get("class", "").split()}
    children: dict[str, list[_Edge]] = {name: [] for name in nodes}
    pointed_at = set()
    for edge in edges:
        children[edge.tail].append(edge)
        if edge.tail != edge.head and not _is_dashed(edge):
            pointed_at.add(edge.head)
    out = label_lines(graph.get("label", ""))
    visited: set[str] = set()

    def walk(name: str, prefix: str, branch: str, below: str, edge: _Edge | None):
        arrow = "" if edge is None else ("┄▸ " if _is_dashed(edge) else "─▸ ")
        edge_label = "" if edge is None or not edge.attributes.get("label") else (
            "[" + " ".join(label_lines(edge.attributes["label"])) + "] ")
        if name in visited:
            out.append(f"{prefix}{branch}{arrow}{edge_label}{labels[name][0]} (above)")
            return
        visited.add(name)
        out.append(f"{prefix}{branch}{arrow}{edge_label}{labels[name][0]}")
        inner = prefix + below
        following = children[name]
        for line in labels[name][1:]:
            out.append(f"{inner}{'│   ' if following else '    '}{line}")
        for index, child in enumerate(following):
            last = index == len(following) - 1
            walk(child.head, inner, "└" if last else "├", "    " if last else "│   ", child)

    for name in [n for n in nodes if n in shown and n not in pointed_at] + list(nodes):
        if name in shown and name not in visited:
            walk(name, "", "", "", None)
    return "\n".join(out)


def _is_dashed(edge: _Edge) -> bool:
    return "dashed" in edge.attributes.get("style", "") or "dotted" in edge.attributes.get("style", "")
