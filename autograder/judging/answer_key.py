"""The grading kernel's modulecraft: the reference with the answer key taken out.

A chapter's probe module names, in `YOURS`, what the learner writes and where the reference keeps it
(`"named_modules": "modulecraft.nn.modules.module:Module.named_modules"`). The kernel that grades that chapter
imports a copy of the reference in which each of those is gone, source and bytecode: a function or method
becomes a seam that calls the learner's own definition of that name (so `nn.Linear` inside a learner's tree
walks with the learner's `named_modules`, and `super().named_modules(...)` comes back to the learner's code); a
class becomes a stub that refuses to be used. A probe module's `SIBLINGS` names functions of modulecraft that hold
the same mechanism under another name (`Optimizer.zero_grad` zeroes gradients as `Module.zero_grad` does): they
become functions that refuse to run, saying whose sibling they are (unless the capstone keeps the code of one of
the names it lists). Everything else (layers used as fixtures, drawings, checks) stays.
In the capstone, the mechanisms a learner switched to the reference (read from the notebook's text by `verdicts`)
are kept (`build(kept=...)`); the test cells that grade them fail there.

Copies are made once per content (the reference's files, the seams and the chapter's list) under a cache folder, and
handed to the forkserver that starts the chapter's kernels (`sandbox`).
"""
from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import modulecraft

from .. import probes

REFERENCE = Path(modulecraft.__file__).resolve().parent
SEAMS_MODULE = "_yours"  # modulecraft._yours in every copy: the kernel-side seams, a copy of this file
SEAMS = Path(__file__).resolve().parent.parent / "kernel" / "seams.py"


