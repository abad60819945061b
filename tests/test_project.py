"""The project's own promises: the two README commands, CI calling the test command, conda and pip agreeing."""
import re
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# conda-forge names for the PyPI packages that are named differently there.
CONDA_NAME = {"graphviz": "python-graphviz"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def _conda_dependencies() -> tuple[set[str], list[str]]:
    names, pip_lines, in_pip = set(), [], False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        item = re.match(r"^(\s*)-\s+(\S.*?)\s*(#.*)?$", line)
        if not item:
            continue
        indent, value = len(item.group(1)), item.group(2)
        if value == "pip:":
            in_pip = True
        elif in_pip and indent > 2:
            pip_lines.append(value)
        else:
            in_pip = False
            names.add(_name(value))
    return names, pip_lines


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    conda, pip_lines = _conda_dependencies()
    for requirement in project["dependencies"]:
        name = _name(requirement)
        assert CONDA_NAME.get(name, name) in conda, f"{name} is in pyproject.toml but not in environment.yml"
    assert "graphviz" in conda, "environment.yml must bring Graphviz's dot binary (conda-forge `graphviz`)"
    assert any(line.startswith("-e .[test]") for line in pip_lines), "environment.yml must install the project itself"


def test_environment_yml_offers_torchs_cpu_build_from_the_index_make_uses():
    cpu_index = re.search(r"torch_cpu_index=\$\{MODULECRAFT_TORCH_INDEX:-(\S+)\}",
                          (ROOT / "scripts" / "install.sh").read_text()).group(1)
    _, pip_lines = _conda_dependencies()
    assert f"--extra-index-url {cpu_index}" in pip_lines


def test_the_licence_is_an_spdx_expression_that_setuptools_reads_without_a_warning():
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the licence as a TOML table warns (and stops building in February 2027)
        distribution = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert distribution.metadata.license_expression == "MIT"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    minimum = re.fullmatch(r"setuptools>=(\d+)", requires[0]).group(1)
    assert int(minimum) >= 77, "setuptools reads an SPDX licence expression since version 77"


def test_torch_is_a_pinned_test_dependency_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(_name(r) == "torch" for r in project["dependencies"])
    assert "torch==2.13.0" in project["optional-dependencies"]["test"]


def test_readme_names_exactly_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## The two commands\s+```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make lab", "make test"]
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_setup_only_commands_exist_and_the_readme_says_what_they_install():
    """Instructors and CI install without starting JupyterLab or running the tests: `make lab` and `make test` are
    each their setup target followed by one command."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab: setup$", makefile, re.M) and re.search(r"^test: setup-test$", makefile, re.M)
    readme = (ROOT / "README.md").read_text()
    assert "`make setup`" in readme and "`make setup-test`" in readme
    assert "make lab` once" not in readme, "`make lab` starts JupyterLab and blocks: it is no setup step"


def test_the_package_never_imports_torch():
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("reference", "autograder")
        for path in (ROOT / folder).rglob("*.py")
        if re.search(r"^\s*(import torch|from torch)", path.read_text(), re.M)
    ]
    assert offenders == []
