"""Matching handed-in files to students and chapters (no grading involved)."""
import json
import zipfile
from pathlib import PurePosixPath

import pytest

from autograder.collect import collect, match_submission
from autograder.course import Course

CHAPTERS = ["01_init_and_call", "02_setattr_dispatch"]


@pytest.mark.parametrize("name, expected", [
    ("ada/01_init_and_call.ipynb", ("ada", "01_init_and_call")),
    ("class/ada/01_init_and_call/01_init_and_call.ipynb", ("ada", "01_init_and_call")),
    ("ada_02_setattr_dispatch.ipynb", ("ada", "02_setattr_dispatch")),
    ("downloads/02_setattr_dispatch-bo.ipynb", ("bo", "02_setattr_dispatch")),
    ("01_init_and_call.ipynb", "no student id"),
    ("ada/homework.ipynb", "no chapter name"),
    ("ada/01_init_and_call.py", "not a notebook"),
    ("ada smith/01_init_and_call.ipynb", "invalid student id"),
])
def test_names_are_matched_or_refused_with_a_reason(name, expected):
    match = match_submission(PurePosixPath(name), CHAPTERS)
    if isinstance(expected, tuple):
        assert match == expected
    else:
        assert isinstance(match, str) and expected in match


def test_collect_from_a_zip_reports_what_it_could_not_match(tmp_path):
    source = tmp_path / "source"
    for chapter in CHAPTERS:
        (source / chapter).mkdir(parents=True)
        (source / chapter / f"{chapter}.ipynb").write_text("{}")
    course = Course(tmp_path / "grading", source=source)
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ada/01_init_and_call.ipynb", json.dumps({"who": "ada"}))
        zf.writestr("ada_01_init_and_call.ipynb", json.dumps({"who": "ada again"}))
        zf.writestr("ada/01_init_and_call (1).ipynb", json.dumps({"who": "a browser's copy"}))
        zf.writestr("__MACOSX/ada/._01_init_and_call.ipynb", "resource fork")
        zf.writestr("bo_02_setattr_dispatch.ipynb", json.dumps({"who": "bo"}))
        zf.writestr("readme.txt", "hello")
    result = collect(course, archive)
    assert [(s, c) for s, c, _ in result.collected] == [("ada", "01_init_and_call"), ("bo", "02_setattr_dispatch")]
    assert json.loads(course.submission_path("bo", "02_setattr_dispatch").read_text()) == {"who": "bo"}
    unmatched = dict(result.unmatched)
    assert "a second file for ada/01_init_and_call" in unmatched["ada_01_init_and_call.ipynb"]
    assert "invalid student id '(1)'" in unmatched["ada/01_init_and_call (1).ipynb"]
    assert unmatched["readme.txt"] == "not a notebook (.ipynb)"
    assert "could not match 3 file(s)" in result.render()
