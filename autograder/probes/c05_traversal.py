"""Chapter 5's tests: walking the module tree."""
from modulecraft import nn

from . import probe

# The learner's names in this chapter, and where the reference keeps each: while grading, these do not exist in
# the kernel's modulecraft (`autograder.answer_key`), and the reference's own methods call the learner's.
YOURS = {
    "named_modules": "modulecraft.nn.modules.module:Module.named_modules",
}


def node_class(yours):
    """A module whose walk is the learner's; its children are given as keyword arguments."""
    class Node(nn.Module):
        named_modules = yours.named_modules

        def __init__(self, **children):
            super().__init__()
            for name, child in children.items():
                setattr(self, name, child)
    return Node


def names(pairs):
    return [name for name, _ in pairs]


@probe("c05_named_modules_visible")
def named_modules_visible(yours, draw, check):
    Node = node_class(yours)
    a, x, y, b, z = draw.names(5)
    hint = "see 5.2: yield the module first, then each child's whole walk, joining names with dots."
    check("pre-order names of a small tree of Nodes",
          lambda: names(Node(**{a: Node(**{x: Node(), y: Node()}), b: Node()}).named_modules()), hint=hint)
    check("the first pair is the root itself",
          lambda: (lambda root: next(iter(root.named_modules()))[1] is root)(Node(**{a: Node()})),
          hint="see 5.2: the root is yielded first, under the name `prefix`.")
    leaf = Node()
    tree = Node(**{a: Node(**{x: Node(), y: leaf}), b: Node(**{z: leaf})})
    check("a shared leaf is listed once, under the first name the walk meets", lambda: names(tree.named_modules()),
          hint="see 'Shared modules and the memo': remember what you yielded in `memo` and skip it later.")
    check("remove_duplicate=False lists the shared leaf twice",
          lambda: names(tree.named_modules(remove_duplicate=False)),
          hint="see 'Shared modules and the memo': add to the memo only when remove_duplicate is true, and pass it on.")


@probe("c05_named_modules_hidden")
def named_modules_hidden(yours, draw, check):
    Node = node_class(yours)
    p, hole, q = draw.names(3)
    gap = Node(**{p: Node()})
    gap.add_module(hole, None)
    gap.add_module(q, Node())
    check("A child registered as None must be skipped.", lambda: names(gap.named_modules()))
