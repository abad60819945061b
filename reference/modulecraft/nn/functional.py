"""``modulecraft.nn.functional``: the differentiable functions behind the layers and losses (torch.nn.functional).

Each function works on plain arrays (returning plain arrays) and on tensors that require grad (returning a
Tensor whose ``grad_fn`` is the node torch records: ``AddmmBackward0`` for ``linear``, ``ReluBackward0``,
``NativeBatchNormBackward0``, ``MseLossBackward0``, ``LogSoftmaxBackward0``, ``NllLossBackward0``...), with
torch's values and gradients. Not supported (a clear error says so): ``cross_entropy`` with class
probabilities, losses over inputs with more than two dimensions (N, C, d1...), batch norm over more than one
spatial dimension.
"""

from __future__ import annotations

import warnings

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.graph import Node
from modulecraft.autograd.engine import unbroadcast
from modulecraft.autograd.ops.linalg import MmBackward0, mm_gradients
from modulecraft.autograd.tensor import (NO_EDGE, Tensor, edges, is_tracked, plain, rebase_in_place, result, save,
                                         save_output)
from modulecraft.nn import init

__all__ = ["linear", "relu", "dropout", "batch_norm", "softmax", "log_softmax", "mse_loss", "nll_loss",
           "cross_entropy"]


def _recording(*values) -> bool:
    if not grad_mode.state.enabled:
        return False
    for value in values:
        if isinstance(value, Tensor) and value._requires_grad:
            return True
    return False


# ---- linear -----------------------------------------------------------------------------------------------
class TBackward0(Node):
    __slots__ = ()

    def backward(self, grad):
        return (grad.T,)


class AddmmBackward0(Node):
    """``bias + input @ weight.T`` for a 2-D input; the weight's gradient goes through a ``TBackward0``."""

    __slots__ = ()

    def backward(self, grad):
        inputs, weight_t = self.saved_values()
        (bias, _), (input_edge, _), (weight_edge, _) = self.next_functions
        # The bias's gradient is the output's, (N, out) for a (out,) bias: the engine sums it (as torch's).
        return (grad if bias is not None else None,
                *mm_gradients(grad, inputs, weight_t, input_edge is not None, weight_edge is not None))


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``; records torch's ``AddmmBackward0`` (or ``MmBackward0``) over ``TBackward0``."""
    raw_input, raw_weight, raw_bias = plain(input), plain(weight), plain(bias)
    if not _recording(input, weight, bias):
        output = np.asarray(raw_input) @ raw_weight.T
        return output if bias is None else output + raw_bias
    raw_input = np.asarray(raw_input)
    if raw_input.ndim != 2:
        if raw_input.ndim < 2:
            return input @ weight.T if bias is None else input @ weight.T + bias
        leading = raw_input.shape[:-1]
        flat = linear(input.reshape(-1, raw_input.shape[-1]), weight, bias)
        return flat.reshape(*leading, flat.shape[-1])
    weight_t = raw_weight.T
    transposed = NO_EDGE
    if is_tracked(weight):
        transposed = (TBackward0((weight._edge(),)), 0)
        transposed[0]._shapes = [weight_t.shape]  # weight.T, which no tensor holds
    input_edge = input._edge() if is_tracked(input) else NO_EDGE
    output = raw_input.dot(weight_t)  # @ for 2-D arrays, cheaper per call (see mm_gradients)
    if bias is None:
        node = MmBackward0((input_edge, transposed))
    else:
        node = AddmmBackward0((bias._edge() if is_tracked(bias) else NO_EDGE, input_edge, transposed))
        output += raw_bias
    save(node, (input, weight), (raw_input, weight_t))
    return result(output, node)


# ---- activations and dropout --------------------------------------------------------------------------------
class ReluBackward0(Node):
    """Passes the gradient where the output is positive. A documented difference: elsewhere numpy's product gives
    ``-0.0`` for a negative incoming gradient (``nan`` for an infinite one) where torch writes ``0.0``. ``-0.0``
    equals ``0.0``, only its printed sign differs; an exact mask (``np.where``, ``copyto(where=)``) costs ten times
    as much in numpy."""

    __slots__ = ()

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad * (out > 0),)


