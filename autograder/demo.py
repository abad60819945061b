"""Demo material for instructors: every chapter's solution notebook, executed, and a reveal.js slide deck of it.

    python -m autograder.demo build [--out demo/] [--chapters 05_traversal 06_hooks] [--font-size 20]
                                    [--reveal-url-prefix URL]

The chapters in ``course/source`` carry no slide metadata, so the deck is cut at build time, on a copy, by rules
that follow the anatomy of a chapter (an existing ``slideshow`` metadata always wins):

- each ``#`` or ``##`` heading starts a slide, each deeper heading a sub-slide below it; other prose continues;
- a code cell whose output is a drawing (SVG) gets a sub-slide of its own; code with other output continues;
- left out: solutions and graded tests (a deck is shown to the class before they do the exercises), code cells
  without output (imports, plumbing that plugs an exercise in), and the "Check your work" section.

The decks work offline: reveal.js 5 comes from the pip package ``sphinx-revealjs`` (which ships its built files) and
is copied next to the decks, ``<out>/reveal.js/``; the deck template loads nothing else (nbconvert's stock reveal
template fetches require.js, jQuery, Mermaid and MathJax from CDNs). ``--reveal-url-prefix`` loads reveal.js from
elsewhere instead.

Drawings are rendered with a larger font for the projector (``$MODULECRAFT_VIZ_FONTSIZE`` in the kernel).
Steppers show their static sequence of steps in the deck and in the saved notebook, since no kernel answers the
buttons there.
Everything is written under the output folder; nothing else is touched.
"""
from __future__ import annotations

import argparse
import copy
import html
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError
from nbconvert import SlidesExporter
from traitlets.config import Config

from .config import CELL_TIMEOUT, COURSE_SOURCE, GRADING_ENV_VAR, REPO_ROOT

DEFAULT_OUT = REPO_ROOT / "demo"
PROJECTOR_FONT_SIZE = 20  # points, for modulecraft.viz drawings
MARKER = ".modulecraft-demo"  # marks a folder as ours, so a rebuild never clobbers someone else's files
SKIPPED_SECTIONS = ("check your work",)
KERNEL_ATTEMPTS = 2  # a kernel that fails to start on a loaded machine gets one more chance
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)

LOCAL_REVEAL = "reveal.js"  # the folder in ``out`` that holds reveal.js for every deck
REVEAL_THEME = "white"      # its fonts ship with it (the "simple" theme imports Google fonts)
# What a deck loads from reveal.js (paths inside the distribution); nothing else is copied.
REVEAL_FILES = ("LICENSE", "dist/reveal.js", "dist/reveal.css", f"dist/theme/{REVEAL_THEME}.css",
                "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js")

# nbconvert's reveal template with every CDN script removed (require.js, jQuery, Mermaid, MathJax, the widget
# manager) and reveal.js loaded by plain <script> tags, so a deck needs nothing but the files next to it. Long code
# lines wrap instead of running off the projected slide.
OFFLINE_DECK = """{%- extends 'reveal/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}
<style>.reveal .jp-InputArea pre, .reveal .jp-OutputArea pre { white-space: pre-wrap; }</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ reveal_url_prefix }}/dist/reveal.js"></script>
<script src="{{ reveal_url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({
    controls: true, progress: true, history: true, plugins: [RevealNotes],
    transition: "{{ reveal_transition }}", slideNumber: "{{ reveal_number }}",
    width: {{ reveal_width }}, height: {{ reveal_height }},
});
// Sub-slides taller than the screen scroll (what the stock template does with jQuery).
Reveal.on("slidechanged", function () {
    if (!{{ reveal_scroll }}) return;
    var tallest = document.querySelector(".reveal").offsetHeight * 0.95;
    document.querySelectorAll("section.present section").forEach(function (section) {
        if (section.offsetHeight > tallest) {
            section.style.height = "calc(95vh)";
            section.style.overflowY = "scroll";
            section.style.marginTop = "20px";
        }
    });
});
</script>
{% endblock footer_js %}
"""


def chapters(source: Path = COURSE_SOURCE) -> list[str]:
    """The chapters in ``source``: folders ``<ch>`` holding ``<ch>.ipynb``, in order."""
    return sorted(p.parent.name for p in source.glob("*/*.ipynb") if p.stem == p.parent.name)


# -- slide metadata --------------------------------------------------------------------------------------------


