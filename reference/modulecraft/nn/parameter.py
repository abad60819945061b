"""Parameters and buffers: tensors that a Module recognises on assignment.

torch's ``Parameter`` and ``Buffer`` are Tensor subclasses; ours subclass :class:`modulecraft.Tensor`
(an ``np.ndarray`` with autograd). A Parameter is a leaf that requires grad: backward accumulates into its
``.grad``. Results of arithmetic, indexing and numpy functions on it are plain ``Tensor`` objects with a
``grad_fn`` (or plain ``np.ndarray`` when nothing records), never Parameters, so ``p * 2`` assigned to a
module attribute does not register a parameter by accident.

What numpy forces us to do differently (each is documented where it happens): an array cannot change dtype
or shape in place, so conversions such as ``Module.double()`` put *new* Parameter objects into the module
(torch keeps the object and swaps its storage).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modulecraft.autograd.tensor import Tensor, version_counter

__all__ = ["Parameter", "UninitializedParameter", "is_lazy", "Buffer", "UninitializedBuffer",
           "UninitializedTensorMixin"]


def _float_dtype_required(data: np.ndarray) -> None:
    if data.dtype.kind not in "fc":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")


class _FlagInstanceCheck(type):
    """``isinstance(x, Cls)`` is also true for any ndarray carrying ``Cls._instance_flag`` set to True.

    torch recognises parameters by the ``_is_param`` flag rather than by class, so a learner's own
    ``class MyParameter(np.ndarray): _is_param = True`` counts as a Parameter everywhere Module dispatches.
    Only the class that declares the flag checks it (``UninitializedParameter`` stays a plain class check).
    """

    def __instancecheck__(cls, instance: Any) -> bool:
        if not isinstance(instance, np.ndarray):  # the common case in Module.__setattr__: answer it fast
            return False
        flag = cls.__dict__.get("_instance_flag")
        if flag is not None and getattr(instance, flag, False):
            return True
        return super().__instancecheck__(instance)


def _detached_view(data, cls):
    """``data`` as a new ``cls`` object sharing its memory and, for a Tensor, its version (as ``t.detach()``)."""
    view = np.asarray(data).view(cls)
    if isinstance(data, Tensor):
        view._vc = version_counter(data)
    return view


def _rebuild_parameter(cls, data, requires_grad):
    return cls(data, requires_grad)


class Parameter(Tensor, metaclass=_FlagInstanceCheck):
    """A leaf tensor that a Module registers as a parameter when it is assigned as an attribute.

    ``Parameter(data)`` is a new object sharing memory with ``data`` when it is an ndarray (torch's
    ``Parameter(t)`` is ``t.detach()`` marked as a parameter: never ``t`` itself); anything array-like is
    accepted. ``requires_grad`` defaults to True (floating dtypes only, as torch) and ``grad`` starts as
    None. The repr starts with ``Parameter containing:`` followed by numpy's repr of the values. Unlike torch,
    which keeps a Tensor subclass's class and only flags it, the result is always a ``Parameter``.
    """

    _instance_flag = "_is_param"
    _is_param = True

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            data = np.empty(0, dtype=np.float32)
        self = _detached_view(data, cls)
        if requires_grad:
            _float_dtype_required(self)
            self._requires_grad = True
        return self

    def __repr__(self) -> str:
        return "Parameter containing:\n" + repr(self.view(np.ndarray))

    def __deepcopy__(self, memo):
        # copy.deepcopy consults and fills ``memo`` around this call, so a shared parameter is copied once.
        # Like torch, the copy gets the values and requires_grad, not the grad.
        return type(self)(np.array(self.view(np.ndarray), copy=True), self.requires_grad)

    def __reduce_ex__(self, protocol):
        return _rebuild_parameter, (type(self), np.asarray(self), self.requires_grad)


class Buffer(Tensor, metaclass=_FlagInstanceCheck):
    """A tensor that a Module registers as a buffer when assigned as an attribute (torch 2.13's ``nn.Buffer``).

    ``persistent`` says whether it goes into the ``state_dict``. A new object sharing memory with ``data``
    (torch's ``Buffer(t)`` is ``t.detach()``, keeping ``t``'s requires_grad). Any ndarray with
    ``_is_buffer = True`` passes ``isinstance(x, Buffer)``.
    """

    _instance_flag = "_is_buffer"
    _is_buffer = True
    persistent = True

    def __new__(cls, data=None, *, persistent: bool = True):
        if data is None:
            data = np.empty(0, dtype=np.float32)
        requires_grad = isinstance(data, Tensor) and data.requires_grad
        self = _detached_view(data, cls)
        if requires_grad:
            self._requires_grad = True
        if not persistent:
            self.persistent = False
        return self

    def __deepcopy__(self, memo):
        return type(self)(np.array(self.view(np.ndarray), copy=True), persistent=self.persistent)

    def __reduce_ex__(self, protocol):
        return _rebuild_buffer, (type(self), np.asarray(self), self.persistent)


def _rebuild_buffer(cls, data, persistent):
    return cls(data, persistent=persistent)


class UninitializedTensorMixin:
    """The shape-less state of a lazy parameter or buffer, until ``materialize`` gives it a shape.

    It holds no values; asking for ``shape`` raises torch's error. ``materialize`` works in place, like
    torch's: the same object grows to the requested shape (zero-filled: numpy has no uninitialised memory
    we would want to show) and changes its class to ``cls_to_become``, so every reference to it (the
    module's dictionary, a learner's variable) sees the materialised array.
    """

    cls_to_become: type

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the array ``shape`` (and optionally ``dtype``) in place and turn it into ``cls_to_become``."""
        if dtype is not None:
            self.dtype = np.dtype(dtype)  # allowed: the array holds no elements yet
        np.ndarray.resize(self, tuple(shape) if np.iterable(shape) else (shape,), refcheck=False)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. "
            "This error usually happens in `load_state_dict` when trying to load "
            "an uninitialized parameter into an initialized one. "
            "Call `forward` to initialize the parameters before accessing their attributes."
        )

    def astype(self, dtype, *args, **kwargs):
        """A dtype conversion of something that has no values yet: a new uninitialised one of that dtype."""
        dtype = np.dtype(dtype)
        return self if dtype == self.dtype else self._like(dtype)

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"

    __str__ = __repr__

    def _refuse_use(self, operation: str):
        raise ValueError(
            f"Attempted to use an uninitialized parameter in {operation}. This error happens when you are using a "
            f"`LazyModule` or explicitly manipulating `modulecraft.nn.parameter.{type(self).__name__}` objects. "
            "When using LazyModules Call `forward` with a dummy batch to initialize the parameters before "
            "calling numpy functions")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._refuse_use(f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))

    def __array_function__(self, func, types, args, kwargs):
        self._refuse_use(f"numpy.{func.__name__}")

    def __getitem__(self, key):
        self._refuse_use("__getitem__")

    def _refuse_autograd(name: str):
        """A Tensor method of autograd that torch refuses on a placeholder (freezing a lazy module included)."""
        def refuse(self, *args, **kwargs):
            self._refuse_use(f"Tensor.{name}")
        refuse.__name__ = name
        return refuse

    requires_grad_ = _refuse_autograd("requires_grad_")
    detach = _refuse_autograd("detach")
    detach_ = _refuse_autograd("detach_")
    retain_grad = _refuse_autograd("retain_grad")
    register_hook = _refuse_autograd("register_hook")
    register_post_accumulate_grad_hook = _refuse_autograd("register_post_accumulate_grad_hook")
    del _refuse_autograd

    def __deepcopy__(self, memo):
        return self._like(self.dtype)


