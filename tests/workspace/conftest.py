"""A workspace prepared once per module from a tiny course of our own (`toy_course`), and copied per test.

Releasing goes through nbgrader (a few seconds per chapter), so each test starts from a copy of a prepared
workspace and only pays for the releases its own scenario causes.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from toy_course import CHAPTERS, write_chapter

from autograder.workspace import prepare


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[Path, Path]:
    """(course source, workspace prepared from it), never modified: tests work on copies."""
    base = tmp_path_factory.mktemp("prepared")
    for chapter in CHAPTERS:
        write_chapter(base / "source", chapter)
    prepare(base / "workspace", base / "source")
    return base / "source", base / "workspace"


@pytest.fixture
def course(prepared, tmp_path) -> tuple[Path, Path]:
    """A copy of the prepared (source, workspace) for one test to change."""
    source, workspace = prepared
    shutil.copytree(source, tmp_path / "source")
    shutil.copytree(workspace, tmp_path / "workspace")
    return tmp_path / "source", tmp_path / "workspace"
