"""A real classroom: the course on JupyterHub with nbgrader's exchange, from release to feedback.

One instructor and two learners (real Unix accounts) log in through the hub's login page in Chromium. The
instructor releases two chapters from formgrader; each learner fetches them from the Assignments panel, answers
(one learner correctly, the other with a named mistake in the first chapter), runs the self-check and submits; the
instructor collects; root grades in the sandbox (the command formgrader's Autograde button names, since a
server that is not root cannot confine kernels); the instructor generates and releases feedback; each learner
fetches it and reads their score and the named mistake. Every action is a click where a person clicks:
formgrader's links (and the dialog that answers each), the Assignments panel's Fetch, Submit and Fetch Feedback
buttons in JupyterLab; the first chapter's notebook is typed and run in JupyterLab itself, the second saved the
way JupyterLab saves (a PUT of the notebook) and self-checked with the command. On the way it checks what the
hub keeps private (homes, the exchange's folders, submissions, the hub's database) and that Autograde on a
graded submission leaves it graded. The hub is shared with test_hostile_learners.py, which runs after this
test.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest
from hub_driver import CHAPTERS, COURSE_ID, PREFIX, PYTHON, REPO, Accounts, AssignmentList, Formgrader, UserSession, run_as
from jupyterlab_driver import Notebook
from nbgrader.api import Gradebook
from playwright.sync_api import expect
from solutions import solutions

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]

MISTAKE_CHAPTER = "03_parameters"


def wrong_implementation(chapter: str, mistake: str) -> dict:
    path = REPO / "tests" / "course" / "wrong_implementations" / f"{chapter}.py"
    spec = importlib.util.spec_from_file_location(f"wrong_{chapter}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(w for w in module.WRONG_IMPLEMENTATIONS if w["mistake"] == mistake)


MISTAKE = wrong_implementation(MISTAKE_CHAPTER, "requires-grad-default-false")


def answers(chapter: str, released: nbformat.NotebookNode, with_mistake: bool) -> dict[int, str]:
    """Cell index -> what the learner types: the course's solutions, with one wrong for the learner who errs."""
    typed = solutions(chapter, released)
    if with_mistake and chapter == MISTAKE_CHAPTER:
        index = next(i for i, cell in enumerate(released.cells)
                     if cell.metadata.get("nbgrader", {}).get("grade_id") == MISTAKE["grade_id"])
        for old, new in MISTAKE["edits"]:
            assert old in typed[index], old
            typed[index] = typed[index].replace(old, new)
    return typed


