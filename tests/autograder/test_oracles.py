"""No oracle in a grading kernel: cells a learner who has read the repository could share, each on an otherwise
blank notebook of a course chapter, graded by the real pipeline. With the kernel's view of the libraries
(`autograder.judging.libraries`: torch out of sight, as importable package and as source text), every attacked test cell
scores 0; without it (the venv's site-packages seen whole), the same notebooks earn points. The sibling defence
(chapter 3's Parameter probes telling a subclass of modulecraft's `nn.Parameter` from the learner's own class)
lives in the kernel's probes; its "without" was shown by a run with the check taken out (see the commit)."""
from __future__ import annotations

import importlib.util
import os

import nbformat
import pytest

from autograder.judging import answer_key, libraries, sandbox
from autograder.course import Course

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not sandbox.namespaces_available(),
                       reason="kernels see only their own view of the libraries when grading runs as root with "
                              "namespaces"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in the venv (the test extra)"),
]

# torch's own methods, their code rebound to modulecraft's classes (`import torch`).
BORROWS_TORCHS_CODE = """
import types
import torch
import torch.nn.modules.module as torch_module
from modulecraft import nn


def borrowed(method):
    scope = {**vars(torch_module), "Parameter": nn.Parameter, "Module": nn.Module}
    return types.FunctionType(method.__code__, scope, method.__name__, method.__defaults__, method.__closure__)
"""

# torch's methods compiled from the text of torch/nn/modules/module.py (no `import torch` anywhere).
EXECS_TORCHS_SOURCE = """
import ast, pathlib, site, textwrap
from modulecraft import nn

text = (pathlib.Path(site.getsitepackages()[0]) / "torch" / "nn" / "modules" / "module.py").read_text()
(torch_module,) = [node for node in ast.parse(text).body if isinstance(node, ast.ClassDef) and node.name == "Module"]
scope = {"Module": nn.Module}
for method in torch_module.body:
    if isinstance(method, ast.FunctionDef) and method.name in NAMES:
        method.decorator_list = []
        exec("from __future__ import annotations\\n" + textwrap.dedent(ast.get_source_segment(text, method)), scope)
globals().update({name: scope[name] for name in NAMES})
"""

ATTACKS = {
    "03_parameters": {
        "c03_register_parameter": (BORROWS_TORCHS_CODE
                                   + "register_parameter = borrowed(torch.nn.Module.register_parameter)"),
        # a sibling of the answer that stays in the kernel: modulecraft's own Parameter
        "c03_parameter": "class Parameter(nn.Parameter):\n    pass",
    },
    "05_traversal": {  # each cell defines its exercise's names (a later blank cell would redefine them)
        "c05_modes_and_apply": 'NAMES = ("named_children", "train", "eval", "apply")' + EXECS_TORCHS_SOURCE,
        "c05_named_modules": 'NAMES = ("named_modules",)' + EXECS_TORCHS_SOURCE,
    },
    "10_autograd": {  # torch's autograd differentiates, torch reduces a gradient to its input's shape
        "c10_matmul_broadcast": """
import torch


def unbroadcast(grad, shape):
    return torch.from_numpy(np.array(grad)).sum_to_size(tuple(shape)).numpy()


def mm_gradients(grad, a, b, first, second):
    a, b = (torch.tensor(np.array(m), requires_grad=True) for m in (a, b))
    (a @ b).backward(torch.tensor(np.array(grad)))
    return (a.grad.numpy() if first else None), (b.grad.numpy() if second else None)


def validate_outputs(node, grad_inputs):  # the engine's check: torch reduces, or refuses
    grads = list(grad_inputs)
    for index, ((following, output_nr), grad) in enumerate(zip(node.next_functions, grads)):
        shape = None if following is None or grad is None else following.gradient_shape(output_nr)
        if shape is not None:
            try:
                grads[index] = unbroadcast(grad, shape)
            except RuntimeError:
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {index} - got "
                                   f"{list(np.shape(grad))} but expected shape compatible with {list(shape)}")
    return tuple(grads)
""",
    },
    "11_backward_hooks": {  # a sibling: the optimizer's zero_grad, on the module's parameters
        "c11_zero_grad": """
from types import SimpleNamespace
from modulecraft.optim import Optimizer


def zero_grad(self, set_to_none=True):
    Optimizer.zero_grad(SimpleNamespace(param_groups=[{"params": list(self.parameters())}]), set_to_none)


def requires_grad_(self, requires_grad=True):
    for parameter in self.parameters():
        parameter.requires_grad_(requires_grad)
    return self
""",
    },
}
# The test cells each attack is after (their visible and hidden cells).
TARGETS = {
    "03_parameters": ["c03_register_parameter", "c03_parameter"],
    "05_traversal": ["c05_named_modules", "c05_modes_and_apply"],
    "10_autograd": ["c10_matmul_broadcast"],
    "11_backward_hooks": ["c11_zero_grad"],
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("oracles")
    course = Course(root / "grading")
    released = course.release(list(ATTACKS))
    for chapter, cells in ATTACKS.items():
        notebook = nbformat.read(released[chapter], as_version=4)
        for cell in notebook.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in cells:
                cell.source = cells[grade_id]
        nbformat.write(notebook, root / f"{chapter}.ipynb")
    course.attacks = root
    return course


def _scores(course, student) -> dict[str, dict[str, float]]:
    """chapter -> attacked test cell -> its score, for `student` submitting every chapter's attacks."""
    for chapter in ATTACKS:
        course.submit(student, chapter, course.attacks / f"{chapter}.ipynb")
    course.grade(students=[student], chapters=list(ATTACKS), force=True)
    scores = {}
    for chapter, exercises in TARGETS.items():
        graded = course.scores(student, chapter)
        scores[chapter] = {grade_id: graded[grade_id][0] for grade_id in graded
                           if grade_id.rpartition("_")[0] in exercises}
    return scores


def test_torch_and_siblings_earn_nothing_on_a_blank_notebook(course, monkeypatch):
    scores = _scores(course, "oracle")
    assert all(score == 0 for chapter in scores.values() for score in chapter.values()), scores
    # Without the kernel's view of the libraries, torch answers: its code, imported or compiled from its text, and
    # its autograd. And
    # without the chapters' SIBLINGS removed, the optimizer's zero_grad answers for the module's.
    monkeypatch.setattr(libraries, "mounts", lambda: [])
    monkeypatch.setattr(answer_key, "siblings_of", lambda chapter: {})
    again = _scores(course, "oracle-again")
    assert again["03_parameters"]["c03_register_parameter_visible"] > 0, again
    assert again["03_parameters"]["c03_register_parameter_hidden"] > 0, again
    assert all(score > 0 for score in again["05_traversal"].values()), again
    assert all(score > 0 for score in again["10_autograd"].values()), again
    assert all(score > 0 for score in again["11_backward_hooks"].values()), again
