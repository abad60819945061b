"""Rendering a graphviz drawing for JupyterLab, and a clear error when Graphviz's ``dot`` is missing."""

from __future__ import annotations

import shutil

import graphviz

INSTALL_HINT = (
    "modulecraft.viz draws with Graphviz's `dot` program, which is not on PATH. Install Graphviz, then restart "
    "the kernel:\n"
    "  Debian/Ubuntu:  sudo apt-get install graphviz\n"
    "  conda:          conda install -c conda-forge graphviz\n"
    "  macOS:          brew install graphviz\n"
    "(`pip install graphviz` installs only the Python bindings, not `dot`.)"
)


class DotNotFoundError(RuntimeError):
    """Graphviz's ``dot`` executable is not installed (or not on PATH)."""


def require_dot() -> None:
    """Fail early, with install instructions, when ``dot`` cannot be found."""
    if shutil.which("dot") is None:
        raise DotNotFoundError(INSTALL_HINT)


def inline_svg(svg: str) -> str:
    """The ``<svg>`` element alone (no XML prolog or doctype), ready to sit inside HTML."""
    return svg[svg.index("<svg"):]


class Drawing(graphviz.Digraph):
    """A ``graphviz.Digraph`` that displays in JupyterLab as an inline ``<svg>`` element.

    JupyterLab shows ``image/svg+xml`` output as an ``<img>``; HTML output keeps a real ``<svg>`` whose nodes
    can be styled and queried (the steppers and the browser tests rely on it). No ``size`` attribute is set, so
    nothing is clipped; the wrapper scrolls instead.
    """

    def svg(self) -> str:
        """Lay the drawing out with ``dot`` and return the SVG text."""
        require_dot()
        try:
            return self.pipe(format="svg", encoding="utf-8")
        except graphviz.ExecutableNotFound as error:
            raise DotNotFoundError(INSTALL_HINT) from error

    def html(self) -> str:
        return f'<div class="modulecraft-viz" style="overflow:auto; max-width:100%">{inline_svg(self.svg())}</div>'

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_mimebundle_(self, include=None, exclude=None, **_):
        return {"text/html": self.html(), "text/plain": f"<{type(self).__name__}: {self.name or 'module tree'}>"}
