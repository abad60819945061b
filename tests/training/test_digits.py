"""Training end to end: an MLP learns scikit-learn's handwritten digits with modulecraft as it does with torch.

Both libraries start from the same weights and see the same mini-batches; the losses must follow the same curve
(float32 rounding grows a little with every step, so the tolerance does too), and a checkpoint of model and
optimizer taken halfway resumes to exactly the continuation of the uninterrupted run.
"""

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import modulecraft
import modulecraft.optim
from modulecraft import nn

BATCH, HIDDEN = 64, 32
OPTIMIZERS = {
    "SGD with momentum": ("SGD", {"lr": 0.1, "momentum": 0.9}),
    "Adam": ("Adam", {"lr": 0.01}),
    "AdamW with amsgrad": ("AdamW", {"lr": 0.01, "weight_decay": 0.05, "amsgrad": True}),
}


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    return (data.data / 16.0).astype(np.float32), data.target.astype(np.int64)


def batches(digits, steps, seed=0):
    images, labels = digits
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        rows = rng.choice(len(images), BATCH, replace=False)
        yield images[rows], labels[rows]


def torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10))


def our_model(like):
    model = nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
    model.load_state_dict({key: value.numpy() for key, value in like.state_dict().items()})
    return model


def train_torch(model, optimizer, data):
    losses = []
    for images, labels in data:
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(images)), torch.tensor(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def train_ours(model, optimizer, data):
    losses = []
    for images, labels in data:
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return np.array(losses)


@pytest.mark.parametrize("case", OPTIMIZERS)
def test_loss_curve_follows_torchs(case, digits):
    name, options = OPTIMIZERS[case]
    theirs = torch_model()
    ours = our_model(theirs)
    torch_losses = train_torch(theirs, getattr(torch.optim, name)(theirs.parameters(), **options),
                               batches(digits, 50))
    our_losses = train_ours(ours, getattr(modulecraft.optim, name)(ours.parameters(), **options),
                            batches(digits, 50))
    assert torch_losses[-1] < 0.5 * torch_losses[0], "the run must learn something for the comparison to mean much"
    steps = np.arange(1, 51)
    np.testing.assert_array_less(np.abs(our_losses - torch_losses), 2e-6 * steps * np.abs(torch_losses))
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("case", OPTIMIZERS)
def test_a_checkpoint_resumes_to_the_same_continuation(case, digits):
    name, options = OPTIMIZERS[case]
    reference = torch_model()
    model = our_model(reference)
    optimizer = getattr(modulecraft.optim, name)(model.parameters(), **options)
    data = list(batches(digits, 40))
    train_ours(model, optimizer, data[:20])
    checkpoint = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    uninterrupted = train_ours(model, optimizer, data[20:])

    resumed_model = nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
    resumed_optimizer = getattr(modulecraft.optim, name)(resumed_model.parameters(), **options)
    resumed_model.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed = train_ours(resumed_model, resumed_optimizer, data[20:])
    np.testing.assert_array_equal(resumed, uninterrupted)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(resumed_model.state_dict()[key], value, err_msg=key)


def test_resuming_without_the_optimizer_state_does_not_continue_the_same(digits):
    """The check above can fail: momentum lost in the checkpoint changes the continuation."""
    reference = torch_model()
    model = our_model(reference)
    optimizer = modulecraft.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = list(batches(digits, 30))
    train_ours(model, optimizer, data[:20])
    weights = copy.deepcopy(model.state_dict())
    uninterrupted = train_ours(model, optimizer, data[20:])
    model.load_state_dict(weights)
    restarted = train_ours(model, modulecraft.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), data[20:])
    assert not np.allclose(restarted, uninterrupted)


@pytest.mark.parametrize("case", ["SGD with momentum", "Adam"])
def test_a_torch_training_checkpoint_on_disk_resumes_in_modulecraft_as_in_torch(case, digits, tmp_path):
    """torch.save({"model": ..., "optimizer": ...}) read by modulecraft.load continues torch's run."""
    name, options = OPTIMIZERS[case]
    theirs = torch_model()
    optimizer = getattr(torch.optim, name)(theirs.parameters(), **options)
    data = list(batches(digits, 40))
    train_torch(theirs, optimizer, data[:20])
    torch.save({"model": theirs.state_dict(), "optimizer": optimizer.state_dict(), "step": 20}, tmp_path / "run.pt")
    continued = train_torch(theirs, optimizer, data[20:])

    checkpoint = modulecraft.load(tmp_path / "run.pt")
    ours = nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
    our_optimizer = getattr(modulecraft.optim, name)(ours.parameters(), **options)
    ours.load_state_dict(checkpoint["model"])
    our_optimizer.load_state_dict(checkpoint["optimizer"])
    assert checkpoint["step"] == 20
    resumed = train_ours(ours, our_optimizer, data[20:])
    steps = np.arange(21, 41)
    np.testing.assert_array_less(np.abs(resumed - continued), 2e-6 * steps * np.abs(continued))
