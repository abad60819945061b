"""Bring a class's notebooks in from a folder or a .zip, matching each file to a student and a chapter.

Accepted names (the chapter is recognised by its name, e.g. `01_init_and_call`):
`<student>/<chapter>.ipynb`, `<student>/<chapter>/<chapter>.ipynb` (nbgrader's layout),
`<student>_<chapter>.ipynb` / `<student>-<chapter>.ipynb`, or `<chapter>_<student>.ipynb`, at any depth.
Every file that cannot be matched is reported with the reason, and nothing is guessed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from pathlib import Path, PurePosixPath

from .course import Course, check_student_id

MAX_NOTEBOOK_BYTES = 50 * 2**20  # a notebook larger than this is not a course notebook (or is a zip bomb)
IGNORED_PARTS = {"__MACOSX", ".ipynb_checkpoints"}
REFUSALS = "collect-refusals.json"  # in the course folder: what a hub's Collect would not take, for `status`


def record_refusal(course_root: str | os.PathLike, learner: str, chapter: str, folder: str, why: str) -> None:
    """Remember that `folder` of the exchange's inbound was not collected (autograder.hub.SafeCollect)."""
    path = Path(course_root) / REFUSALS
    refused = refusals(course_root)
    refused[folder] = {"learner": learner, "chapter": chapter, "why": why}
    path.write_text(json.dumps(refused, indent=1, sort_keys=True))


def refusals(course_root: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Folder name -> learner, chapter and reason, for every folder a hub's Collect refused."""
    path = Path(course_root) / REFUSALS
    return json.loads(path.read_text()) if path.exists() else {}


@dataclasses.dataclass
class CollectResult:
    collected: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # student, chapter, file
    unmatched: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # file, why

    def render(self) -> str:
        lines = [f"collected {len(self.collected)} submission(s)"]
        lines += [f"  {student}/{chapter} <- {name}" for student, chapter, name in self.collected]
        if self.unmatched:
            lines.append(f"could not match {len(self.unmatched)} file(s):")
            lines += [f"  {name}: {why}" for name, why in self.unmatched]
        return "\n".join(lines)


def collect(course: Course, submissions: Path) -> CollectResult:
    """Copy every matching notebook of `submissions` (folder or .zip) into the course as a submission."""
    files = _read_zip(submissions) if zipfile.is_zipfile(submissions) else _read_folder(submissions)
    chapters = course.chapters()
    result = CollectResult()
    claimed: dict[tuple[str, str], str] = {}
    for name, size, read in sorted(files, key=lambda file: file[0]):
        path = PurePosixPath(name)
        if IGNORED_PARTS & set(path.parts) or path.name.startswith("."):
            continue
        match = match_submission(path, chapters)
        if isinstance(match, str):
            result.unmatched.append((name, match))
        elif size > MAX_NOTEBOOK_BYTES:
            result.unmatched.append((name, f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB"))
        elif match in claimed:
            result.unmatched.append((name, f"a second file for {match[0]}/{match[1]} (kept {claimed[match]})"))
        else:
            claimed[match] = name
            target = course.submission_path(*match)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(read())
            result.collected.append((*match, name))
    return result


def match_submission(path: PurePosixPath, chapters: list[str]) -> tuple[str, str] | str:
    """(student, chapter) for a file path, or the reason it cannot be matched."""
    if path.suffix != ".ipynb":
        return "not a notebook (.ipynb)"
    stem = path.stem
    chapter = max((c for c in chapters if c in stem), key=len, default=None)
    if chapter is None:
        return f"no chapter name in the file name (expected one of {', '.join(chapters)})"
    student = stem.replace(chapter, "", 1).strip("_-. ")
    if not student:
        folders = [part for part in path.parent.parts if part not in chapters]
        if not folders:
            return "no student id: put the file in a folder named after the student, or name it <student>_<chapter>.ipynb"
        student = folders[-1]
    try:
        check_student_id(student)
    except ValueError as error:
        return str(error)
    return student, chapter


def _read_folder(folder: Path):
    """(name, size, read) for every file; reading is deferred until the file is matched and small enough."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is neither a folder nor a .zip file")
    for path in folder.rglob("*"):
        if path.is_file():
            yield path.relative_to(folder).as_posix(), path.stat().st_size, path.read_bytes


def _read_zip(archive: Path):
    # Only a member's name is used for matching; its content is written to our own paths, never extracted.
    zf = zipfile.ZipFile(archive)
    for info in zf.infolist():
        if not info.is_dir():
            yield info.filename, info.file_size, lambda info=info: zf.read(info)
