"""``Tensor``: an ``np.ndarray`` that records the operations done on it (torch's ``torch.Tensor`` + autograd).

A Tensor is an ndarray subclass, so numpy functions, operators and code written for arrays keep working.
Operations reach us through numpy's hooks (``__array_ufunc__`` for ``+ * exp maximum`` and the like,
``__array_function__`` for ``np.sum``, ``np.concatenate``...) and through the ndarray methods that bypass
them (``reshape``, ``transpose``, ``T``, ``sum``, ``__getitem__``...), all overridden here.

* When grad mode is on and an input requires grad, the result is a new ``Tensor`` with a ``grad_fn`` (a
  :class:`~modulecraft.autograd.graph.Node`); a Parameter's arithmetic gives a Tensor, never a Parameter.
* Otherwise the result is a plain ``np.ndarray``: data that does not take part in a graph stays ordinary
  numpy data (torch would return a Tensor without ``grad_fn``; numpy users expect arrays).
* A numpy operation with no gradient rule here raises ``NotImplementedError`` ("... is not differentiable in
  modulecraft") when it would need to record, instead of silently cutting the graph. Results that cannot
  carry a gradient (comparisons, ``argmax``, ``shape``...) are returned as plain data.
* ``.grad`` is a plain ``np.ndarray`` (torch's is a Tensor): gradients never record a graph.

In-place changes bump a version counter, shared by a tensor and the views recorded from it: in-place ufuncs
(``out=``, ``+=``), ``__setitem__``, ``fill``. Backward compares it with the version each saved value had
and raises torch's error when they differ. What numpy does not show us cannot be counted: writes through a
plain ``np.ndarray`` view (``np.asarray(t)[0] = 1``, ``t.data[...] = 0``) and in-place changes of plain
ndarrays used in a graph; such writes change the gradient silently, as ``.data`` writes do in torch.
Likewise, numpy converts a *list* of tensors to a plain array without asking us (``np.array([a, b])``,
``np.add([a, b], 1)``), and so does assigning a tensor into a plain array (``array[0] = t``): the result has
no graph; ``np.stack([a, b])`` records one. An in-place ufunc on a plain array with a tensor that requires
grad (``array += t``) is refused: torch would make the plain tensor part of the graph, a numpy array cannot be.
An in-place change of a view made by indexing (``y[0:2] += 1``, ``y[1][0] = t``) is recorded on the tensor
it was taken from, as torch's ``CopySlices``, and the view is read back from that tensor's new value (so is
a view used after the tensor it was taken from changed in place). A view made otherwise (``reshape``,
``transpose``) of a tensor in a graph may not be changed in place, nor used after that tensor was: numpy
does not record how to replay it.
Assigning into a leaf that requires grad (``p[...] = values``, ``p[0] = 1``, ``p.fill(0)``) is a data write
even with grad mode on (torch raises "a leaf Variable that requires grad is being used in an in-place
operation" unless under ``no_grad``): existing array code initialises, converts and loads parameters that
way. In-place arithmetic on such a leaf (``p -= lr * p.grad`` outside ``no_grad``) raises torch's error.
"""

from __future__ import annotations

import copy as _copy
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.engine import backward
from modulecraft.autograd.graph import Node, weak_accumulator
from modulecraft.autograd.ops.registry import FUNCTIONS, UFUNCS
from modulecraft.utils.hooks import RemovableHandle

__all__ = ["Tensor", "tensor"]

NO_EDGE = (None, 0)
_grad_state = grad_mode.state


