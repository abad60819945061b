"""Walking a pickle's opcodes without running them, to bound what C's unpickler would then do blindly.

C's unpickler allocates a ``bytes`` of the size an opcode declares *before* reading it, grows its memo to the
index a PUT names, and hashes every dict key and set item it is given, however many times the pickle names the
same memoised tuple inside it. :func:`check_opcodes` reads every opcode's argument (each declared length must
fit in the data), requires memo indices in order (as every pickler writes them), and simulates the stack, one
:class:`_Value` per object, to count what unpickling and :func:`~modulecraft.serialization.torch_pickle.materialise`
will cost: opcodes, objects built, how deeply tuples nest (hashing a tuple nested a million deep crashes the
interpreter), and the nodes hashed, unfolded (a key that is a memoised tuple DAG 60 levels deep has 2**60),
those whose hash a file can choose counted apart (see :mod:`~modulecraft.serialization.limits`). Opcodes and the
memory of the objects built (estimated per opcode, :data:`_COSTS`) are bounded by the bytes walked so far, so
checking and then loading cost time and memory linear in the pickle's size; each count is refused as soon as it
passes its limit.
"""

from __future__ import annotations

import pickletools
import struct

from modulecraft.serialization import limits
from modulecraft.serialization.errors import CheckpointError

__all__ = ["check_opcodes"]

_CAP = 2**62  # unfolded sizes saturate here: a list appended to itself doubles at every APPEND


class _Value:
    """What the walk knows of one object on the stack or in the memo: its size unfolded (nodes a hash of it
    visits), the unfolded nodes inside it that are in keys whose hash a file can choose (``chosen``; for a tuple,
    also ``inner``: those of its items alone), how deeply it nests tuples, and, for short strings and globals, a
    tag (the string's bytes, or whether the global hashes its arguments). Containers are changed in place, so an
    object named again from the memo is seen with everything added to it since."""

    __slots__ = ("size", "chosen", "inner", "depth", "tag")

    def __init__(self, size=1, chosen=0, inner=0, depth=0, tag=None):
        self.size, self.chosen, self.inner, self.depth, self.tag = size, chosen, inner, depth, tag


# the globals that hash what they are called on, tagged with what a call makes beyond another call's result
_SET_CALL, _ORDERED_DICT_CALL = "set(): hashes its items", "OrderedDict(): hashes its keys"
_HASHING_CALLABLES = {(b"builtins", b"set"): _SET_CALL, (b"__builtin__", b"set"): _SET_CALL,
                      (b"collections", b"OrderedDict"): _ORDERED_DICT_CALL}
_HASHING_CALL = {_SET_CALL: 128, _ORDERED_DICT_CALL: 0}  # an empty set takes 216 bytes, an OrderedDict 128
_SHORT = 64  # strings up to this long keep their bytes, for STACK_GLOBAL's module and name

# Opcode kinds, to dispatch on small ints.
(_PUSH, _MUTABLE, _BIG_INT, _STRING, _MARK, _PUT, _MEMOIZE, _GET, _DUP, _POP, _POP_MARK, _TUPLE, _LIST, _DICT,
 _FROZENSET, _ADD, _BUILD, _REDUCE, _NEWOBJ, _OBJ, _GLOBAL, _STACK_GLOBAL, _OPAQUE, _STOP, _NOTHING) = range(25)

_KINDS = {
    "INT": _BIG_INT, "LONG": _BIG_INT, "LONG1": _BIG_INT, "LONG4": _BIG_INT,
    "SHORT_BINUNICODE": _STRING, "BINUNICODE": _STRING, "BINUNICODE8": _STRING, "UNICODE": _STRING,
    "STRING": _STRING, "BINSTRING": _STRING, "SHORT_BINSTRING": _STRING,
    "MARK": _MARK, "PUT": _PUT, "BINPUT": _PUT, "LONG_BINPUT": _PUT, "MEMOIZE": _MEMOIZE,
    "GET": _GET, "BINGET": _GET, "LONG_BINGET": _GET, "DUP": _DUP, "POP": _POP, "POP_MARK": _POP_MARK,
    "EMPTY_LIST": _MUTABLE, "EMPTY_DICT": _MUTABLE, "EMPTY_SET": _MUTABLE, "BYTEARRAY8": _MUTABLE,
    "EMPTY_TUPLE": _TUPLE, "TUPLE": _TUPLE, "TUPLE1": _TUPLE, "TUPLE2": _TUPLE, "TUPLE3": _TUPLE,
    "LIST": _LIST, "DICT": _DICT, "FROZENSET": _FROZENSET,
    "APPEND": _ADD, "APPENDS": _ADD, "SETITEM": _ADD, "SETITEMS": _ADD, "ADDITEMS": _ADD,
    "REDUCE": _REDUCE, "NEWOBJ": _NEWOBJ, "NEWOBJ_EX": _NEWOBJ, "BUILD": _BUILD,
    "GLOBAL": _GLOBAL, "STACK_GLOBAL": _STACK_GLOBAL, "INST": _OBJ, "OBJ": _OBJ,
    "EXT1": _OPAQUE, "EXT2": _OPAQUE, "EXT4": _OPAQUE, "PERSID": _OPAQUE, "BINPERSID": _OPAQUE,
    "READONLY_BUFFER": _OPAQUE, "NEXT_BUFFER": _OPAQUE,
    "STOP": _STOP, "PROTO": _NOTHING, "FRAME": _NOTHING,
}
_LENGTHS = {pickletools.TAKEN_FROM_ARGUMENT1: ("<B", 1), pickletools.TAKEN_FROM_ARGUMENT4: ("<i", 4),
            pickletools.TAKEN_FROM_ARGUMENT4U: ("<I", 4), pickletools.TAKEN_FROM_ARGUMENT8U: ("<Q", 8)}
