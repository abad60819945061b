"""`python -m autograder.demo build`: the slide rules on a small notebook, then a real build of every chapter."""

import hashlib
import re
import shutil

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder import demo
from autograder.config import COURSE_SOURCE
from modulecraft.viz import DfsStepper

SVG = '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><g id="mc-."/></svg>'


def _graded(cell, **nbgrader):
    cell.metadata["nbgrader"] = {"schema_version": 3, "grade_id": f"id{id(cell)}", "locked": True, **nbgrader}
    return cell


def _executed_chapter():
    """A small chapter as it looks after execution, each cell named by what the rules should do with it."""
    drawing = new_output("execute_result", {"image/svg+xml": SVG, "text/plain": "<Drawing>"}, execution_count=1)
    stepper = new_output("display_data", {"text/html": "<div>static steps<svg></svg></div>", "text/plain": "steps",
                                          demo.WIDGET_VIEW: {"model_id": "abc", "version_major": 2}})
    printed = new_output("stream", name="stdout", text="hello\n")
    cells = {
        "title": new_markdown_cell("# Chapter 9 · Title"),
        "section": new_markdown_cell("## 9.1 A mechanism\n\nProse."),
        "prose": new_markdown_cell("More prose."),
        "imports": new_code_cell("import numpy as np"),
        "demo code": new_code_cell("print('hello')", outputs=[printed]),
        "drawing": new_code_cell("draw_tree(model)", outputs=[drawing]),
        "stepper": new_code_cell("DfsStepper(model)", outputs=[stepper]),
        "exercise": new_markdown_cell("### Exercise 1 (2 points)"),
        "solution": _graded(new_code_cell("def f():\n    return 1"), solution=True, grade=False),
        "test": _graded(new_code_cell("assert f() == 1", outputs=[printed]), solution=False, grade=True, points=2),
        "kept as the author said": new_code_cell("x = 1", metadata={"slideshow": {"slide_type": "fragment"}}),
        "check": new_markdown_cell("## Check your work"),
        "check code": new_code_cell("print('score')", outputs=[printed]),
        "after": new_markdown_cell("## Summary"),
    }
    return new_notebook(cells=list(cells.values()), metadata={"widgets": {"state": {}}}), cells


def test_slide_rules():
    notebook, cells = _executed_chapter()
    deck = demo.assign_slides(notebook)
    roles = {cell.source: cell.metadata["slideshow"]["slide_type"] for cell in deck.cells}
    expected = {
        "title": "slide", "section": "slide", "prose": "-", "demo code": "-", "drawing": "subslide",
        "stepper": "subslide", "exercise": "subslide", "kept as the author said": "fragment", "after": "slide",
    }
    assert roles == {cells[name].source: role for name, role in expected.items()}
    assert "slideshow" not in notebook.cells[0].metadata, "the rules work on a copy"


def _data(notebook, source):
    return next(cell for cell in notebook.cells if cell.source == source).outputs[0]["data"]


def test_slides_show_svgs_inline():
    deck = demo.assign_slides(_executed_chapter()[0])
    assert _data(deck, "draw_tree(model)")["text/html"] == SVG[SVG.index("<svg"):]


def test_saved_steppers_show_their_static_sequence():
    notebook = _executed_chapter()[0]
    demo._static_steppers(notebook)
    assert set(_data(notebook, "DfsStepper(model)")) == {"text/html", "text/plain"}
    assert "widgets" not in notebook.metadata


# -- decks that work without network ----------------------------------------------------------------------------

SCREENSHOTS = COURSE_SOURCE.parents[1] / "test-artifacts" / "demo"  # git-ignored, looked at by people
REMOTE = re.compile(r"""(?:<script[^>]*\ssrc|<link[^>]*\shref|@import\s+url)\s*[=(]\s*["']?(?:https?:)?//""", re.I)
LOCAL = re.compile(r"""<(?:script[^>]*\ssrc|link[^>]*\shref)=["']([^"'#?]+)""", re.I)


