"""The torch checkpoint shipped in ``modulecraft.data``: found without torch, loads into our modules, is what
the regeneration script writes, and is declared as package data so an installed modulecraft has it."""

import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris

import modulecraft
from modulecraft import data, nn

from .make_shipped_checkpoint import SHIPPED, train

ROOT = Path(__file__).resolve().parents[2]


def iris_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_the_shipped_checkpoint_loads_into_our_module_and_classifies_iris():
    state = modulecraft.load(data.path("iris_mlp.pt"))
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [state[key].shape for key in state] == [(8, 4), (8,), (3, 8), (3,)]
    assert all(value.dtype == np.float32 for value in state.values())
    model = iris_mlp()
    assert str(model.load_state_dict(state)) == "<All keys matched successfully>"
    iris = load_iris()
    logits = np.asarray(model(iris.data.astype(np.float32)))
    assert (logits.argmax(axis=1) == iris.target).mean() == pytest.approx(0.98)
    reference = torch.load(SHIPPED, weights_only=True)
    torch_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch_model.load_state_dict(reference)
    with torch.no_grad():
        expected = torch_model(torch.tensor(iris.data, dtype=torch.float32)).numpy()
    # float32 products summed in the order of each library's BLAS kernel, which depends on the processor: a few
    # ulps apart (an ulp of a logit near 20 is 2e-6)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_the_shipped_file_is_what_the_script_writes():
    shipped = modulecraft.load(SHIPPED)
    regenerated = train().state_dict()
    assert list(shipped) == list(regenerated)
    for key, value in regenerated.items():  # same machine: equal; another CPU may round differently
        np.testing.assert_allclose(shipped[key], value.numpy(), rtol=1e-4, atol=1e-5, err_msg=key)


def test_every_shipped_file_is_declared_package_data():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = declared["modulecraft.data"]
    assert data.names() == ["iris_mlp.pt"]
    for name in data.names():
        assert any(fnmatch(name, pattern) for pattern in patterns), name


def test_an_unknown_name_lists_what_is_shipped():
    with pytest.raises(FileNotFoundError, match="available: \\['iris_mlp.pt'\\]"):
        data.path("mnist.pt")


def test_the_data_is_reachable_as_the_readme_writes_it():
    """`import modulecraft; modulecraft.data.path(...)`, in a fresh interpreter (here `data` is imported already)."""
    code = "import modulecraft; print(modulecraft.data.path('iris_mlp.pt'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == str(data.path("iris_mlp.pt")), done.stderr
    assert "`modulecraft.data.path(\"iris_mlp.pt\")`" in (ROOT / "README.md").read_text()
