"""Views, indexing, joining and copies: ``reshape``, ``transpose``/``T``, ``[]``, ``concatenate``, ``where``...

Results that share memory with their input (reshape of a contiguous array, transpose, basic indexing) are
recorded views: they share the input's version counter, so an in-place change through either is seen.
One ``__getitem__`` records one node, named after the last index that does something (``x[0]``:
``SelectBackward0``, ``x[1:3]``: ``SliceBackward0``, ``x[None]``: ``UnsqueezeBackward0``, arrays or masks:
``IndexBackward0``); torch records one node per indexed dimension. ``reshape`` always records
``ViewBackward0`` (torch records ``UnsafeViewBackward0`` and ``CloneBackward0`` when it must copy).
"""

from __future__ import annotations

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.graph import Node
from modulecraft.autograd.engine import unbroadcast
from modulecraft.autograd.ops.registry import implements
from modulecraft.autograd.tensor import (Tensor, _refuse_graph_write, edges, is_tracked, plain, result, save,
                                         set_grad_fn, unwrap_key, version_counter, view_chain)

__all__ = []


def _view_result(raw_out, raw_in, node, a):
    """The result of a shaping op: a recorded view of ``a`` when numpy gave a view, else a new tensor."""
    return result(raw_out, node, view_of=a if np.may_share_memory(raw_out, raw_in) else None)


class _Reshaped(Node):
    """Backward puts the gradient back into the input's ``shape``."""

    __slots__ = ("shape",)

    def backward(self, grad):
        return (np.reshape(grad, self.shape),)


class ViewBackward0(_Reshaped):
    __slots__ = ()


class SqueezeBackward0(_Reshaped):
    __slots__ = ()


class UnsqueezeBackward0(_Reshaped):
    __slots__ = ()


def _reshaped(node_class, a, function, *args, **kwargs):
    raw = plain(a)
    node = node_class(edges((a,)))
    node.shape = np.shape(raw)
    return _view_result(function(raw, *args, **kwargs), raw, node, a)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    return _reshaped(ViewBackward0, a, np.reshape, newshape if shape is None else shape, order=order)


@implements(np.ravel)
def ravel(a, order="C"):
    return _reshaped(ViewBackward0, a, np.ravel, order=order)


@implements(np.squeeze)
def squeeze(a, axis=None):
    return _reshaped(SqueezeBackward0, a, np.squeeze, axis=axis)


@implements(np.expand_dims)
def expand_dims(a, axis):
    return _reshaped(UnsqueezeBackward0, a, np.expand_dims, axis)


class PermuteBackward0(Node):
    __slots__ = ("axes",)

    def backward(self, grad):
        return (np.transpose(grad, np.argsort(self.axes)),)


class TransposeBackward0(Node):
    __slots__ = ("axis1", "axis2")

    def backward(self, grad):
        return (np.swapaxes(grad, self.axis1, self.axis2),)


@implements(np.transpose)
def transpose(a, axes=None):
    raw = plain(a)
    node = PermuteBackward0(edges((a,)))
    node.axes = tuple(range(raw.ndim))[::-1] if axes is None else tuple(axes)
    return result(np.transpose(raw, axes), node, view_of=a)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    raw = plain(a)
    node = TransposeBackward0(edges((a,)))
    node.axis1, node.axis2 = axis1, axis2
    return result(np.swapaxes(raw, axis1, axis2), node, view_of=a)


def _is_advanced(index) -> bool:
    return isinstance(index, (np.ndarray, list)) or (isinstance(index, np.generic) and index.dtype == bool)


class _IndexNode(Node):
    __slots__ = ("shape", "dtype", "key")

    def backward(self, grad):
        full = np.zeros(self.shape, dtype=np.result_type(self.dtype, grad))
        full[self.key] = grad
        return (full,)


class SelectBackward0(_IndexNode):
    __slots__ = ()


class SliceBackward0(_IndexNode):
    __slots__ = ()


class IndexBackward0(_IndexNode):
    """Integer arrays may repeat an element: its gradients are added up (``np.add.at``). The index is a saved
    value, as torch saves its index tensors: backward a second time without ``retain_graph`` raises."""

    __slots__ = ()

    def backward(self, grad):
        (key,) = self.saved_values()
        full = np.zeros(self.shape, dtype=np.result_type(self.dtype, grad))
        np.add.at(full, key, grad)
        return (full,)


def _index_node_class(key):
    parts = key if isinstance(key, tuple) else (key,)
    if any(_is_advanced(part) for part in parts):
        return IndexBackward0
    acting = [part for part in parts if part is not Ellipsis and part != slice(None)]
    if not acting:
        return SliceBackward0
    last = acting[-1]
    if last is None:
        return UnsqueezeBackward0
    return SliceBackward0 if isinstance(last, slice) else SelectBackward0


