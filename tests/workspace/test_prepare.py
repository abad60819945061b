"""`prepare` builds the learner's workspace from nbgrader releases and never destroys the learner's work."""
from __future__ import annotations

import json

import nbformat
import pytest
from nbgrader import utils as nbgrader_utils
from toy_course import CHAPTERS, write_chapter

from autograder import workspace as workspace_module
from autograder.workspace import INDEX, exercise_progress, prepare, progress_table

pytestmark = pytest.mark.slow  # real nbgrader releases


def files(folder):
    """Every file under `folder` (the hidden state folder aside) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".modulecraft" not in p.parts}


def edit_solution(notebook_path, code: str) -> bytes:
    """What a learner does: write code into the exercise and save (JupyterLab also adds outputs and metadata)."""
    notebook = nbformat.read(notebook_path, as_version=4)
    solution = next(cell for cell in notebook.cells if nbgrader_utils.is_solution(cell))
    solution.source = code
    notebook.metadata["modulecraft_test"] = "saved by the learner"
    nbformat.write(notebook, notebook_path)
    return notebook_path.read_bytes()


def test_the_workspace_holds_the_student_version_of_every_chapter_and_an_index(prepared):
    source, workspace = prepared
    assert sorted(files(workspace)) == [f"{c}/{c}.ipynb" for c in CHAPTERS] + [INDEX]
    for chapter in CHAPTERS:
        text = (workspace / chapter / f"{chapter}.ipynb").read_text()
        assert "return 42" not in text and "BEGIN SOLUTION" not in text, "the solution must be cleared"
        assert "answer() + 1" not in text and "HIDDEN TESTS" not in text, "hidden tests must be removed"
        assert "raise NotImplementedError()" in text
    index = nbformat.read(workspace / INDEX, as_version=4).cells[0].source
    assert [f"[Chapter {c}]({c}/{c}.ipynb)" in index for c in CHAPTERS] == [True, True]
    assert index.count("not started") == len(CHAPTERS)


def test_running_it_again_changes_nothing(course):
    source, workspace = course
    before = files(workspace)

    report = prepare(workspace, source)

    assert files(workspace) == before
    assert (report.added, report.offered, report.up_to_date) == ([], [], CHAPTERS)


def test_a_modified_learner_notebook_is_kept_and_the_update_is_offered_next_to_it(course):
    source, workspace = course
    mine = workspace / "01_alpha" / "01_alpha.ipynb"
    my_work = edit_solution(mine, "def answer():\n    return 6 * 7  # mine")
    write_chapter(source, "01_alpha", intro="Read this first. Now with a clearer explanation.")

    report = prepare(workspace, source)

    assert mine.read_bytes() == my_work
    offer = workspace / "01_alpha" / "01_alpha.updated.ipynb"
    assert "clearer explanation" in offer.read_text() and "BEGIN SOLUTION" not in offer.read_text()
    assert report.offered == [("01_alpha/01_alpha.ipynb", "01_alpha/01_alpha.updated.ipynb")]
    assert "01_alpha/01_alpha.updated.ipynb" in str(report) and "your copy is untouched" in str(report)
    assert report.up_to_date == ["02_beta"]
    index = (workspace / INDEX).read_text()
    assert "new version: [01_alpha.updated.ipynb](01_alpha/01_alpha.updated.ipynb)" in index


def test_an_untouched_learner_notebook_is_not_replaced_either(course):
    source, workspace = course
    mine = workspace / "02_beta" / "02_beta.ipynb"
    before = mine.read_bytes()
    write_chapter(source, "02_beta", intro="Rewritten.")

    report = prepare(workspace, source)

    assert mine.read_bytes() == before
    assert "Rewritten." in (workspace / "02_beta" / "02_beta.updated.ipynb").read_text()
    assert report.offered == [("02_beta/02_beta.ipynb", "02_beta/02_beta.updated.ipynb")]


def test_a_course_change_learners_cannot_see_offers_nothing(course):
    source, workspace = course
    before = files(workspace)
    path = source / "02_beta" / "02_beta.ipynb"
    path.write_text(path.read_text().replace("answer() + 1 == 43", "answer() - 1 == 41"))  # a hidden test

    report = prepare(workspace, source)

    assert files(workspace) == before
    assert (report.added, report.offered, report.up_to_date) == ([], [], CHAPTERS)


def test_new_chapters_are_added_and_existing_ones_left_alone(course):
    source, workspace = course
    my_work = edit_solution(workspace / "01_alpha" / "01_alpha.ipynb", "def answer():\n    return 42")
    write_chapter(source, "03_gamma")

    report = prepare(workspace, source)

    assert report.added == ["03_gamma/03_gamma.ipynb"]
    assert report.offered == [] and report.up_to_date == CHAPTERS
    assert (workspace / "01_alpha" / "01_alpha.ipynb").read_bytes() == my_work
    assert "[Chapter 03_gamma](03_gamma/03_gamma.ipynb)" in (workspace / INDEX).read_text()


def test_a_chapter_the_course_renamed_is_kept_and_pointed_at_its_successor(course, monkeypatch):
    source, workspace = course
    my_work = edit_solution(workspace / "02_beta" / "02_beta.ipynb", "def answer():\n    return 42")
    (source / "02_beta" / "02_beta.ipynb").rename(source / "02_beta" / "12_beta.ipynb")
    (source / "02_beta").rename(source / "12_beta")
    monkeypatch.setitem(workspace_module.MOVED_CHAPTERS, "02_beta", "12_beta")

    report = prepare(workspace, source)

    assert report.added == ["12_beta/12_beta.ipynb"] and report.retired == ["02_beta"]
    assert (workspace / "02_beta" / "02_beta.ipynb").read_bytes() == my_work
    assert "kept       02_beta/: this chapter is no longer in the course (it is now 12_beta" in str(report)
    index = nbformat.read(workspace / INDEX, as_version=4).cells[0].source
    assert "| 02 | [02_beta](02_beta/02_beta.ipynb) | this chapter is no longer in the course (it is now 12_beta" in index


def test_an_offer_the_learner_has_not_opened_is_refreshed_but_one_they_edited_is_kept(course):
    source, workspace = course
    edit_solution(workspace / "01_alpha" / "01_alpha.ipynb", "def answer():\n    return 42")
    offer = workspace / "01_alpha" / "01_alpha.updated.ipynb"
    write_chapter(source, "01_alpha", intro="Second version.")
    prepare(workspace, source)
    write_chapter(source, "01_alpha", intro="Third version.")

    prepare(workspace, source)
    assert "Third version." in offer.read_text(), "an untouched offer is ours to refresh"

    worked_on_offer = edit_solution(offer, "def answer():\n    return 42  # started over in the new version")
    write_chapter(source, "01_alpha", intro="Fourth version.")
    report = prepare(workspace, source)

    assert offer.read_bytes() == worked_on_offer
    assert "Fourth version." in (workspace / "01_alpha" / "01_alpha.updated-2.ipynb").read_text()
    assert report.offered == [("01_alpha/01_alpha.ipynb", "01_alpha/01_alpha.updated-2.ipynb")]


def test_a_chapter_nbgrader_cannot_generate_is_reported_and_the_others_still_update(course):
    source, workspace = course
    broken = nbformat.read(source / "01_alpha" / "01_alpha.ipynb", as_version=4)
    broken.cells[2].metadata.nbgrader["grade_id"] = "answer"  # the solution cell's id: invalid metadata
    nbformat.write(broken, source / "01_alpha" / "01_alpha.ipynb")
    write_chapter(source, "03_gamma")
    before = (workspace / "01_alpha" / "01_alpha.ipynb").read_bytes()

    report = prepare(workspace, source)

    assert [chapter for chapter, _ in report.failed] == ["01_alpha"]
    assert "ValidationError" in report.failed[0][1] and "FAILED     01_alpha" in str(report)
    assert (workspace / "01_alpha" / "01_alpha.ipynb").read_bytes() == before
    assert report.added == ["03_gamma/03_gamma.ipynb"]
    assert "01_alpha" not in prepare(workspace, source).up_to_date, "a failed chapter is tried again next time"


def test_a_deleted_chapter_notebook_comes_back(course):
    source, workspace = course
    (workspace / "02_beta" / "02_beta.ipynb").unlink()

    report = prepare(workspace, source)

    assert report.added == ["02_beta/02_beta.ipynb"]


def test_the_index_shows_progress_and_is_kept_once_the_learner_edits_it(course):
    source, workspace = course
    edit_solution(workspace / "01_alpha" / "01_alpha.ipynb", "def answer():\n    return 42")

    prepare(workspace, source)
    index = nbformat.read(workspace / INDEX, as_version=4)
    assert "| 1 of 1 exercises attempted |" in index.cells[0].source
    assert "| not started |" in index.cells[0].source  # 02_beta

    index.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    nbformat.write(index, workspace / INDEX)
    edited = (workspace / INDEX).read_bytes()
    edit_solution(workspace / "02_beta" / "02_beta.ipynb", "def answer():\n    return 42")
    report = prepare(workspace, source)

    assert (workspace / INDEX).read_bytes() == edited
    assert ("index.ipynb", "index.updated.ipynb") in report.offered
    assert "not started" not in (workspace / "index.updated.ipynb").read_text()


def test_progress_counts_solution_cells_that_differ_from_the_released_stub(prepared):
    _, workspace = prepared
    notebook = nbformat.read(workspace / "01_alpha" / "01_alpha.ipynb", as_version=4)
    assert exercise_progress(notebook) == (0, 1)
    next(cell for cell in notebook.cells if nbgrader_utils.is_solution(cell)).source = "def answer(): return 42"
    assert exercise_progress(notebook) == (1, 1)


def test_progress_shows_the_last_self_check_saved_in_the_notebook(course):
    _, workspace = course
    path = workspace / "01_alpha" / "01_alpha.ipynb"
    notebook = nbformat.read(path, as_version=4)
    next(cell for cell in notebook.cells if nbgrader_utils.is_solution(cell)).source = "def answer(): return 42"
    check = nbformat.v4.new_code_cell("check_my_work()")
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Checked 01_alpha.ipynb ...\nTotal: 1/1\n")]
    notebook.cells.append(check)
    nbformat.write(notebook, path)

    table = progress_table(workspace, CHAPTERS)

    assert "| 1 of 1 exercises attempted, last self-check 1/1 |" in table
    assert "| 02 | [Chapter 02_beta](02_beta/02_beta.ipynb) | not started |" in table


def test_the_manifest_records_the_course_version_and_what_was_written(prepared):
    _, workspace = prepared
    manifest = json.loads((workspace / ".modulecraft" / "manifest.json").read_text())
    assert sorted(manifest["chapters"]) == CHAPTERS
    assert sorted(manifest["written"]) == [f"{c}/{c}.ipynb" for c in CHAPTERS] + [INDEX]