_NONE, _FIXED_SIZE, _COUNTED, _LINES = range(4)  # argument layouts
_FIXED = {"uint1": "<B", "uint2": "<H", "int4": "<i", "uint4": "<I"}  # others are skipped (floats, FRAME)
_KEYED = {"SETITEM", "SETITEMS", "DICT"}  # hash every other item
_SET = {"ADDITEMS", "FROZENSET"}  # hash every item


# What a load holds for each object an opcode builds, in bytes (measured on CPython 3.11, rounded up): the
# unpickled object, the copy materialise() returns and its entry in materialise's table of objects made (an empty
# dict 64 + 64, a set 216 + 216, a tuple 56 + 56, an entry about 100), and, while the pickle is walked, the walk's
# own record of it (80). Every opcode also pays for the slots it fills: on both stacks (the walk's and the
# unpickler's: 16), in both memos (24), a mark (48). None, booleans, ints below 256 and the empty tuple are
# Python's own, made once; other scalars are returned as they are. Strings and bytes add their length (four bytes
# a character at most). Each item an opcode takes adds a slot in both copies (a tuple's: 8 + 8) or a dict's or
# set's entry (pairs: 128); a call's arguments and a persistent id are only read by our code.
# tests/serialization/test_size_bounds.py measures the costliest patterns and asserts the estimate covers them.
_COSTS = {_PUSH: 32, _BIG_INT: 96, _STRING: 96, _MUTABLE: 256, _GET: 16, _DUP: 16, _PUT: 24, _MEMOIZE: 24,
          _MARK: 48, _TUPLE: 224, _LIST: 256, _DICT: 256,
          _FROZENSET: 576, _GLOBAL: 256, _STACK_GLOBAL: 256, _REDUCE: 448, _NEWOBJ: 448, _OBJ: 448, _OPAQUE: 448}
_COSTS_BY_NAME = {"EMPTY_SET": 576, "BYTEARRAY8": 256, "EMPTY_TUPLE": 16,  # Python's own, made once:
                  "NONE": 16, "NEWTRUE": 16, "NEWFALSE": 16, "BININT1": 16}  # None, True, False, ints < 256
_ITEM = 64
_ITEMS = {_TUPLE: 24, _REDUCE: 0, _NEWOBJ: 0, _OPAQUE: 0}  # the cost of each item, where not _ITEM
_HASHED_ITEM = 256  # each node set() or OrderedDict() is called on: a set's entry in both copies, its list's slot


def _table() -> list:
    """Per opcode byte: its name, kind, how its argument is laid out, whether it pops to a mark, how many other
    items it pops (before the mark: e.g. the list APPENDS adds to, which stays on the stack), the bytes of
    memory the object it builds takes and those each item it takes adds (see _COSTS); None for bytes that are
    no opcode."""
    table = [None] * 256
    for opcode in pickletools.opcodes:
        argument = opcode.arg
        if argument is None:
            layout = (_NONE, None, 0)
        elif argument.n == pickletools.UP_TO_NEWLINE:
            layout = (_LINES, None, 2 if argument.name == "stringnl_noescape_pair" else 1)
        elif argument.n in _LENGTHS:
            layout = (_COUNTED, *_LENGTHS[argument.n])
        else:
            layout = (_FIXED_SIZE, _FIXED.get(argument.name), argument.n)
        before = opcode.stack_before
        marked = pickletools.markobject in before
        pops = before.index(pickletools.markobject) if marked else len(before)
        kind = _KINDS.get(opcode.name, _PUSH)
        cost = _COSTS_BY_NAME.get(opcode.name, _COSTS.get(kind, 0))
        table[opcode.code.encode("latin-1")[0]] = (opcode.name, kind, *layout, marked, pops, cost,
                                                    _ITEMS.get(kind, _ITEM))
    return table


_TABLE = _table()


