"""Display in JupyterLab (inline <svg>), the shared font, and the error when Graphviz's dot is missing."""

import shutil
import subprocess

import graphviz
import pytest

from modulecraft.viz import DotNotFoundError, draw_state_dict_diff, draw_tree

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


def test_missing_dot_says_what_to_install(fw, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no dot on it
    assert shutil.which("dot") is None
    drawing = draw_state_dict_diff(models.mlp(fw), {})  # building the DOT source needs no dot
    for render in (drawing.svg, drawing._repr_html_, drawing._repr_mimebundle_):
        with pytest.raises(DotNotFoundError) as raised:
            render()
        message = str(raised.value)
        assert "Graphviz's `dot` program, which is not on PATH" in message
        assert "sudo apt-get install graphviz" in message
        assert "conda install -c conda-forge graphviz" in message
        assert "brew install graphviz" in message