def relu(input, inplace: bool = False):
    """``max(0, x)``; the gradient is 0 where the output is 0 (torch's rule, also at x == 0)."""
    raw = plain(input)
    if not _recording(input):
        return np.maximum(raw, 0, out=raw if inplace else None)
    node = ReluBackward0(edges((input,)))
    if inplace:
        rebase_in_place(input, np.maximum(raw, 0), node)
        save_output(node, input)
        return input
    out = result(np.maximum(raw, 0), node)
    save_output(node, out)
    return out


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (identity unless training).

    The mask comes from ``modulecraft.nn.init``'s generator, so ``manual_seed`` makes it repeatable (the
    numbers differ from torch's). Records ``MulBackward0`` with the mask, as torch 2.13 on CPU does.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    shape = np.shape(input)
    keep = init.generator().random(shape) >= p
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    mask = (keep * scale).astype(np.result_type(input), copy=False)
    if inplace:
        return np.multiply(input, mask, out=input)
    return np.multiply(input, mask)


def _softmax_axis(dim, ndim: int, name: str) -> int:
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                      "dim=X as an argument.", stacklevel=3)
        dim = 0 if ndim in (0, 1, 3) else 1
    return dim


def _log_softmax_values(raw, axis):
    shifted = raw - raw.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


class LogSoftmaxBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, grad):
        (out,) = self.saved_values()
        return (grad - np.exp(out) * grad.sum(axis=self.axis, keepdims=True),)


class SoftmaxBackward0(Node):
    __slots__ = ("axis",)

    def backward(self, grad):
        (out,) = self.saved_values()
        return (out * (grad - (grad * out).sum(axis=self.axis, keepdims=True)),)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``log(softmax(x))`` along ``dim``, computed stably (the maximum is subtracted first)."""
    return _normalised(input, dim, dtype, "log_softmax", LogSoftmaxBackward0, _log_softmax_values)


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim``."""
    return _normalised(input, dim, dtype, "softmax", SoftmaxBackward0,
                       lambda raw, axis: np.exp(_log_softmax_values(raw, axis)))


def _normalised(input, dim, dtype, name, node_class, values_of):
    """softmax and log_softmax: values along one axis, and a node that keeps its output for backward."""
    raw = np.asarray(plain(input)) if dtype is None else np.asarray(plain(input)).astype(dtype)
    axis = _softmax_axis(dim, raw.ndim, name)
    values = values_of(raw, axis)
    if not _recording(input):
        return values
    node = node_class(edges((input,)))
    node.axis = axis
    out = result(values, node)
    save_output(node, out)
    return out


