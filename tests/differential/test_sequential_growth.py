"""Sequential's append, extend, + and +=: keys, identity of the result and of the children, and errors.

Chapter 9 has learners write these four; the reference they are compared with must agree with torch on each point
the chapter grades (test_containers.py covers only their plain, unnamed use).
"""

from collections import OrderedDict

from .observe import differential, raises


def _named(lib):
    """A Sequential with names, a child with children of its own, and a shared layer."""
    nn = lib.nn
    encoder = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    head = nn.Linear(3, 1)
    return encoder, head, nn.Sequential(OrderedDict(encoder=encoder, act=nn.ReLU()))


def _layout(container, **known):
    """(key, which known module or the class name) per child, so identity is part of the trace."""
    return [(key, next((name for name, m in known.items() if m is child), type(child).__name__))
            for key, child in container._modules.items()]


@differential
def test_append_and_extend_key_by_length_and_return_self(lib):
    encoder, head, named = _named(lib)
    appended = named.append(head)
    extended = named.extend(m for m in lib.nn.Sequential(OrderedDict(again=encoder, out=head)))
    return [
        appended is named, extended is named, _layout(named, encoder=encoder, head=head),
        raises(lambda: named.append("relu"), "str is not a Module subclass"),
        raises(lambda: named.extend(head), "object is not iterable"),
        len(named),
    ]


@differential
def test_add_builds_a_new_plain_sequential_of_the_same_children(lib):
    encoder, head, named = _named(lib)

    class Tagged(lib.nn.Sequential):
        pass

    left = Tagged(OrderedDict(encoder=encoder))
    total = left + lib.nn.Sequential(OrderedDict(head=head))
    twice = left + left
    return [
        type(total), total is left, _layout(total, encoder=encoder, head=head), _layout(left, encoder=encoder),
        _layout(twice, encoder=encoder), type(left[0:]),
        [raises(lambda: left + other, "add operator supports only objects of Sequential class, but <class")
         for other in ([head], head, lib.nn.ModuleList([head]))],
        raises(lambda: [head] + left, "can only concatenate list"),
    ]


@differential
def test_iadd_adds_after_the_current_length_and_returns_self(lib):
    encoder, head, named = _named(lib)
    model = lib.nn.Sequential(named)
    before = named
    named += lib.nn.Sequential(OrderedDict(out=head, again=encoder))
    trace = [named is before, model[0] is named, _layout(named, encoder=encoder, head=head)]

    def add_list():
        grown = named
        grown += [head]

    trace += [raises(add_list, "add operator supports only objects of Sequential class"), len(named)]
    return trace
