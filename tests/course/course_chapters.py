"""The chapters under test and their typical wrong implementations, found on disk.

Every `course/source/<ch>/<ch>.ipynb` is a chapter; `wrong_implementations/<ch>.py` holds its mistakes (format in
wrong_implementations/README.md). Nothing here is chapter-specific, so new chapters are tested as soon as they exist.
"""
from __future__ import annotations

import runpy
from pathlib import Path

import nbformat

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "course" / "source"
WRONG_DIR = Path(__file__).resolve().parent / "wrong_implementations"

CHAPTERS = sorted(p.parent.name for p in SOURCE.glob("*/*.ipynb") if p.stem == p.parent.name)


def notebook_path(chapter: str) -> Path:
    return SOURCE / chapter / f"{chapter}.ipynb"


def read_notebook(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(notebook_path(chapter), as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def solution_ids(nb) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c).get("solution")]


def graded_cells(nb) -> dict[str, float]:
    """grade_id -> points of every graded test cell."""
    return {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c)["points"])
            for c in nb.cells if nbgrader_meta(c).get("grade")}


def exercise_test_cells(solution_id: str, graded: dict[str, float]) -> list[str]:
    """The test cells of an exercise: `<solution id>_visible` and `<solution id>_hidden`."""
    return [gid for gid in graded if gid in (f"{solution_id}_visible", f"{solution_id}_hidden")]


def wrong_implementations(chapter: str) -> list[dict]:
    """The chapter's mistakes, each with its whole replacement cell in `source` (an entry given as `edits` of the
    solution is resolved against the solution cell in the source notebook; see wrong_implementations/README.md)."""
    path = WRONG_DIR / f"{chapter}.py"
    entries = runpy.run_path(str(path))["WRONG_IMPLEMENTATIONS"] if path.exists() else []
    notebook = read_notebook(chapter) if any("edits" in entry for entry in entries) else None
    return [_resolved(entry, notebook, f"{path.name} [{entry.get('mistake')}]") for entry in entries]


def _resolved(entry: dict, notebook, where: str) -> dict:
    if ("source" in entry) == ("edits" in entry):
        raise ValueError(f"{where}: give exactly one of source= or edits=")
    if "source" in entry:
        return entry
    return {**entry, "source": edited(solution_source(notebook, entry["grade_id"]), entry["edits"], where)}


def solution_source(notebook, grade_id: str) -> str:
    """The solution cell `grade_id` as a learner who wrote the solution would submit it (markers dropped)."""
    cells = [c for c in notebook.cells if nbgrader_meta(c).get("solution") and nbgrader_meta(c)["grade_id"] == grade_id]
    if len(cells) != 1:
        raise KeyError(f"no solution cell with grade_id {grade_id!r}")
    return "\n".join(line for line in cells[0].source.splitlines() if line.strip() not in SOLUTION_MARKERS)


def edited(source: str, edits, where: str = "edits") -> str:
    """`source` with each (old, new) of `edits` applied in turn; every `old` must occur exactly once."""
    for old, new in edits:
        found = source.count(old) if old else 0
        if found != 1:
            raise ValueError(f"{where}: {old!r} occurs {found} times in the solution, not exactly once "
                             "(has the solution changed?)")
        source = source.replace(old, new)
    return source


SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def solved(released, source) -> nbformat.NotebookNode:
    """The released notebook as a learner who wrote the solutions would submit it (markers dropped)."""
    copy = nbformat.from_dict(released)
    for cell in source.cells:
        if nbgrader_meta(cell).get("solution"):
            copy = with_cell_replaced(copy, nbgrader_meta(cell)["grade_id"],
                                      solution_source(source, nbgrader_meta(cell)["grade_id"]))
    return copy


def with_cell_replaced(nb, grade_id: str, source: str) -> nbformat.NotebookNode:
    """A copy of `nb` whose cell `grade_id` holds `source` (what a learner would have typed)."""
    copy = nbformat.from_dict(nb)
    (cell,) = [c for c in copy.cells if nbgrader_meta(c).get("grade_id") == grade_id]
    cell.source = source.strip("\n")
    return copy


def builds_on(chapter: str) -> dict[str, list[str]]:
    """Which exercises of `chapter` call which others of it while graded (its probe module's `BUILDS_ON`)."""
    from autograder import probes
    return getattr(probes.chapter_module(chapter), "BUILDS_ON", {})


def delegating(answers, chapter: str) -> nbformat.NotebookNode:
    """`answers` with every name the learner writes replaced by the reference's own: a function that calls it, a
    class that subclasses it (what `super()` or a one-line subclass would do)."""
    import ast

    from autograder import probes
    yours = probes.yours_of(chapter)
    copy = nbformat.from_dict(answers)
    for cell in copy.cells:
        if not nbgrader_meta(cell).get("solution"):
            continue
        defined = [node.name for node in ast.parse(cell.source).body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        lines = []
        for name in defined:
            if name not in yours:
                continue
            module, _, qualname = yours[name].partition(":")
            where = f"__import__('importlib').import_module({module!r}).{qualname}"
            if isinstance(probes.resolve(yours[name]), type):
                lines.append(f"class {name}({where}):\n    pass\n")
            else:
                lines.append(f"def {name}(*args, **kwargs):\n    return {where}(*args, **kwargs)\n")
        cell.source = "\n".join(lines) or "raise NotImplementedError()"
    return copy
