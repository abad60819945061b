"""course/INSTRUCTORS.md stays true: a section per chapter, mistakes that the course's tests really submit,
and grading commands that exist."""

import re
from pathlib import Path

import pytest

from autograder import demo
from autograder.cli import COMMANDS
from tests.course.course_chapters import wrong_implementations

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "course" / "INSTRUCTORS.md").read_text()
WRONG = ROOT / "tests" / "course" / "wrong_implementations"


def section(chapter: str) -> str:
    match = re.search(rf"^### {chapter}\b.*?(?=^##|\Z)", GUIDE, re.M | re.S)
    assert match, f"INSTRUCTORS.md has no '### {chapter}' section"
    return match.group(0)


@pytest.mark.parametrize("chapter", demo.chapters())
def test_every_chapter_has_a_section_with_its_real_mistakes(chapter):
    text = section(chapter)
    named = set(re.findall(r"[\[,] ?([a-z0-9]+(?:-[a-z0-9]+)+)(?=[,\]])", text))
    wrong_file = WRONG / f"{chapter}.py"
    if not wrong_file.exists():
        pytest.skip(f"no wrong implementations for {chapter} yet")
    known = {wrong["mistake"] for wrong in wrong_implementations(chapter)}
    assert named <= known, f"labels in the guide that {wrong_file.name} does not have: {sorted(named - known)}"
    assert len(named) >= min(2, len(known)), f"name the typical mistakes of {chapter}: {sorted(known)}"


def test_the_grading_commands_exist_and_are_all_explained():
    used = set(re.findall(r"python -m autograder (\w+)", GUIDE))
    assert used <= set(COMMANDS), f"commands the CLI does not have: {sorted(used - set(COMMANDS))}"
    assert {"release", "collect", "grade", "feedback", "export", "status"} <= used
    assert "python -m autograder.demo build" in GUIDE
