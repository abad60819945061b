"""The grading kernel's confinement, beyond the bad-submission suite: what it can reach when the code it needs
sits under folders other users cannot enter (a clone under /root or a 0700 temporary folder in CI)."""
import os
from pathlib import Path

import nbformat
import pytest

from autograder import synthetic
from autograder.judging.sandbox import PRIVATE, SYSTEM, folders_out_of_sight, folders_to_rebuild
from autograder.selfcheck import check_notebook

TOY_CHAPTERS = Path(__file__).parent / "chapters"
HELPER = "import numpy as np\n\ndef add(a, b):\n    return np.asarray(a) + np.asarray(b)\n"
USES_HELPER = """from helper_mod import add
import os, helper_mod
locked = os.path.dirname(os.path.dirname(helper_mod.__file__))
print("sees", sorted(os.listdir(locked)))"""


def test_only_the_needed_entries_of_blocked_and_shared_folders_come_back(tmp_path):
    locked = tmp_path / "locked"
    (locked / "lib").mkdir(parents=True)
    (locked / "secret").mkdir()
    locked.chmod(0o700)
    order = folders_to_rebuild([locked / "lib"])
    rebuilt = dict(order)
    assert rebuilt[locked] == {"lib"}  # not "secret"
    assert set(PRIVATE) <= set(rebuilt)
    for private in PRIVATE:
        if locked.is_relative_to(private):  # e.g. pytest's folders under /tmp: brought back into the new /tmp
            assert rebuilt[private] == {locked.relative_to(private).parts[0]}
            assert [f for f, _ in order].index(private) < [f for f, _ in order].index(locked)


def test_of_the_folders_outside_the_systems_a_kernel_sees_only_the_way_to_what_it_needs(tmp_path):
    clone, other = tmp_path / "clone", tmp_path / "other-clone"
    for folder in (clone / ".venv" / "bin", clone / "tests", other):
        folder.mkdir(parents=True)
    needed = [clone, clone / ".venv", clone / ".venv" / "bin"]
    rebuilt = dict(folders_to_rebuild(needed))
    assert rebuilt[tmp_path] == {"clone"}  # not the other clone
    assert not any(folder.is_relative_to(clone) for folder in rebuilt)  # what it needs, it sees whole
    assert all(folder.parts[1] not in SYSTEM or folder in PRIVATE for folder in rebuilt)
    hidden = folders_out_of_sight(needed)
    assert Path("/tmp") not in hidden and not any(folder.name in SYSTEM for folder in hidden)
    assert {Path(name) for name in ("/opt", "/srv", "/home", "/mnt") if Path(name).is_dir()} <= set(hidden)


@pytest.fixture
def locked_library(tmp_path, monkeypatch):
    """A module in <tmp>/locked/lib (locked is 0700, next to a secret), on $PYTHONPATH."""
    locked = tmp_path / "locked"
    (locked / "lib").mkdir(parents=True)
    (locked / "lib" / "helper_mod.py").write_text(HELPER)
    (locked / "secret.txt").write_text("hidden")
    locked.chmod(0o700)
    monkeypatch.setenv("PYTHONPATH", str(locked / "lib"))
    return locked


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="kernels change user only when grading runs as root")
def test_an_unprivileged_kernel_reaches_what_it_needs_and_nothing_else(toy_course, locked_library, tmp_path):
    notebook = synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": USES_HELPER})
    synthetic.write(notebook, tmp_path / "uses-helper.ipynb")
    toy_course.submit("uses-helper", "90_toy", tmp_path / "uses-helper.ipynb")
    outcome = toy_course.grade().outcome("uses-helper", "90_toy")
    assert (outcome.score, outcome.needs_review) == (5.0, [])
    graded = nbformat.read(toy_course.root / "autograded" / "uses-helper" / "90_toy" / "90_toy.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    assert "sees ['lib']" in printed


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="kernels change user only when grading runs as root")
def test_self_check_with_its_cache_in_a_blocked_folder(toy_course, locked_library, tmp_path, monkeypatch):
    """Like root's ~/.cache under a 0700 /root: the cache is out of the kernel's sight, which is fine."""
    monkeypatch.setenv("MODULECRAFT_SELFCHECK_CACHE", str(locked_library / "cache"))
    notebook = tmp_path / "90_toy.ipynb"
    synthetic.write(synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": USES_HELPER}), notebook)
    result = check_notebook(notebook, source=TOY_CHAPTERS)
    assert (result.score, result.max_score, result.problems) == (5, 5, [])
