"""The graph backward walks: nodes (``grad_fn``), their edges, hooks and saved values (torch.autograd.graph).

Every operation that records creates one :class:`Node`. Its ``next_functions`` holds one edge per input,
``(node, output_nr)``: the node that produced that input (``AccumulateGrad`` for a leaf that requires grad)
and which of that node's outputs it was, or ``(None, 0)`` for an input that needs no gradient. A node's
``apply`` receives the gradients of its outputs and returns one gradient per edge.

Gradients travelling through the graph are plain ``np.ndarray`` (or numpy scalars for 0-d values): backward
never records a graph of its own, which is also why ``create_graph=True`` is not supported.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections import OrderedDict

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.utils.hooks import RemovableHandle

__all__ = ["Node", "AccumulateGrad"]

_sequence_numbers = itertools.count()
_FREED = object()  # what ``Node._saved`` becomes once backward released the saved values

FREED_GRAPH_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward.")


class _NodeHooks:
    """The hook tables of one node, created on first registration so that plain nodes stay small."""

    __slots__ = ("pre_hooks", "hooks", "tensor_pre_hooks", "retains_grad")

    def __init__(self) -> None:
        self.pre_hooks: OrderedDict = OrderedDict()  # fn(grad_outputs) -> None or replacement
        self.hooks: OrderedDict = OrderedDict()  # fn(grad_inputs, grad_outputs) -> None or replacement
        self.tensor_pre_hooks: OrderedDict = OrderedDict()  # id -> (output_nr, fn(grad) -> None or grad)
        self.retains_grad: dict = {}  # output_nr -> weak reference to the tensor whose .grad is kept


class Node:
    """A recorded operation; ``name()`` is torch's node name (the class name, e.g. ``MulBackward0``).

    Subclasses with one output implement ``backward(grad)``; ``apply(grads)`` (one gradient per output, in
    order) is what the engine calls. Values needed by backward are kept in ``_saved`` with the version of
    each tensor they came from (``_versions``: pairs of version counter and expected version), so that an
    in-place change made after recording is detected instead of giving a wrong gradient.
    """

    __slots__ = ("next_functions", "_sequence_nr", "_saved", "_versions", "_hook_tables", "_shapes", "__weakref__")

    num_outputs = 1

    def __init__(self, next_functions: tuple) -> None:
        self.next_functions = next_functions
        self._sequence_nr = next(_sequence_numbers)
        self._saved = None
        self._versions = ()
        self._hook_tables = None
        self._shapes = None  # the shape of each output, recorded with it (torch's input_metadata)

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def saved_values(self) -> tuple:
        """The values saved for backward, after checking they are still there and unmodified."""
        saved = self._saved
        if saved is _FREED:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        for counter, expected in self._versions:
            if counter[0] != expected:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: it is needed by {self.name()} and is at version {counter[0]}; expected version "
                    f"{expected} instead. Hint: the in-place change was made after the operation was recorded; "
                    "do it on a copy, or before.")
        return saved

    def gradient_shape(self, output_nr: int) -> tuple | None:
        """The shape a gradient for output ``output_nr`` must have: that output's (None if never recorded)."""
        shapes = self._shapes
        return None if shapes is None else shapes[output_nr]

    def release_saved(self) -> None:
        """Drop the saved values (backward without ``retain_graph``); a second backward then raises."""
        if self._saved is not None:
            self._saved = _FREED

    def apply(self, grads: list) -> tuple:
        return self.backward(grads[0])

    def backward(self, grad):
        raise NotImplementedError(f"{self.name()} does not implement backward")

    def __call__(self, *grads, **kwargs):
        """This node alone (no hooks) on one gradient per output, as torch's ``grad_fn(*grads)``: one gradient per
        edge of ``next_functions``, a single one unwrapped. The gradients are plain arrays, as in backward."""
        if kwargs:
            raise TypeError("keyword arguments are not supported")
        if len(grads) != self.num_outputs:
            raise TypeError(f"expected {self.num_outputs} arguments, got {len(grads)} instead")
        for index, grad in enumerate(grads):
            if grad is not None and not isinstance(grad, np.ndarray):
                raise TypeError(f"argument {index} is not a Variable")
        if all(grad is None for grad in grads):
            gradients = (None,) * len(self.next_functions)
        else:
            with grad_mode.no_grad():
                gradients = self.apply([None if grad is None else np.asarray(grad) for grad in grads])
        return gradients[0] if len(gradients) == 1 else tuple(gradients)

    def _hooks(self) -> _NodeHooks:
        if self._hook_tables is None:
            self._hook_tables = _NodeHooks()
        return self._hook_tables

    def register_hook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_inputs, grad_outputs)`` after this node ran; a tuple returned replaces grad_inputs.

        As in torch, ``grad_inputs`` are the gradients this node computed (one per ``next_functions`` edge)
        and ``grad_outputs`` the gradients it received.
        """
        table = self._hooks().hooks
        handle = RemovableHandle(table)
        table[handle.id] = fn
        return handle

    def register_prehook(self, fn) -> RemovableHandle:
        """Call ``fn(grad_outputs)`` before this node runs; a tuple returned replaces grad_outputs."""
        table = self._hooks().pre_hooks
        handle = RemovableHandle(table)
        table[handle.id] = fn
        return handle

    def _register_tensor_hook(self, output_nr: int, fn) -> RemovableHandle:
        table = self._hooks().tensor_pre_hooks
        handle = RemovableHandle(table)
        table[handle.id] = (output_nr, fn)
        return handle

    def _tensor_pre_hooks(self):
        """(output_nr, fn) pairs of the hooks registered on this node's output tensors, in order."""
        tables = self._hook_tables
        return () if tables is None else tables.tensor_pre_hooks.values()


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the gradient it receives into ``variable.grad``.

    It runs first among the nodes that are ready (torch gives it the highest priority). The first gradient
    becomes ``.grad`` as it is when nothing else can see it (see :func:`_adoptable`), as torch "steals" it;
    otherwise it is copied (it may be the caller's array, kept by a hook, or shared with another node), into
    the leaf's own memory layout as torch lays out ``.grad`` like its parameter. Later ones are added in place.
    The gradient has the leaf's shape: the engine summed it to that shape, or refused it (``validate_outputs``).
    Hooks registered on the leaf tensor run just before, as this node's tensor pre-hooks; its post-accumulate
    hooks run right after the addition.
    """

    __slots__ = ("variable",)

    def __init__(self, variable) -> None:
        Node.__init__(self, ())
        self._sequence_nr = sys.maxsize
        self.variable = variable

    def gradient_shape(self, output_nr: int) -> tuple:
        return self.variable.shape

    def backward(self, grad):
        variable = self.variable
        grad = np.asarray(grad)
        existing = variable._grad
        if existing is None:
            if sys.getrefcount(grad) <= _UNSHARED_GRADIENT and _adoptable(grad, variable):
                variable._grad = grad
            else:
                # Allocated from a plain view: np.empty_like(variable) would go through Tensor's numpy dispatch.
                variable._grad = np.empty_like(variable.view(np.ndarray))
                np.copyto(variable._grad, grad, casting="unsafe")
        else:
            np.add(existing, grad, out=existing, casting="unsafe")
        if variable._post_accumulate_grad_hooks is not None:
            for hook in tuple(variable._post_accumulate_grad_hooks.values()):
                returned = hook(variable)
                if returned is not None:
                    if not isinstance(returned, np.ndarray):
                        raise TypeError(f"expected Variable, but hook returned '{type(returned).__name__}'")
                    raise RuntimeError("Tensor post accumulate grad hooks should return None.")
        return ()

    def _tensor_pre_hooks(self):
        hooks = self.variable._backward_hooks
        return () if hooks is None else [(0, fn) for fn in hooks.values()]


def _counts_when_unshared() -> tuple[int, int]:
    """What sys.getrefcount reports for an array no one else holds, in the pattern of AccumulateGrad.backward
    (a gradient held by the engine's list of a node's incoming gradients: 3 on Python 3.11, for that list,
    the argument and getrefcount's own) and of _adoptable (the array owning a view's memory, held by that view).

    Measured once rather than written down: how an argument is counted differs between Python versions (3.10
    also counts the caller's stack; newer versions may borrow references).
    """
    def gradient(grad):
        grad = np.asarray(grad)
        return sys.getrefcount(grad)

    def owner(view):
        owner = view.base
        return sys.getrefcount(owner)

    incoming = [np.empty(1)]
    return gradient(incoming[0]), owner(np.empty(2)[:1])


_UNSHARED_GRADIENT, _UNSHARED_OWNER = _counts_when_unshared()


def _adoptable(grad: np.ndarray, variable) -> bool:
    """Whether ``grad``, referenced by the engine alone, may become ``variable.grad`` without a copy.

    torch adopts a gradient that no other tensor uses and that is laid out like the variable. A numpy
    gradient may also be a view (``TBackward0`` returns ``grad.T``): then the array owning the memory must
    be referenced by that view alone, else a later in-place ``+=`` into ``.grad`` would change another array.
    """
    if type(grad) is not np.ndarray or not grad.flags.writeable or grad.dtype != variable.dtype \
            or grad.strides != variable.strides:
        return False
    owner = grad.base
    return owner is None or (type(owner) is np.ndarray and owner.base is None
                             and sys.getrefcount(owner) <= _UNSHARED_OWNER)


def weak_accumulator(variable) -> AccumulateGrad:
    """The leaf's ``AccumulateGrad`` node: the same object for as long as some graph holds it (as torch)."""
    ref = variable._grad_accumulator
    node = None if ref is None else ref()
    if node is None:
        node = AccumulateGrad(variable)
        variable._grad_accumulator = weakref.ref(node)
    return node
