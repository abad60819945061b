"""No oracle in a grading kernel: cells a learner who has read the repository could share, each on an otherwise
blank notebook of a course chapter, every one graded by the real pipeline in one grading run. With the kernel's
view of the libraries (`autograder.judging.libraries`: torch out of sight, as importable package and as source
text) and the chapters' `SIBLINGS` removed (`autograder.judging.answer_key`), every attacked test cell scores 0.
Without them (the venv's site-packages seen whole, no sibling removed), one more run grades the attacks that would
earn points, and each does. The other siblings tried (aliases of modulecraft functions that come back to the
learner's seams) earn nothing either way; chapter 3's Parameter probes tell a subclass of modulecraft's
`nn.Parameter` from the learner's own class in the kernel's probes (its "without" was shown by a run with the check
taken out)."""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os

import nbformat
import pytest

from autograder.config import COURSE_SOURCE
from autograder.course import Course
from autograder.judging import answer_key, libraries, sandbox
from modulecraft import mechanisms

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not sandbox.namespaces_available(),
                       reason="kernels see only their own view of the libraries when grading runs as root with "
                              "namespaces"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in the venv (the test extra)"),
]

# torch's own functions, their code rebound to modulecraft's: what they look up in torch's modules (`torch`, the
# hook registries, Parameter, Module, the handles) comes from modulecraft's module of the same role, and
# `super()` finds modulecraft's Module (`import torch`).
BORROWS_TORCHS_CODE = """
import types
import torch
import torch.nn.modules.module as torch_module
import modulecraft
import modulecraft.nn.modules.container as our_container
import modulecraft.nn.modules.module as our_module


class TorchLike(types.ModuleType):
    def __getattr__(self, name):
        return getattr(modulecraft, name, getattr(torch, name))


torch_like = TorchLike("torch")
torch_like.nn = types.SimpleNamespace(Module=our_module.Module, Parameter=modulecraft.nn.Parameter)


def borrowed(function, *ours):
    scope = {**vars(torch_module), **{k: v for module in ours for k, v in vars(module).items()},
             **vars(our_module), "torch": torch_like}
    cells = tuple(types.CellType(our_module.Module) if cell.cell_contents is torch.nn.Module else cell
                  for cell in function.__closure__ or ())
    made = types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__, cells or None)
    made.__kwdefaults__ = function.__kwdefaults__
    return made
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

# The module's zero_grad done by the optimizer's (modulecraft's sibling of it), on the module's parameters.
ZERO_GRAD_BY_THE_OPTIMIZER = """
from types import SimpleNamespace
from modulecraft.optim import Optimizer


def zero_grad(self, set_to_none=True):
    Optimizer.zero_grad(SimpleNamespace(param_groups=[{"params": list(self.parameters())}]), set_to_none)
"""


def borrowing(*lines: str) -> str:
    return BORROWS_TORCHS_CODE + "\n".join(lines)


def whose(*mine: str) -> str:
    """The capstone's switches: `mine` the learner's, every other mechanism modulecraft's."""
    switches = {mechanism: "mine" if mechanism in mine else "reference" for mechanism in mechanisms.MECHANISMS}
    return f"WHOSE = {switches!r}"


