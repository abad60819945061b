"""Any sequence of course updates, learner edits and re-runs: `prepare` never changes a byte the learner wrote,
and the newest version of every chapter is always in the workspace (as the learner's file or as an offer).

nbgrader's release is replaced by a copy of the source notebook here: what is under test is where `prepare`
puts things, many steps per example (the release itself is tested with nbgrader in test_prepare.py).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from toy_course import write_chapter

import autograder.workspace as workspace_module
from autograder.workspace import fingerprint, prepare

CHAPTERS = ["01_alpha", "02_beta", "03_gamma"]


def copy_release(chapters, source, scratch, report):
    """Stands in for nbgrader: the 'student version' is the source notebook itself."""
    return {chapter: source / chapter / f"{chapter}.ipynb" for chapter in chapters}


class CourseAndLearner(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="never-destroys-"))
        self.source, self.workspace = self.root / "source", self.root / "workspace"
        self.versions = {}  # chapter -> how many times the course changed it
        self.learners = {}  # path -> bytes the learner last wrote there
        self.changed = set()  # chapters changed in the course, or deleted by the learner, since the last prepare
        self.update_course("01_alpha")
        self.prepared = False

    def teardown(self):
        shutil.rmtree(self.root)

    @rule(chapter=st.sampled_from(CHAPTERS))
    def update_course(self, chapter):
        self.versions[chapter] = self.versions.get(chapter, 0) + 1
        self.changed.add(chapter)
        write_chapter(self.source, chapter, intro=f"Version {self.versions[chapter]}.")

    @precondition(lambda self: any(self.workspace.glob("*/*.ipynb")))
    @rule(data=st.data(), code=st.text(alphabet="abc xyz()=+1\n", max_size=20))
    def learner_edits_a_notebook(self, data, code):
        notebooks = sorted(self.workspace.glob("*/*.ipynb"))
        path = data.draw(st.sampled_from(notebooks))
        notebook = nbformat.read(path, as_version=4)
        notebook.cells[1].source = f"def answer():\n    return 42  # {code!r}"
        nbformat.write(notebook, path)
        self.learners[path] = path.read_bytes()

    @precondition(lambda self: self.prepared)
    @rule(chapter=st.sampled_from(CHAPTERS))
    def learner_deletes_a_chapter(self, chapter):
        path = self.workspace / chapter / f"{chapter}.ipynb"
        path.unlink(missing_ok=True)
        self.learners.pop(path, None)
        self.changed.add(chapter)

    @rule()
    def run_prepare(self):
        prepare(self.workspace, self.source)
        self.prepared = True
        self.check_newest_versions_are_there()
        self.changed.clear()

    @invariant()
    def learners_bytes_are_never_changed(self):
        for path, data in self.learners.items():
            assert path.read_bytes() == data, f"prepare changed {path.relative_to(self.workspace)}"

    def check_newest_versions_are_there(self):
        for chapter, version in self.versions.items():
            folder = self.workspace / chapter
            assert (folder / f"{chapter}.ipynb").exists()
            if chapter not in self.changed:
                continue
            newest = fingerprint(self.source / chapter / f"{chapter}.ipynb")
            assert newest in {fingerprint(path) for path in folder.glob("*.ipynb")}, \
                f"version {version} of {chapter} is nowhere in the workspace"


CourseAndLearner.TestCase.settings = settings(
    max_examples=60, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_prepare_never_destroys_and_always_offers_the_newest(monkeypatch):
    monkeypatch.setattr(workspace_module, "_release", copy_release)
    CourseAndLearner.TestCase("runTest").runTest()