def build(chapter: str, cache: Path | None = None, kept: frozenset[str] = frozenset()) -> Path:
    """The folder holding the stripped `modulecraft` for `chapter` (to put first on the kernel's sys.path).
    `kept`: learner names whose modulecraft code stays (the capstone's mechanisms the learner switched to the
    reference); every other name of the chapter's `YOURS` is removed."""
    targets = _targets({name: target for name, target in probes.yours_of(chapter).items() if name not in kept})
    siblings = {target: names for target, names in siblings_of(chapter).items() if kept.isdisjoint(names)}
    if not targets and not siblings:
        return REFERENCE.parent
    digest = hashlib.sha256(repr((sorted(targets.items()), sorted(siblings.items()))).encode() + SEAMS.read_bytes())
    for path in sorted(REFERENCE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(REFERENCE)).encode() + b"\0" + path.read_bytes())
    base = cache or default_cache()
    folder = base / f"{chapter}-{digest.hexdigest()[:16]}"
    if (folder / "modulecraft" / f"{SEAMS_MODULE}.py").exists():
        return folder
    base.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(base, 0o755)
    staging = Path(tempfile.mkdtemp(prefix=f".{chapter}-", dir=base))
    package = staging / "modulecraft"
    shutil.copytree(REFERENCE, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    removed = {**targets, **{target: ("", *names) for target, names in siblings.items()}}
    for relative, names in _by_file(removed).items():
        source = package / relative
        module = ".".join(("modulecraft", *relative.with_suffix("").parts)).removesuffix(".__init__")
        source.write_text(strip(source.read_text(), names, f"modulecraft.{SEAMS_MODULE}", module))
    shutil.copyfile(SEAMS, package / f"{SEAMS_MODULE}.py")
    for path in [staging, *staging.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    try:
        staging.rename(folder)
    except OSError:  # another grading process built the same copy meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def siblings_of(chapter: str) -> dict[str, tuple[str, ...]]:
    """{target in modulecraft: the learner's names whose mechanism it also holds}: the chapter's `SIBLINGS` (a name,
    or a tuple of names: the sibling stays when the code of any of them is kept, as the reference's code they need)."""
    return {target: (names,) if isinstance(names, str) else tuple(names)
            for target, names in getattr(probes.chapter_module(chapter), "SIBLINGS", {}).items()}


def default_cache() -> Path:
    """Root's under the grader's state folder (kernels run as slot users and read it); anyone else's in their own
    cache folder, never a shared one (a copy planted there would run as them)."""
    if os.geteuid() == 0:
        return Path("/run/modulecraft-grader") / "answer-key-removed"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "modulecraft" / "answer-key-removed"


def _targets(yours: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """{"modulecraft.nn.modules.module:Module.named_modules": the learner's names for it}: what modulecraft keeps
    (answers kept elsewhere, such as numpy's for the grader's own test chapters, are not modulecraft's to remove).
    A target has several names where the capstone gathers chapters that wrote it in parts."""
    targets: dict[str, tuple[str, ...]] = {}
    for name, target in yours.items():
        if target.startswith("modulecraft."):
            targets[target] = (*targets.get(target, ()), name)
    return targets


def _by_file(targets: dict[str, tuple[str, ...]]) -> dict[Path, dict[str, tuple[str, ...]]]:
    files: dict[Path, dict[str, tuple[str, ...]]] = {}
    for target, names in targets.items():
        module, _, qualname = target.partition(":")
        parts = module.split(".")[1:]
        relative = Path(*parts).with_suffix(".py")
        if not (REFERENCE / relative).exists():
            relative = Path(*parts, "__init__.py")
        if not (REFERENCE / relative).exists():
            raise LookupError(f"YOURS names {target!r}, but the reference has no module {module}")
        files.setdefault(relative, {})[qualname] = names
    return files


def strip(source: str, names: dict[str, tuple[str, ...]], seams: str, module: str = "") -> str:
    """`source` (of modulecraft's module `module`) with each definition `names` lists (qualname -> the learner's
    names) replaced by a seam or stub; names `("", name)` mark a sibling of the learner's `name`, which refuses."""
    tree = ast.parse(source)
    found = set()

    def visit(body: list, prefix: str) -> list:
        result = []
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = prefix + node.name
                if qualname in names:
                    found.add(qualname)
                    node = (_stub_class(node, qualname, seams) if isinstance(node, ast.ClassDef)
                            else _sibling(node, names[qualname][1], qualname, seams) if names[qualname][0] == ""
                            else _seam(node, names[qualname], f"{module}:{qualname}", seams))
                elif isinstance(node, ast.ClassDef):
                    node.body = visit(node.body, qualname + ".")
            result.append(node)
        return result

    tree.body = visit(tree.body, "")
    missing = set(names) - found
    if missing:
        raise LookupError(f"YOURS names {sorted(missing)}, which this reference file does not define")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _seam(node: ast.FunctionDef, learner_names: tuple[str, ...], target: str, seams: str) -> ast.FunctionDef:
    where = f"`{target.partition(':')[2]}`"
    seams_module = f"__import__({seams!r}, fromlist=['call'])"
    call = (f"call({learner_names[0]!r}, {where!r}, args, kwargs)" if len(learner_names) == 1 else
            f"call_routed({target!r}, {where!r}, args, kwargs)")
    body = ast.parse(f"return {seams_module}.{call}").body
    marker = ast.parse(f"{seams_module}.seam", mode="eval").body
    return _any_arguments(node, body, [*node.decorator_list, marker])


def _sibling(node: ast.FunctionDef, learner_name: str, qualname: str, seams: str) -> ast.FunctionDef:
    where = f"`{qualname}`"
    body = ast.parse(f"__import__({seams!r}, fromlist=['sibling']).sibling({learner_name!r}, {where!r})").body
    return _any_arguments(node, body, node.decorator_list)


def _any_arguments(node: ast.FunctionDef, body: list, decorators: list) -> ast.FunctionDef:
    """`node` as `def name(*args, **kwargs)` with `body`."""
    arguments = ast.arguments(posonlyargs=[], args=[], vararg=ast.arg("args"), kwonlyargs=[], kw_defaults=[],
                              kwarg=ast.arg("kwargs"), defaults=[])
    return ast.FunctionDef(name=node.name, args=arguments, body=body, decorator_list=decorators, returns=None,
                           type_comment=None, type_params=[])


def _stub_class(node: ast.ClassDef, qualname: str, seams: str) -> ast.ClassDef:
    return ast.parse(f"class {node.name}(__import__({seams!r}, fromlist=['Removed']).Removed):\n"
                     f"    __removed__ = {qualname!r}\n").body[0]
