"""The installed libraries a grading kernel may see: modulecraft's own requirements, nothing else.

The virtual environment that grades often has more than the course needs: `make test` installs torch (the
oracle our tests compare with, whose semantics the reference mirrors: an answer key for most chapters), its
sympy, networkx and mpmath, pytest, playwright... A kernel that sees them can delegate an exercise to torch, or
exec the source text of `torch/nn/modules/module.py`. So a grading kernel (as root, in the forkserver's mount
namespace: `forkserver.serve`) sees its site-packages rebuilt with only the distributions that modulecraft's
runtime requirements bring (what `scripts/install.sh VENV runtime`, the learner's `make lab`, installs), their
extras included, and the base interpreter's site-packages, which the venv does not import from, not at all.

Within those requirements, scikit-learn (the capstone's digits) is seen whole but for `sklearn/neural_network`:
its MLP's backward pass and its SGD-with-momentum and Adam optimizers hold chapters 10 and 12's formulas.
scipy's finite differences (`scipy.optimize.approx_fprime`) compute what chapter 10's checker computes; they stay:
numpy alone computes it as readily (`(f(x + h) - f(x - h)) / 2h`), and the checker is graded on behaviour.
"""
from __future__ import annotations

import functools
import site
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "modulecraft"
# Parts of an allowed distribution that implement a graded mechanism: top-level folder -> its entries not seen.
WITHHELD_PARTS = {"sklearn": ("neural_network",)}


def site_packages() -> list[Path]:
    """The folders this interpreter (and so every kernel forked from the grader's forkserver) imports
    distributions from."""
    return sorted({Path(path).resolve() for path in site.getsitepackages() if Path(path).is_dir()})  # lib64 -> lib


def base_site_packages() -> list[Path]:
    """The base interpreter's site-packages that a venv without system site-packages never imports from: on the
    way to the interpreter, a kernel would otherwise see them whole (with whatever is installed there)."""
    if sys.prefix == sys.base_prefix:
        return []
    return sorted({Path(path).resolve() for path in site.getsitepackages([sys.base_prefix]) if Path(path).is_dir()}
                  - set(site_packages()))


def headers(distribution: metadata.Distribution) -> tuple[str, list[str]]:
    """A distribution's name and requirements, read from its metadata's header lines (what
    `Distribution.metadata` parses as a whole e-mail, long description included: 9 ms a distribution)."""
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
    name, requires = "", []
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        if key == "Name":
            name = value.strip()
        elif key == "Requires-Dist":
            requires.append(value.strip())
    return name, requires


def required(requires: dict[str, list[str]], project: str = PROJECT) -> set[str]:
    """The canonical names of `project` and every distribution its requirements bring (`requires`: each
    distribution's requirements, by canonical name), with no extras of the project itself and the extras its
    requirements ask for."""
    found: set[tuple[str, str]] = set()
    todo = [(canonicalize_name(project), "")]
    while todo:
        name, extra = todo.pop()
        if (name, extra) in found or name not in requires:
            continue
        found.add((name, extra))
        for line in requires[name]:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo += [(canonicalize_name(requirement.name), wanted) for wanted in ("", *requirement.extras)]
    return {name for name, _ in found}


def top_level_entries(distribution: metadata.Distribution, folder: Path) -> set[str]:
    """The entries of `folder` (a site-packages) that `distribution` installed: its packages, modules, .pth
    files and its own metadata folder. (Read from its RECORD's text: `Distribution.files` builds a path object
    per file, a second for torch's 20,000.)"""
    own_folder = getattr(distribution, "_path", None)  # its .dist-info (also listed in its RECORD, when it has one)
    entries = {Path(own_folder).name} if own_folder else set()
    for line in (distribution.read_text("RECORD") or "").splitlines():
        entries.add(line.partition(",")[0].partition("/")[0])
    entries -= {"", "..", "__pycache__"}
    return {entry for entry in entries if (folder / entry).exists() or (folder / entry).is_symlink()}


def views() -> list[tuple[Path, list[str]]]:
    """Each folder of the kernel's view to rebuild, with the entries it keeps: every site-packages this
    interpreter imports from, without the distributions modulecraft does not require; the withheld parts of
    those it does."""
    found = {}  # canonical name -> (its site-packages, the distribution, its requirements)
    for folder in site_packages():
        for distribution in metadata.distributions(path=[str(folder)]):
            name, needs = headers(distribution)
            if name:
                found.setdefault(canonicalize_name(name), (folder, distribution, needs))
    if canonicalize_name(PROJECT) not in found:
        raise LookupError(
            f"{PROJECT} is not installed in this Python ({sys.executable}): without its requirements, the grader "
            "cannot tell which libraries grading kernels may see (torch, which the tests install, must stay out of "
            "their sight). Install it with scripts/install.sh (pip install -e .), then grade again.")
    keep = required({name: needs for name, (_, _, needs) in found.items()})
    result = []
    for folder in site_packages():
        here = {name: distribution for name, (where, distribution, _) in found.items() if where == folder}
        unseen = set().union(*(top_level_entries(d, folder) for name, d in here.items() if name not in keep))
        unseen -= set().union(*(top_level_entries(d, folder) for name, d in here.items() if name in keep))  # shared
        result.append((folder, sorted(entry.name for entry in folder.iterdir() if entry.name not in unseen)))
        for package, parts in WITHHELD_PARTS.items():
            if package not in unseen and (folder / package).is_dir():
                result.append((folder / package, sorted(entry.name for entry in (folder / package).iterdir()
                                                        if entry.name not in parts)))
    return result


@functools.cache
def mounts() -> list[list[str]]:
    """The forkserver's mounts that make this view (`forkserver.Mounter`), once per base server for all its kernels;
    computed once per grading process (0.1-0.5 s, by the load)."""
    rebuilt = [["rebuild", str(folder), "mode=0755,size=64k", *entries] for folder, entries in views()]
    return [*rebuilt, *(["hide", str(folder)] for folder in base_site_packages())]
