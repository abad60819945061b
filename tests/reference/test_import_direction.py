"""modulecraft's modules import one another one way: no module reaches, directly or through others, back to
itself (deferred imports inside functions included). A utility stays below what uses it (``utils.hooks`` is
used by the autograd package and by ``nn``), and each piece has one home."""

import ast
from pathlib import Path

import modulecraft

PACKAGE = Path(modulecraft.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = ["modulecraft", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each module -> the modulecraft modules it imports (a package's ``__init__`` counts, its own ancestors not:
    importing a submodule always runs its package first)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(filter(None, [package.rsplit(".", node.level - 1)[0], node.module]))
                targets.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
        graph[name] = {prefix for target in targets for prefix in _prefixes(target)
                       if prefix in paths and prefix != name and not name.startswith(prefix + ".")}
    return graph


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), list(graph[start])
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph[module])
    return seen


def test_no_module_imports_its_way_back_to_itself():
    graph = _imports()
    circles = sorted(name for name in graph if name in _reaches(graph, name))
    assert not circles, f"these modules import their way back to themselves: {circles}"


def test_the_hooks_utility_and_the_two_viz_modules_that_imported_each_other():
    graph = _imports()
    assert not {target for target in graph["modulecraft.utils.hooks"]
                if target.startswith(("modulecraft.nn", "modulecraft.autograd"))}
    assert "modulecraft.viz.steppers" not in _reaches(graph, "modulecraft.viz.steppers")
    assert "modulecraft.viz.diff" not in graph["modulecraft.viz.steppers"]
