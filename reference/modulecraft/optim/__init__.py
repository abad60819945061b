"""``modulecraft.optim``: torch 2.13's optimizers on numpy, one per file as torch lays them out.

Each reads ``p.grad`` and updates ``p`` in place (the Parameter object stays the same); ``state_dict()``
has torch's format, so optimizer checkpoints travel between the two libraries (arrays for tensors).
"""

from modulecraft.optim.adam import Adam
from modulecraft.optim.adamw import AdamW
from modulecraft.optim.optimizer import Optimizer
from modulecraft.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