def _tuple_of(items: list[_Value]) -> _Value:
    """A tuple (or frozenset) of ``items``: hashing it hashes them all, and a file can choose its hash."""
    size, inner, depth = 1, 0, 0
    for item in items:
        size += item.size
        inner += item.chosen
        if item.depth > depth:
            depth = item.depth
    size = size if size < _CAP else _CAP
    return _Value(size, size, inner if inner < _CAP else _CAP, depth + 1)


def check_opcodes(data: bytes) -> int:
    """Refuse a pickle that would make C's unpickler allocate big, compute long or crash (see the module); else
    return the memory its objects are estimated to take in a load, in bytes."""
    stack: list[_Value] = []
    marks: list[int] = []
    memo: list[_Value] = []
    scalar = _Value()  # every int, float, bytes, None or bool: never changed, so one value serves them all
    empty = _tuple_of([])  # and every empty tuple
    opcodes = hashed = chosen = spent = 0  # spent: bytes of memory the objects built so far take in a load
    position, end = 0, len(data)
    table, unpack_from = _TABLE, struct.unpack_from
    # the limits at the position last checked: they only grow, so a count below them needs no arithmetic
    opcodes_allowed, memory_allowed = limits.OPCODES, limits.OBJECT_BYTES
    try:
        while True:
            start = position
            name, kind, layout, form, width, marked, pops, cost, item_cost = table[data[position]]
            position += 1
            # the argument, every length checked against the data
            if layout:
                if layout == _FIXED_SIZE:
                    if position + width > end:
                        raise CheckpointError(f"the checkpoint's pickle is damaged (truncated at byte {start})")
                    argument = data[position] if width == 1 else \
                        unpack_from(form, data, position)[0] if form else None
                    position += width
                elif layout == _COUNTED:
                    if position + width > end:
                        raise CheckpointError(f"the checkpoint's pickle is damaged (truncated at byte {start})")
                    length = unpack_from(form, data, position)[0]
                    position += width
                    if length < 0 or position + length > end:
                        raise CheckpointError(f"the checkpoint's pickle is damaged: it declares {length} bytes at "
                                              f"byte {start}, more than it holds")
                    argument = (position, length)
                    position += length
                    cost += 4 * length
                elif layout == _LINES:
                    argument = []
                    for _ in range(width):
                        newline = data.index(b"\n", position)
                        argument.append(data[position:newline])
                        position = newline + 1
                    cost += 4 * (position - start)
            opcodes += 1
            if opcodes > opcodes_allowed:
                opcodes_allowed = limits.OPCODES + int(limits.OPCODES_PER_BYTE * position)
                if opcodes > opcodes_allowed:
                    raise CheckpointError(f"the checkpoint's pickle has {opcodes} opcodes in its first {position} "
                                          f"bytes, more than the opcodes limit ({limits.OPCODES} plus "
                                          f"{limits.OPCODES_PER_BYTE} a byte; torch.save writes at most 0.41 a byte)")
            spent += cost  # with the items the opcode took (added below), checked at the next opcode or STOP
            if spent > memory_allowed:
                memory_allowed = _memory_allowed(spent, position)
            if kind == _GET:
                stack.append(memo[argument if layout == _FIXED_SIZE else int(argument[0])])
                continue
            if kind == _PUT or kind == _MEMOIZE:
                index = len(memo) if kind == _MEMOIZE else argument if layout == _FIXED_SIZE else int(argument[0])
                if index > len(memo):
                    raise CheckpointError(f"the checkpoint's pickle stores memo entry {index} at byte {start} after "
                                          f"only {len(memo)} entries: picklers number them in order")
                if index == len(memo):
                    memo.append(stack[-1])
                else:
                    memo[index] = stack[-1]
                continue
            if kind == _MARK:
                marks.append(len(stack))
                continue
            if kind == _PUSH:  # the commonest objects: no items, no hashing
                stack.append(scalar)
                continue
            if kind == _DUP:
                stack.append(stack[-1])
                continue
            if kind == _NOTHING:
                continue
            # the items the opcode takes: those above its mark, or its last ``pops``
            if marked:
                mark = marks.pop()
                items = stack[mark:]
                del stack[mark:]
            elif pops:
                items = stack[-pops:]
                del stack[-pops:]
            else:
                items = []
            if kind == _POP or kind == _POP_MARK:
                continue
            if kind == _STOP:
                _memory_allowed(spent, position)
                return spent
            if kind == _ADD:  # APPEND(S), SETITEM(S), ADDITEMS: into the container below them, in place
                container = stack[-1] if marked else items.pop(0)
                container.size = min(_CAP, container.size + sum(item.size for item in items))
                container.chosen = min(_CAP, container.chosen + sum(item.chosen for item in items))
                value = None if marked else container
            if name in _KEYED:
                hashed, chosen = _hash(items[0::2], hashed, chosen)
            elif name in _SET:
                hashed, chosen = _hash(items, hashed, chosen)
            spent += item_cost * len(items)
            if kind == _ADD:
                pass
            elif kind == _BUILD:  # sets the state's keys as attributes: hashes them again
                value, state = items
                hashed, chosen = _count(hashed + state.size, chosen + state.chosen)
            elif kind == _MUTABLE:  # an empty list, dict, set or a bytearray, filled in place later
                value = _Value()
            elif kind == _STRING:
                value = _Value()
                if layout == _COUNTED and argument[1] <= _SHORT:
                    value.tag = data[argument[0]:argument[0] + argument[1]]
            elif kind == _BIG_INT:  # ints of 2**56 or more hash as the file chooses
                long = argument[1] >= 8 if layout == _COUNTED else len(argument[0]) >= 17
                value = _Value(chosen=int(long))
            elif kind == _TUPLE and not items:
                value = empty
            elif kind in (_TUPLE, _FROZENSET):
                value = _tuple_of(items)
                if value.depth > limits.NESTING:
                    raise CheckpointError(f"the checkpoint's pickle nests tuples more than {limits.NESTING} deep at "
                                          f"byte {start} (the nesting limit)")
            elif kind in (_LIST, _DICT):  # unhashable: only its items' chosen nodes matter, to set() or OrderedDict()
                value = _Value(min(_CAP, 1 + sum(item.size for item in items)),
                               min(_CAP, sum(item.chosen for item in items)))
            elif kind == _GLOBAL:
                value = _Value(tag=_HASHING_CALLABLES.get(tuple(argument)))
            elif kind == _STACK_GLOBAL:
                value = _Value(tag=_HASHING_CALLABLES.get((items[0].tag, items[1].tag)))
            else:  # _OPAQUE, or a call's result: made by our code (a storage, a tensor, a number), one node
                if kind in (_REDUCE, _NEWOBJ) and items[0].tag in _HASHING_CALL:  # set(items), OrderedDict(pairs)
                    hashed, chosen = _count(hashed + items[1].size, chosen + items[1].inner)
                    spent += _HASHING_CALL[items[0].tag] + _HASHED_ITEM * (items[1].size - 1)  # not the tuple
                elif kind == _OBJ:  # OBJ: the callable, then its arguments; INST names it in its argument
                    callable_tag = items.pop(0).tag if name == "OBJ" else \
                        _HASHING_CALLABLES.get(tuple(argument))
                    if callable_tag in _HASHING_CALL:
                        hashed, chosen = _hash(items, hashed, chosen)
                        spent += _HASHING_CALL[callable_tag] + _HASHED_ITEM * len(items)
                value = _Value(chosen=1)
            if value is not None:
                stack.append(value)
    except CheckpointError:
        raise
    except Exception as error:  # running off the data or the stack, a bad memo index: a malformed pickle
        raise CheckpointError(f"the checkpoint's pickle is damaged ({type(error).__name__}: {error})") from None