def _heading_level(cell) -> int:
    """The level of the markdown heading the cell starts with (0 when it does not start with one)."""
    match = re.match(r"\s*(#{1,6})\s", cell.source) if cell.cell_type == "markdown" else None
    return len(match.group(1)) if match else 0


def _has_drawing(cell) -> bool:
    """A graph, a figure or a stepper in the outputs (an image, or HTML that embeds an SVG)."""
    return any(any(kind.startswith("image/") for kind in data) or "<svg" in data.get("text/html", "")
               for data in (output.get("data", {}) for output in cell.get("outputs", [])))


def _is_exercise_machinery(cell) -> bool:
    """Solution cells, graded test cells, and the self-check: the learners' work, not the lecture."""
    grading = cell.metadata.get("nbgrader", {})
    self_check = cell.cell_type == "code" and "check_my_work(" in cell.source
    return bool(grading.get("solution") or grading.get("grade")) or self_check


def slide_type(cell) -> str:
    """The reveal.js role of one executed cell, by the rules in the module docstring."""
    level = _heading_level(cell)
    if level:
        return "slide" if level <= 2 else "subslide"
    if cell.cell_type == "markdown":
        return "-"
    if _is_exercise_machinery(cell) or not cell.get("outputs"):
        return "skip"
    return "subslide" if _has_drawing(cell) else "-"


def assign_slides(notebook):
    """A copy of the executed ``notebook`` with a slide type on every cell and the left-out cells removed."""
    deck = copy.deepcopy(notebook)
    kept, skipping_section = [], 0  # heading level of the section being left out (0: none)
    for cell in deck.cells:
        level = _heading_level(cell)
        if level and (not skipping_section or level <= skipping_section):
            heading = cell.source.lstrip().lstrip("#").strip().lower()
            skipping_section = level if heading.startswith(SKIPPED_SECTIONS) else 0
        slideshow = cell.metadata.setdefault("slideshow", {})
        if "slide_type" not in slideshow:
            slideshow["slide_type"] = "skip" if skipping_section else slide_type(cell)
        if slideshow["slide_type"] != "skip":
            kept.append(cell)
    deck.cells = kept
    _inline_svgs(deck)
    _steppers_as_fragments(deck)
    return deck


def _outputs(notebook):
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "data" in output:
                yield output["data"]


def _inline_svgs(deck) -> None:
    """nbconvert turns an ``image/svg+xml`` output into an escaped or base64 ``<img>``; as HTML it stays a real
    ``<svg>`` in the slide."""
    for data in _outputs(deck):
        if "image/svg+xml" in data and "text/html" not in data:
            svg = data["image/svg+xml"]
            data["text/html"] = svg[svg.find("<svg"):]


STEPPER_FRAME = re.compile(r'<div class="modulecraft-step" data-step="(\d+)"')


def _steppers_as_fragments(deck) -> None:
    """A stepper's frames stacked in one place (reveal.js ``r-stack``), shown in turn as the presenter presses
    Next: fragments where the first frame fades out, the middle ones show while current, and the last stays."""
    for data in _outputs(deck):
        last = len(STEPPER_FRAME.findall(data.get("text/html", ""))) - 1
        if last < 1:
            continue

        def fragment(match):
            step = int(match.group(1))
            effect = " fade-out" if step == 0 else " current-visible" if step < last else ""
            return (f'<div class="modulecraft-step fragment{effect}" data-fragment-index="{max(step - 1, 0)}" '
                    f'data-step="{step}"')

        stacked = STEPPER_FRAME.sub(fragment, data["text/html"])
        data["text/html"] = stacked.replace('class="modulecraft-frames"', 'class="modulecraft-frames r-stack"')


def _static_steppers(notebook) -> None:
    """Saved widgets have no kernel behind their buttons: keep a stepper's static sequence instead (Run All in
    JupyterLab brings the buttons back)."""
    for data in _outputs(notebook):
        if WIDGET_VIEW in data and "text/html" in data:
            del data[WIDGET_VIEW]
    notebook.metadata.pop("widgets", None)


# -- building --------------------------------------------------------------------------------------------------


@dataclass
class Built:
    """One chapter's demo material: the executed notebook, and the deck (None when the chapter failed)."""

    chapter: str
    title: str
    notebook: Path
    slides: Path | None
    error: str = ""