def _offline_deck(folder):
    """The small chapter as a deck in ``folder/chapter/``, with reveal.js copied into ``folder`` as a build does."""
    demo.copy_reveal(folder)
    (folder / "chapter").mkdir()
    deck, notebook = folder / "chapter" / "chapter.slides.html", _executed_chapter()[0]
    demo._static_steppers(notebook)
    deck.write_text(demo.export_slides(demo.assign_slides(notebook)), encoding="utf-8")
    return deck


def _assert_self_contained(deck):
    """No script or stylesheet from the network, in the deck or in the CSS it loads; every local file is there."""
    html = deck.read_text()
    assert not REMOTE.findall(html), REMOTE.findall(html)
    for reference in LOCAL.findall(html):
        loaded = (deck.parent / reference).resolve()
        assert loaded.is_file(), f"{deck.name} loads {reference}, which the build did not copy"
        if loaded.suffix == ".css":
            assert not REMOTE.findall(loaded.read_text()), f"{reference} imports from the network"
            for imported in re.findall(r"@import\s+url\(([^)]+)\)", loaded.read_text()):
                assert (loaded.parent / imported).is_file(), f"{reference} imports {imported}, which is missing"


def test_a_deck_loads_reveal_js_from_the_copy_next_to_it(tmp_path):
    deck = _offline_deck(tmp_path)
    _assert_self_contained(deck)
    loaded = LOCAL.findall(deck.read_text())
    assert "../reveal.js/dist/reveal.js" in loaded and "../reveal.js/dist/reveal.css" in loaded
    assert "require" not in " ".join(loaded) and "jquery" not in " ".join(loaded).lower()


def test_the_stock_template_would_load_from_cdns():
    """The defence above matters: nbconvert's own reveal template fetches reveal.js, require.js and jQuery."""
    from nbconvert import SlidesExporter

    notebook = _executed_chapter()[0]
    demo._static_steppers(notebook)
    stock, _ = SlidesExporter().from_notebook_node(demo.assign_slides(notebook))
    assert len(REMOTE.findall(stock)) >= 3


@pytest.mark.browser
def test_a_deck_renders_offline_in_chromium(tmp_path, playwright_session):
    """Chromium with every non-file request refused: reveal.js starts and lays out the slides."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium found (Debian: apt-get install -y chromium)")
    deck = _offline_deck(tmp_path)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    refused = []
    browser = playwright_session.chromium.launch(executable_path=chromium, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                   else (refused.append(route.request.url), route.abort()))
        page.goto(deck.as_uri())
        page.wait_for_selector(".reveal.ready", timeout=15_000)
        assert page.evaluate("Reveal.isReady() && Reveal.getTotalSlides()") >= 3
        title = page.locator("section.present h1")
        assert title.text_content().startswith("Chapter 9")
        assert title.evaluate("h => getComputedStyle(h).textTransform") == "uppercase", "the theme did not load"
        page.screenshot(path=str(SCREENSHOTS / "offline-deck.png"))
    finally:
        browser.close()
    assert refused == [], f"the deck asked the network for {refused}"


def test_refuses_to_write_into_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="did not make"):
        demo.main(["build", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="course sources"):
        demo.main(["build", "--out", str(COURSE_SOURCE / "demo")])
    with pytest.raises(SystemExit, match="unknown chapter"):
        demo.main(["build", "--out", str(tmp_path / "new"), "--chapters", "99_nope"])
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


# -- a real build of every chapter ----------------------------------------------------------------------------


def _fingerprint(folder):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One build of every chapter, from a snapshot of the sources (authors may be editing the real ones)."""
    source = tmp_path_factory.mktemp("source") / "source"
    shutil.copytree(COURSE_SOURCE, source)
    out = tmp_path_factory.mktemp("demo")
    before = _fingerprint(source)
    chapters = demo.build(out, source=source)
    assert _fingerprint(source) == before, "the build must not touch the course sources"
    return out, [item.chapter for item in chapters if not item.slides]


