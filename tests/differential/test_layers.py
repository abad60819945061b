"""The layers: Linear, Identity, ReLU, Dropout, BatchNorm1d (reprs, members, forward values, train vs eval)."""

import numpy as np
import pytest

from .models import set_values
from .observe import differential, raises

LAYERS = {
    "Linear": lambda nn: nn.Linear(2, 3),
    "Linear without bias": lambda nn: nn.Linear(4, 1, bias=False),
    "Identity with ignored arguments": lambda nn: nn.Identity(3, unused=True),
    "ReLU": lambda nn: nn.ReLU(),
    "ReLU in place": lambda nn: nn.ReLU(inplace=True),
    "Dropout": lambda nn: nn.Dropout(),
    "Dropout in place": lambda nn: nn.Dropout(p=0.25, inplace=True),
    "BatchNorm1d": lambda nn: nn.BatchNorm1d(3),
    "BatchNorm1d with other settings": lambda nn: nn.BatchNorm1d(5, eps=0.001, momentum=0.3),
    "BatchNorm1d without affine and stats": lambda nn: nn.BatchNorm1d(
        4, eps=1e-3, momentum=None, affine=False, track_running_stats=False),
}


@pytest.mark.parametrize("layer", LAYERS)
@differential
def test_layer_repr_and_members(lib, layer):
    module = LAYERS[layer](lib.nn)
    members = [(name, t if t is None else (type(t), t.dtype, t.shape)) for name, t in
               [*module._parameters.items(), *module._buffers.items()]]
    return repr(module), module.extra_repr(), members, module.training


@differential
def test_linear_default_initialisation_bounds(lib):
    module = lib.nn.Linear(16, 8)
    bound = 1 / np.sqrt(16)
    weight, bias = lib.to_numpy(module.weight), lib.to_numpy(module.bias)
    return (bool(np.all(np.abs(weight) <= bound)), bool(np.all(np.abs(bias) <= bound)),
            bool(np.std(weight) > bound / 4))


@differential
def test_reset_methods_reinitialise_in_place(lib):
    linear = set_values(lib, lib.nn.Linear(4, 2))
    weight = linear.weight
    linear.reset_parameters()
    norm = set_values(lib, lib.nn.BatchNorm1d(3))
    lib.copy_into(norm.num_batches_tracked, np.array(4))
    members = [*norm._parameters.values(), *norm._buffers.values()]
    norm.reset_running_stats()
    after_stats = [(name, lib.clone(buffer)) for name, buffer in norm.named_buffers()]
    norm.reset_parameters()
    return (linear.weight is weight, bool(np.all(np.abs(lib.to_numpy(weight)) <= 0.5)), after_stats,
            list(norm.named_parameters()), [a is b for a, b in zip(members, [*norm._parameters.values(),
                                                                             *norm._buffers.values()])])


@pytest.mark.parametrize("shape", [(2,), (5, 2), (4, 3, 2)])
@differential
def test_linear_forward(lib, shape):
    module = set_values(lib, lib.nn.Linear(2, 3))
    return module(lib.arange(*shape))


@differential
def test_identity_and_relu_forward(lib):
    x = lib.tensor([-2.0, -0.5, 0.0, 1.5])
    identity_out = lib.nn.Identity()(x)
    relu_out = lib.nn.ReLU()(x)
    in_place_input = lib.tensor([-1.0, 2.0])
    in_place_out = lib.nn.ReLU(inplace=True)(in_place_input)
    return identity_out is x, relu_out, x, in_place_out is in_place_input, in_place_input


@differential
def test_dropout_obeys_training(lib):
    x = lib.ones(200)
    half = lib.nn.Dropout(0.5)
    kept_values = sorted(set(np.unique(lib.to_numpy(half(x))).tolist()))
    half.eval()
    return (
        kept_values, half(x), float(lib.nn.Dropout(1.0)(x).sum()), float(lib.nn.Dropout(0.0)(x).sum()),
        raises(lambda: lib.nn.Dropout(1.5), "dropout probability has to be between 0 and 1, but got 1.5"),
        raises(lambda: lib.nn.Dropout(-0.1), "dropout probability has to be between 0 and 1, but got -0.1"),
    )


@differential
def test_dropout_in_place_changes_its_input(lib):
    x = lib.ones(3)
    return lib.nn.Dropout(1.0, inplace=True)(x) is x, x


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5)])
@pytest.mark.parametrize("momentum", [0.1, None])
@differential
def test_batchnorm_train_then_eval(lib, shape, momentum):
    module = lib.nn.BatchNorm1d(3, momentum=momentum)
    rng = np.random.default_rng(1)
    trace = []
    for _ in range(2):
        trace.append(module(lib.tensor(rng.normal(2.0, 3.0, shape))))
        trace.append([(name, lib.clone(buffer)) for name, buffer in module.named_buffers()])
    module.eval()
    trace.append(module(lib.tensor(rng.normal(0.0, 1.0, shape))))
    trace.append(module.num_batches_tracked)
    return trace


@differential
def test_batchnorm_without_running_stats_uses_batch_statistics_in_eval(lib):
    module = set_values(lib, lib.nn.BatchNorm1d(2, track_running_stats=False)).eval()
    return module(lib.arange(3, 2)), list(module.named_buffers())


@differential
def test_batchnorm_input_errors(lib):
    module = lib.nn.BatchNorm1d(3)
    return [
        raises(lambda: module(lib.zeros(3)), "expected 2D or 3D input (got 1D input)"),
        raises(lambda: module(lib.zeros(1, 3)), "Expected more than 1 value per channel when training"),
    ]


@differential
def test_repr_of_nested_custom_modules(lib):
    class Described(lib.nn.Module):
        def __init__(self, lines, children=()):
            super().__init__()
            self.lines = lines
            for index, child in enumerate(children):
                self.add_module(f"part{index}", child)

        def extra_repr(self):
            return "\n".join(self.lines)

    leaf = Described([])
    inner = Described(["depth=2"], [lib.nn.Linear(1, 2), leaf])
    outer = Described(["first line", "second line"], [inner, lib.nn.Sequential(lib.nn.ReLU(), Described(["x"]))])
    outer.add_module("missing", None)
    return repr(leaf), repr(Described(["only extra"])), repr(outer)
