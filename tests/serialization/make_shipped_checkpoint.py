"""Regenerate ``reference/modulecraft/data/iris_mlp.pt``, the real torch checkpoint shipped for the course.

The model is ``nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))`` trained by torch 2.13 on
scikit-learn's iris data (150 flowers; inputs: sepal length, sepal width, petal length, petal width in cm,
unscaled; outputs: logits for setosa, versicolor, virginica), full batch, Adam, seed 0. A learner loads it
into their own Module with ``modulecraft.load`` and sees real trained weights classify real flowers.

Run from the repository root: ``.venv/bin/python -m tests.serialization.make_shipped_checkpoint``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from sklearn.datasets import load_iris

SHIPPED = Path(__file__).resolve().parents[2] / "reference" / "modulecraft" / "data" / "iris_mlp.pt"
STEPS = 300


def train() -> torch.nn.Sequential:
    """The model, trained the same way every time (CPU, fixed seed, full batch)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    iris = load_iris()
    inputs = torch.tensor(iris.data, dtype=torch.float32)
    targets = torch.tensor(iris.target)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return model


def main() -> None:
    torch.save(train().state_dict(), SHIPPED)
    print(f"wrote {SHIPPED}")


if __name__ == "__main__":
    main()