# ---- batch norm ---------------------------------------------------------------------------------------------
class NativeBatchNormBackward0(Node):
    """Edges (input, weight, bias). Holds what torch's holds: the input, the weight, the running statistics, and in
    training the batch's mean and inverse standard deviation (torch's ``result1``, ``result2``; empty in eval mode,
    None here), with ``eps`` and ``training``. The formula is the capstone's exercise (chapter 13)."""

    __slots__ = ("axes", "shape", "training", "eps")

    def backward(self, grad):
        input, weight, running_mean, running_var, mean, inverse_std = self.saved_values()
        (input_edge, _), (weight_edge, _), (bias_edge, _) = self.next_functions
        axes, shape = self.axes, self.shape
        if not self.training:  # the running statistics normalised: constants
            mean, inverse_std = running_mean, 1 / np.sqrt(running_var + self.eps)
        scale = inverse_std.reshape(shape)
        normalized = (input - mean.reshape(shape)) * scale
        grad_weight = (grad * normalized).sum(axis=axes) if weight_edge is not None else None
        grad_bias = grad.sum(axis=axes) if bias_edge is not None else None
        grad_input = None
        if input_edge is not None:
            grad_normalized = grad if weight is None else grad * weight.reshape(shape)
            if self.training:  # the mean and the variance depend on every input of the channel
                grad_input = scale * (grad_normalized - grad_normalized.mean(axis=axes, keepdims=True)
                                      - normalized * (grad_normalized * normalized).mean(axis=axes, keepdims=True))
            else:
                grad_input = grad_normalized * scale
        return grad_input, grad_weight, grad_bias


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each channel (axis 1) of an (N, C) or (N, C, L) input.

    In training, with batch statistics, and ``running_mean``/``running_var`` (when given) updated in place
    by ``momentum`` without recording anything (the running variance uses the unbiased batch variance, as
    torch's); otherwise with the running statistics.
    """
    raw = np.asarray(plain(input))
    if raw.ndim not in (2, 3):
        raise NotImplementedError("batch_norm in modulecraft supports (N, C) and (N, C, L) inputs")
    axes = (0,) if raw.ndim == 2 else (0, 2)
    shape = (1, -1) if raw.ndim == 2 else (1, -1, 1)
    if training:
        count = raw.size // raw.shape[1]
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {raw.shape}")
        mean = raw.mean(axis=axes)
        var = raw.var(axis=axes)
        if running_mean is not None:
            with grad_mode.no_grad():
                running_mean[...] = (1 - momentum) * plain(running_mean) + momentum * mean
                running_var[...] = (1 - momentum) * plain(running_var) + momentum * var * count / (count - 1)
    else:
        mean, var = plain(running_mean), plain(running_var)
    inverse_std = 1.0 / np.sqrt(var + eps)
    normalized = ((raw - mean.reshape(shape)) * inverse_std.reshape(shape)).astype(raw.dtype, copy=False)
    raw_weight, raw_bias = plain(weight), plain(bias)
    output = normalized if raw_weight is None else normalized * raw_weight.reshape(shape)
    if raw_bias is not None:
        output = output + raw_bias.reshape(shape)
    output = output.astype(raw.dtype, copy=False)
    if not _recording(input, weight, bias):
        return output
    node = NativeBatchNormBackward0(edges((input, weight, bias)))
    node.axes, node.shape, node.training, node.eps = axes, shape, training, eps
    batch = (mean, inverse_std.astype(raw.dtype, copy=False)) if training else (None, None)
    save(node, (input, weight), (raw, raw_weight, plain(running_mean), plain(running_var), *batch))
    return result(output, node)


# ---- losses -------------------------------------------------------------------------------------------------
def _reduce(values, reduction: str):
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    if reduction == "none":
        return values
    raise ValueError(f"{reduction} is not a valid value for reduction")


class MseLossBackward0(Node):
    __slots__ = ("reduction", "shapes")

    def backward(self, grad):
        difference, = self.saved_values()
        scale = 2.0 / difference.size if self.reduction == "mean" else 2.0
        grad_difference = scale * difference * grad
        (input_edge, _), (target_edge, _) = self.next_functions
        shape_input, shape_target = self.shapes
        return (unbroadcast(grad_difference, shape_input) if input_edge is not None else None,
                unbroadcast(-grad_difference, shape_target) if target_edge is not None else None)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """The mean (or sum, or elementwise) squared difference; warns, as torch, when the shapes differ.

    With ``weight`` (one per element of ``input``), each squared difference is weighted, and 'mean' divides the
    sum by the sum of the weights (torch 2.13's rule).
    """
    if np.shape(target) != np.shape(input):
        warnings.warn(f"Using a target size ({np.shape(target)}) that is different to the input size "
                      f"({np.shape(input)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=2)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if weight is not None:
        return _weighted_mse_loss(input, target, reduction, weight)
    difference = np.asarray(plain(input)) - np.asarray(plain(target))
    difference, _ = np.broadcast_arrays(difference, difference)
    values = _reduce(difference * difference, reduction)
    if not _recording(input, target):
        return values
    node = MseLossBackward0(edges((input, target)))
    node.reduction = reduction
    node.shapes = (np.shape(input), np.shape(target))
    save(node, (), (difference,))
    return result(values, node)


def _weighted_mse_loss(input, target, reduction: str, weight):
    """torch's weighted mean squared error, built as torch builds it: from recorded operations."""
    if np.shape(weight) != np.shape(input):
        raise ValueError("Weights and input must have the same size.")
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    difference = input - target
    weighted = difference * difference * weight
    if reduction == "none":
        return weighted
    return weighted.sum() if reduction == "sum" else weighted.sum() / np.sum(weight)


class NllLossBackward0(Node):
    """The target, weights and total weight are saved values, as torch saves them (with the input, whose in-place
    change is caught): a second backward without ``retain_graph`` raises."""

    __slots__ = ("reduction", "shape")

    def backward(self, grad):
        target, weights, valid, total_weight = self.saved_values()
        per_sample = weights * grad  # grad: one number (mean, sum) or one per sample (none)
        if self.reduction == "mean":
            if total_weight != 0:
                per_sample = per_sample / total_weight
            else:  # as torch: ignored samples get zeros, the others 0 / 0
                with np.errstate(invalid="ignore"):
                    per_sample = np.where(valid, per_sample / total_weight, 0)
        grad_input = np.zeros(self.shape, dtype=np.result_type(grad))
        if len(self.shape) == 1:
            grad_input[target] = -per_sample
        else:
            grad_input[np.arange(self.shape[0]), target] = -per_sample
        return (grad_input,)


# torch's names of the target dtypes nll_loss refuses (it takes int64, "Long", and uint8, "Byte").
_TORCH_DTYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "int16": "Short",
                      "int32": "Int", "bool": "Bool", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
                      "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


_CLASS_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.uint8))