def _memory_allowed(spent: int, position: int) -> int:
    """The memory the objects built in the first ``position`` bytes may take, if ``spent`` is within it."""
    allowed = min(limits.OBJECT_BYTES_MOST, limits.OBJECT_BYTES + limits.OBJECT_BYTES_PER_BYTE * position)
    if spent > allowed:
        raise CheckpointError(f"the checkpoint's pickle builds objects taking about {spent // 2**20} MB in its "
                              f"first {position} bytes, more than the object memory limit "
                              f"({limits.OBJECT_BYTES // 2**20} MB plus {limits.OBJECT_BYTES_PER_BYTE} bytes per "
                              f"byte of pickle, at most {limits.OBJECT_BYTES_MOST // 2**20} MB; torch.save's "
                              "state_dicts take at most 43 bytes per byte)")
    return allowed


def _hash(keys: list[_Value], hashed: int, chosen: int) -> tuple[int, int]:
    return _count(hashed + sum(key.size for key in keys), chosen + sum(key.chosen for key in keys))


def _count(hashed: int, chosen: int) -> tuple[int, int]:
    if hashed > limits.HASHED_NODES:
        raise CheckpointError(f"the checkpoint's pickle hashes more than {limits.HASHED_NODES} nodes of dict keys "
                              "and set items, counted unfolded (the hashed nodes limit): a memoised tuple named "
                              "again and again inside a key is hashed whole each time")
    if chosen > limits.CHOSEN_HASH_NODES:
        raise CheckpointError(f"the checkpoint's pickle has more than {limits.CHOSEN_HASH_NODES} nodes in dict keys or "
                              "set items whose hash a file can choose (tuples, complex numbers, ints of 2**56 or "
                              "more: the chosen hashes limit); keys that all collide would cost time growing with "
                              "the square of their number")
    return hashed, chosen
