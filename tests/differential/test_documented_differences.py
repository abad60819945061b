"""Where modulecraft differs from torch on purpose: each difference pinned down on both libraries.

These are the documented exceptions to "behaves like torch.nn": a dtype change makes new arrays (numpy cannot change
an array's dtype in place), there are no devices, Parameter/Buffer are ndarray subclasses (and a Buffer keeps its
class), a state_dict holds plain ndarrays (loading takes any ndarray), and checkpoints are safetensors by default
(torch's zip format is read, bfloat16 as float32, and written on request for torch.load(weights_only=True));
backward hooks get plain ndarray gradients; optimizers take arrays that can hold a gradient and do not differentiate
their step; autograd: plain ndarray gradients and untracked results, a few node names, data writes into parameters
accepted, writes through plain views unseen, no higher-order gradients, in-place changes and replays of views only
for views made by indexing, no in-place operation of a plain array joining a graph, Python's wording for deleting
read-only properties; losses: class indices of (N, C) or (C,) inputs only; Parameter() of a custom tensor class is a
Parameter; no memory shared between processes (share_memory is refused).
"""

import numpy as np
import pytest

from .backends import backend
from .models import set_values


def test_dtype_change_makes_new_parameters_where_torch_keeps_them():
    for name, keeps_identity in (("torch", True), ("modulecraft", False)):
        lib = backend(name)
        model = lib.nn.Linear(2, 2)
        weight = model.weight
        model.double()
        assert (model.weight is weight) is keeps_identity, name
        assert isinstance(model.weight, lib.Parameter) and model.weight.dtype == lib.float64
    assert weight.dtype == np.float32, "the old array is left as it was"
    model.float()
    same = model.weight
    assert model.float().weight is same, "no dtype change, no new object"


def test_there_are_no_devices():
    model = backend("modulecraft").nn.Linear(1, 1)
    assert model.to("cpu") is model and model.cpu() is model
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        model.to("cuda")


def test_parameter_and_buffer_are_ndarray_subclasses():
    lib = backend("modulecraft")
    param, buffer = lib.Parameter(lib.zeros(2)), lib.Buffer(lib.zeros(2))
    assert isinstance(param, np.ndarray) and isinstance(buffer, np.ndarray)
    recorded = param * 2
    assert type(recorded) is lib.modulecraft.Tensor and recorded.grad_fn.name() == "MulBackward0"
    with lib.modulecraft.no_grad():
        assert type(param * 2) is np.ndarray, "what records nothing stays a plain array (torch: a Tensor)"
    assert type(lib.Parameter(lib.zeros(2), requires_grad=False) * 2) is np.ndarray


def test_a_buffer_is_a_class_of_its_own_where_torch_flags_a_plain_tensor():
    """Modules keep the object assigned (test_buffers.py), so the class shows; observe.py names both "array"."""
    for name, buffer_type in (("torch", "Tensor"), ("modulecraft", "Buffer")):
        lib = backend(name)
        module = lib.nn.Module()
        buffer = lib.Buffer(lib.zeros(2))
        module.buf = buffer
        assert module.buf is buffer and isinstance(buffer, lib.Buffer), name
        assert type(buffer).__name__ == buffer_type, name



def test_state_dicts_hold_plain_arrays_and_load_any_array():
    """A state_dict holds views of the values as plain ndarrays (chapter 7), so loading takes any ndarray: torch
    refuses a numpy array with "expected torch.Tensor or Tensor-like object from checkpoint but received"."""
    import torch

    ours, theirs = backend("modulecraft").nn.Linear(2, 2), torch.nn.Linear(2, 2)
    assert type(ours.state_dict()["weight"]) is np.ndarray and type(theirs.state_dict()["weight"]) is torch.Tensor
    values = np.arange(4.0).reshape(2, 2)
    ours.load_state_dict({"weight": values, "bias": np.zeros(2)})
    assert np.array_equal(ours.weight, values) and ours.weight.dtype == np.float32
    with pytest.raises(RuntimeError, match="expected torch.Tensor or Tensor-like object from checkpoint"):
        theirs.load_state_dict({"weight": values, "bias": np.zeros(2)})

def test_backward_hooks_receive_gradients_as_plain_arrays():
    """Gradients never record a graph in modulecraft (no create_graph), so hooks get what .grad holds: ndarrays."""
    for name, gradient_type in (("torch", "Tensor"), ("modulecraft", "ndarray")):
        lib = backend(name)
        seen = []
        layer = lib.nn.Linear(2, 2)
        layer.register_full_backward_pre_hook(lambda m, grad_output: seen.extend(grad_output))
        layer.register_full_backward_hook(lambda m, grad_input, grad_output: seen.extend(grad_input + grad_output))
        x = lib.leaf(np.ones((1, 2)))
        layer(x).sum().backward()
        assert [type(g).__name__ for g in seen + [x.grad]] == [gradient_type] * 4, name


