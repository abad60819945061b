"""Chapter 2's prediction, stated as a rule: where an attribute lives after two assignments (run for real)."""
import numpy as np

from modulecraft import nn

CONTAINERS = ("__dict__", "_parameters", "_modules", "_buffers", "_non_persistent_buffers_set")

KINDS = ("Linear", "None", "array", "Parameter", "Buffer", "Buffer(persistent=False)")


def value_of(kind: str):
    """A value of a kind the prediction exercise names."""
    return {
        "Linear": lambda: nn.Linear(1, 1),
        "None": lambda: None,
        "array": lambda: np.zeros(2),
        "Parameter": lambda: nn.Parameter(np.zeros(2, dtype=np.float32)),
        "Buffer": lambda: nn.Buffer(np.ones(2)),
        "Buffer(persistent=False)": lambda: nn.Buffer(np.ones(2), persistent=False),
    }[kind]()


def where(module, name) -> list:
    """The containers holding `name`, read from the instance's own state (as `checks.containers_holding`)."""
    state = vars(module)
    return [key for key in CONTAINERS if name in (state if key == "__dict__" else state.get(key, ()))]


def prediction(first: str, second: str):
    """The scenario of the prediction, run for real: where `name` lives after a value of kind `first`, then one of
    kind `second`, is assigned to it (or the exception the second assignment raises)."""
    model = nn.Module()
    model.name = value_of(first)
    try:
        model.name = value_of(second)
    except (TypeError, KeyError) as error:
        return type(error).__name__
    return where(model, "name")
