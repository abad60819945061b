"""What the steppers show: one lit module per step, in the static sequence and in the widget, buttons that move."""

import re
from html import unescape

import numpy as np
import pytest
import torch

from modulecraft.viz import steppers, style
from modulecraft.viz.steppers import CallStepper, DfsStepper, LoadStepper

from .models import nested, shared_subtree

LIT = re.compile(r'<g id="mc&#45;([^"]*)" class="node module[^"]*highlighted')


def lit_nodes(html: str) -> list[str]:
    """The qualified names of the lit modules, in document order ('.' is the root, as in the SVG ids)."""
    return LIT.findall(html)


@pytest.fixture
def model():
    return shared_subtree(torch.nn)


def test_static_sequence_lights_the_module_of_every_step(model):
    stepper = DfsStepper(model)
    html = stepper._repr_html_()
    frames = html.split('class="modulecraft-step"')[1:]
    assert len(frames) == len(stepper.steps)
    assert [lit_nodes(frame) for frame in frames] == [[s.node or "."] for s in stepper.steps]
    assert "skip '1'" in unescape(html)  # the shared block's second path, skipped with its subtree


def test_printing_lists_the_steps(model):
    text = str(LoadStepper(model, {"1.0.weight": torch.zeros(2, 2), "9.bias": torch.zeros(1)}))
    assert "'0.encoder.0.bias': missing" in text
    assert "'9.bias': unexpected" in text


def test_buttons_move_the_lit_node():
    stepper = CallStepper(nested(torch.nn), torch.ones(1, 3))
    view = stepper.widget()
    back, next_, reset = view.children[0].children
    frame = view.children[1]
    assert back.disabled and lit_nodes(frame.value) == ["."]
    next_.click()
    next_.click()
    assert stepper.position == 2
    assert lit_nodes(frame.value) == [stepper.steps[2].node or "."]
    back.click()
    assert lit_nodes(frame.value) == [stepper.steps[1].node or "."]
    for _ in stepper.steps:
        next_.click()
    assert next_.disabled and stepper.position == len(stepper.steps) - 1
    reset.click()
    assert stepper.position == 0 and back.disabled and lit_nodes(frame.value) == ["."]


def test_without_a_kernel_the_display_is_the_static_sequence(model):
    bundle = DfsStepper(model)._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/html"].count("<svg") == len(DfsStepper(model).steps)


def test_projector_font_size_comes_from_the_environment(model, monkeypatch):
    monkeypatch.setenv("MODULECRAFT_VIZ_FONTSIZE", "20")
    assert 'font-size="20.00"' in DfsStepper(model).svg(0)


def test_nothing_to_step_through_is_a_clear_error():
    class Silent(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match="no steps"):
        LoadStepper(Silent(), {})
    assert len(CallStepper(Silent(), np.zeros(1)).steps) == 2  # forward starts, forward returns


def test_load_drawing_colours_each_entry_once_it_is_handled():
    model = nested(torch.nn)
    checkpoint = {key: value for key, value in model.state_dict().items() if key != "0.bias"}
    stepper = LoadStepper(model, checkpoint)
    missing = next(i for i, step in enumerate(stepper.steps) if step.key == "0.bias")
    missing_fill = f'fill="{style.COLOURS["missing"]}"'
    assert missing_fill not in stepper.svg(missing - 1)
    assert missing_fill in stepper.svg(missing)
    assert "has no entry in the checkpoint" in unescape(stepper.svg(missing))
    assert "has no entry in the checkpoint" not in unescape(stepper.svg(missing + 1)), "only the current reason"
    assert missing_fill in stepper.svg(len(stepper.steps) - 1), "handled entries stay coloured"


def test_a_long_static_sequence_stops_and_says_how_to_see_the_rest(monkeypatch):
    monkeypatch.setattr(steppers, "MAX_STATIC_FRAMES", 3)
    stepper = DfsStepper(nested(torch.nn))
    html = stepper._repr_html_()
    assert html.count('class="modulecraft-step"') == 3
    assert f"and {len(stepper.steps) - 3} more steps" in html
