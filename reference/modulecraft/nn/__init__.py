"""``modulecraft.nn``: torch 2.13's ``torch.nn`` Module machinery, rebuilt on numpy.

Same names, signatures, orders and error phrases as ``torch.nn`` for everything the course teaches;
see each docstring for where numpy forces a difference.
"""

from modulecraft.nn import functional, init, modules, parameter
from modulecraft.nn.modules import (BatchNorm1d, CrossEntropyLoss, Dropout, Identity, LazyBatchNorm1d, LazyLinear,
                                    Linear, Module, ModuleDict, ModuleList, MSELoss, NLLLoss, ParameterDict,
                                    ParameterList, ReLU, Sequential)
from modulecraft.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

__all__ = ["functional", "init", "modules", "parameter", "Module", "Parameter", "Buffer", "UninitializedParameter",
           "UninitializedBuffer", "Linear", "LazyLinear", "Identity", "ReLU", "Dropout", "BatchNorm1d",
           "LazyBatchNorm1d", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "MSELoss",
           "NLLLoss", "CrossEntropyLoss"]
