"""draw_state_dict_diff / check_state_dict predict exactly what torch's load_state_dict reports."""

import copy
import re

import numpy as np
import pytest
import torch

from modulecraft.viz import check_state_dict, draw_state_dict_diff
from modulecraft.viz.style import COLOURS

from . import models, svg


def torch_verdict(model, state_dict):
    """What torch says when loading strictly: (missing, unexpected, mismatched keys), parsed from its error."""
    try:
        copy.deepcopy(model).load_state_dict(state_dict, strict=True)
    except RuntimeError as error:
        message = str(error)
    else:
        return [], [], []

    def listed(heading):
        line = re.search(rf"{heading} key\(s\) in state_dict: (.*)\.", message)
        return re.findall(r'"([^"]+)"', line.group(1)) if line else []
    return listed("Missing"), listed("Unexpected"), re.findall(r"size mismatch for (\S+):", message)


def edited(model, *, drop=(), add=None):
    state = dict(model.state_dict())
    for key in drop:
        del state[key]
    state.update(add or {})
    return state


SCENARIOS = {
    "complete": (models.deep, lambda m: edited(m)),
    "missing": (models.deep, lambda m: edited(m, drop=["stem.bias", "head.1.running_var"])),
    "unexpected": (models.deep, lambda m: edited(m, add={
        "extra.weight": torch.zeros(1), "stem.weight.grad": torch.zeros(1), "blocks.2.2.alpha": torch.zeros(1),
        "stem": torch.zeros(1)})),
    "size mismatch": (models.deep, lambda m: edited(m, add={"blocks.1.0.weight": torch.zeros(6, 5)})),
    "scalar from a one-element vector": (models.deep, lambda m: edited(m, add={
        "head.1.num_batches_tracked": torch.tensor([3])})),
    "shared module loaded under both paths": (models.shared, lambda m: edited(m, drop=["again.bias", "0.weight"])),
    "non-persistent buffer is unexpected": (models.stateful, lambda m: edited(m, add={"1.mask": torch.zeros(4)})),
    "lazy parameter takes any shape": (models.stateful, lambda m: edited(m, add={
        "0.weight": torch.zeros(4, 7), "0.bias": torch.zeros(4)})),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_report_matches_torch_load_state_dict(torch_fw, scenario):
    build, make_state = SCENARIOS[scenario]
    model = build(torch_fw)
    state = make_state(model)
    report, _ = check_state_dict(model, state)
    missing, unexpected, mismatched = torch_verdict(model, state)
    assert report.missing_keys == missing
    assert report.unexpected_keys == unexpected
    assert [key for key, _, _ in report.size_mismatches] == mismatched
    assert report.compatible == (not (missing or unexpected or mismatched))


def test_drawing_marks_rows_where_they_would_load(fw):
    model = models.deep(fw)
    state = edited(model, drop=["stem.bias"], add={"blocks.1.0.weight": fw.zeros(6, 5), "head.1.alpha": fw.zeros(1),
                                                   "tail.weight": fw.zeros(1)})
    drawing = draw_state_dict_diff(model, state)
    drawn = svg.modules(drawing.svg())
    assert "missing: the model's parameter has no entry in the checkpoint" in drawn["stem"].texts
    assert COLOURS["missing"] in drawn["stem"].fills
    assert ("size mismatch: the checkpoint's shape (6, 5) differs from the parameter's shape (6, 6) in the model"
            in drawn["blocks.1.0"].texts)
    assert COLOURS["mismatch"] in drawn["blocks.1.0"].fills
    assert "alpha" in drawn["head.1"].texts and COLOURS["unexpected"] in drawn["head.1"].fills
    assert "tail.weight" in drawn[""].texts  # no module "tail": the root meets the key
    assert COLOURS["loads"] in drawn["head.0"].fills and COLOURS["missing"] not in drawn["head.0"].fills
    assert "load_state_dict(strict=True) would fail: 1 missing, 2 unexpected, 1 size mismatch(es)" in drawing.source
    assert drawing.report.loaded_keys[:2] == ["stem.weight", "blocks.0.0.weight"]


def test_collapsed_subtree_carries_the_marks_of_what_it_hides(fw):
    model = models.deep(fw)
    drawn = svg.modules(draw_state_dict_diff(model, edited(model, drop=["blocks.2.1.running_mean"]),
                                             collapse=["blocks"]).svg())
    assert "2.1.running_mean" in drawn["blocks"].texts and COLOURS["missing"] in drawn["blocks"].fills


def test_numpy_state_dict_on_a_modulecraft_model(modulecraft_fw):
    model = models.mlp(modulecraft_fw)
    report = draw_state_dict_diff(model, {"0.weight": np.zeros((8, 4)), "2.weight": np.zeros((2, 9))}).report
    assert report.missing_keys == ["0.bias", "2.bias"]
    assert report.size_mismatches == [("2.weight", (2, 9), (2, 8))]
    assert "would load all 4 entries" in draw_state_dict_diff(model, model.state_dict()).source