def _check_class_indices(input_shape: tuple, target: np.ndarray) -> None:
    """torch's checks of a class-index target, in torch's order and with its exception types."""
    target_batch = target.shape[0] if target.ndim else 0
    if len(input_shape) != 1 and input_shape[0] != target_batch:
        raise ValueError(f"Expected input batch_size ({input_shape[0]}) to match target batch_size ({target_batch}).")
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if len(input_shape) == 1 and target.ndim == 1 and target.size != 1:
        raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.size}")
    if target.dtype not in _CLASS_INDEX_DTYPES:
        name = _TORCH_DTYPE_NAMES.get(target.dtype.name, target.dtype.name)
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {name}")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """Minus the log-probability of each sample's class (``input`` holds log-probabilities, shape (N, C) or (C,)).

    With ``reduction='mean'`` the sum is divided by the total weight of the samples not ignored: if every
    sample is ignored, the loss is NaN (0 / 0) and the gradient zeros, as torch's.
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    raw = np.asarray(plain(input))
    target = np.asarray(plain(target))
    if raw.ndim not in (1, 2):
        raise NotImplementedError("nll_loss/cross_entropy in modulecraft support (N, C) and (C,) inputs")
    _check_class_indices(raw.shape, target)
    classes = raw.shape[-1]
    valid = target != ignore_index
    safe_target = np.where(valid, target, 0)
    out_of_bounds = (safe_target < 0) | (safe_target >= classes)
    if out_of_bounds.any():
        raise IndexError(f"Target {int(safe_target[out_of_bounds].flat[0])} is out of bounds.")
    if weight is None:
        weights = valid.astype(raw.dtype)
    else:
        weights = np.where(valid, np.asarray(plain(weight))[safe_target], 0).astype(raw.dtype)
    picked = raw[safe_target] if raw.ndim == 1 else raw[np.arange(len(safe_target)), safe_target]
    losses = -weights * picked
    total_weight = weights.sum()
    if reduction == "mean":
        values = losses.sum() / total_weight if total_weight != 0 else np.nan  # torch's 0 / 0, without a warning
    else:
        values = _reduce(losses, reduction)
    values = np.asarray(values, dtype=raw.dtype)
    if not _recording(input):
        return values
    node = NllLossBackward0(edges((input,)))
    node.reduction, node.shape = reduction, raw.shape
    save(node, (input,), (safe_target, weights, valid, total_weight))
    return result(values, node)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """``nll_loss(log_softmax(input, 1), target)`` for class indices: records ``NllLossBackward0`` over
    ``LogSoftmaxBackward0``, as torch does.

    With ``label_smoothing`` ε in (0, 1], the loss is ``(1 - ε) * nll + ε / C * smooth`` where ``smooth`` is
    minus the (class-weighted) sum of the log-probabilities over the C classes, reduced as torch reduces it
    (a mean divides by the total weight of the samples not ignored); a negative ε counts as none, as in torch.
    Class probabilities as targets are not supported.
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    target = np.asarray(plain(target))
    if target.dtype.kind == "f" and target.shape == np.shape(plain(input)):
        raise NotImplementedError("cross_entropy in modulecraft takes class indices (an integer target); class "
                                  "probabilities are not supported")
    dim = 0 if np.ndim(input) == 1 else 1
    log_probabilities = log_softmax(input, dim)
    loss = nll_loss(log_probabilities, target, weight, None, ignore_index, None, reduction)
    if label_smoothing <= 0.0:
        return loss
    return _label_smoothed(loss, log_probabilities, target, weight, ignore_index, reduction, label_smoothing, dim)


def _label_smoothed(loss, log_probabilities, target, weight, ignore_index, reduction, label_smoothing, dim):
    """``(1 - ε) * loss + ε / C * smooth``, recorded with the tensor operations (torch's node on top:
    ``AddBackward0``)."""
    classes = np.shape(log_probabilities)[dim]
    valid = target != ignore_index
    weighted = log_probabilities if weight is None else log_probabilities * plain(weight)
    smooth = np.where(valid, -weighted.sum(axis=dim), 0)
    if reduction == "mean":
        if weight is None:
            denominator = float(valid.sum())
        else:
            denominator = float(np.asarray(plain(weight))[target[valid]].sum())
        if denominator:
            smooth = smooth.sum() * (1 / denominator)
        else:  # torch's 0 / 0: a NaN loss whose gradient is zeros (every sample ignored)
            smooth = smooth.sum() * 0 + np.nan
    elif reduction == "sum":
        smooth = smooth.sum()
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _legacy_reduction(size_average, reduce) -> str:
    """torch's translation of the deprecated ``size_average``/``reduce`` arguments, with its warning."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                  stacklevel=3)
    return reduction