def test_checkpoints_are_npz_with_json_and_never_pickles(tmp_path):
    lib = backend("modulecraft")
    model = set_values(lib, lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2)))
    path = tmp_path / "model.npz"
    lib.modulecraft.save(model.state_dict(), path)
    with np.load(path, allow_pickle=False) as archive:
        assert set(model.state_dict()) <= set(archive.files)
        assert np.array_equal(archive["0.weight"], model[0].weight)
    with pytest.raises(TypeError):
        lib.modulecraft.save({"opaque": object()}, tmp_path / "refused.npz")
    with pytest.raises(TypeError):
        lib.modulecraft.save({"objects": np.array([object()])}, tmp_path / "refused.npz")


def test_loading_a_checkpoint_never_unpickles(tmp_path):
    lib = backend("modulecraft")
    path, tampered = tmp_path / "model.npz", tmp_path / "tampered.npz"
    lib.modulecraft.save(lib.nn.Linear(1, 1).state_dict(), path)
    with np.load(path) as archive:
        entries = {name: archive[name] for name in archive.files}
    entries["weight"] = np.array([{"would be": "unpickled"}], dtype=object)
    np.savez(tampered, **entries)
    with pytest.raises(ValueError, match="allow_pickle=False"):
        lib.modulecraft.load(tampered)


def test_torch_checkpoints_are_read_with_bfloat16_as_float32(tmp_path):
    """numpy has no bfloat16: those values load widened, exactly, to float32, and are written back as float32."""
    import torch

    lib = backend("modulecraft")
    path = tmp_path / "model.pt"
    values = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    torch.save({"w": values}, path)
    assert torch.load(path, weights_only=True)["w"].dtype == torch.bfloat16
    loaded = lib.modulecraft.load(path)["w"]
    assert loaded.dtype == np.float32 and loaded.tolist() == values.float().tolist()
    lib.modulecraft.save({"w": loaded}, tmp_path / "again.pt")
    assert torch.load(tmp_path / "again.pt", weights_only=True)["w"].dtype == torch.float32


def test_optimizers_refuse_plain_arrays_and_differentiable_steps():
    """torch optimizes any tensor and can differentiate through a step; a plain ndarray has no ``.grad`` and
    cannot key the optimizer's state, and modulecraft's autograd has no higher-order gradients."""
    import torch

    import modulecraft.optim

    torch.optim.SGD([torch.zeros(2)], lr=0.1)
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], differentiable=True)
    lib = backend("modulecraft")
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is numpy"):
        modulecraft.optim.SGD([np.zeros(2, dtype=np.float32)], lr=0.1)
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        modulecraft.optim.Adam([lib.Parameter(lib.zeros(2))], differentiable=True)


def _autograd_pair():
    import torch

    import modulecraft

    return (modulecraft.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True),
            torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True))


def test_gradients_are_plain_ndarrays_and_untracked_results_plain_arrays():
    """numpy users expect arrays: ``.grad`` and what records nothing are np.ndarray (torch: Tensors)."""
    import torch

    import modulecraft

    ours, theirs = _autograd_pair()
    (ours * ours).sum().backward()
    (theirs * theirs).sum().backward()
    assert type(ours.grad) is np.ndarray and type(theirs.grad) is torch.Tensor
    assert np.array_equal(ours.grad, theirs.grad.numpy())
    with modulecraft.no_grad():
        assert type(ours * 2) is np.ndarray


def test_autograd_node_names_that_differ():
    """AccumulateGrad without torch's C++ namespace; one node per indexing, per reshape and per ``number / x``
    where torch records one per indexed dimension, a copy then a view, a reciprocal then a product."""
    ours, theirs = _autograd_pair()
    leaf = ours[0, 0:1].grad_fn.next_functions[0][0]
    assert leaf.name() == "AccumulateGrad"
    assert theirs[0, 0:1].grad_fn.next_functions[0][0].next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    assert ours.T.reshape(4).grad_fn.name() == "ViewBackward0"
    assert theirs.T.reshape(4).grad_fn.name() == "UnsafeViewBackward0"
    assert (2 / ours).grad_fn.name() == "DivBackward0" and (2 / theirs).grad_fn.name() == "MulBackward0"


def test_data_writes_into_a_parameter_are_accepted_with_grad_mode_on():
    """Array code writes into parameters (initialisers, load_state_dict, learners' code): modulecraft takes
    ``p[...] = values`` as a data write; torch wants ``torch.no_grad()`` there. In-place arithmetic
    (``p -= ...``) is refused by both."""
    import torch

    ours, theirs = _autograd_pair()
    ours[...] = 0
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        theirs[...] = 0
    for leaf in (ours, theirs):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            leaf -= 1
    assert torch.is_grad_enabled()


def test_writes_through_a_plain_array_view_are_not_seen_by_the_version_counter():
    """numpy tells us nothing about writes through a plain ndarray view: backward then uses the new values."""
    ours, theirs = _autograd_pair()
    hidden = ours * 1
    loss = (hidden * hidden).sum()
    np.asarray(hidden)[0, 0] = 10.0  # torch's .data writes are likewise unchecked
    loss.backward()
    assert ours.grad[0, 0] == 20.0