CHAPTERS = demo.chapters()


@pytest.mark.slow
def test_every_chapter_builds(built):
    out, failed = built
    assert CHAPTERS, "no chapter in course/source"
    index = (out / "index.html").read_text()
    assert not failed, f"chapters that did not build: {failed} (see {out}/<chapter>/)"
    assert all(f"{chapter}/{chapter}.slides.html" in index for chapter in CHAPTERS)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_deck(built, chapter):
    out, _ = built
    executed = nbformat.read(out / chapter / f"{chapter}.ipynb", as_version=4)
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code), "every code cell ran"
    assert not any(o.output_type == "error" for cell in code for o in cell.outputs)

    deck = demo.assign_slides(executed)
    assert not [cell.source for cell in deck.cells if demo._is_exercise_machinery(cell)], "no solution or test"
    slides = (out / chapter / f"{chapter}.slides.html").read_text()
    drawings = sum(demo._has_drawing(cell) for cell in deck.cells)
    assert slides.count("<svg") >= drawings, "every drawing is in the deck as an inline SVG"
    assert slides.count("<section") >= 3
    assert "HIDDEN TESTS" not in slides
    _assert_self_contained(out / chapter / f"{chapter}.slides.html")


@pytest.mark.slow
def test_decks_have_drawings(built):
    out, _ = built
    decks = [(out / chapter / f"{chapter}.slides.html").read_text() for chapter in CHAPTERS]
    assert sum("<svg" in deck for deck in decks) >= len(decks) / 2, "most chapters draw something"


@pytest.mark.slow
def test_a_failing_chapter_is_reported_and_the_others_still_build(tmp_path):
    source = tmp_path / "source"
    for chapter, code in {"01_fine": "print('fine')", "02_broken": "raise ValueError('the chapter is broken')"}.items():
        (source / chapter).mkdir(parents=True)
        cells = [new_markdown_cell(f"# {chapter}"), new_markdown_cell("## A section"), new_code_cell(code)]
        nbformat.write(new_notebook(cells=cells), source / chapter / f"{chapter}.ipynb")
    out = tmp_path / "demo"
    (out / "02_broken").mkdir(parents=True)
    (out / demo.MARKER).write_text("")
    (out / "02_broken" / "02_broken.slides.html").write_text("a deck from an earlier build")

    fine, broken = demo.build(out, source=source, progress=lambda message: None)

    assert fine.slides and fine.slides.exists()
    assert broken.slides is None and broken.error == "ValueError: the chapter is broken"
    assert not (out / "02_broken" / "02_broken.slides.html").exists(), "a stale deck is removed"
    executed = nbformat.read(broken.notebook, as_version=4)
    assert executed.cells[2].outputs[0].output_type == "error", "the saved notebook shows where it stopped"
    index = (out / "index.html").read_text()
    assert "01_fine/01_fine.slides.html" in index and "not built: ValueError: the chapter is broken" in index


def test_a_stepper_steps_through_its_frames_in_the_deck():
    """In a slide the presenter's Next key shows the frames in turn, stacked in one place."""
    stepper = DfsStepper(torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.ReLU()))
    output = new_output("display_data", {"text/html": stepper._repr_html_(), "text/plain": str(stepper)})
    notebook = new_notebook(cells=[new_markdown_cell("## Steps"), new_code_cell("DfsStepper(model)", outputs=[output])])
    html = _data(demo.assign_slides(notebook), "DfsStepper(model)")["text/html"]
    frames = re.findall(r'<div class="modulecraft-step ([^"]*)" data-fragment-index="(\d+)"', html)
    assert frames == [("fragment fade-out", "0"), ("fragment current-visible", "0"), ("fragment", "1")]
    assert 'class="modulecraft-frames r-stack"' in html
