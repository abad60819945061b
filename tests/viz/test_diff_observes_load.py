"""The diff and the load stepper observe the real ``load_state_dict``: overrides, pre-hooks, post-hooks, lazy modules.

Each scenario is a model whose load differs from the default rules; the drawing's report must equal what the
model's own ``load_state_dict`` says (strictly), on torch and on modulecraft. A re-implementation of the default
rules (what ``step_load_state_dict`` used to be) gets the overrides, hooks and old checkpoints wrong.
"""

import copy

import numpy as np
import pytest

from modulecraft.viz import check_state_dict, draw_state_dict_diff
from modulecraft.viz.steppers import FORGIVEN, TAKEN, LoadStepper

from .test_diff import torch_verdict

RENAMES = {"backbone.": "img_backbone.", "neck.": "img_neck."}


def _rename(state_dict, prefix):
    for key in list(state_dict):
        for old, new in RENAMES.items():
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)


def detector(nn):
    model = nn.Module()
    model.backbone = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.neck = nn.Linear(4, 3)
    model.head = nn.Linear(3, 2)
    return model


def renaming_override(nn):
    """A model that takes a detector's backbone and neck under new names, renaming while it loads (chapter 7.5)."""
    class MultiModal(nn.Module):
        def __init__(self):
            super().__init__()
            self.img_backbone = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
            self.img_neck = nn.Linear(4, 3)
            self.points = nn.Linear(3, 3)

        def _load_from_state_dict(self, state_dict, prefix, *args):
            _rename(state_dict, prefix)
            super()._load_from_state_dict(state_dict, prefix, *args)
    return nn.Sequential(MultiModal())


def renaming_pre_hook(nn):
    """The same renaming done by a public load pre-hook on a plain module."""
    model = nn.Module()
    model.img_backbone = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.img_neck = nn.Linear(4, 3)
    model.register_load_state_dict_pre_hook(lambda module, state_dict, prefix, *rest: _rename(state_dict, prefix))
    return model


def forgiving_post_hook(nn):
    """A post-hook that accepts checkpoints without the head and ignores extra keys."""
    model = renaming_pre_hook(nn)
    model.head = nn.Linear(3, 2)

    def forgive(module, keys):
        keys.missing_keys[:] = [key for key in keys.missing_keys if not key.startswith("head.")]
        keys.unexpected_keys.clear()
    model.register_load_state_dict_post_hook(forgive)
    return model


def refusing_override(nn):
    """An override that reports its own error for a checkpoint it does not accept."""
    class Picky(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            if local_metadata.get("version") is None:
                errors.append(f"{prefix or 'root'}: a checkpoint without a version is refused")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)
    return nn.Sequential(Picky(4, 4))


def shifted(model):
    """The detector's state_dict with every key moved under '0.' (for the wrapped MultiModal)."""
    return {"0." + key: value for key, value in model.state_dict().items()}


SCENARIOS = {
    "override renames keys": (renaming_override, lambda nn: shifted(detector(nn))),
    "pre-hook renames keys": (renaming_pre_hook, lambda nn: dict(detector(nn).state_dict())),
    "post-hook forgives keys": (forgiving_post_hook, lambda nn: {
        key: value for key, value in detector(nn).state_dict().items() if not key.startswith("head.")}),
    "override adds an error": (refusing_override, lambda nn: dict(nn.Sequential(nn.Linear(4, 4)).state_dict())),
    "old BatchNorm checkpoint": (lambda nn: nn.Sequential(nn.BatchNorm1d(3)), lambda nn: {
        key: value for key, value in nn.Sequential(nn.BatchNorm1d(3)).state_dict().items()
        if "num_batches" not in key}),
    "lazy layer materialised by its pre-hook": (lambda nn: nn.Sequential(nn.LazyLinear(2), nn.ReLU()), lambda nn: dict(
        nn.Sequential(nn.Linear(5, 2)).state_dict())),
}


