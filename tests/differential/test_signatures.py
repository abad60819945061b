"""Same names, parameters, kinds and defaults as torch (annotations differ: numpy arrays stand in for tensors)."""

import inspect

import pytest

from .observe import differential

MODULE_METHODS = (
    "__init__", "forward", "__setattr__", "__getattr__", "__delattr__", "__dir__", "__setstate__", "__getstate__",
    "register_parameter", "register_buffer", "add_module", "register_module", "get_submodule", "set_submodule",
    "get_parameter", "get_buffer", "named_modules", "modules", "named_children", "children", "_named_members",
    "named_parameters", "parameters", "named_buffers", "buffers", "train", "eval", "apply", "_apply", "to", "float",
    "double", "half", "cpu", "requires_grad_", "zero_grad", "extra_repr", "_get_name", "_call_impl",
    "register_forward_pre_hook", "register_forward_hook", "register_full_backward_pre_hook",
    "register_full_backward_hook", "register_backward_hook", "state_dict", "_save_to_state_dict",
    "load_state_dict", "_load_from_state_dict", "register_state_dict_pre_hook", "register_state_dict_post_hook",
    "_register_state_dict_hook", "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
    "get_extra_state", "set_extra_state",
)
CONSTRUCTORS = (
    "Linear", "LazyLinear", "Identity", "ReLU", "Dropout", "BatchNorm1d", "LazyBatchNorm1d", "Sequential",
    "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "MSELoss", "NLLLoss", "CrossEntropyLoss",
)
TENSOR_TYPES = ("Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer")
GLOBAL_FUNCTIONS = (
    "register_module_forward_pre_hook", "register_module_forward_hook", "register_module_module_registration_hook",
    "register_module_parameter_registration_hook", "register_module_buffer_registration_hook",
    "register_module_full_backward_pre_hook", "register_module_full_backward_hook", "register_module_backward_hook",
)
LAZY_METHODS = ("has_uninitialized_params", "initialize_parameters", "_infer_parameters", "_lazy_load_hook")


def parameters(function):
    return [(p.name, p.kind.name, repr(p.default)) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("method", MODULE_METHODS)
@differential
def test_module_method(lib, method):
    return parameters(getattr(lib.nn.Module, method))


@pytest.mark.parametrize("name", CONSTRUCTORS)
@differential
def test_constructor(lib, name):
    return parameters(getattr(lib.nn, name).__init__)


@pytest.mark.parametrize("name", TENSOR_TYPES)
@differential
def test_tensor_type_constructor(lib, name):
    return parameters(getattr(lib.nn, name).__new__)


@pytest.mark.parametrize("name", GLOBAL_FUNCTIONS)
@differential
def test_global_hook_function(lib, name):
    return parameters(getattr(lib.hooks, name))


@pytest.mark.parametrize("method", LAZY_METHODS)
@differential
def test_lazy_module_mixin_method(lib, method):
    return parameters(getattr(lib.nn.modules.lazy.LazyModuleMixin, method))


@differential
def test_removable_handle(lib):
    return parameters(lib.RemovableHandle.__init__), parameters(lib.RemovableHandle.remove)