def _strip_solution_markers(notebook) -> None:
    """The demo shows solved code without nbgrader's ``### BEGIN/END SOLUTION`` lines."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source = SOLUTION_MARKERS.sub("", cell.source)


def execute(notebook, workdir: Path, font_size: float) -> None:
    """Run the notebook in place in ``workdir``; the kernel draws for a projector and skips the self-check.

    The kernel talks over Unix sockets in a private folder: TCP ports picked at random collided with other
    kernels on a busy machine ("Address already in use") and the kernel never answered.
    """
    env = {**os.environ, "MODULECRAFT_VIZ_FONTSIZE": f"{font_size:g}", GRADING_ENV_VAR: "1"}
    with tempfile.TemporaryDirectory(prefix="modulecraft-demo-") as sockets:
        private_sockets = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}})
        client = NotebookClient(notebook, config=private_sockets, kernel_name="python3", timeout=CELL_TIMEOUT,
                                startup_timeout=CELL_TIMEOUT,
                                extra_arguments=["--InlineBackend.figure_formats=svg"],  # crisp on a projector
                                resources={"metadata": {"path": str(workdir)}})
        client.execute(env=env)  # the client starts the kernel, so it also shuts it down


def export_slides(deck, reveal_url_prefix: str = f"../{LOCAL_REVEAL}") -> str:
    """The reveal.js deck as one HTML file that loads reveal.js from ``reveal_url_prefix`` and nothing from the
    network (default: the copy :func:`copy_reveal` puts next to the chapter folders)."""
    exporter = SlidesExporter(reveal_scroll=True, reveal_transition="none", reveal_theme=REVEAL_THEME,
                              reveal_url_prefix=reveal_url_prefix, exclude_input_prompt=True,
                              exclude_output_prompt=True, extra_loaders=[DictLoader({"offline.j2": OFFLINE_DECK})],
                              template_file="offline.j2")
    body, _ = exporter.from_notebook_node(deck, resources={"metadata": {"name": _title(deck)}})
    return body


def reveal_distribution() -> Path:
    """The built reveal.js files inside the installed ``sphinx-revealjs`` package (found, not imported: importing it
    would load Sphinx)."""
    spec = importlib.util.find_spec("sphinx_revealjs")
    folder = Path(next(iter(spec.submodule_search_locations))) / "_static" / "revealjs" if spec else None
    if folder is None or not (folder / "dist" / "reveal.js").is_file():
        raise SystemExit("demo: the decks load reveal.js from the package sphinx-revealjs, which is not installed: "
                         "pip install sphinx-revealjs (it is a dependency of this project: pip install -e .)")
    return folder


def copy_reveal(out: Path) -> Path:
    """Copy the parts of reveal.js a deck loads into ``out/reveal.js`` (replacing an older copy)."""
    source, target = reveal_distribution(), out / LOCAL_REVEAL
    shutil.rmtree(target, ignore_errors=True)
    for name in REVEAL_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, target / name)
    return target


def _title(notebook) -> str:
    """The text of the notebook's first heading (the browser tab of the deck), without markdown."""
    heading = next((cell.source.lstrip() for cell in notebook.cells if _heading_level(cell)), "modulecraft")
    return re.sub(r"[#`*]", "", heading.splitlines()[0]).strip()


def build_chapter(chapter: str, out: Path, source: Path, font_size: float, reveal_url_prefix: str | None) -> Built:
    """Copy the chapter folder into ``out/<chapter>``, execute its notebook there, and write its deck."""
    target = out / chapter
    target.mkdir(parents=True, exist_ok=True)
    for asset in (source / chapter).iterdir():
        if asset.is_file() and asset.suffix != ".ipynb":
            (target / asset.name).write_bytes(asset.read_bytes())
    executed, slides = target / f"{chapter}.ipynb", target / f"{chapter}.slides.html"
    for attempt in range(1, KERNEL_ATTEMPTS + 1):
        notebook = nbformat.read(source / chapter / f"{chapter}.ipynb", as_version=4)
        _strip_solution_markers(notebook)
        try:
            execute(notebook, target, font_size)
            error = ""
            break
        except CellExecutionError as failure:  # the chapter itself fails: the saved notebook shows where
            error = f"{failure.ename}: {failure.evalue}"
            break
        except (RuntimeError, DeadKernelError, TimeoutError) as failure:  # the kernel did not start, or died
            error = f"the kernel failed {attempt} time(s): {failure}"
    _static_steppers(notebook)
    nbformat.write(notebook, executed)
    if error:
        slides.unlink(missing_ok=True)  # a deck from an earlier build would no longer match
        return Built(chapter, _title(notebook), executed, None, error)
    location = {"reveal_url_prefix": reveal_url_prefix} if reveal_url_prefix else {}
    slides.write_text(export_slides(assign_slides(notebook), **location), encoding="utf-8")
    return Built(chapter, _title(notebook), executed, slides)


