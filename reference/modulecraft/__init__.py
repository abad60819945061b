"""modulecraft: rebuild torch.nn.Module with numpy.

``from modulecraft import nn`` is the reference implementation; ``modulecraft.save``/``load`` store
state_dicts safely on disk; ``modulecraft.manual_seed`` makes initialisation repeatable.
"""

from modulecraft import nn, utils
from modulecraft.nn.init import manual_seed
from modulecraft.serialization import load, save

__all__ = ["nn", "utils", "save", "load", "manual_seed"]
