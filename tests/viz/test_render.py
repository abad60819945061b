"""Display in JupyterLab (inline <svg>), the shared font, and the error svg() raises when Graphviz's dot is missing."""

import shutil
import subprocess

import graphviz
import pytest

from modulecraft.viz import DotNotFoundError, draw_state_dict_diff, draw_tree, render

from . import models


def test_displays_as_inline_svg_html(fw):
    drawing = draw_tree(models.mlp(fw))
    assert isinstance(drawing, graphviz.Digraph)  # everything graphviz offers still works (render, pipe, ...)
    bundle = drawing._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # JupyterLab would turn image/svg+xml into an <img>
    html = bundle["text/html"]
    assert html.startswith('<div class="modulecraft-viz"') and "<svg" in html and "<?xml" not in html
    assert 'id="mc&#45;."' in html and 'font-family="DejaVu Sans,sans-serif"' in html


def test_dot_and_the_browser_share_an_installed_font():
    matched = subprocess.run(["fc-match", "-f", "%{family}", "DejaVu Sans"], capture_output=True, text=True)
    assert "DejaVu Sans" in matched.stdout, "install fonts-dejavu-core (Debian) so dot measures with DejaVu Sans"


def test_asking_for_the_svg_without_dot_says_what_to_install(fw, monkeypatch, tmp_path):
    """Only an explicit svg() raises; displaying falls back to text (test_without_dot.py)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no dot on it
    assert shutil.which("dot") is None
    drawing = draw_state_dict_diff(models.mlp(fw), {})  # building the DOT source needs no dot
    with pytest.raises(DotNotFoundError) as raised:
        drawing.svg()
    message = str(raised.value)
    assert "Graphviz's `dot` program, which is not on PATH" in message
    assert "sudo apt-get install graphviz" in message
    assert "conda install -c conda-forge graphviz" in message
    assert "brew install graphviz" in message


def test_one_dot_lays_out_every_drawing_as_graphviz_would(fw):
    """Drawings go through one dot process kept running; each SVG is the one graphviz's own pipe() makes."""
    drawings = [draw_tree(models.mlp(fw)), draw_state_dict_diff(models.mlp(fw), {}), draw_tree(models.mlp(fw))]
    svgs = [drawing.svg() for drawing in drawings]
    process = render._dot.process
    assert [drawing.svg() for drawing in drawings] == svgs and render._dot.process is process
    assert svgs == [drawing.pipe(format="svg", encoding="utf-8") for drawing in drawings]


def test_a_drawing_dot_rejects_raises_as_graphviz_does_and_the_next_one_draws(fw):
    broken = render.Drawing()
    broken.body.append("a -> }")
    with pytest.raises(graphviz.CalledProcessError) as raised:
        broken.svg()
    assert b"syntax error" in raised.value.stderr
    assert "<svg" in draw_tree(models.mlp(fw)).svg()  # a new dot: the last one ended at the error


def test_a_drawing_interrupted_mid_answer_leaves_nothing_for_the_next(fw, monkeypatch):
    """A kernel interrupt (KeyboardInterrupt) while dot answers: the next drawing gets its own SVG, not the rest
    of the interrupted one's."""
    first, second = draw_tree(models.mlp(fw)), draw_state_dict_diff(models.mlp(fw), {})
    expected = second.pipe(format="svg", encoding="utf-8")
    read = render._Dot._read

    def interrupted(self, process):
        monkeypatch.setattr(render._Dot, "_read", read)
        raise KeyboardInterrupt

    monkeypatch.setattr(render._Dot, "_read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        first.svg()
    assert second.svg() == expected
