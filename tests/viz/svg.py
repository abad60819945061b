"""Reading a rendered drawing back: the SVG that dot produced, parsed with ElementTree."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class Element:
    id: str
    classes: set[str]
    texts: list[str]
    dashed: bool
    fills: set[str]  # fill colours of the shapes inside (table cell backgrounds)
    x: float  # where its first text starts, left to right

    @property
    def text(self) -> str:
        return " ".join(self.texts)


def parse(svg: str) -> list[Element]:
    """Every node and edge group of the SVG, with its id, classes, text and whether its line is dashed."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter(f"{SVG}g"):
        classes = set(group.get("class", "").split())
        if classes & {"node", "edge"}:
            texts = [t.text.strip() for t in group.iter(f"{SVG}text") if t.text and t.text.strip()]
            dashed = any(p.get("stroke-dasharray") for p in group.iter(f"{SVG}path"))
            fills = {shape.get("fill") for shape in group.iter(f"{SVG}polygon")} - {None, "none"}
            first_text = next(group.iter(f"{SVG}text"), None)
            x = float(first_text.get("x")) if first_text is not None else 0.0
            found.append(Element(group.get("id", ""), classes, texts, dashed, fills, x))
    return found


def modules(svg: str) -> dict[str, Element]:
    """Module nodes keyed by qualified name (the root is '')."""
    nodes = {}
    for element in parse(svg):
        if "module" in element.classes:
            name = element.id.removeprefix("mc-")
            nodes["" if name == "." else name] = element
    return nodes


def edges(svg: str, kind: str) -> list[Element]:
    """Edges of one kind: 'tree', 'shared-module' or 'shared-parameter'."""
    return [element for element in parse(svg) if "edge" in element.classes and kind in element.classes]
