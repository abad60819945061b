"""modulecraft: rebuild torch.nn.Module with numpy.

``from modulecraft import nn`` is the reference implementation; ``modulecraft.Tensor`` (an ``np.ndarray``
with autograd), ``tensor``, ``no_grad`` and ``modulecraft.autograd`` give it a backward half and ``modulecraft.optim`` its optimizers;
``modulecraft.save``/``load`` store state_dicts safely on disk, ``modulecraft.data.path`` finds the files shipped
with the package; ``modulecraft.manual_seed`` makes initialisation repeatable.
"""

from modulecraft import autograd
from modulecraft.autograd import Tensor, enable_grad, is_grad_enabled, no_grad, set_grad_enabled, tensor
from modulecraft import data, nn, optim, utils
from modulecraft.nn.init import manual_seed
from modulecraft.serialization import load, save

__all__ = ["nn", "optim", "utils", "autograd", "data", "Tensor", "tensor", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "save", "load", "manual_seed"]
