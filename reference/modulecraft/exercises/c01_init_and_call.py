"""Chapter 1's own exercises: the prediction's scenario run for real, and the reference's counterpart of the fixed
pipeline."""
from collections import OrderedDict

from modulecraft import nn
from modulecraft.nn.modules import module as module_impl


def prediction(x):
    """The scenario of the prediction exercise, run for real: the events of a Doubler with four hooks called on x."""
    events = []

    class Doubler(nn.Module):
        def forward(self, x):
            events.append(f"forward({x})")
            return 2 * x

    doubler = Doubler()
    doubler.register_forward_hook(lambda module, args, result: events.append(f"hook A({result})"))
    doubler.register_forward_hook(lambda module, args, result: events.append(f"hook B({result})") or result + 10)
    doubler.register_forward_pre_hook(lambda module, args: args[0] + 1)
    handle = module_impl.register_module_forward_hook(lambda module, args, result: events.append(f"global({result})"))
    try:
        events.append(f"returned {doubler(x)}")
    finally:
        handle.remove()
    return events


def FixedPipeline():
    """The reference's counterpart of a fixed pipeline: a Sequential calls each child as child(x)."""
    return nn.Sequential(OrderedDict(encoder=nn.Linear(2, 3), head=nn.Linear(3, 1)))
