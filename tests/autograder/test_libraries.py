"""The libraries a grading kernel may see (`autograder.judging.libraries`): modulecraft's requirements, nothing else.
That the view is what kernels get, and that it matters, is shown by grading in test_defences.py and
test_oracles.py; here, what it keeps and what it refuses to guess."""
from __future__ import annotations

import importlib.util

import pytest

from autograder.judging import libraries


def test_the_view_keeps_what_kernels_import_and_drops_the_tests_libraries():
    (folder, kept), *rest = libraries.views()
    assert {"numpy", "ipykernel", "IPython", "matplotlib", "nbgrader", "safetensors", "sklearn", "scipy"} <= set(kept)
    if importlib.util.find_spec("torch") is not None:  # the test extra is installed: all of it is out of sight
        assert not {"torch", "functorch", "torchgen", "sympy", "pytest"} & set(kept)
        assert not [entry for entry in kept if entry.startswith("torch-") and entry.endswith(".dist-info")]
    assert (folder / "sklearn", sorted(set(entry.name for entry in (folder / "sklearn").iterdir())
                                       - {"neural_network"})) in rest


def test_without_modulecraft_installed_the_view_is_refused_not_guessed(monkeypatch):
    monkeypatch.setattr(libraries, "PROJECT", "modulecraft-not-installed")
    with pytest.raises(LookupError, match="is not installed in this Python"):
        libraries.views()