def _index_node(a: Tensor, key) -> Node:
    """The node recording ``a[key]``."""
    raw = a.view(np.ndarray)
    node_class = _index_node_class(key)
    node = node_class(edges((a,)))
    if node_class is UnsqueezeBackward0:
        node.shape = raw.shape
    else:
        node.shape, node.dtype = raw.shape, raw.dtype
        if node_class is IndexBackward0:
            node._saved = (key,)
        else:
            node.key = key
    return node


def getitem(a: Tensor, key):
    key = unwrap_key(key)
    raw = a.view(np.ndarray)
    out = _view_result(raw[key], raw, _index_node(a, key), a)
    if out._view_base is not None:
        out._view_index = key if type(key) is tuple else (key,)
    return out


class CopySlices(Node):
    """``tensor[key] = value`` on a tensor in a graph: the old values' gradient loses the written part.

    After an in-place change of a view of the tensor (``fn``: the node of that change, recorded on the view's old
    value, input ``own`` of it), as torch's: the part of the gradient under the view goes through ``fn``, whose
    gradient for the view's old value takes that part's place; ``fn``'s other gradients go to its other inputs.
    The view's old node thus no longer runs (nor its hooks). ``keys``: the indexing from the tensor to the part
    written; ``value_shape``: the shape of the value written (without ``fn``).
    """

    __slots__ = ("keys", "value_shape", "fn", "own")

    def __init__(self, next_functions: tuple, keys: tuple, value_shape: tuple | None = None, fn: Node | None = None,
                 own: int | None = None) -> None:
        super().__init__(next_functions)
        self.keys, self.value_shape, self.fn, self.own = keys, value_shape, fn, own

    def backward(self, grad):
        if self.fn is None:
            (old, _), (value, _) = self.next_functions
            grad_old = grad_value = None
            if old is not None:
                grad_old = np.array(grad, copy=True)
                holder, key = _holder(grad_old, self.keys)
                holder[key] = 0
            if value is not None:
                holder, key = _holder(np.asarray(grad), self.keys)
                grad_value = unbroadcast(holder[key], self.value_shape)
            return grad_old, grad_value
        result = np.array(grad, copy=True)
        holder, key = _holder(result, self.keys)
        grads = list(self.fn.apply([np.array(holder[key], copy=True)]))
        own = grads.pop(self.own) if self.own is not None else None
        holder[key] = 0 if own is None else own
        return (result, *grads)

    def release_saved(self) -> None:
        super().release_saved()
        if self.fn is not None:
            self.fn.release_saved()


def _holder(array: np.ndarray, keys: tuple) -> tuple:
    """``(holder, key)``: ``holder[key]`` is ``array`` indexed with each of ``keys`` in turn (views until the last
    key, so that ``holder[key] = ...`` writes into ``array``, also where the last gives a 0-d value)."""
    for key in keys[:-1]:
        array = array[key]
    return array, keys[-1]


def setitem(a: Tensor, key, value) -> None:
    """``a[key] = value``: a data write, or a recorded one when ``a`` is in a graph or ``value`` requires grad."""
    key = unwrap_key(key)
    raw = a.view(np.ndarray)
    _refuse_graph_write(a, value)
    # A leaf that requires grad takes any value as a plain data write (see the tensor module's docstring).
    data_write_into_leaf = a._grad_fn is None and a._requires_grad
    recording = grad_mode.state.enabled and (a._grad_fn is not None
                                             or (is_tracked(value) and not data_write_into_leaf))
    if recording:
        node = CopySlices(edges((a, value)), (key,), np.shape(value))
    raw[key] = plain(value)
    version_counter(a)[0] += 1
    if recording:
        if a._view_base is not None:
            rebase_view(a, node)
        else:
            set_grad_fn(a, node)


def rebase_view(view: Tensor, node: Node) -> None:
    """``view``, taken by indexing from a tensor in a graph, was changed in place and now holds the output of
    ``node``: record the change on the tensor the chain of views starts from (torch's ``CopySlices``, which runs
    ``node`` itself), and read the view (and the views between) back from that tensor's new value.

    ``_refuse_graph_write`` has checked that every view of the chain was made by indexing.
    """
    chain = view_chain(view)
    base = chain[-1]._view_base
    # node's input that was the view's old value (none when the view was in no graph: its gradient goes nowhere)
    own = node.next_functions.index((view._grad_fn, view._output_nr)) if view._grad_fn is not None else None
    others = tuple(edge for index, edge in enumerate(node.next_functions) if index != own)
    keys = tuple(link._view_index for link in reversed(chain))
    set_grad_fn(base, CopySlices(edges((base,)) + others, keys, fn=node, own=own))
    regenerate_view(view)


