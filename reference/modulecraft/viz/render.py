"""Rendering a graphviz drawing for JupyterLab; where Graphviz's ``dot`` is missing, a text rendering instead."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import select
import shutil
import subprocess
import sys
import threading

from html import escape

import graphviz

from . import text

HOW_TO_INSTALL = (
    "  Debian/Ubuntu:  sudo apt-get install graphviz\n"
    "  conda:          conda install -c conda-forge graphviz\n"
    "  macOS:          brew install graphviz\n"
    "(`pip install graphviz` installs only the Python bindings, not `dot`.)"
)
INSTALL_HINT = ("modulecraft.viz draws with Graphviz's `dot` program, which is not on PATH. Install Graphviz, then "
                "restart the kernel:\n" + HOW_TO_INSTALL)
TEXT_NOTICE = ("Graphviz's `dot` program is not on PATH, so drawings are shown as text. To see them drawn, install "
               "Graphviz and restart the kernel:\n" + HOW_TO_INSTALL)


class DotNotFoundError(RuntimeError):
    """Graphviz's ``dot`` executable is not installed (or not on PATH)."""


def require_dot() -> None:
    """Fail early, with install instructions, when ``dot`` cannot be found."""
    if shutil.which("dot") is None:
        raise DotNotFoundError(INSTALL_HINT)


_notice_given = False


def text_bundle(graph) -> dict[str, str]:
    """Any graphviz graph as text, for a machine without ``dot``: the first one shown also says how to install it.
    DOT that the text reader cannot follow (hand-written, say) is shown as it is."""
    global _notice_given
    try:
        rendering = text.render(graph.source)
    except (ValueError, IndexError):
        rendering = graph.source
    notice, _notice_given = ("" if _notice_given else TEXT_NOTICE), True
    return {"text/plain": f"{notice}\n\n{rendering}" if notice else rendering,
            "text/html": ('<div class="modulecraft-viz modulecraft-viz-text">'
                          + (f'<pre style="color:#a61e4d">{escape(notice)}</pre>' if notice else "")
                          + f"<pre>{escape(rendering)}</pre></div>")}


def show_graphs_as_text_without_dot() -> None:
    """Where ``dot`` is missing, IPython shows every graphviz graph as text (the course's own flowcharts too): a
    notebook then runs to its end instead of stopping at the first drawing, which graphviz cannot lay out."""
    if shutil.which("dot") is not None:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        for kind in (graphviz.Graph, graphviz.Digraph, graphviz.Source):
            shell.display_formatter.mimebundle_formatter.for_type(kind, text_bundle)


def inline_svg(svg: str) -> str:
    """The ``<svg>`` element alone (no XML prolog or doctype), ready to sit inside HTML."""
    return svg[svg.index("<svg"):]