class Tensor(np.ndarray):
    """An ndarray with autograd state: ``requires_grad``, ``grad``, ``grad_fn``, ``is_leaf``, ``backward()``.

    ``Tensor(data, requires_grad=False)`` wraps ``data`` (sharing memory with an ndarray);
    :func:`tensor` copies, as ``torch.tensor`` does. Hashing is by identity, as torch's.
    """

    # Defaults live on the class, so views and results cost nothing until a value is set on the instance.
    _requires_grad = False
    _grad_fn = None
    _output_nr = 0
    _grad = None
    _vc = None  # version counter: a one-element list shared with recorded views
    _view_base = None  # the tensor a recorded view was taken from
    _view_index = None  # for a view made by basic indexing: the index (a tuple) that takes it from _view_base
    _function_output = None  # (output_nr, Function name, version then) for an input a Function returned as is
    _grad_accumulator = None  # weak reference to the AccumulateGrad node of a leaf
    _backward_hooks = None
    _post_accumulate_grad_hooks = None
    _retains_grad = False

    __hash__ = object.__hash__

    def __new__(cls, data=(), requires_grad: bool = False):
        self = np.asarray(data).view(cls)
        if requires_grad:
            self.requires_grad = True
        return self

    # ---- autograd state -------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._grad_fn is not None:
            if not value:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
            return
        if value and self.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and self.dtype.kind not in "fc":  # the setter says "floating point and complex dtype"
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self) -> Node | None:
        """The node that produced this tensor (None for leaves)."""
        if self._view_base is not None and _stale(self):
            _ops().shaping.regenerate_view(self)
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for leaves)."""
        return self._output_nr

    @property
    def is_leaf(self) -> bool:
        """True unless the tensor is the recorded result of an operation (then it has a ``grad_fn``)."""
        return self._grad_fn is None

    @property
    def grad(self) -> np.ndarray | None:
        """The accumulated gradient (a plain ``np.ndarray``), or None before the first backward."""
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor "
                "by mistake, make sure you access the leaf Tensor instead.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            value = np.asarray(value)
            if value.shape != self.shape:
                raise RuntimeError("assigned grad has data of a different size")
            if value.dtype != self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def _version(self) -> int:
        """How many in-place changes this tensor (or a view recorded from it) has had."""
        return version_counter(self)[0]

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf tensor in ``.grad`` during backward (a no-op on leaves)."""
        if self._grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if not self._retains_grad:
            self._grad_fn._hooks().retains_grad[self._output_nr] = weakref.ref(self)
            self._retains_grad = True

    def _retain(self, grad) -> None:
        """Called by the engine for a tensor that ``retain_grad()``: keep (or add) the gradient it got."""
        self._grad = np.array(grad, copy=True) if self._grad is None else self._grad + grad

    def register_hook(self, hook) -> RemovableHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned array replaces it."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            return self._grad_fn._register_tensor_hook(self._output_nr, hook)
        if self._backward_hooks is None:
            self._backward_hooks = OrderedDict()
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook) -> RemovableHandle:
        """Call ``hook(tensor)`` on this leaf once backward has added into its ``.grad``."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_accumulate_grad_hooks is None:
            self._post_accumulate_grad_hooks = OrderedDict()
        handle = RemovableHandle(self._post_accumulate_grad_hooks)
        self._post_accumulate_grad_hooks[handle.id] = hook
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Compute the gradient of this tensor with respect to the leaves and add it into their ``.grad``.

        ``gradient`` is required unless the tensor has one element; ``retain_graph=True`` keeps the saved
        values for a second backward; with ``inputs``, only those accumulate (see ``autograd.backward``).
        ``create_graph=True`` (higher-order gradients) is not supported.
        """
        backward(self, None if gradient is None else (gradient,), retain_graph, create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's memory (and version counter) that does not require grad."""
        detached = self.view(np.ndarray).view(Tensor)
        detached._vc = version_counter(self)
        return detached

    def detach_(self) -> Tensor:
        """Make this tensor a leaf that does not require grad."""
        if self._view_base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> Tensor:  # type: ignore[override]
        """The values as a Tensor that shares memory and does not require grad (shadows ndarray's buffer)."""
        return self.view(np.ndarray).view(Tensor)

    @data.setter
    def data(self, value) -> None:
        if not isinstance(value, (np.ndarray, np.generic)):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        value = np.asarray(value)
        if value.shape != self.shape or value.dtype != self.dtype:
            raise RuntimeError("modulecraft can only assign .data of the same shape and dtype "
                               f"({self.shape}, {self.dtype}); got ({value.shape}, {value.dtype})")
        self.view(np.ndarray)[...] = value

    def numpy(self) -> np.ndarray:
        """The values as a plain ndarray sharing memory (refused while the tensor requires grad, as torch)."""
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        return self.view(np.ndarray)

    def __delattr__(self, name: str) -> None:
        refused = _UNDELETABLE.get(name)
        if refused is not None:
            raise RuntimeError(refused)
        super().__delattr__(name)

    def _edge(self) -> tuple:
        """The graph edge through which a gradient reaches this tensor."""
        fn = self._grad_fn
        if fn is not None:
            if self._view_base is not None and _stale(self):
                fn = _ops().shaping.regenerate_view(self)
            elif self._function_output is not None:
                _check_function_view(self)
            return (fn, self._output_nr)
        ref = self._grad_accumulator  # inlined weak_accumulator: this runs for every leaf of every operation
        node = None if ref is None else ref()
        return (weak_accumulator(self) if node is None else node, 0)

    # ---- representation, copying, pickling -----------------------------------------------------------
    def __repr__(self) -> str:
        text = repr(self.view(np.ndarray))
        text = "tensor(" + text[len("array("):-1].replace("\n      ", "\n       ")
        if self._grad_fn is not None:
            text += f", grad_fn=<{self._grad_fn.name()}>"
        elif self._requires_grad:
            text += ", requires_grad=True"
        return text + ")"

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        result = type(self).__new__(type(self), np.array(self.view(np.ndarray), copy=True))
        result._requires_grad = self._requires_grad
        if self._grad is not None:
            result._grad = _copy.deepcopy(self._grad, memo)
        return result

    def __reduce_ex__(self, protocol):
        return _rebuild_tensor, (type(self), np.array(self.view(np.ndarray)), self._requires_grad)

    # ---- numpy's dispatch -------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = []
        tracked = False
        for x in inputs:
            if isinstance(x, Tensor):
                if x._requires_grad:
                    tracked = True
                x = x.view(np.ndarray)
            raw.append(x)
        out = kwargs.pop("out", None)
        recording = tracked and _grad_state.enabled
        if out is not None:
            return _ufunc_into(ufunc, method, inputs, raw, out, kwargs, recording)
        if not recording:
            return getattr(ufunc, method)(*raw, **kwargs)
        rule = UFUNCS.get(ufunc) if method == "__call__" and not kwargs else None
        if rule is None:
            return _without_gradient(f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"),
                                     getattr(ufunc, method)(*raw, **kwargs))
        return rule(inputs, raw)

    def __pow__(self, exponent):
        """``np.power``: ndarray's ``**`` takes shortcuts for some exponents (``-1`` computes ``np.reciprocal``,
        ``0.5`` ``np.sqrt``), which would record nodes torch's ``**`` never records (it records ``PowBackward0``)."""
        return np.power(self, exponent)

    def __ipow__(self, exponent):
        return np.power(self, exponent, out=(self,))

    def __array_function__(self, func, types, args, kwargs):
        plain_kwargs = {key: plain(value) for key, value in kwargs.items()} if kwargs else kwargs
        if _grad_state.enabled and _any_tracked(args, kwargs):
            rule = FUNCTIONS.get(func)
            if rule is not None:
                return rule(*args, **kwargs)
            result = func(*plain(args), **plain_kwargs)
            return result if func in _CONSTANT_FUNCTIONS else _without_gradient(f"numpy.{func.__name__}", result)
        return func(*plain(args), **plain_kwargs)

    # ---- ndarray methods that bypass numpy's dispatch -----------------------------------------------
    def __getitem__(self, key):
        if self._requires_grad and _grad_state.enabled:
            return _ops().shaping.getitem(self, key)
        return np.ndarray.__getitem__(self.view(np.ndarray), unwrap_key(key))

    def __setitem__(self, key, value):
        _ops().shaping.setitem(self, key, value)

    def __iter__(self):
        # ndarray's own iteration bypasses __getitem__: it would hand out rows that lost the graph.
        if self._requires_grad and _grad_state.enabled:
            return (self[index] for index in range(len(self)))
        return iter(self.view(np.ndarray))

    def reshape(self, *shape, **kwargs):
        if self._requires_grad and _grad_state.enabled:
            return _ops().shaping.reshape(self, shape[0] if len(shape) == 1 else shape, **kwargs)
        return self.view(np.ndarray).reshape(*shape, **kwargs)

    def transpose(self, *axes):
        if self._requires_grad and _grad_state.enabled:
            return _ops().shaping.transpose(self, axes[0] if len(axes) == 1 else (axes or None))
        return self.view(np.ndarray).transpose(*axes)

    @property
    def T(self):
        return self.transpose()

    @property
    def mT(self):
        return self.swapaxes(-1, -2)

    def swapaxes(self, axis1, axis2):
        if self._requires_grad and _grad_state.enabled:
            return _ops().shaping.swapaxes(self, axis1, axis2)
        return self.view(np.ndarray).swapaxes(axis1, axis2)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if self._requires_grad and _grad_state.enabled:
            return _ops().shaping.astype(self, dtype, order=order, casting=casting, copy=copy)
        return self.view(np.ndarray).astype(dtype, order=order, casting=casting, copy=copy)

    def copy(self, order="C"):
        return self._method(np.copy, "copy", order=order)

    def squeeze(self, axis=None):
        return self._method(np.squeeze, "squeeze", axis=axis)

    def ravel(self, order="C"):
        return self._method(np.ravel, "ravel", order=order)

    def flatten(self, order="C"):
        if self._requires_grad and _grad_state.enabled:
            return np.ravel(self, order=order).copy()
        return self.view(np.ndarray).flatten(order)

    def dot(self, b, out=None):
        return np.dot(self, b, out=out)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        return self._method(np.sum, "sum", axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kwargs)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        return self._method(np.mean, "mean", axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kwargs)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
        return self._method(np.var, "var", axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                            **kwargs)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
        return self._method(np.std, "std", axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                            **kwargs)

    def max(self, axis=None, out=None, keepdims=False, **kwargs):
        return self._method(np.max, "max", axis=axis, out=out, keepdims=keepdims, **kwargs)

    def min(self, axis=None, out=None, keepdims=False, **kwargs):
        return self._method(np.min, "min", axis=axis, out=out, keepdims=keepdims, **kwargs)

    def round(self, decimals=0, out=None):
        return self._method(np.round, "round", decimals=decimals, out=out)

    def _method(self, function, name, **kwargs):
        """An ndarray method: numpy's ``function`` while recording, else the plain method (no dispatch)."""
        if self._requires_grad and _grad_state.enabled:
            return function(self, **kwargs)
        return getattr(self.view(np.ndarray), name)(**kwargs)

    def fill(self, value) -> None:
        _ops().shaping.setitem(self, Ellipsis, value)


def _ops():
    """The operation modules (imported late: they import this one)."""
    from modulecraft.autograd import ops

    return ops


def _guard_method(name: str):
    """An ndarray method without a gradient rule: plain results, or a clear error while recording."""
    method = getattr(np.ndarray, name)

    def guarded(self, *args, **kwargs):
        if self._requires_grad and _grad_state.enabled:
            with grad_mode.no_grad():
                result = method(self.view(np.ndarray), *args, **kwargs)
            return _without_gradient(f"ndarray.{name}", result)
        return method(self.view(np.ndarray), *args, **kwargs)

    guarded.__name__ = name
    guarded.__doc__ = method.__doc__
    return guarded


for _name in ("repeat", "take", "diagonal", "cumsum", "cumprod", "prod", "trace", "compress",
              "choose", "conj", "conjugate", "argmax", "argmin", "argsort", "nonzero", "all", "any",
              "tolist", "item", "tobytes", "__copy__"):
    setattr(Tensor, _name, _guard_method(_name))
del _name


def _in_place_method(name: str):
    """An ndarray method that changes the array in place: counted as a version, refused while recording."""
    method = getattr(np.ndarray, name)

    def in_place(self, *args, **kwargs):
        if self._requires_grad and _grad_state.enabled:
            raise NotImplementedError(f"ndarray.{name} changes a tensor that requires grad in place, which is not "
                                      "differentiable in modulecraft; use the numpy function that returns a copy")
        method(self.view(np.ndarray), *args, **kwargs)
        version_counter(self)[0] += 1

    in_place.__name__ = name
    in_place.__doc__ = method.__doc__
    return in_place


for _name in ("sort", "put", "partition"):
    setattr(Tensor, _name, _in_place_method(_name))
del _name


# torch's errors for ``del tensor.<name>`` (``del tensor.grad`` is allowed: it sets the gradient to None).
_UNDELETABLE = {
    "data": "Deleting tensor data is not allowed. Delete tensor instead!",
    "requires_grad": "requires_grad must be a bool",
    "_backward_hooks": "Deletion of _backwards_hooks not allowed!",
    "_post_accumulate_grad_hooks": "Deletion of _post_accumulate_grad_hooks not allowed!",
}


def _rebuild_tensor(cls, data, requires_grad):
    return cls(data, requires_grad)


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new leaf Tensor holding a copy of ``data`` (like ``torch.tensor``).

    Python floats become float32 as in torch (numpy would choose float64); arrays keep their dtype.
    """
    array = np.array(plain(data), dtype=dtype, copy=True)
    if dtype is None and array.dtype == np.float64 and not isinstance(data, np.ndarray):
        array = array.astype(np.float32)
    if requires_grad and array.dtype.kind not in "fc":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    return Tensor(array, requires_grad)


# ---- helpers shared by the operation modules ---------------------------------------------------------------
def plain(value):
    """``value`` with every Tensor (also inside tuples and lists) turned into a plain ndarray view."""
    if isinstance(value, Tensor):
        return value.view(np.ndarray)
    if type(value) in (tuple, list):
        return type(value)(plain(v) for v in value)
    return value


def unwrap_key(key):
    """An index with Tensors replaced by plain arrays (numpy would otherwise dispatch on them)."""
    if isinstance(key, Tensor):
        return key.view(np.ndarray)
    if type(key) is tuple:
        return tuple(k.view(np.ndarray) if isinstance(k, Tensor) else k for k in key)
    return key


def is_tracked(value) -> bool:
    """Whether ``value`` is a tensor that requires grad."""
    return isinstance(value, Tensor) and value._requires_grad


def _any_tracked(args, kwargs) -> bool:
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            if value._requires_grad:
                return True
        elif type(value) in (tuple, list):
            if any(isinstance(v, Tensor) and v._requires_grad for v in value):
                return True
    return False


def _without_gradient(what: str, result):
    """Return ``result`` if it cannot carry a gradient (booleans, integers...); else refuse clearly."""
    values = result if isinstance(result, (tuple, list)) else (result,)
    for value in values:
        dtype = getattr(value, "dtype", None)
        if dtype is not None and dtype.kind in "fc":
            raise NotImplementedError(
                f"{what} is not differentiable in modulecraft: it was called on a tensor that requires grad "
                "while grad mode is on. Call it inside `with modulecraft.no_grad():` or on `tensor.detach()` "
                "if no gradient must flow through it.")
    return result


# numpy functions whose result never depends differentiably on the inputs' values (torch: no grad_fn).
_CONSTANT_FUNCTIONS = {np.empty_like, np.zeros_like, np.ones_like, np.full_like, np.shape, np.ndim, np.size,
                       np.result_type, np.can_cast, np.may_share_memory, np.shares_memory}


def edges(inputs) -> tuple:
    """The ``next_functions`` of a node recorded on ``inputs`` (``(None, 0)`` for those without grad)."""
    return tuple([x._edge() if isinstance(x, Tensor) and x._requires_grad else NO_EDGE for x in inputs])


def version_counter(t: Tensor) -> list:
    counter = t._vc
    if counter is None:
        counter = t._vc = [0]
    return counter


def save(node: Node, values, raw) -> None:
    """Keep ``raw`` for ``node``'s backward, with the current version of each Tensor among ``values``."""
    node._saved = tuple(raw)
    versions = []
    for value in values:
        if isinstance(value, Tensor):
            counter = value._vc
            if counter is None:
                counter = value._vc = [0]
            versions.append((counter, counter[0]))
    node._versions = versions


def result(raw_out, node: Node, view_of: Tensor | None = None, output_nr: int = 0) -> Tensor:
    """Wrap ``raw_out`` as the Tensor produced by ``node`` (a view of ``view_of`` shares its version)."""
    if type(raw_out) is not np.ndarray:
        raw_out = np.asarray(raw_out)
    out = raw_out.view(Tensor)
    out._requires_grad = True
    out._grad_fn = node
    shapes = node._shapes
    if shapes is None:
        shapes = node._shapes = [None] * node.num_outputs
    shapes[output_nr] = raw_out.shape
    if output_nr:
        out._output_nr = output_nr
    if view_of is not None:
        out._vc = version_counter(view_of)
        out._view_base = view_of
    return out


def save_output(node: Node, out: Tensor) -> None:
    """Keep ``out`` (the node's own result) for backward, watching its version."""
    counter = version_counter(out)
    node._saved = (out.view(np.ndarray),)
    node._versions = ((counter, counter[0]),)


_FUNCTION_VIEW_RULE = (
    "This view was created inside a custom Function (or because an input was returned as-is) and the autograd "
    "logic to handle view+inplace would override the custom backward associated with the custom Function, leading "
    "to incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom "
    "Function.")


def mark_function_view(out: Tensor, output_nr: int, function: str) -> None:
    """Mark ``out``, an output of ``function`` sharing memory with an input, as a view that may not be changed
    in place, nor used once its base has been (torch's rule for inputs a custom Function returns as is)."""
    out._function_output = (output_nr, function, version_counter(out)[0])


def view_chain(view: Tensor) -> list:
    """The view, the view it was taken from, ... up to the last one, whose base is no view."""
    chain = [view]
    while chain[-1]._view_base._view_base is not None:
        chain.append(chain[-1]._view_base)
    return chain


def _stale(view: Tensor) -> bool:
    """Whether the tensor ``view`` was taken from (or one in between) got a new ``grad_fn`` from an in-place
    change since: the view's own ``grad_fn`` then still reads the old value."""
    base = view._view_base
    base_fn = base._grad_fn
    if base_fn is not None and view._grad_fn.next_functions[0][0] is not base_fn:
        return True
    return base._view_base is not None and _stale(base)


def _check_function_view(view: Tensor) -> None:
    """torch's error for using an output of a Function that is a view after its base was changed in place."""
    output_nr, function, version = view._function_output
    if view._vc[0] != version and _grad_state.enabled:
        raise RuntimeError(f"Output {output_nr} of {function} is a view and its base or another view of its base "
                           f"has been modified inplace. {_FUNCTION_VIEW_RULE}")


def _refuse_graph_write(target: Tensor, value) -> None:
    """torch's errors for in-place changes it cannot record on ``target``."""
    if not _grad_state.enabled:
        return
    if target._function_output is not None:
        output_nr, function, _ = target._function_output
        raise RuntimeError(f"Output {output_nr} of {function} is a view and is being modified inplace. "
                           f"{_FUNCTION_VIEW_RULE}")
    base = target._view_base
    if base is not None and (base._requires_grad or is_tracked(value)):
        chain = view_chain(target)
        if chain[-1]._view_base._grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        if any(view._view_index is None for view in chain):
            raise NotImplementedError(
                "modulecraft records an in-place change of a view of a tensor that requires grad only for views "
                "made by indexing (y[0:2] += 1); this one comes from reshape, transpose or the like: change the "
                "tensor itself, or work on a copy")


def _ufunc_into(ufunc, method, inputs, raw, out, kwargs, recording):
    """A ufunc with ``out=``: a data write, or a recorded in-place operation (``y += x`` with a graph)."""
    targets = out if isinstance(out, tuple) else (out,)
    if not recording:
        raw_targets = []
        for target in targets:
            if isinstance(target, Tensor):
                if target._view_base is not None or target._function_output is not None:
                    _refuse_graph_write(target, None)
                target = target.view(np.ndarray)
            raw_targets.append(target)
        getattr(ufunc, method)(*raw, out=tuple(raw_targets), **kwargs)
        for target in targets:
            if isinstance(target, Tensor):
                version_counter(target)[0] += 1
        return targets[0] if len(targets) == 1 else targets
    target = targets[0]
    if len(targets) != 1 or method != "__call__" or not any(x is target for x in inputs):
        raise RuntimeError(f"{ufunc.__name__}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if not isinstance(target, Tensor):  # torch would make the plain tensor part of the graph: numpy cannot
        raise RuntimeError(
            f"{ufunc.__name__}(): an in-place operation on a plain numpy array cannot record the gradient of a "
            "tensor that requires grad: write `array = array + tensor` (a new Tensor), or make the array a "
            "modulecraft.Tensor first")
    rule = UFUNCS.get(ufunc) if not kwargs else None
    if rule is None:
        raise NotImplementedError(f"numpy.{ufunc.__name__} with out= is not differentiable in modulecraft")
    # Record on a snapshot of the target's old value (backward may need it), then write and rebase.
    if target._view_base is not None and _stale(target):
        _ops().shaping.regenerate_view(target)
    snapshot = np.array(target.view(np.ndarray), copy=True).view(Tensor)
    snapshot._requires_grad = target._requires_grad
    snapshot._grad_fn = target._grad_fn
    snapshot._output_nr = target._output_nr
    snapshot_inputs = tuple(snapshot if x is target else x for x in inputs)
    snapshot_raw = [snapshot.view(np.ndarray) if x is target else r for x, r in zip(inputs, raw)]
    recorded = rule(snapshot_inputs, snapshot_raw)
    rebase_in_place(target, recorded.view(np.ndarray), recorded._grad_fn)
    return target


def rebase_in_place(target: Tensor, values, node: Node) -> None:
    """Write ``values`` into ``target`` as the recorded in-place result of ``node`` (torch's ``relu_``, ``+=``).

    ``node`` was recorded on the target's old value; the target now is its output, one version later. A view
    made by indexing passes the change on to its base (see ``shaping.rebase_view``).
    """
    _refuse_graph_write(target, None)
    if target._grad_fn is None and target._requires_grad and _grad_state.enabled:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    np.copyto(target.view(np.ndarray), values, casting="same_kind")
    version_counter(target)[0] += 1
    if target._view_base is not None and _grad_state.enabled:
        _ops().shaping.rebase_view(target, node)
    else:
        set_grad_fn(target, node)


def set_grad_fn(target: Tensor, node: Node) -> None:
    """Make ``target`` the output of ``node`` after an in-place change. As in torch, ``retain_grad`` follows the
    tensor (its ``.grad`` is the gradient of the new value); hooks registered earlier stay with the old value."""
    if target._retains_grad:
        del target._grad_fn._hook_tables.retains_grad[target._output_nr]
        node._hooks().retains_grad[0] = weakref.ref(target)
    target._grad_fn = node
    target._requires_grad = True
    target._output_nr = 0
    node._shapes = [target.shape]
