"""Parameter and Buffer: the tensor types that registration recognises (chapters 3-4)."""

import copy
import pickle

from .observe import differential, raises


@differential
def test_parameter_defaults(lib):
    frozen = lib.Parameter(lib.zeros(2), requires_grad=False)
    param = lib.Parameter(lib.arange(2, 3))
    return (
        param, param.requires_grad, param.grad, frozen.requires_grad,
        lib.Parameter(), lib.Parameter(lib.tensor([1.0], dtype=lib.float64)).dtype,
        isinstance(param, lib.TensorBase), type(param),
    )


@differential
def test_parameter_wraps_its_data_without_copying(lib):
    data = lib.zeros(3)
    return lib.shares_memory(lib.Parameter(data), data)


@differential
def test_arithmetic_on_a_parameter_gives_plain_tensors(lib):
    param = lib.Parameter(lib.arange(3))
    results = [param * 2, param + param, -param, param[1:], param.reshape(3, 1), param.detach()]
    return [(type(r), isinstance(r, lib.Parameter), r) for r in results]


@differential
def test_parameter_repr_starts_with_parameter_containing(lib):
    return repr(lib.Parameter(lib.zeros(2))).splitlines()[0]


@differential
def test_is_param_flag_makes_any_tensor_a_parameter(lib):
    """torch's metaclass `__instancecheck__`: a tensor (subclass) with `_is_param = True` is a Parameter."""
    class Flagged(lib.TensorBase):
        _is_param = True

    class Unflagged(lib.TensorBase):
        pass

    flagged = lib.as_subclass(lib.zeros(2), Flagged)
    module = lib.nn.Module()
    module.f = flagged
    module.register_parameter("g", lib.as_subclass(lib.ones(1), Flagged))
    return (
        isinstance(flagged, lib.Parameter), isinstance(lib.as_subclass(lib.zeros(2), Unflagged), lib.Parameter),
        isinstance(lib.zeros(2), lib.Parameter), list(module._parameters), module._parameters["f"] is flagged,
        [name for name, _ in module.named_parameters()], list(module.state_dict()),
        raises(lambda: setattr(module, "f", lib.zeros(2)), "cannot assign", "as parameter 'f'"),
    )


@differential
def test_buffer_type_and_persistence(lib):
    data = lib.arange(2)
    buffer = lib.Buffer(data)
    hidden = lib.Buffer(lib.zeros(1), persistent=False)
    return (
        buffer, isinstance(buffer, lib.TensorBase), isinstance(buffer, lib.Buffer), isinstance(data, lib.Buffer),
        buffer.persistent, hidden.persistent, lib.shares_memory(buffer, data),
    )


@differential
def test_assigning_a_buffer_registers_it_as_a_plain_tensor(lib):
    module = lib.nn.Module()
    module.kept = lib.Buffer(lib.zeros(1))
    module.hidden = lib.Buffer(lib.zeros(1), persistent=False)
    module.register_buffer("explicit", lib.Buffer(lib.zeros(1)), persistent=False)
    return (list(module._buffers), module._non_persistent_buffers_set, list(module.state_dict()),
            [type(b) for b in module.buffers()])


@differential
def test_copies_of_a_parameter(lib):
    frozen = lib.Parameter(lib.arange(2), requires_grad=False)
    trained = lib.Parameter(lib.arange(3))
    lib.set_grad(trained, [1.0, 1.0, 1.0])
    copies = [copy.deepcopy(frozen), copy.deepcopy(trained), pickle.loads(pickle.dumps(frozen))]
    return [(c, c.requires_grad, c.grad, lib.shares_memory(c, frozen)) for c in copies]


@differential
def test_requires_grad_in_place_returns_the_parameter(lib):
    param = lib.Parameter(lib.zeros(1))
    return param.requires_grad_(False) is param, param.requires_grad, param.requires_grad_() is param, \
        param.requires_grad
