"""The module classes of ``modulecraft.nn``, one mechanism or layer family per file."""

from modulecraft.nn.modules import _functions  # noqa: F401  (hands BackwardHookFunction to BackwardHook)
from modulecraft.nn.modules.module import Module
from modulecraft.nn.modules.activation import ReLU
from modulecraft.nn.modules.batchnorm import BatchNorm1d, LazyBatchNorm1d
from modulecraft.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from modulecraft.nn.modules.dropout import Dropout
from modulecraft.nn.modules.lazy import LazyModuleMixin
from modulecraft.nn.modules.linear import Identity, LazyLinear, Linear
from modulecraft.nn.modules.loss import CrossEntropyLoss, MSELoss, NLLLoss

__all__ = ["Module", "ReLU", "BatchNorm1d", "LazyBatchNorm1d", "ModuleDict", "ModuleList", "ParameterDict",
           "ParameterList", "Sequential", "Dropout", "LazyModuleMixin", "Identity", "LazyLinear", "Linear",
           "MSELoss", "NLLLoss", "CrossEntropyLoss"]
