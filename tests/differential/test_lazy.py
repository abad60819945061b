"""Lazy modules: uninitialised parameters, shape inference on the first call, cls_to_become, loading (chapter 8)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .backends import backend
from .models import set_values
from .observe import differential, observe, raises

LAZY_LAYERS = {
    "LazyLinear": (lambda nn: nn.LazyLinear(3), (2, 5)),
    "LazyLinear without bias": (lambda nn: nn.LazyLinear(2, bias=False), (4, 3, 6)),
    "LazyBatchNorm1d": (lambda nn: nn.LazyBatchNorm1d(), (4, 3)),
    "LazyBatchNorm1d without affine": (lambda nn: nn.LazyBatchNorm1d(affine=False, momentum=None), (4, 2, 3)),
}


def make_lazy(lib, layer):
    with warnings.catch_warnings():  # torch warns that lazy modules are a new feature
        warnings.simplefilter("ignore")
        return LAZY_LAYERS[layer][0](lib.nn)


def lazy_state(lib, module):
    """What a lazy module shows: class, repr, members (lazy or not) and its hook bookkeeping."""
    members = [(name, lib.is_lazy(t), type(t), None if lib.is_lazy(t) else t.shape)
               for name, t in [*module._parameters.items(), *module._buffers.items()] if t is not None]
    hooks = [len(module._forward_pre_hooks), len(module._forward_pre_hooks_with_kwargs),
             len(module._load_state_dict_pre_hooks)]
    return type(module), repr(module), members, hooks, getattr(module, "has_uninitialized_params", lambda: None)()


@pytest.mark.parametrize("layer", LAZY_LAYERS)
@differential
def test_first_call_infers_shapes_and_becomes_the_eager_class(lib, layer):
    module = make_lazy(lib, layer)
    before = lazy_state(lib, module)
    output = module(lib.arange(*LAZY_LAYERS[layer][1]))
    after = lazy_state(lib, set_values(lib, module))
    return before, output.shape, after, module(lib.arange(*LAZY_LAYERS[layer][1]))


@pytest.mark.parametrize("layer", LAZY_LAYERS)
@differential
def test_state_dict_of_an_uninitialised_module(lib, layer):
    module = make_lazy(lib, layer)
    return module.state_dict(), list(module.state_dict(keep_vars=True))


@pytest.mark.parametrize("layer", ["LazyLinear", "LazyBatchNorm1d"])
@differential
def test_loading_an_initialised_state_materialises(lib, layer):
    shape = LAZY_LAYERS[layer][1]
    trained = make_lazy(lib, layer)
    trained(lib.arange(*shape))
    set_values(lib, trained)
    module = make_lazy(lib, layer)
    result = module.load_state_dict(trained.state_dict())
    loaded = lazy_state(lib, module)
    module.eval()
    trained.eval()
    output = module(lib.arange(*shape))
    return result, loaded, module.state_dict(), lazy_state(lib, module), output, trained(lib.arange(*shape))


@differential
def test_loading_an_uninitialised_state_keeps_the_module_lazy(lib):
    module = make_lazy(lib, "LazyLinear")
    result = module.load_state_dict(make_lazy(lib, "LazyLinear").state_dict())
    return result, lazy_state(lib, module)


@pytest.mark.parametrize("out_features, in_features", [(1, 1), (2, 3)])
@differential
def test_a_placeholder_left_unmaterialised_refuses_the_loaded_values(lib, out_features, in_features):
    """A load hook that forgets to materialise: the copy into the empty placeholder fails, even for a (1, 1) weight
    (numpy's assignment alone would let it "fit")."""
    class Forgetful(lib.nn.LazyLinear):
        def _lazy_load_hook(self, *args, **kwargs):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = Forgetful(out_features)
    state = lib.nn.Linear(in_features, out_features).state_dict()
    return raises(lambda: module.load_state_dict(state), "Error(s) in loading state_dict for Forgetful",
                  'While copying the parameter named "weight", whose dimensions in the model are'), lazy_state(lib, module)


@differential
def test_keyword_arguments_reach_shape_inference(lib):
    module = make_lazy(lib, "LazyLinear")
    output = module(input=lib.ones(2, 4))
    return output.shape, lazy_state(lib, module)


@differential
def test_custom_lazy_module_without_cls_to_become(lib):
    log = []

    class LazyScale(lib.nn.modules.lazy.LazyModuleMixin, lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.UninitializedParameter()

        def initialize_parameters(self, x, *, offset=0):
            log.append(("initialize", x.shape, offset))
            if self.has_uninitialized_params():
                self.scale.materialize(tuple(x.shape[1:]))
                lib.copy_into(self.scale, np.full(tuple(x.shape[1:]), 2.0 + offset, dtype=np.float32))

        def forward(self, x, *, offset=0):
            return x * self.scale

    module = LazyScale()
    first = module(lib.ones(2, 3), offset=1)
    second = module(lib.ones(2, 3), offset=5)
    return log, first, second, lazy_state(lib, module)


@differential
def test_uninitialized_parameter(lib):
    param = lib.UninitializedParameter()
    frozen = lib.UninitializedParameter(requires_grad=False)
    trace = [lib.is_lazy(param), lib.is_lazy(lib.Parameter(lib.zeros(1))), lib.is_lazy(lib.zeros(1)),
             isinstance(param, lib.Parameter), repr(param),
             raises(lambda: param.shape, "Can't access the shape of an uninitialized parameter or buffer")]
    param.materialize((2, 3))
    frozen.materialize(4, dtype=lib.float64)
    trace += [type(param), param.shape, param.dtype, param.requires_grad, lib.is_lazy(param),
              type(frozen), frozen.shape, frozen.dtype, frozen.requires_grad]
    return trace


def lazy_life_cycle(lib, layer, shape, load_first):
    """Materialise a lazy layer by loading a trained twin's state or by calling it, then call it once more."""
    module, twin = make_lazy(lib, layer), make_lazy(lib, layer)
    twin(lib.arange(*shape))
    set_values(lib, twin)
    if load_first:
        module.load_state_dict(twin.state_dict())
    first = module(lib.arange(*shape))
    return observe((lazy_state(lib, module), first.shape, module(lib.arange(*shape)) if load_first else None),
                   lib, oracle=lib.name == "torch")


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["LazyLinear", "LazyBatchNorm1d"]), st.lists(st.integers(2, 5), min_size=2, max_size=3),
       st.booleans())