def _claim(out: Path) -> None:
    """Make sure ``out`` is ours to write: new, empty, or built by us before; never the course's own folders."""
    out = out.resolve()
    if out == COURSE_SOURCE.resolve() or COURSE_SOURCE.resolve() in out.parents or out in COURSE_SOURCE.parents:
        raise SystemExit(f"demo: refusing to build into {out}: it holds the course sources. Pick another --out.")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise SystemExit(f"demo: {out} already has files that the demo build did not make; refusing to write "
                         "there. Pick an empty or new folder with --out.")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("Built by `python -m autograder.demo build`; safe to delete.\n")


def write_index(out: Path, built: list[Built]) -> Path:
    """``out/index.html``: every chapter in ``out`` (also those of earlier builds), failures of this one named."""
    errors = {item.chapter: item.error for item in built if item.error}
    rows = []
    for chapter in chapters(out):
        executed = nbformat.read(out / chapter / f"{chapter}.ipynb", as_version=4)
        slides = out / chapter / f"{chapter}.slides.html"
        if slides.exists():
            deck = f'<a href="{chapter}/{slides.name}">slides</a>'
        else:
            deck = f"<em>not built: {html.escape(errors.get(chapter, 'see the notebook'))}</em>"
        rows.append(f"<tr><td>{html.escape(_title(executed))}</td><td>{deck}</td>"
                    f'<td><a href="{chapter}/{chapter}.ipynb">executed notebook</a></td></tr>')
    index = out / "index.html"
    index.write_text("<!doctype html><meta charset='utf-8'><title>modulecraft demos</title>"
                     "<style>body{font-family:sans-serif} td{padding:0.3em 1em}</style>"
                     "<h1>modulecraft: instructor demos</h1><table>" + "".join(rows) + "</table>\n",
                     encoding="utf-8")
    return index


def build(out: Path = DEFAULT_OUT, chapter_names=None, source: Path = COURSE_SOURCE,
          font_size: float = PROJECTOR_FONT_SIZE, reveal_url_prefix: str | None = None,
          progress=print) -> list[Built]:
    """Build the demo material of ``chapter_names`` (default: every chapter in ``source``) into ``out``."""
    known = chapters(source)
    selected = known if not chapter_names else list(chapter_names)
    unknown = sorted(set(selected) - set(known))
    if unknown:
        raise SystemExit(f"demo: unknown chapter(s) {unknown}; {source} has {known}")
    if not selected:
        raise SystemExit(f"demo: no chapters found in {source} (expected <chapter>/<chapter>.ipynb)")
    _claim(out)
    if not reveal_url_prefix:
        copy_reveal(out)
    built = []
    for chapter in selected:
        progress(f"demo: {chapter} ...")
        item = build_chapter(chapter, out, source, font_size, reveal_url_prefix)
        progress(f"demo: {chapter}: " + (f"slides {item.slides}" if item.slides else f"FAILED: {item.error}"))
        built.append(item)
    progress(f"demo: open {write_index(out, built)}")
    return built


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.demo", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="execute every chapter's solution notebook and build its slides")
    command.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: demo/ in the repo)")
    command.add_argument("--chapters", nargs="+", metavar="CHAPTER", help="only these chapters (default: all)")
    command.add_argument("--font-size", type=float, default=PROJECTOR_FONT_SIZE,
                         help=f"font size of the drawings, in points (default: {PROJECTOR_FONT_SIZE})")
    command.add_argument("--reveal-url-prefix", metavar="URL",
                         help=f"where the decks load reveal.js 5 from (default: a copy in <out>/{LOCAL_REVEAL})")
    args = parser.parse_args(argv)
    built = build(args.out, args.chapters, font_size=args.font_size, reveal_url_prefix=args.reveal_url_prefix)
    failed = [item.chapter for item in built if not item.slides]
    if failed:
        print(f"demo: {len(failed)} chapter(s) failed to execute: {failed}; their notebooks in {args.out} show "
              "where.", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
