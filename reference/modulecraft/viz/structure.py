"""The registration tree of a module, as ``named_modules`` walks it.

``named_modules()`` gives the nodes and their pre-order DFS numbers; ``_modules`` gives the edges. Its memo drops
the second path to a shared module: a registered child whose path is not the one ``named_modules`` kept is drawn
as a dashed edge to where it was kept (a DFS without memo yields it again; that node is drawn too, marked).
Parameters are deduplicated the way ``named_parameters`` does it: the first module (in DFS order) that registers
a parameter owns it, later ones share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import introspect


@dataclass(eq=False)
class TreeNode:
    """One distinct module, at the path where ``named_modules`` first met it."""

    qualname: str
    module: object
    depth: int
    order: int  # 1-based position in named_modules() order
    duplicate_of: str | None = None  # a module yielded twice (a DFS without memo): where it was yielded first
    parent: TreeNode | None = None
    children: list[TreeNode] = field(default_factory=list)


@dataclass(frozen=True)
class SharedModule:
    """A second registration of an already-visited module: ``parent.attr`` is ``target``."""

    parent: str
    attr: str
    target: str

    @property
    def path(self) -> str:
        return introspect.join(self.parent, self.attr)


@dataclass(frozen=True)
class ParameterRef:
    """Who owns a parameter: the first module (DFS order) that registers it, and under which name."""

    qualname: str
    name: str

    @property
    def path(self) -> str:
        return introspect.join(self.qualname, self.name)


class ModuleTree:
    """Nodes, tree edges, shared-module edges, parameter owners and subtree totals of one module tree."""

    def __init__(self, module):
        self.root_module = module
        self.nodes: dict[str, TreeNode] = {}
        self.by_identity: dict[int, TreeNode] = {}
        by_identity = self.by_identity
        for order, (qualname, submodule) in enumerate(module.named_modules(), start=1):
            node = TreeNode(qualname, submodule, depth=qualname.count(".") + 1 if qualname else 0, order=order)
            self.nodes[qualname] = node
            first = by_identity.setdefault(id(submodule), node)
            node.duplicate_of = None if first is node else first.qualname
        self.root = self.nodes[""]
        self.shared_modules: list[SharedModule] = []
        for node in self.nodes.values():
            for attr, child in introspect.children(node.module):
                path = introspect.join(node.qualname, attr)
                yielded_here = self.nodes.get(path)
                if yielded_here is not None and yielded_here.module is child:
                    yielded_here.parent = node
                    node.children.append(yielded_here)
                elif id(child) in by_identity:
                    self.shared_modules.append(SharedModule(node.qualname, attr, by_identity[id(child)].qualname))
                # else: named_modules did not yield it (e.g. a learner's DFS under construction)
        self.parameter_owner: dict[int, ParameterRef] = {}
        for node in self.nodes.values():
            for name, parameter in introspect.own_parameters(node.module):
                self.parameter_owner.setdefault(id(parameter), ParameterRef(node.qualname, name))
        self._reachable: dict[int, dict[int, object]] = {}

    def resolve(self, path: str) -> str:
        """The qualified name drawn for ``path``, which may be a second path to a shared module ("again.0")."""
        if path in self.nodes:
            return path
        module = self.root_module
        for name in path.split("."):
            module = module._modules.get(name)
            if module is None:
                raise KeyError(path)
        return self.by_identity[id(module)].qualname

    def tied_to(self, qualname: str, name: str, parameter) -> ParameterRef | None:
        """Where ``parameter`` (registered as ``name`` on ``qualname``) was registered first, if not right here."""
        owner = self.parameter_owner[id(parameter)]
        return None if owner == ParameterRef(qualname, name) else owner

    def descendants(self, node: TreeNode) -> list[TreeNode]:
        """All tree descendants of ``node`` (not following shared edges), in DFS order."""
        found = []
        for child in node.children:
            found.append(child)
            found.extend(self.descendants(child))
        return found

    def reachable_parameters(self, module) -> dict[int, object]:
        """Distinct parameters of ``module`` and everything registered under it, as ``module.parameters()``."""
        key = id(module)
        if key not in self._reachable:
            found = {id(p): p for _, p in introspect.own_parameters(module)}
            for _, child in introspect.children(module):
                found.update(self.reachable_parameters(child))
            self._reachable[key] = found
        return self._reachable[key]

    def parameter_total(self, node: TreeNode) -> tuple[int, bool]:
        """``(elements, has_lazy)``: parameter count of the subtree and whether some of it is not allocated yet."""
        parameters = self.reachable_parameters(node.module).values()
        return sum(map(introspect.numel, parameters)), any(map(introspect.is_lazy, parameters))

    def signature(self, module) -> tuple:
        """What makes two sibling blocks "identical" for folding: class, config, state shapes, hooks, children."""
        return (
            type(module).__qualname__,
            introspect.extra_repr(module),
            bool(getattr(module, "training", True)),
            tuple((name, introspect.shape_of(p), introspect.dtype_name(p), introspect.requires_grad(p))
                  for name, p in introspect.own_parameters(module)),
            tuple((name, introspect.shape_of(b), introspect.dtype_name(b), persistent)
                  for name, b, persistent in introspect.own_buffers(module)),
            tuple(introspect.hook_counts(introspect.local_hook_dicts(module)).items()),
            tuple((name, self.signature(child)) for name, child in introspect.children(module)),
        )
