"""trace_calls records hooks and forwards in the order the framework really fires them, and cleans up after."""

import numpy as np
import pytest

from modulecraft.viz import trace_calls
from modulecraft.viz.timeline import FORWARD_END, FORWARD_START, KINDS

from . import models


def hooked(fw, log):
    """A nested model with every kind of forward hook on every module, each logging (module, kind, hook)."""
    model = fw.nn.Sequential(fw.nn.Linear(4, 4), fw.nn.Sequential(fw.nn.Linear(4, 2), fw.nn.ReLU()))
    for qualname, module in model.named_modules():
        def logger(kind, name, qualname=qualname):
            def hook(*args):
                log.append((qualname, kind, name))
            hook.__name__ = name
            return hook
        module.register_forward_pre_hook(logger("pre_hook", "pre"))
        module.register_forward_pre_hook(logger("pre_hook", "pre_first"), prepend=True)
        module.register_forward_pre_hook(logger("pre_hook", "pre_kwargs"), with_kwargs=True)
        module.register_forward_hook(logger("forward_hook", "fwd"))
        module.register_forward_hook(logger("forward_hook", "fwd_always"), always_call=True)
        module.register_forward_hook(logger("forward_hook", "fwd_first"), prepend=True)
    return model


@pytest.fixture
def global_hooks(fw):
    """Global hooks that log with the qualified name of the module they fire for."""
    log, names = [], {}
    registry = fw.nn.modules.module

    def global_pre(module, args):
        log.append((names.get(id(module)), "global_pre_hook", "global_pre"))

    def global_forward(module, args, output):
        log.append((names.get(id(module)), "global_forward_hook", "global_forward"))

    handles = [registry.register_module_forward_pre_hook(global_pre),
               registry.register_module_forward_hook(global_forward)]
    yield log, names
    for handle in handles:
        handle.remove()


def test_recorded_order_is_the_real_hook_order(fw, global_hooks):
    log, names = global_hooks
    model = hooked(fw, log)
    names.update({id(module): qualname for qualname, module in model.named_modules()})
    inputs = fw.array(np.ones((3, 4)))
    model(inputs)
    untraced = list(log)
    log.clear()
    trace = trace_calls(model, inputs)
    assert log == untraced  # tracing does not change what fires, or in which order
    hook_events = [(event.module, event.kind, name) for event, name in zip(trace.events, trace.hook_names)
                   if event.kind not in (FORWARD_START, FORWARD_END)]
    assert hook_events == untraced
    assert untraced[:7] == [("", "global_pre_hook", "global_pre"), ("", "pre_hook", "pre_first"),
                            ("", "pre_hook", "pre"), ("", "pre_hook", "pre_kwargs"),
                            ("0", "global_pre_hook", "global_pre"), ("0", "pre_hook", "pre_first"),
                            ("0", "pre_hook", "pre")]


def test_forward_runs_between_pre_hooks_and_forward_hooks_and_nests(fw):
    log = []
    model = hooked(fw, log)
    trace = trace_calls(model, fw.array(np.ones((3, 4))))
    assert {event.kind for event in trace.events} <= set(KINDS)
    for qualname in ["", "0", "1", "1.0", "1.1"]:
        kinds = [event.kind for event in trace.events if event.module == qualname]
        start, end = kinds.index(FORWARD_START), kinds.index(FORWARD_END)
        assert set(kinds[:start]) == {"pre_hook"} and set(kinds[end + 1:]) == {"forward_hook"}
        assert start == 3 and len(kinds) - end - 1 == 3
    position = {(event.module, event.kind): step for step, event in enumerate(trace.events)}
    for parent, child in [("", "0"), ("", "1"), ("1", "1.0"), ("1", "1.1")]:
        assert position[parent, FORWARD_START] < position[child, "pre_hook"]
        assert position[child, "forward_hook"] < position[parent, FORWARD_END]


def test_same_order_as_torch(torch_fw, modulecraft_fw):
    torch_trace = trace_calls(hooked(torch_fw, []), torch_fw.array(np.ones((3, 4))))
    modulecraft_trace = trace_calls(hooked(modulecraft_fw, []), modulecraft_fw.array(np.ones((3, 4))))
    assert modulecraft_trace.events == torch_trace.events
    assert modulecraft_trace.hook_names == torch_trace.hook_names


def test_everything_is_restored_afterwards(fw):
    model = hooked(fw, [])
    before = {qualname: (dict(module._forward_pre_hooks), dict(module._forward_hooks), dict(module.__dict__))
              for qualname, module in model.named_modules()}
    trace = trace_calls(model, fw.array(np.ones((3, 4))))
    after = {qualname: (dict(module._forward_pre_hooks), dict(module._forward_hooks), dict(module.__dict__))
             for qualname, module in model.named_modules()}
    assert after == before and all("forward" not in module.__dict__ for module in model.modules())
    assert trace.output.shape == (3, 2)


def test_restored_when_the_call_raises(fw):
    model = models.mlp(fw)
    with pytest.raises(Exception):
        trace_calls(model, fw.array(np.ones((3, 5))))  # wrong width: the first Linear raises
    assert all("forward" not in module.__dict__ for module in model.modules())
    assert trace_calls(model, fw.array(np.ones((1, 4)))).events[0] == ("", FORWARD_START)


def test_shared_module_called_twice_records_twice_in_its_lane(fw):
    model = models.shared(fw)  # Sequential runs 0, 1, 2, again (= 0), tied
    trace = trace_calls(model, fw.array(np.ones((1, 3))))
    assert [event for event in trace.events if event.module == "0"] == [("0", FORWARD_START), ("0", FORWARD_END)] * 2
    assert "again" not in trace.lanes


def test_timeline_figure_has_one_lane_per_module_and_a_bar_per_forward(fw):
    trace = trace_calls(hooked(fw, []), fw.array(np.ones((3, 4))))
    figure = trace.draw()
    (axes,) = figure.axes
    assert [label.get_text() for label in axes.get_yticklabels()] == ["(root)", "0", "1", "1.0", "1.1"]
    assert len(axes.collections) == 5  # one forward bar per call
    hooks_drawn = [text.get_text() for text in axes.texts if text.get_text() != "forward"]
    assert hooks_drawn == [name for name in trace.hook_names if name]
    assert "<svg" in trace._repr_html_()
