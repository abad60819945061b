"""``BatchNorm1d`` and ``LazyBatchNorm1d``: the motivating example for buffers and ``_version``."""

from __future__ import annotations

import numpy as np

from modulecraft.nn import functional as F
from modulecraft.nn import init
from modulecraft.nn.modules.lazy import LazyModuleMixin
from modulecraft.nn.modules.module import Module
from modulecraft.nn.parameter import Parameter, UninitializedBuffer, UninitializedParameter

__all__ = ["BatchNorm1d", "LazyBatchNorm1d"]


class _NormBase(Module):
    """Parameters (``weight``, ``bias``) and running-statistics buffers shared by the batch-norm layers.

    ``_version = 2``: version 2 added the ``num_batches_tracked`` buffer. Checkpoints saved before (no
    version, or version 1) lack it, and ``_load_from_state_dict`` fills it in so they still load strictly.
    """

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        dtype = np.float32 if dtype is None else dtype
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(np.empty(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(np.empty(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", np.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", np.array(0, dtype=np.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                # An old checkpoint: keep our own counter (or start one at 0) instead of reporting it missing.
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else np.array(0, dtype=np.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            np.add(self.num_batches_tracked, 1, out=self.num_batches_tracked)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        # Batch statistics in training, and in eval when there are no running statistics to use.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # As torch: in training without tracking, no running statistics go in (so none are updated).
        passed = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if passed else None, self.running_var if passed else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Normalise each feature of a (N, C) or (N, C, L) batch; keep running mean/var for eval mode."""

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """A norm layer whose ``num_features`` is read from the first input's second dimension."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None,
                 *, bias=True) -> None:
        # Build with nothing to track, then put placeholders where the real layer has arrays.
        super().__init__(0, eps, momentum, False, False, dtype=dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = np.array(0, dtype=np.int64)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            self.num_features = np.shape(input)[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A BatchNorm1d that infers ``num_features`` on the first call, then becomes a ``BatchNorm1d``."""

    cls_to_become = BatchNorm1d

    def _check_input_dim(self, input) -> None:
        BatchNorm1d._check_input_dim(self, input)