def solution(chapter: str, grade_id: str, leaving_out: str = "") -> str:
    """The course's solution of exercise `grade_id` (what a learner writes, or pastes from their chapters into the
    capstone), without the definition `leaving_out`, top-level or a method of a top-level class."""
    notebook = nbformat.read(COURSE_SOURCE / chapter / f"{chapter}.ipynb", as_version=4)
    (source,) = [cell.source for cell in notebook.cells
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    tree = ast.parse(source)
    for scope in [tree, *(node for node in tree.body if isinstance(node, ast.ClassDef))]:
        scope.body = [node for node in scope.body if getattr(node, "name", None) != leaving_out]
    return ast.unparse(tree)


@dataclasses.dataclass(frozen=True)
class Attack:
    cells: dict[str, str]  # grade id (or cell id) of a cell of the released notebook -> the shared text put there
    targets: tuple[str, ...]  # the exercises it is after: the points of their visible and hidden test cells
    undefended: bool = True  # earns points without the defences (and is graded again without them to show it)


# (student, chapter) -> the attack that student's notebook of that chapter holds.
ATTACKS = {
    ("torch", "02_setattr_dispatch"): Attack({
        "c02_module_setattr": borrowing("module_setattr = borrowed(torch.nn.Module.__setattr__)"),
        "c02_module_getattr": borrowing("module_getattr = borrowed(torch.nn.Module.__getattr__)"),
        "c02_module_delattr": borrowing("module_delattr = borrowed(torch.nn.Module.__delattr__)"),
        "c02_module_dir": borrowing("module_dir = borrowed(torch.nn.Module.__dir__)"),
        "c02_add_module": borrowing("add_module = borrowed(torch.nn.Module.add_module)"),
    }, ("c02_module_setattr", "c02_module_getattr", "c02_module_delattr", "c02_module_dir", "c02_add_module")),
    ("torch", "03_parameters"): Attack({
        "c03_register_parameter": borrowing("register_parameter = borrowed(torch.nn.Module.register_parameter)"),
    }, ("c03_register_parameter",)),
    # each cell defines its exercise's names (a later blank cell would redefine them)
    ("torch", "05_traversal"): Attack({
        "c05_modes_and_apply": 'NAMES = ("named_children", "train", "eval", "apply")' + EXECS_TORCHS_SOURCE,
        "c05_named_modules": 'NAMES = ("named_modules",)' + EXECS_TORCHS_SOURCE,
    }, ("c05_named_modules", "c05_modes_and_apply")),
    ("torch", "06_hooks"): Attack({
        "c06_register_hooks": borrowing(
            "register_forward_pre_hook = borrowed(torch.nn.Module.register_forward_pre_hook)",
            "register_forward_hook = borrowed(torch.nn.Module.register_forward_hook)",
            "register_module_forward_hook = borrowed(torch_module.register_module_forward_hook)"),
        "c06_call_impl": borrowing("_call_impl = borrowed(torch.nn.Module._call_impl)"),
        "c06_registration_hooks": borrowing(
            "register_parameter = borrowed(torch.nn.Module.register_parameter)",
            "register_buffer = borrowed(torch.nn.Module.register_buffer)"),
    }, ("c06_register_hooks", "c06_call_impl", "c06_registration_hooks")),
    ("torch", "07_state_dict"): Attack({
        "c07_load_state_dict": borrowing("load_state_dict = borrowed(torch.nn.Module.load_state_dict)"),
    }, ("c07_load_state_dict",)),
    ("torch", "09_containers"): Attack({
        "c09_sequential_indexing": borrowing(
            "sequential_getitem = borrowed(torch.nn.Sequential.__getitem__, our_container)",
            "sequential_delitem = borrowed(torch.nn.Sequential.__delitem__, our_container)"),
        "c09_sequential_growth": borrowing(*(f"sequential_{name.strip('_')} = borrowed(torch.nn.Sequential.{name}, "
                                             "our_container)" for name in ("append", "extend", "__add__", "__iadd__"))),
        "c09_sequential_insert": borrowing("sequential_insert = borrowed(torch.nn.Sequential.insert, our_container)"),
        "c09_modulelist_repr": borrowing("modulelist_repr = borrowed(torch.nn.ModuleList.__repr__, our_container)"),
    }, ("c09_sequential_indexing", "c09_sequential_growth", "c09_sequential_insert", "c09_modulelist_repr")),
    ("torch", "10_autograd"): Attack({  # torch's autograd differentiates, torch reduces a gradient to its input's shape
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
    }, ("c10_matmul_broadcast",)),
    ("torch", "13_capstone"): Attack({  # the walks from torch's text, every other mechanism switched to modulecraft's
        "c13_whose": whose("tree walks and modes (5)"),
        "c13_mine_walks": 'NAMES = ("named_modules", "_named_members", "named_children", "train", "eval")'
                          + EXECS_TORCHS_SOURCE,
    }, ("c13_mine_walks",)),
    # modulecraft's siblings of an exercise: subclassed, aliased or called on the exercise's data
    ("sibling", "02_setattr_dispatch"): Attack({  # the containers' __dir__ filter Module's; register_module is an alias
        "c02_module_dir": "module_dir = nn.ModuleList.__dir__",
        "c02_add_module": "add_module = nn.Module.register_module",
    }, ("c02_module_dir", "c02_add_module"), undefended=False),
    ("sibling", "03_parameters"): Attack({
        "c03_parameter": "class Parameter(nn.Parameter):\n    pass",
    }, ("c03_parameter",), undefended=False),
    ("sibling", "06_hooks"): Attack({  # the backward hooks' registration (a handle, prepend) on the forward dicts
        "c06_register_hooks": """
import weakref
import modulecraft.nn.modules.module as our_module


def _registered(self, hooks, hook, prepend, *tables):
    backward = self.__dict__["_backward_pre_hooks"]
    self.__dict__["_backward_pre_hooks"] = self.__dict__[hooks]
    try:
        handle = nn.Module.register_full_backward_pre_hook(self, hook, prepend=prepend)
    finally:
        self.__dict__["_backward_pre_hooks"] = backward
    handle.extra_dict_ref = tuple(weakref.ref(getattr(self, table)) for table in tables)
    return handle


def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
    handle = _registered(self, "_forward_pre_hooks", hook, prepend, "_forward_pre_hooks_with_kwargs")
    if with_kwargs:
        self._forward_pre_hooks_with_kwargs[handle.id] = True
    return handle


def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
    handle = _registered(self, "_forward_hooks", hook, prepend, "_forward_hooks_with_kwargs",
                         "_forward_hooks_always_called")
    if with_kwargs:
        self._forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        self._forward_hooks_always_called[handle.id] = True
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    handle = our_module._register_global(our_module._global_forward_hooks, hook)
    if with_kwargs:
        our_module._global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        our_module._global_forward_hooks_always_called[handle.id] = True
    return handle
""",
    }, ("c06_register_hooks",)),
    ("sibling", "07_state_dict"): Attack({  # BatchNorm's own, which goes on to Module's
        "c07_own_load": "load_from_state_dict = nn.BatchNorm1d._load_from_state_dict",
    }, ("c07_own_load",), undefended=False),
    ("sibling", "09_containers"): Attack({  # ModuleList's, for Sequential's
        "c09_sequential_growth": "sequential_append = nn.ModuleList.append\nsequential_extend = nn.ModuleList.extend\n"
                                 "sequential_iadd = nn.ModuleList.__iadd__",
        "c09_modulelist_repr": "modulelist_repr = nn.Module.__repr__",
    }, ("c09_sequential_growth", "c09_modulelist_repr"), undefended=False),
    ("sibling", "11_backward_hooks"): Attack({
        "c11_zero_grad": ZERO_GRAD_BY_THE_OPTIMIZER + """

def requires_grad_(self, requires_grad=True):
    for parameter in self.parameters():
        parameter.requires_grad_(requires_grad)
    return self
""",
    }, ("c11_zero_grad",)),
    # chapter 12's SGD with the solution's step and the optimizer's zero_grad, which modulecraft's SGD inherits
    ("sibling", "12_optimizers"): Attack({
        "c12_sgd": solution("12_optimizers", "c12_sgd", leaving_out="zero_grad"),
    }, ("c12_sgd",)),
    # the capstone's backward hooks pasted from chapter 11 but zero_grad; chapter 6's hooks they call, and chapter
    # 12's SGD (switched to modulecraft's, whose SGD inherits the optimizer's zero_grad, it would keep the sibling)
    ("sibling", "13_capstone"): Attack({
        "c13_whose": whose("forward hooks in _call_impl (6)", "backward hooks in _call_impl (11)", "optimizer (12)"),
        "c13_mine_forward_hooks": solution("13_capstone", "c13_mine_forward_hooks"),
        "c13_mine_optimizer": solution("13_capstone", "c13_mine_optimizer"),
        "c13_mine_backward_hooks": solution("13_capstone", "c13_mine_backward_hooks", leaving_out="zero_grad")
                                   + "\n" + ZERO_GRAD_BY_THE_OPTIMIZER,
    }, ("c13_mine_backward_hooks",)),
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("oracles")
    course = Course(root / "grading")
    released = course.release(sorted({chapter for _, chapter in ATTACKS}))
    for (student, chapter), attack in ATTACKS.items():
        notebook = nbformat.read(released[chapter], as_version=4)
        for cell in notebook.cells:
            key = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or cell.get("id")
            if key in attack.cells:
                cell.source = attack.cells[key]
        nbformat.write(notebook, root / f"{student}-{chapter}.ipynb")
    course.attacks = root
    return course


def _scores(course, attacks: dict, run: str) -> dict[tuple[str, str], dict[str, float]]:
    """(student, chapter) -> each targeted test cell's score: `attacks` graded in one run, as `<student>-<run>`."""
    for student, chapter in attacks:
        course.submit(f"{student}-{run}", chapter, course.attacks / f"{student}-{chapter}.ipynb")
    course.grade(students=sorted({f"{student}-{run}" for student, _ in attacks}),
                 chapters=sorted({chapter for _, chapter in attacks}), force=True)
    scores = {}
    for (student, chapter), attack in attacks.items():
        graded = course.scores(f"{student}-{run}", chapter)
        scores[student, chapter] = {grade_id: graded[grade_id][0] for grade_id in graded
                                    if grade_id.rpartition("_")[0] in attack.targets}
        assert len(scores[student, chapter]) == 2 * len(attack.targets), (student, chapter, sorted(graded))
    return scores


def test_torch_and_siblings_earn_nothing_on_a_blank_notebook(course, monkeypatch):
    scores = _scores(course, ATTACKS, "defended")
    earned = {key: {cell: score for cell, score in cells.items() if score} for key, cells in scores.items()}
    assert not any(earned.values()), earned
    # Without the kernel's view of the libraries, torch answers: its code, imported or compiled from its text, and
    # its autograd. Without the chapters' SIBLINGS removed, the optimizer's zero_grad answers for the module's and
    # for chapter 12's SGD, and the backward pre-hooks' registration for the forward hooks'.
    monkeypatch.setattr(libraries, "mounts", lambda: [])
    monkeypatch.setattr(answer_key, "siblings_of", lambda chapter: {})
    undefended = {key: attack for key, attack in ATTACKS.items() if attack.undefended}
    again = _scores(course, undefended, "undefended")
    nothing = [(student, chapter, exercise) for (student, chapter), attack in undefended.items()
               for exercise in attack.targets
               if not any(score for grade_id, score in again[student, chapter].items()
                          if grade_id.rpartition("_")[0] == exercise)]
    assert not nothing, (nothing, again)
