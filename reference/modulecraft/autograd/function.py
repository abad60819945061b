"""Custom differentiable operations: ``Function`` with ``forward(ctx, ...)`` and ``backward(ctx, ...)``.

As in torch, ``MyFunction.apply(*args)`` runs ``forward`` with grad mode off and, if an input requires
grad, records one node of class ``MyFunctionBackward``. That node is also the ``ctx`` both methods receive:
attributes set on it in ``forward`` are there in ``backward``, and ``register_hook``/``register_prehook``
on ``output.grad_fn`` work as on any node. With several outputs the node's ``backward`` gets one gradient
per output; tensor outputs that received none get zeros (torch's ``materialize_grads`` default), outputs that
are not tensors always None. As torch's, a Function is never instantiated (``MyFunction()`` warns, calling
the instance raises: a legacy Function), and ``once_differentiable`` marks a ``backward`` that runs with grad
mode off.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.graph import Node
from modulecraft.autograd.engine import unbroadcast
from modulecraft.autograd.tensor import Tensor, edges, mark_function_view, result, version_counter

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]


class FunctionCtx:
    """What ``forward`` can tell ``backward``: saved tensors, non-differentiable outputs, materialize_grads."""

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` for backward (read them back as ``ctx.saved_tensors``); in-place changes are seen."""
        self.to_save = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs listed here get no ``grad_fn`` and do not require grad."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether outputs without a gradient give zeros (default) or None to ``backward``."""
        self.materialize_grads = value

    def mark_dirty(self, *tensors) -> None:
        raise NotImplementedError("in-place custom Functions (mark_dirty) are not supported by modulecraft")


class BackwardCFunction(FunctionCtx, Node):
    """The node (and ``ctx``) recorded by ``Function.apply``; one subclass per Function, ``<Name>Backward``."""

    _forward_cls: type
    materialize_grads = True
    to_save = ()
    non_differentiable = ()

    def __init__(self) -> None:
        Node.__init__(self, ())
        self.num_outputs = 1
        self._output_meta = ()
        self._input_meta = ()

    @property
    def saved_tensors(self) -> tuple:
        return self.saved_values()

    def __call__(self, *args, **kwargs):
        raise TypeError(f"'{type(self).__name__}' object is not callable")  # as torch's custom Function nodes

    def backward(self, grad):
        """The engine's call for a node with one output (the Function's own backward is called by apply)."""
        return self.apply([grad])

    def apply(self, grads: list) -> tuple:
        if self.materialize_grads:  # zeros for tensor outputs only: the others (meta None) always give None
            grads = [np.zeros(*meta) if grad is None and meta is not None else grad
                     for grad, meta in zip(grads, self._output_meta)]
        returned = self._forward_cls.backward(self, *grads)
        returned = returned if isinstance(returned, tuple) else (returned,)
        expected = len(self._input_meta)
        if len(returned) != expected and (len(returned) < expected
                                          or any(g is not None for g in returned[expected:])):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients (expected "
                               f"{expected}, got {len(returned)})")
        gradients = []
        for index, (grad, meta) in enumerate(zip(returned, self._input_meta)):
            if meta is None:  # an argument that is not a tensor
                if grad is not None:
                    raise RuntimeError(f"function {self.name()} returned a gradient different than None at "
                                       f"position {index + 1}, but the corresponding forward input was not a "
                                       "Variable")
                continue
            if grad is not None and (type(grad) is not np.ndarray or grad.shape != meta):
                grad = self._conformed(index, grad, meta)
            gradients.append(grad)
        return tuple(gradients)

    def _conformed(self, index: int, grad, shape: tuple) -> np.ndarray:
        """A gradient returned by backward as a plain array of the input's ``shape`` (summing a broadcast one)."""
        value = np.asarray(grad.view(np.ndarray) if isinstance(grad, Tensor) else grad)
        if value.shape != shape:
            try:
                np.broadcast_shapes(value.shape, shape)
                value = unbroadcast(value, shape)
            except ValueError:
                value = None
            if value is None or value.shape != shape:
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index {index} - got "
                                   f"{list(np.shape(grad))} but expected shape compatible with {list(shape)}")
        return value