def _empty_owned(cls, dtype) -> np.ndarray:
    """A zero-size array of class ``cls`` that owns its memory, so that it can be resized in place later."""
    return np.ndarray.__new__(cls, (0,), dtype=np.float32 if dtype is None else dtype)


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is an ``UninitializedParameter`` or ``UninitializedBuffer``."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (used by lazy modules); ``materialize`` makes it a Parameter."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        self = _empty_owned(cls, dtype)
        self._requires_grad = requires_grad
        return self

    def _like(self, dtype):
        return type(self)(self.requires_grad, dtype=dtype)

    def __reduce_ex__(self, protocol):
        return type(self), (self.requires_grad, None, self.dtype)


class UninitializedBuffer(UninitializedTensorMixin, Buffer):
    """A buffer whose shape is not known yet; ``materialize`` turns it into a plain ``np.ndarray``.

    numpy cannot change an array's class to the base ``np.ndarray`` in place, so the materialised buffer
    becomes a :class:`Buffer` (which is an ndarray and keeps its ``persistent`` flag).
    """

    cls_to_become = Buffer

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        self = _empty_owned(cls, dtype)
        self.persistent = persistent
        self._requires_grad = requires_grad
        return self

    def _like(self, dtype):
        return type(self)(self.requires_grad, dtype=dtype, persistent=self.persistent)

    def __reduce_ex__(self, protocol):
        return type(self), (self.requires_grad, None, self.dtype, self.persistent)
