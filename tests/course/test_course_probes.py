"""Every chapter's probes (autograder/probes): one per test cell, seeded, repeatable, tidy, and its answer key
removable from the grading kernel's modulecraft."""
from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from autograder import probes
from autograder.judging import answer_key
from course_chapters import CHAPTERS, graded_cells, read_notebook

pytestmark = pytest.mark.parametrize("chapter", CHAPTERS)


def _reference_runs(chapter: str, seed: int) -> dict[str, list]:
    reference = probes.Reference(probes.yours_of(chapter))
    return {grade_id: [check.observed for check in probes.run_probe(grade_id, reference, seed).checks]
            for grade_id in probes.grade_ids(chapter)}


def test_every_test_cell_has_a_probe_and_every_probe_a_cell(chapter):
    assert sorted(probes.grade_ids(chapter)) == sorted(graded_cells(read_notebook(chapter)))


def test_the_reference_passes_its_own_probes_and_every_check_says_what_it_checks(chapter):
    """A probe that fails on the reference itself (NotWritten: it asked for a name YOURS lacks) is a course bug;
    a check without a `what` would fail with an empty message."""
    reference = probes.Reference(probes.yours_of(chapter))
    for grade_id in probes.grade_ids(chapter):
        checks = probes.run_probe(grade_id, reference, 1).checks
        assert checks, f"{grade_id} makes no check"
        assert not [c.what for c in checks if "missing" in c.observed], grade_id
        assert all(c.what.strip() for c in checks), f"{grade_id}: a check without `what`"


def test_expected_observations_depend_on_the_seed(chapter):
    """Observations copied from another seed's run (someone's feedback, a notebook run at home) do not pass:
    every graded cell's expected observations change with the seed."""
    points = graded_cells(read_notebook(chapter))
    first, second, third = (_reference_runs(chapter, seed) for seed in (11, 22, 33))
    fixed = [grade_id for grade_id in first if points[grade_id] > 0
             and first[grade_id] == second[grade_id] == third[grade_id]]
    assert fixed == [], f"probes whose expected observations do not depend on the seed: {fixed}"


def test_probes_are_repeatable_and_leave_no_global_hooks(chapter):
    from modulecraft.nn.modules import module
    before = {name: dict(value) for name, value in vars(module).items()
              if name.startswith("_global") and isinstance(value, dict)}
    assert _reference_runs(chapter, 5) == _reference_runs(chapter, 5)
    after = {name: dict(value) for name, value in vars(module).items()
             if name.startswith("_global") and isinstance(value, dict)}
    assert after == before


def test_the_answer_key_is_gone_from_the_grading_kernels_modulecraft(chapter, tmp_path):
    """Each name the learner writes is, in the kernel's copy, a seam (a function whose one statement calls the
    learner's definition) or a stub class; and none of the reference's own longer statements of it is left
    anywhere in that copy's file."""
    yours = probes.yours_of(chapter)
    targets = {name: target for name, target in yours.items() if target.startswith("modulecraft.")}
    if not targets:
        pytest.skip("no modulecraft mechanism in this chapter")
    build = answer_key.build(chapter, tmp_path)
    for name, target in targets.items():
        module, _, qualname = target.partition(":")
        relative = module.split(".")[1:]
        path = build.joinpath("modulecraft", *relative).with_suffix(".py")
        if not path.exists():
            path = build.joinpath("modulecraft", *relative, "__init__.py")
        text = path.read_text()
        replaced = _definition(ast.parse(text), qualname)
        if isinstance(replaced, ast.ClassDef):
            assert ast.unparse(replaced.bases[0]).endswith(".Removed"), target
        else:
            seam = ast.unparse(replaced.body[0])  # a target several names share (capstone) routes between them
            assert len(replaced.body) == 1 and (f".call({name!r}" in seam or f".call_routed({target!r}" in seam), target
        original = textwrap.dedent(inspect.getsource(probes.resolve(target)))
        statements = [ast.unparse(node) for node in ast.walk(ast.parse(original))
                      if isinstance(node, (ast.Return, ast.Raise, ast.If, ast.For, ast.While)) and
                      len(ast.unparse(node)) > 40]
        assert not [s for s in statements if s in text], f"{target}: its statements are still in {path}"


def _definition(tree: ast.Module, qualname: str):
    body = tree.body
    for part in qualname.split("."):
        (node,) = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
        body = node.body
    return node
