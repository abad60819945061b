"""The capstone's training loop, evaluation, statistics hooks and checkpoint."""
from pathlib import Path

import numpy as np

import modulecraft
from modulecraft import nn


def train_epoch(model, optimizer, loss_fn, x, y, batch_size=64, seed=0):
    """One pass over `x` in the order of a seeded permutation: zero_grad, forward, loss, backward, step per batch.
    Returns the batches' losses as floats."""
    model.train()
    order = np.random.default_rng(seed).permutation(len(x))
    losses = []
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        model.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def accuracy(model, x, y):
    """The fraction of rows whose highest logit is their label, measured in eval mode without recording a graph."""
    model.eval()
    with modulecraft.no_grad():
        logits = model(x)
    return float((logits.argmax(axis=1) == y).mean())


def attach_statistics(model):
    """Per child: the mean and std of its output at each call, and for a Linear the norm of the gradient at its
    output at each backward. Returns `(stats, handles)`."""
    stats, handles = {}, []
    for name, layer in model.named_children():
        record = stats[name] = {"mean": [], "std": []}

        def forward_hook(module, args, output, record=record):
            record["mean"].append(float(output.mean()))
            record["std"].append(float(output.std()))
        handles.append(layer.register_forward_hook(forward_hook))
        if isinstance(layer, nn.Linear):
            record["grad_norm"] = []

            def backward_hook(module, grad_input, grad_output, record=record):
                record["grad_norm"].append(float(np.linalg.norm(grad_output[0])))
            handles.append(layer.register_full_backward_hook(backward_hook))
    return stats, handles


def save_checkpoint(model, optimizer, folder):
    """`model.state_dict()` and the optimizer's state, flattened to `state.<index>.<name>` keys, as safetensors."""
    folder = Path(folder)
    modulecraft.save(model.state_dict(), folder / "model.safetensors")
    state = optimizer.state_dict()
    flat = {"param_groups": state["param_groups"]}
    for index, values in state["state"].items():
        for name, value in values.items():
            flat[f"state.{index}.{name}"] = value
    modulecraft.save(flat, folder / "optimizer.safetensors")


def load_checkpoint(folder, model, make_optimizer):
    """Load the model strictly, then make its optimizer and give it back its state (int indices again)."""
    folder = Path(folder)
    model.load_state_dict(modulecraft.load(folder / "model.safetensors"))
    optimizer = make_optimizer(model.parameters())
    flat = modulecraft.load(folder / "optimizer.safetensors")
    state = {}
    for key, value in flat.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": flat["param_groups"]})
    return optimizer


def run_experiment(model, make_optimizer, x, y, epochs, folder):
    """The capstone's whole run: an optimizer for `model`, statistics hooks while it trains `epochs` epochs (seeds 0,
    1, ...), the hooks removed, then a checkpoint in `folder`. Returns `(optimizer, losses, stats)`."""
    optimizer = make_optimizer(model.parameters())
    stats, handles = attach_statistics(model)
    losses = [loss for epoch in range(epochs)
              for loss in train_epoch(model, optimizer, nn.CrossEntropyLoss(), x, y, seed=epoch)]
    for handle in handles:
        handle.remove()
    save_checkpoint(model, optimizer, folder)
    return optimizer, losses, stats