class _Dot:
    """One ``dot -Tsvg`` per process, kept running: dot lays out each graph it reads from stdin as it comes and
    flushes its SVG, so a drawing costs a fraction of a millisecond instead of dot's start-up (about 10 ms, which
    a stepper pays once per step). Each drawing is followed by an empty marker graph: its SVG ends dot's answer
    even when the drawing gave none. dot ends at a syntax error; the next drawing starts another."""

    MARKER = b"digraph modulecraft_end_of_drawing {}\n"
    MARKER_TITLE = b"<title>modulecraft_end_of_drawing</title>"
    END = b"</svg>\n"

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.pid = None  # the process that started it (a forked child must not share its pipes)
        self.lock = threading.Lock()

    def svg(self, source: str) -> str:
        with self.lock:
            if self.process is None or self.pid != os.getpid() or self.process.poll() is not None:
                # In a session of its own: a kernel's interrupt (SIGINT to its group) must not end it, nor ipykernel
                # wait for it at shutdown (it signals its group's children and waits seconds for them to go). It
                # ends when its stdin closes, as the process that started it ends, however.
                self.process = subprocess.Popen(["dot", "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, start_new_session=True)
                if self.pid is None:
                    atexit.register(self.close)
                self.pid = os.getpid()
            process = self.process
            try:
                try:
                    process.stdin.write(source.encode() + b"\n" + self.MARKER)
                    process.stdin.flush()
                except BrokenPipeError:
                    pass  # dot has ended: what it said is read below
                output, errors = self._read(process)
            except BaseException:  # interrupted mid-answer (a kernel's interrupt): the rest would answer the next
                process.kill()
                self.close()
                raise
            marker = output.find(self.MARKER_TITLE)
            svg = output[:output.rfind(b"<?xml", 0, marker)] if marker >= 0 else output
            if marker < 0 or not svg.endswith(self.END):  # no drawing: say why, as graphviz's pipe() does
                if marker < 0:
                    self.close()
                raise graphviz.CalledProcessError(process.returncode or 1, ["dot", "-Tsvg"], output=svg,
                                                  stderr=errors)
            if errors:
                sys.stderr.write(errors.decode(errors="replace"))  # dot's warnings, shown as pipe() shows them
            # dot numbers the graphs of one run: the drawing's group gets the id it has when drawn alone
            return re.sub(r'^<g id="page\d+,\d+_graph0" class="graph"', '<g id="graph0" class="graph"', svg.decode(),
                          count=1, flags=re.MULTILINE)

    def close(self) -> None:
        """End this process's dot (its stdin closed, it exits)."""
        if self.process is not None and self.pid == os.getpid():
            with contextlib.suppress(BrokenPipeError):  # what a failed write left in the buffer goes nowhere
                self.process.stdin.close()
            self.process.wait()
            self.process.stdout.close()
            self.process.stderr.close()
        self.process = None

    def _read(self, process) -> tuple[bytes, bytes]:
        """Read dot's outputs until the marker's SVG has ended, or dot has.

        A big drawing's SVG comes in many chunks: they are appended to a bytearray and only the newly read end is
        searched for the marker, so reading stays linear in the SVG's size."""
        output, errors = bytearray(), bytearray()
        marker_seen = False
        open_streams = [process.stdout, process.stderr]
        while process.stdout in open_streams and not (marker_seen and output.endswith(self.END)):
            ready, _, _ = select.select(open_streams, [], [])
            for stream in ready:
                chunk = os.read(stream.fileno(), 1 << 16)
                if not chunk:
                    open_streams.remove(stream)
                elif stream is process.stdout:
                    output += chunk
                    marker_seen = marker_seen or self.MARKER_TITLE in output[-len(chunk) - len(self.MARKER_TITLE):]
                else:
                    errors += chunk
        return bytes(output), bytes(errors)


_dot = _Dot()


def _cached_for_short(quote):
    """``quote`` (one of graphviz's quoting functions, without its per-call argument check) remembering its answers
    for short strings: a drawing repeats attribute names, colours, classes and node names thousands of times."""
    quote = getattr(quote, "__wrapped__", quote)
    cached = functools.lru_cache(maxsize=1 << 14)(quote)

    def quoted(identifier: str) -> str:
        # exactly str: graphviz's nohtml() strings are equal to plain ones but quoted differently
        return cached(identifier) if type(identifier) is str and len(identifier) <= 64 else quote(identifier)

    return quoted


_quote = _cached_for_short(graphviz.quoting.quote)


def _a_list(label=None, kwargs=None, attributes=None) -> str:
    """graphviz's ``a_list`` (the text inside ``[...]``), with the cached quoting above."""
    result = [f"label={_quote(label)}"] if label is not None else []
    for mapping in (kwargs, attributes):
        if mapping:
            items = graphviz._tools.mapping_items(mapping) if hasattr(mapping, "items") else mapping
            result += [f"{_quote(key)}={_quote(value)}" for key, value in items if value is not None]
    return " ".join(result)


def _attr_list(label=None, kwargs=None, attributes=None) -> str:
    """graphviz's ``attr_list``: `` [...]``, or nothing when there are no attributes."""
    content = _a_list(label, kwargs, attributes)
    return f" [{content}]" if content else ""


class Drawing(graphviz.Digraph):
    """A ``graphviz.Digraph`` that displays in JupyterLab as an inline ``<svg>`` element.

    JupyterLab shows ``image/svg+xml`` output as an ``<img>``; HTML output keeps a real ``<svg>`` whose nodes
    can be styled and queried (the steppers and the browser tests rely on it). No ``size`` attribute is set, so
    nothing is clipped; the wrapper scrolls instead. The DOT text is graphviz's, quoted by the same rules with
    the answers for short strings cached (a 1,000-module tree quotes about 10,000 of them).
    """

    _quote = staticmethod(_quote)
    _quote_edge = staticmethod(_cached_for_short(graphviz.quoting.quote_edge))
    _a_list = staticmethod(_a_list)
    _attr_list = staticmethod(_attr_list)

    def svg(self) -> str:
        """Lay the drawing out with ``dot`` and return the SVG text."""
        require_dot()
        try:
            if os.name == "nt":  # select() cannot wait on pipes there: a dot per drawing, as graphviz runs it
                return self.pipe(format="svg", encoding="utf-8")
            return _dot.svg(self.source)
        except (FileNotFoundError, graphviz.ExecutableNotFound) as error:
            raise DotNotFoundError(INSTALL_HINT) from error

    def inline(self) -> str:
        """The drawing as an element to put inside HTML: its ``<svg>``, or its text where ``dot`` is missing."""
        if shutil.which("dot") is None:
            return text_bundle(self)["text/html"]
        return inline_svg(self.svg())

    def html(self) -> str:
        return f'<div class="modulecraft-viz" style="overflow:auto; max-width:100%">{self.inline()}</div>'

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_mimebundle_(self, include=None, exclude=None, **_):
        if shutil.which("dot") is None:
            return text_bundle(self)
        return {"text/html": self.html(), "text/plain": f"<{type(self).__name__}: {self.name or 'module tree'}>"}