def test_release_submit_grade_feedback(classroom):
    accounts, hub, course_root, exchange = classroom.accounts, classroom.hub, classroom.course_root, classroom.exchange
    # Before anyone logs in: every home private, the exchange's course folders the instructor's (a learner cannot
    # make them first and block releases), the hub's database root's alone.
    for role in ("instructor", "alice", "bob", "mallory"):
        assert accounts.home(role).stat().st_mode & 0o777 == 0o700, role
    instructor_uid = accounts.home("instructor").stat().st_uid
    for folder, mode in [("", 0o755), ("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711)]:
        info = (exchange / COURSE_ID / folder).lstat()
        assert (info.st_uid, info.st_mode & 0o7777) == (instructor_uid, mode), (folder, oct(info.st_mode))
    assert (hub.state / "jupyterhub.sqlite").stat().st_mode & 0o777 == 0o600

    people = {role: classroom.person(role) for role in ("instructor", "alice", "bob")}
    teacher, learners = people["instructor"], {"alice": people["alice"], "bob": people["bob"]}

    # The instructor: formgrader (in a tab of its own) lists the course's chapters; Generate and Release two.
    formgrader = Formgrader(teacher)
    formgrader.open_assignments()
    for chapter in CHAPTERS:
        expect(formgrader.assignment_row(chapter)).to_be_visible(timeout=60_000)
    for chapter in CHAPTERS:
        formgrader.click(chapter, "assign")
        formgrader.click(chapter, "release")

    # The learners: fetch, answer, self-check, submit.
    for role, learner in learners.items():
        listed = learner.get(f"assignments?course_id={COURSE_ID}")
        assert {a["assignment_id"] for a in listed["value"] if a["status"] == "released"} == set(CHAPTERS)
        panel = AssignmentList(learner)
        panel.open()
        for chapter in CHAPTERS:
            panel.shows_released(chapter)
            panel.fetch(chapter)
        answer_in_lab(learner, MISTAKE_CHAPTER, with_mistake=role == "bob")
        for chapter in CHAPTERS[1:]:
            answer_through_contents_api(learner, chapter, with_mistake=role == "bob")
        panel.open()
        for chapter in CHAPTERS:
            panel.submit(chapter)

    # The instructor collects; the Autograde button refuses and names the root command, which grades.
    formgrader.open_assignments()
    for chapter in CHAPTERS:
        formgrader.click(chapter, "collect")
    refused = formgrader.autograde(MISTAKE_CHAPTER, accounts["alice"])
    assert "autograder.hub grade --course-root" in refused, refused
    graded = run_as(None, PYTHON, "-m", "autograder.hub", "grade", "--course-root", course_root, check=False)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    # Autograde on a graded submission: refused before nbgrader would delete what was graded.
    autograded = course_root / "autograded" / accounts["alice"] / MISTAKE_CHAPTER / f"{MISTAKE_CHAPTER}.ipynb"
    before = autograded.read_bytes()
    formgrader.autograde(MISTAKE_CHAPTER, accounts["alice"])
    assert autograded.read_bytes() == before
    formgrader.open_assignments()
    for chapter in CHAPTERS:
        formgrader.click(chapter, "generate-feedback")
        formgrader.click(chapter, "release-feedback")

    # The gradebook: alice full marks in both chapters, bob loses the points of his mistake in the first chapter only.
    scores = gradebook_scores(course_root, accounts)
    for chapter in CHAPTERS:
        score, max_score = scores["alice", chapter]
        assert max_score > 0 and score == max_score, (chapter, scores)
    assert scores["bob", CHAPTERS[1]][0] == scores["bob", CHAPTERS[1]][1]
    assert 0 < scores["bob", MISTAKE_CHAPTER][0] < scores["bob", MISTAKE_CHAPTER][1]

    # The learners fetch their feedback and read score and mistake; no hidden test is in it.
    hidden_line = hidden_test_line(course_root, MISTAKE_CHAPTER)
    for role, learner in learners.items():
        panel = AssignmentList(learner)
        panel.open()
        panel.fetch_feedback(MISTAKE_CHAPTER)
        text = read_feedback(learner, MISTAKE_CHAPTER)
        score, max_score = scores[role, MISTAKE_CHAPTER]
        assert re.search(rf"Score:\s*{score:g}(\.0+)?\s*/\s*{max_score:g}", text), text[:2000]
        assert (MISTAKE["feedback"] in text) == (role == "bob")
        assert hidden_line not in text and "BEGIN HIDDEN TESTS" not in text

    # What a learner cannot read: another's work, submission and feedback, the hidden tests, the gradebook.
    bob = accounts["bob"]
    inbound = exchange / COURSE_ID / "inbound"
    # A submission is hidden by an inbound nobody can list and a folder name with a random part
    # (student+chapter+time+random), and closed: its folder and files are its learner's and the instructors' group's
    # alone (nbgrader would make the folder 0777 and the files readable by all).
    alice_submission = next(p for p in inbound.iterdir() if p.name.startswith(f"{accounts['alice']}+"))
    assert len(alice_submission.name.split("+")) == 4, alice_submission.name
    replaced = run_as(bob, "touch", alice_submission / "replaced", check=False)
    assert replaced.returncode != 0 and "Permission denied" in replaced.stderr, replaced
    for forbidden in [accounts.home("alice") / MISTAKE_CHAPTER / f"{MISTAKE_CHAPTER}.ipynb", inbound,
                      alice_submission / f"{MISTAKE_CHAPTER}.ipynb",
                      exchange / COURSE_ID / "feedback",
                      course_root / "chapters" / MISTAKE_CHAPTER / f"{MISTAKE_CHAPTER}.ipynb",
                      PREFIX / "modulecraft" / "course" / "source" / MISTAKE_CHAPTER / f"{MISTAKE_CHAPTER}.ipynb",
                      course_root / "gradebook.db", hub.state / "jupyterhub.sqlite"]:
        denied = run_as(bob, "cat" if forbidden.suffix else "ls", forbidden, check=False)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, (forbidden, denied)

    # The Canvas export, run by the instructor on the hub's gradebook.
    canvas = course_root / "canvas.csv"
    exported = run_as(accounts["instructor"], PYTHON, "-m", "autograder", "export", "--root", course_root,
                      "--format", "canvas", "--output", canvas, check=False, cwd=course_root)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    rows = {row["SIS Login ID"]: row for row in csv.DictReader(canvas.open()) if row["SIS Login ID"]}
    for role in learners:
        for chapter in CHAPTERS:
            assert float(rows[accounts[role]][chapter]) == scores[role, chapter][0]


def answer_in_lab(learner: UserSession, chapter: str, with_mistake: bool) -> None:
    """Open the fetched chapter in JupyterLab, type the answers, save, Run All: its last cell is the self-check."""
    path = f"{chapter}/{chapter}.ipynb"
    released = nbformat.reads(json.dumps(learner.get(f"api/contents/{path}")["content"]), as_version=4)
    notebook = Notebook.open(learner.page, learner, path)
    for index, source in answers(chapter, released, with_mistake).items():
        notebook.set_source(index, source)
    notebook.save()
    notebook.run_all()
    last = len(released.cells) - 1
    if with_mistake:  # Run All stops at the failing visible test: the learner then runs the self-check cell alone
        notebook.run_cell(last)
    self_check = notebook.cells.nth(last).locator(".jp-OutputArea")
    expect(self_check).to_contain_text("Total:", timeout=120_000)
    report = self_check.inner_text()
    total, max_total = map(float, re.search(r"Total: ([\d.]+)/([\d.]+)", report).groups())
    assert (total < max_total) == with_mistake, report
    if with_mistake:
        assert MISTAKE["feedback"] in report, report
    notebook.save()


def answer_through_contents_api(learner: UserSession, chapter: str, with_mistake: bool) -> None:
    """The same save JupyterLab sends (PUT of the notebook) with the answers in it; then the self-check command."""
    path = f"{chapter}/{chapter}.ipynb"
    notebook = nbformat.reads(json.dumps(learner.get(f"api/contents/{path}")["content"]), as_version=4)
    for index, source in answers(chapter, notebook, with_mistake).items():
        notebook.cells[index].source = source
    learner.put(f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
    checked = run_as(learner.name, PYTHON, "-m", "autograder", "check", Path("~" + learner.name).expanduser() / path,
                     check=False, env=learner_environment(learner))
    assert checked.returncode == 0 and "Total:" in checked.stdout, checked.stdout + checked.stderr


def learner_environment(learner: UserSession) -> dict[str, str]:
    """What the hub gives a learner's server: the self-check grades against the chapters without solutions."""
    home = Path("~" + learner.name).expanduser()
    return {"HOME": str(home), "PATH": f"{PYTHON.parent}:/usr/bin:/bin",
            "MODULECRAFT_COURSE_SOURCE": str(learner.hub.selfcheck)}


def read_feedback(learner: UserSession, chapter: str) -> str:
    """Open the fetched feedback page in the learner's browser and return its text."""
    folder = learner.get(f"api/contents/{chapter}/feedback")["content"]
    assert folder, f"no feedback fetched for {learner.name}"
    latest = sorted(entry["name"] for entry in folder)[-1]
    learner.page.goto(f"{learner.server}/files/{chapter}/feedback/{latest}/{chapter}.html")
    expect(learner.page.locator("body")).to_contain_text("Score")
    return learner.page.locator("body").inner_text()


def gradebook_scores(course_root: Path, accounts: Accounts) -> dict[tuple[str, str], tuple[float, float]]:
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        return {(role, chapter): (float(n.score), float(n.max_score))
                for role in ("alice", "bob") for chapter in CHAPTERS
                for n in [gradebook.find_submission_notebook(chapter, chapter, accounts[role])]}


def hidden_test_line(course_root: Path, chapter: str) -> str:
    """A line from inside the chapter's first hidden-test block."""
    source = (course_root / "chapters" / chapter / f"{chapter}.ipynb").read_text()
    block = json.loads(source)
    for cell in block["cells"]:
        text = "".join(cell["source"])
        if "### BEGIN HIDDEN TESTS" in text:
            lines = text.split("### BEGIN HIDDEN TESTS", 1)[1].strip().splitlines()
            return next(line.strip() for line in lines if len(line.strip()) > 20)
    raise AssertionError(f"{chapter} has no hidden tests")