def test_lazy_life_cycle_on_random_shapes_matches_torch(layer, shape, load_first):
    assert lazy_life_cycle(backend("modulecraft"), layer, shape, load_first) == \
        lazy_life_cycle(backend("torch"), layer, shape, load_first)


@pytest.mark.parametrize("layer", LAZY_LAYERS)
@differential
def test_share_memory_refuses_uninitialized_parameters_and_buffers(lib, layer):
    """torch's own refusal comes first (modulecraft refuses share_memory of initialized arrays too, see
    test_documented_differences.py)."""
    return raises(lambda: make_lazy(lib, layer).share_memory(),
                  "Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize the "
                  "parameters before calling `module.share_memory()`.")


@pytest.mark.parametrize("layer", LAZY_LAYERS)
@differential
def test_autograd_methods_refuse_uninitialized_parameters_and_buffers(lib, layer):
    """Freezing a lazy module before its first call, or any autograd method of its placeholders, is a use of an
    uninitialized parameter: torch's ValueError. A module without parameters freezes nothing, so nothing fails."""
    module = make_lazy(lib, layer)
    phrase = "Attempted to use an uninitialized parameter in"
    trace = [raises(lambda: module.requires_grad_(False), phrase), raises(module.requires_grad_, phrase),
             raises(module.zero_grad)]
    for placeholder in [*module._parameters.values(), *module._buffers.values()]:
        if lib.is_lazy(placeholder):
            trace += [raises(call, phrase) for call in (
                placeholder.requires_grad_, lambda: placeholder.requires_grad_(False), placeholder.detach,
                placeholder.detach_, placeholder.retain_grad, lambda: placeholder.register_hook(lambda grad: grad),
                lambda: placeholder.register_post_accumulate_grad_hook(lambda param: None))]
    return trace, lazy_state(lib, module)
