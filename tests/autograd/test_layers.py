"""Layers, losses and nn.functional against torch: values, gradients, recorded nodes, reprs (float32)."""

import numpy as np
import pytest
import torch

import modulecraft
from modulecraft import nn
from modulecraft.nn import functional as F

RNG = np.random.default_rng(7)


def _pair(array, requires_grad=True):
    array = np.asarray(array, dtype=np.float32)
    return (modulecraft.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def _copy_parameters(ours, theirs):
    with torch.no_grad():
        for (name, ours_param), (their_name, their_param) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == their_name
            ours_param[...] = their_param.numpy()


def _close(ours, theirs, tolerance=1e-5):
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=tolerance, atol=tolerance)


def _check_backward(ours_out, theirs_out, pairs):
    """Same output; then the same gradients for each (ours, theirs) leaf after backward of a weighted sum."""
    _close(ours_out, theirs_out)
    weights = RNG.standard_normal(np.shape(ours_out)).astype(np.float32)
    (ours_out * weights).sum().backward()
    (theirs_out * torch.from_numpy(weights)).sum().backward()
    for ours, theirs in pairs:
        assert (ours.grad is None) == (theirs.grad is None)
        if ours.grad is not None:
            _close(ours.grad, theirs.grad)


def _names(node):
    if node is None:
        return None
    return node.name().replace("torch::autograd::", ""), tuple(_names(n) for n, _ in node.next_functions)


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(shape, bias):
    ours, theirs = nn.Linear(3, 4, bias=bias), torch.nn.Linear(3, 4, bias=bias)
    _copy_parameters(ours, theirs)
    x, tx = _pair(RNG.standard_normal(shape))
    out, tout = ours(x), theirs(tx)
    if len(shape) == 2:
        assert _names(out.grad_fn) == _names(tout.grad_fn)
    pairs = [(x, tx)] + [(p, q) for p, q in zip(ours.parameters(), theirs.parameters())]
    _check_backward(out, tout, pairs)


def test_linear_on_plain_arrays_records_nothing():
    layer = nn.Linear(3, 2)
    with modulecraft.no_grad():
        assert type(layer(np.ones((1, 3), dtype=np.float32))) is np.ndarray
    out = layer(np.ones((1, 3), dtype=np.float32))
    assert out.grad_fn.name() == "AddmmBackward0"
    assert out.grad_fn.next_functions[1] == (None, 0), "a plain input gets no edge, as torch's"


@pytest.mark.parametrize("inplace", [False, True])
def test_relu(inplace):
    values = RNG.standard_normal((4, 5))
    values[0, 0] = 0.0  # torch's rule at 0: gradient 0
    x, tx = _pair(values)
    out, tout = nn.ReLU(inplace)(x * 1), torch.nn.ReLU(inplace)(tx * 1)
    assert _names(out.grad_fn) == _names(tout.grad_fn)
    _check_backward(out, tout, [(x, tx)])
    assert repr(nn.ReLU(inplace)) == repr(torch.nn.ReLU(inplace))


def test_dropout_scales_what_it_keeps_and_its_gradient_is_the_mask():
    modulecraft.manual_seed(0)
    x = modulecraft.tensor(np.ones((50, 40)), requires_grad=True)
    layer = nn.Dropout(0.25)
    out = layer(x)
    kept = np.asarray(out) != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_allclose(np.asarray(out)[kept], 1 / 0.75)
    assert out.grad_fn.name() == "MulBackward0"
    out.sum().backward()
    np.testing.assert_allclose(x.grad, np.asarray(out))
    layer.eval()
    assert layer(x) is x
    assert repr(layer) == repr(torch.nn.Dropout(0.25))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_in_training_and_eval(shape, affine):
    ours, theirs = nn.BatchNorm1d(3, affine=affine), torch.nn.BatchNorm1d(3, affine=affine)
    if affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-1, 1)
        _copy_parameters(ours, theirs)
    for training in (True, False, True):
        ours.train(training)
        theirs.train(training)
        x, tx = _pair(RNG.standard_normal(shape) * 2 + 1)
        out, tout = ours(x), theirs(tx)
        assert _names(out.grad_fn) == _names(tout.grad_fn)
        for p in (*ours.parameters(), *theirs.parameters()):
            p.grad = None
        pairs = [(x, tx)] + [(p, q) for p, q in zip(ours.parameters(), theirs.parameters())]
        _check_backward(out, tout, pairs)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            _close(getattr(ours, name), getattr(theirs, name))
    assert type(ours.running_mean) is not modulecraft.Tensor or ours.running_mean.grad_fn is None


