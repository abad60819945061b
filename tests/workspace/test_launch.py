"""`launch`: JupyterLab with a private configuration, the nbgrader extensions of the role, the learner's options."""
from __future__ import annotations

import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.validator import Validator
from toy_course import nbgrader_cell
from traitlets.config.loader import PyFileConfigLoader

import autograder.workspace as workspace_module
from autograder.config import GRADING_ENV_VAR
from autograder.workspace import jupyter_environment, main


class Launched(Exception):
    """Raised instead of exec'ing JupyterLab."""


@pytest.fixture
def exec_calls(monkeypatch):
    calls = []

    def fake_execve(path, argv, env):
        calls.append((argv, env))
        raise Launched

    monkeypatch.setattr(os, "execve", fake_execve)
    return calls


def test_launch_prepares_then_runs_jupyterlab_on_the_workspace_with_the_learners_options(
        course, exec_calls, monkeypatch):
    source, workspace = course
    real_prepare = workspace_module.prepare
    monkeypatch.setattr(workspace_module, "prepare", lambda ws: real_prepare(ws, source))
    monkeypatch.chdir(workspace.parent)  # launch moves into the workspace; undone after the test

    with pytest.raises(Launched):
        main(["launch", "--workspace", str(workspace), "--port", "8899", "--no-browser"])

    (argv, env), = exec_calls
    assert argv[1:3] == ["-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={workspace}" in argv and "--LabApp.default_url=/lab/tree/index.ipynb" in argv
    assert argv[-3:] == ["--port", "8899", "--no-browser"], "JupyterLab options are passed through, in order"
    private = workspace / ".modulecraft"
    for variable in ("JUPYTER_CONFIG_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR",
                     "JUPYTER_RUNTIME_DIR"):
        assert env[variable].startswith(str(private)), variable
    assert os.getcwd() == str(workspace), "nbgrader's server extensions read their config from the working directory"


def test_launch_instructor_opens_a_grading_folder_with_its_nbgrader_config(tmp_path, exec_calls, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "grading"

    with pytest.raises(Launched):
        main(["launch", "--instructor", "--course-root", str(root), "--no-browser"])

    (argv, env), = exec_calls
    assert f"--ServerApp.root_dir={root}" in argv and "--LabApp.default_url=/lab" in argv
    assert (root / "nbgrader_config.py").is_file() and (root / "source").is_symlink()
    assert env["JUPYTER_CONFIG_DIR"].startswith(str(root / ".modulecraft"))
    assert os.getcwd() == str(root), "the formgrader reads nbgrader_config.py from the working directory"


@pytest.mark.parametrize("role, server_on, lab_off", [
    ("learner", {"validate_assignment"}, {"menu", "formgrader", "create-assignment", "assignment-list", "course-list"}),
    ("instructor", {"validate_assignment", "formgrader"}, {"assignment-list", "course-list"}),
])
def test_each_role_gets_the_nbgrader_extensions_that_fit(tmp_path, role, server_on, lab_off):
    env = jupyter_environment(tmp_path, role)

    config = tmp_path / "config"
    assert env["JUPYTER_CONFIG_DIR"] == str(config)
    server = json.loads((config / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert {name.rsplit(".", 1)[1] for name, on in server.items() if on} == server_on
    assert len(server) == 4, "every nbgrader server extension is decided explicitly"
    lab = json.loads((config / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    assert {name.split(":")[1] for name in lab} == lab_off


def test_the_validate_button_config_makes_validation_kernels_skip_the_self_check(tmp_path, monkeypatch):
    """Validation runs the whole notebook; its last cell, check_my_work(), must see the grading switch."""
    monkeypatch.delenv(GRADING_ENV_VAR, raising=False)  # the switch in the kernel comes from the config alone
    notebook = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"}})
    notebook.cells = [nbgrader_cell(new_code_cell(
        "import os\nassert os.environ.get('MODULECRAFT_GRADING') == '1', 'the self-check would grade again'"),
        "switch", points=1)]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    config_dir = jupyter_environment(tmp_path / "jupyter", "learner")["JUPYTER_CONFIG_DIR"]
    config = PyFileConfigLoader("nbgrader_config.py", path=config_dir).load_config()

    assert Validator(config=config).validate(str(path)) == {}
    assert "failed" in Validator().validate(str(path)), "without the config the switch is absent"
