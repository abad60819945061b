"""What a new user does first: train a small model on the digits with modulecraft alone, and watch it learn.

Runs in a fresh interpreter that never imports torch (checked), as in a course environment without torch.
"""

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from sklearn.datasets import load_digits

    import modulecraft
    from modulecraft import nn, optim

    data = load_digits()
    images, labels = (data.data / 16.0).astype(np.float32), data.target
    order = np.random.default_rng(0).permutation(len(images))
    train, held_out = order[:1500], order[1500:]

    modulecraft.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(1)
    epoch_losses = []
    for epoch in range(5):
        losses = []
        for batch in np.array_split(rng.permutation(train), len(train) // 50):
            loss = loss_fn(model(images[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
        epoch_losses.append(float(np.mean(losses)))
    model.eval()
    with modulecraft.no_grad():
        predictions = model(images[held_out]).argmax(axis=1)
    print(json.dumps({"epoch_losses": epoch_losses,
                      "held_out_accuracy": float((predictions == labels[held_out]).mean()),
                      "torch_imported": "torch" in sys.modules}))
""")


def test_a_small_model_learns_the_digits_without_torch():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["torch_imported"] is False
    losses = report["epoch_losses"]
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.2 * losses[0], losses
    assert report["held_out_accuracy"] > 0.9, report