def test_batch_norm_without_running_statistics():
    ours, theirs = nn.BatchNorm1d(2, track_running_stats=False), torch.nn.BatchNorm1d(2, track_running_stats=False)
    for training in (True, False):
        ours.train(training)
        theirs.train(training)
        x, tx = _pair(RNG.standard_normal((5, 2)))
        _check_backward(ours(x), theirs(tx), [(x, tx)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    x, tx = _pair(RNG.standard_normal((4, 3)))
    t, tt = _pair(RNG.standard_normal((4, 3)))
    out, tout = nn.MSELoss(reduction=reduction)(x, t), torch.nn.MSELoss(reduction=reduction)(tx, tt)
    assert _names(out.grad_fn) == _names(tout.grad_fn)
    _check_backward(out, tout, [(x, tx), (t, tt)])


def test_mse_loss_warns_about_broadcasting_like_torch():
    with pytest.warns(UserWarning, match="Using a target size") as ours:
        F.mse_loss(np.zeros((4, 3), dtype=np.float32), np.zeros((4, 1), dtype=np.float32))
    with pytest.warns(UserWarning, match="Using a target size"):
        torch.nn.functional.mse_loss(torch.zeros(4, 3), torch.zeros(4, 1))
    assert "(4, 1)" in str(ours[0].message)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy(reduction, weighted):
    x, tx = _pair(RNG.standard_normal((6, 4)) * 3)
    target = np.array([0, 3, 1, 1, 2, -100])
    weight = RNG.uniform(0.5, 2, 4).astype(np.float32) if weighted else None
    ours = nn.CrossEntropyLoss(weight=weight, reduction=reduction)
    theirs = torch.nn.CrossEntropyLoss(weight=None if weight is None else torch.from_numpy(weight),
                                       reduction=reduction)
    out, tout = ours(x, target), theirs(tx, torch.from_numpy(target))
    assert _names(out.grad_fn) == _names(tout.grad_fn)
    _check_backward(out, tout, [(x, tx)])


def test_cross_entropy_of_one_unbatched_sample():
    x, tx = _pair(RNG.standard_normal(5))
    _check_backward(F.cross_entropy(x, np.array(2)), torch.nn.functional.cross_entropy(tx, torch.tensor(2)), [(x, tx)])


@pytest.mark.parametrize("function", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(function, dim):
    x, tx = _pair(RNG.standard_normal((3, 4)) * 5)
    out = getattr(F, function)(x, dim)
    tout = getattr(torch.nn.functional, function)(tx, dim)
    assert _names(out.grad_fn) == _names(tout.grad_fn)
    _check_backward(out, tout, [(x, tx)])


def test_loss_reprs_and_state_match_torch():
    for ours, theirs in ((nn.MSELoss(), torch.nn.MSELoss()), (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
                         (nn.CrossEntropyLoss(reduction="sum", ignore_index=3),
                          torch.nn.CrossEntropyLoss(reduction="sum", ignore_index=3))):
        assert repr(ours) == repr(theirs)
        assert ours.reduction == theirs.reduction
        assert list(ours.state_dict()) == list(theirs.state_dict())
    weighted = nn.CrossEntropyLoss(weight=np.ones(3, dtype=np.float32))
    assert list(weighted.state_dict()) == ["weight"]
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.MSELoss(size_average=False).reduction == "sum"


def test_unsupported_loss_options_are_refused_clearly():
    with pytest.raises(NotImplementedError, match=r"support \(N, C\) and \(C,\) inputs"):
        F.cross_entropy(np.zeros((2, 3, 4)), np.zeros((2, 4), dtype=np.int64))
    with pytest.raises(NotImplementedError, match="class probabilities"):
        F.cross_entropy(np.zeros((2, 3)), np.zeros((2, 3)))


def test_a_small_mlp_trains_like_torch():
    modulecraft.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.BatchNorm1d(8),
                                 torch.nn.Linear(8, 3))
    _copy_parameters(ours, theirs)
    x = RNG.standard_normal((16, 4)).astype(np.float32)
    y = RNG.integers(0, 3, 16)
    for _ in range(20):
        loss = nn.CrossEntropyLoss()(ours(x), y)
        tloss = torch.nn.CrossEntropyLoss()(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        assert np.isclose(float(loss), tloss.item(), rtol=1e-4)
        loss.backward()
        tloss.backward()
        with modulecraft.no_grad(), torch.no_grad():
            for p, q in zip(ours.parameters(), theirs.parameters()):
                p -= 0.1 * p.grad
                q -= 0.1 * q.grad
                p.grad = None
                q.grad = None


def test_dropout_in_place_on_a_tensor_in_a_graph():
    modulecraft.manual_seed(1)
    x = modulecraft.tensor(np.ones((20, 10)), requires_grad=True)
    hidden = x * 1
    out = nn.Dropout(0.5, inplace=True)(hidden)
    assert out is hidden and out.grad_fn.name() == "MulBackward0"
    out.sum().backward()
    np.testing.assert_array_equal(x.grad, (np.asarray(out) != 0) * 2.0)


def test_batch_norm_with_a_cumulative_average_and_identity():
    ours, theirs = nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    for _ in range(3):
        x, tx = _pair(RNG.standard_normal((5, 3)))
        _check_backward(ours(x), theirs(tx), [(x, tx)])
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        _close(getattr(ours, name), getattr(theirs, name))
    x, tx = _pair(RNG.standard_normal((2, 3)))
    _check_backward(nn.Identity(7, key="ignored")(x) * 2, torch.nn.Identity(7, key="ignored")(tx) * 2, [(x, tx)])