def real_result(model, state_dict):
    """(missing, unexpected, size-mismatched keys, other error lines) of a strict load on a copy."""
    missing, unexpected, mismatched = torch_verdict(model, state_dict)
    try:
        copy.deepcopy(model).load_state_dict(state_dict)
    except RuntimeError as error:
        lines = str(error).split("\n\t")[1:]
    else:
        lines = []
    others = [line for line in lines if not line.startswith(("Missing key", "Unexpected key", "size mismatch"))]
    return missing, unexpected, mismatched, others


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_diff_reports_what_load_state_dict_really_does(fw, scenario):
    build, checkpoint = SCENARIOS[scenario]
    model, state = build(fw.nn), checkpoint(fw.nn)
    report, _ = check_state_dict(model, state)
    missing, unexpected, mismatched, others = real_result(model, state)
    assert (report.missing_keys, report.unexpected_keys) == (missing, unexpected)
    assert [key for key, _, _ in report.size_mismatches] == mismatched
    assert report.refused == others
    assert report.compatible == (not (missing or unexpected or mismatched or others))


def test_the_chapter_rename_is_drawn_as_renamed_not_as_eleven_missing_keys(fw):
    model, state = renaming_override(fw.nn), shifted(detector(fw.nn))
    drawing = draw_state_dict_diff(model, state)
    assert drawing.report.missing_keys == ["0.points.weight", "0.points.bias"]
    assert drawing.report.unexpected_keys == ["0.head.weight", "0.head.bias"]
    assert "would fail: 2 missing, 2 unexpected, 0 size mismatch(es)" in drawing.source
    taken = [step for step in LoadStepper(model, state).steps if step.outcome == TAKEN]
    assert [step.key for step in taken] == [key for key in state if not key.startswith("0.head.")]
    assert taken[0].reason.startswith("renamed to '0.img_backbone.0.weight' by MultiModal")
    assert {step.node for step in taken} == {"0"}


def test_the_chapter_case_after_exercise_3_is_pinned(fw):
    target = fw.nn.Sequential(fw.nn.Linear(2, 3))
    bad = {"0.weight": fw.zeros(4, 2), "extra": fw.zeros(1)}
    report = draw_state_dict_diff(target, bad).report
    assert (report.missing_keys, report.unexpected_keys) == (["0.bias"], ["extra"])
    assert report.size_mismatches == [("0.weight", (4, 2), (3, 2))]


def test_a_forgiven_key_is_drawn_grey_and_the_load_succeeds(fw):
    model = forgiving_post_hook(fw.nn)
    state = SCENARIOS["post-hook forgives keys"][1](fw.nn)
    drawing = draw_state_dict_diff(model, state)
    report = drawing.report
    assert report.compatible and report.forgiven_keys == ["head.weight", "head.bias"]
    assert "forgiven by a post-hook" in drawing.source, "the legend says what a grey row means"
    steps = LoadStepper(model, state).steps
    assert [step.outcome for step in steps[-2:]] == [FORGIVEN, FORGIVEN]


def test_the_module_drawn_is_not_loaded(fw):
    model = fw.nn.Sequential(fw.nn.Linear(2, 3))
    before = {key: np.asarray(value).copy() for key, value in model.state_dict().items()}
    draw_state_dict_diff(model, {"0.weight": fw.zeros(3, 2), "0.bias": fw.zeros(3)})
    assert all(np.array_equal(np.asarray(model.state_dict()[key]), value) for key, value in before.items())
    assert "_load_from_state_dict" not in vars(model[0]), "the wrappers live on the copy only"


def test_an_exception_from_an_override_propagates(fw):
    class Broken(fw.nn.Linear):
        def _load_from_state_dict(self, *args):
            raise KeyError("no version")

    with pytest.raises(KeyError, match="no version"):
        check_state_dict(Broken(1, 1), {})


def test_a_module_that_cannot_be_copied_gets_a_clear_error(fw):
    import threading

    model = fw.nn.Linear(1, 1)
    model.lock = threading.Lock()  # not copyable: the drawing would otherwise have to load into the module itself
    with pytest.raises(TypeError, match="runs on a deep copy"):
        draw_state_dict_diff(model, model.state_dict())