def test_no_higher_order_gradients():
    import modulecraft

    import torch

    ours, theirs = _autograd_pair()
    (first,) = torch.autograd.grad((theirs * theirs).sum(), theirs, create_graph=True)
    assert first.grad_fn is not None
    with pytest.raises(NotImplementedError, match="create_graph=True is not supported"):
        (ours * ours).sum().backward(create_graph=True)
    with pytest.raises(NotImplementedError, match="create_graph=True is not supported"):
        modulecraft.autograd.grad((ours * ours).sum(), ours, create_graph=True)


def test_parameter_of_a_custom_tensor_class_is_a_parameter_where_torch_keeps_the_class():
    """torch marks ``t.detach()`` of a Tensor subclass with ``_is_param`` and keeps its class; ours returns a
    Parameter (still ``isinstance`` of both torch's and our flag check), so the custom class's methods are lost."""
    import torch

    from modulecraft import Tensor, nn

    class Custom(torch.Tensor):
        pass

    class Ours(Tensor):
        pass

    theirs = torch.nn.Parameter(torch.ones(2).as_subclass(Custom))
    assert type(theirs) is Custom and isinstance(theirs, torch.nn.Parameter)
    mine = nn.Parameter(np.ones(2, dtype=np.float32).view(Ours))
    assert type(mine) is nn.Parameter and isinstance(mine, nn.Parameter)


def test_in_place_changes_of_views_made_otherwise_than_by_indexing_are_refused():
    """numpy views do not record how they were made: modulecraft replays (and records in-place changes of) views
    made by indexing only; torch replays any view. A replayed view's node is the index's (torch: AsStrided)."""
    import torch

    import modulecraft

    theirs = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True) * 2
    theirs.T[0] += 1
    flat = theirs.reshape(4)
    theirs *= 3
    assert (flat * 1).grad_fn.next_functions[0][0].name() == "AsStridedBackward0"
    ours = modulecraft.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True) * 2
    with pytest.raises(NotImplementedError, match="only for views made by indexing"):
        ours.T[0] += 1
    flat = ours.reshape(4)
    ours *= 3
    with pytest.raises(NotImplementedError, match="take the view .* after the in-place change"):
        flat * 1
    row = ours[0]
    row += 1
    assert row.grad_fn.name() == "SelectBackward0"


def test_an_in_place_operation_on_a_plain_array_cannot_join_the_graph():
    """torch makes a plain tensor part of the graph when a tensor that requires grad is added into it in place;
    a numpy array cannot become a Tensor in place, so modulecraft refuses ``array += tensor`` (and assignment
    into a plain array, which numpy does without asking us, loses the graph)."""
    import torch

    import modulecraft

    plain_torch = torch.ones(2)
    plain_torch += torch.ones(2, requires_grad=True)
    assert plain_torch.grad_fn.name() == "AddBackward0"
    tracked = modulecraft.tensor([1.0, 1.0], requires_grad=True)
    plain = np.ones(2, dtype=np.float32)
    with pytest.raises(RuntimeError, match="in-place operation on a plain numpy array cannot record the gradient"):
        plain += tracked
    plain[0] = tracked[1]
    assert type(plain) is np.ndarray


def test_losses_take_class_indices_of_one_or_two_dimensional_inputs():
    """torch's cross_entropy also takes class probabilities and (N, C, d1, ...) inputs; modulecraft refuses both."""
    import torch

    import modulecraft

    torch.nn.functional.cross_entropy(torch.zeros(2, 3), torch.full((2, 3), 1 / 3))
    torch.nn.functional.cross_entropy(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.int64))
    F = modulecraft.nn.functional
    with pytest.raises(NotImplementedError, match="class probabilities are not supported"):
        F.cross_entropy(np.zeros((2, 3), np.float32), np.full((2, 3), 1 / 3, np.float32))
    with pytest.raises(NotImplementedError, match=r"support \(N, C\) and \(C,\) inputs"):
        F.cross_entropy(np.zeros((2, 3, 4), np.float32), np.zeros((2, 4), np.int64))


def test_deleting_grad_fn_or_is_leaf_says_so_in_pythons_words():
    """Both raise AttributeError; torch's message names its C class ("is not writable"), ours Python's property
    ("has no deleter")."""
    import torch

    import modulecraft

    for name in ("grad_fn", "is_leaf"):
        with pytest.raises(AttributeError, match="is not writable"):
            delattr(torch.ones(1, requires_grad=True), name)
        with pytest.raises(AttributeError, match="has no deleter"):
            delattr(modulecraft.tensor([1.0], requires_grad=True), name)


def test_share_memory_is_refused_where_torch_moves_the_arrays_into_shared_memory():
    """numpy cannot move an array's memory in place, and new arrays would not be the ones an optimizer holds."""
    torch_model = backend("torch").nn.Linear(2, 2)
    assert torch_model.share_memory() is torch_model and torch_model.weight.is_shared()
    with pytest.raises(NotImplementedError, match="cannot share a module's memory between processes"):
        backend("modulecraft").nn.Linear(2, 2).share_memory()