def regenerate_view(view: Tensor) -> Node:
    """Read ``view`` (and the views between) again from the current value of the tensor it was taken from,
    after that tensor changed in place (torch replays the view the same way); return its new ``grad_fn``.

    Only views made by indexing can be replayed: numpy views made otherwise do not record how.
    """
    chain = view_chain(view)
    if any(link._view_index is None for link in chain):
        raise NotImplementedError(
            "modulecraft cannot use this view in a graph any more: the tensor it was taken from was changed in "
            "place since, and only views made by indexing (y[0:2]) can be read again from its new value; take "
            "the view (reshape, transpose...) after the in-place change")
    for link in reversed(chain):
        set_grad_fn(link, _index_node(link._view_base, link._view_index))
    return view._grad_fn


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """``np.copyto(dst, src)`` is ``dst[...] = src`` (torch's ``copy_``), recorded the same way."""
    if where is not True:
        raise NotImplementedError("numpy.copyto with where= is not differentiable in modulecraft")
    if not np.can_cast(np.result_type(plain(src)), np.result_type(plain(dst)), casting=casting):
        raise TypeError(f"Cannot cast array data from {np.result_type(plain(src))} to {np.result_type(plain(dst))} "
                        f"according to the rule {casting!r}")
    if not isinstance(dst, Tensor):
        raise RuntimeError("copyto(): writing a value that requires grad into a plain ndarray would lose its "
                           "gradient; copy into a modulecraft.Tensor, or detach() the value")
    setitem(dst, Ellipsis, src)


class CatBackward0(Node):
    __slots__ = ("axis", "sizes")

    def backward(self, grad):
        return tuple(np.split(grad, np.cumsum(self.sizes)[:-1], axis=self.axis))


class StackBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, grad):
        return tuple(np.moveaxis(grad, self.axis, 0))


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, **kwargs):
    if out is not None or axis is None or kwargs:
        raise NotImplementedError("numpy.concatenate is differentiable in modulecraft only with an integer axis")
    raw = [np.asarray(plain(x)) for x in arrays]
    node = CatBackward0(edges(arrays))
    node.axis = axis
    node.sizes = [x.shape[axis] for x in raw]
    return result(np.concatenate(raw, axis=axis), node)


@implements(np.stack)
def stack(arrays, axis=0, out=None, **kwargs):
    if out is not None or kwargs:
        raise NotImplementedError("numpy.stack is differentiable in modulecraft only without out= or dtype=")
    raw = [np.asarray(plain(x)) for x in arrays]
    stacked = np.stack(raw, axis=axis)
    node = StackBackward0(edges(arrays))
    node.axis = axis % stacked.ndim
    return result(stacked, node)


class WhereBackward0(Node):
    __slots__ = ("shapes",)

    def backward(self, grad):
        (condition,) = self.saved_values()
        (first, _), (second, _) = self.next_functions
        shape_x, shape_y = self.shapes
        return (unbroadcast(np.where(condition, grad, 0), shape_x) if first is not None else None,
                unbroadcast(np.where(condition, 0, grad), shape_y) if second is not None else None)


@implements(np.where)
def where(condition, *values):
    if len(values) != 2:
        return np.where(plain(condition), *plain(values))
    raw_condition = np.asarray(plain(condition))
    node = WhereBackward0(edges(values))
    node.shapes = tuple(np.shape(v) for v in values)
    save(node, (), (raw_condition,))
    return result(np.where(raw_condition, *plain(values)), node)


class ToCopyBackward0(Node):
    __slots__ = ("dtype",)

    def backward(self, grad):
        return (np.asarray(grad).astype(self.dtype, copy=False),)


class CloneBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        return (grad,)


def astype(a: Tensor, dtype, order="K", casting="unsafe", copy=True):
    raw = a.view(np.ndarray)
    dtype = np.dtype(dtype)
    if dtype == raw.dtype and not copy:
        return a
    if dtype.kind not in "fc":
        return raw.astype(dtype, order=order, casting=casting)
    node = ToCopyBackward0(edges((a,)))
    node.dtype = raw.dtype
    return result(raw.astype(dtype, order=order, casting=casting), node)


@implements(np.copy)
def copy(a, order="K", subok=False):
    node = CloneBackward0(edges((a,)))
    return result(np.array(plain(a), order=order, copy=True), node)
