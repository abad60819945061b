"""Chapter 12's param groups: weight decay chosen by name."""
from modulecraft import nn

NORM_LAYERS = (nn.BatchNorm1d,)


def param_groups(model, weight_decay):
    """Two groups in `named_parameters()` order: `weight_decay` for weights, none for biases and the parameters
    of normalisation layers."""
    modules = dict(model.named_modules())
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        owner, _, last = name.rpartition(".")
        (no_decay if last == "bias" or isinstance(modules[owner], NORM_LAYERS) else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