class _FunctionMeta(type):
    """Gives each Function subclass its node class, named ``<Function>Backward`` as in torch."""

    def __init__(cls, name, bases, attributes) -> None:
        super().__init__(name, bases, attributes)
        cls._backward_cls = type(f"{name}Backward", (BackwardCFunction,), {"_forward_cls": cls})


class Function(metaclass=_FunctionMeta):
    """Subclass with ``@staticmethod forward(ctx, *args)`` and ``@staticmethod backward(ctx, *grads)`` (or
    torch 2's ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``); call ``apply``, never
    ``forward``, to get a recorded result."""

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd functions are all static, "
                      "so you should invoke them on the class itself. Instantiating an autograd function will raise "
                      "an error in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Override (with a ``forward`` that takes no ctx) to fill ``ctx`` from the inputs and the output."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple([isinstance(arg, Tensor) and arg._requires_grad for arg in args])
        state = grad_mode.state  # no_grad's switch, without its object (this runs for every call, hooks' too)
        enabled, state.enabled = state.enabled, False
        try:
            if cls.setup_context is Function.setup_context:
                outputs = cls.forward(ctx, *args, **kwargs)
            else:  # torch 2's style: forward without ctx, then setup_context(ctx, inputs, output)
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
        finally:
            state.enabled = enabled
        if not (enabled and True in ctx.needs_input_grad):
            return outputs
        tensor_args = [arg for arg in args if isinstance(arg, np.ndarray)]
        ctx.next_functions = edges(tensor_args)
        # .shape rather than np.shape, which on a Tensor would go through numpy's dispatch (µs per call).
        ctx._input_meta = tuple([arg.shape if isinstance(arg, np.ndarray) else None for arg in args])
        several = isinstance(outputs, tuple)
        outputs = outputs if several else (outputs,)
        ctx.num_outputs = len(outputs)
        ctx._output_meta = tuple([(out.shape, out.dtype) if isinstance(out, np.ndarray) else None
                                  for out in outputs])
        non_differentiable = {id(t) for t in ctx.non_differentiable}
        raw_args = [arg.view(np.ndarray) for arg in tensor_args]  # no numpy dispatch in the checks below
        wrapped = []
        for output_nr, out in enumerate(outputs):
            if not isinstance(out, np.ndarray) or id(out) in non_differentiable:
                # A tensor comes back as a new object that shares memory, as torch returns it (never the input).
                wrapped.append(out.detach() if isinstance(out, Tensor) else out)
                continue
            raw = out.view(np.ndarray)
            recorded = result(raw, ctx, output_nr=output_nr)
            if any(out is arg or np.may_share_memory(raw, raw_arg) for arg, raw_arg in zip(tensor_args, raw_args)):
                # An input returned as is (or a view of one): the output is a view, which may not be changed
                # in place while grad mode is on (torch's rule).
                if isinstance(out, Tensor):
                    recorded._vc = version_counter(out)
                mark_function_view(recorded, output_nr, cls.__name__)
            wrapped.append(recorded)
        saved = ctx._saved = tuple(ctx.to_save)
        if saved:
            ctx._versions = tuple((counter, counter[0]) for counter in
                                  (version_counter(t) for t in saved if isinstance(t, Tensor)))
            del ctx.to_save
        return tuple(wrapped) if several else wrapped[0]


def once_differentiable(backward):
    """Decorate a Function's ``backward`` that is not itself differentiable: it runs with grad mode off.

    torch also makes a double backward through it fail; here every backward runs on plain arrays with grad
    mode off and no graph is recorded (no ``create_graph``), so there is nothing more to do.
    """
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            return backward(ctx, *grads)

    return wrapper
