"""trace_calls records hooks and forwards in the order the framework really fires them, and cleans up after."""

import numpy as np
import pytest

from modulecraft.viz import trace_calls
from modulecraft.viz.timeline import BACKWARD_START, FORWARD_END, FORWARD_START, KINDS

from . import models


def _logger(log, qualname):
    """logger(kind, name): a hook named `name` that logs (qualname, kind, name) whatever it is called with."""
    def logger(kind, name):
        def hook(*args):
            log.append((qualname, kind, name))
        hook.__name__ = name
        return hook
    return logger


def hooked(fw, log):
    """A nested model with every kind of forward hook on every module, each logging (module, kind, hook)."""
    model = fw.nn.Sequential(fw.nn.Linear(4, 4), fw.nn.Sequential(fw.nn.Linear(4, 2), fw.nn.ReLU()))
    for qualname, module in model.named_modules():
        logger = _logger(log, qualname)
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


def backward_hooked(fw, log):
    """A nested model with backward pre-hooks and full backward hooks (one prepended) on every module, plus a
    forward hook each: one trace then holds forward and backward."""
    model = fw.nn.Sequential(fw.nn.Linear(4, 3), fw.nn.Sequential(fw.nn.Linear(3, 2), fw.nn.ReLU()))
    for qualname, module in model.named_modules():
        logger = _logger(log, qualname)
        module.register_forward_hook(logger("forward_hook", "fwd"))
        module.register_full_backward_pre_hook(logger("backward_pre_hook", "bpre"))
        module.register_full_backward_hook(logger("backward_hook", "bwd"))
        module.register_full_backward_hook(logger("backward_hook", "bwd_first"), prepend=True)
    return model


@pytest.fixture
def global_backward_hooks(fw):
    log, names = [], {}
    registry = fw.nn.modules.module
    handles = [
        registry.register_module_full_backward_pre_hook(
            lambda module, grad_output: log.append((names.get(id(module)), "global_backward_pre_hook", "<lambda>"))),
        registry.register_module_full_backward_hook(
            lambda module, grad_input, grad_output: log.append((names.get(id(module)), "global_backward_hook",
                                                                "<lambda>"))),
    ]
    yield log, names
    for handle in handles:
        handle.remove()


def leaf_input(fw):
    """An input that requires grad (modulecraft's arrays become one as a modulecraft.Tensor)."""
    inputs = fw.array(np.linspace(-1, 1, 12).reshape(3, 4))
    if fw.name == "modulecraft":
        import modulecraft
        inputs = modulecraft.Tensor(inputs)
    return inputs.requires_grad_()


def test_backward_hooks_recorded_in_the_real_order(fw, global_backward_hooks):
    log, names = global_backward_hooks
    model = backward_hooked(fw, log)
    names.update({id(module): qualname for qualname, module in model.named_modules()})
    model(leaf_input(fw)).sum().backward()
    untraced = list(log)
    log.clear()
    trace = trace_calls(model, leaf_input(fw), backward=lambda output: output.sum())
    assert log == untraced  # tracing changes neither what fires nor the order
    hook_events = [(event.module, event.kind, name) for event, name in zip(trace.events, trace.hook_names)
                   if event.kind not in (FORWARD_START, FORWARD_END, BACKWARD_START)]
    assert hook_events == untraced
    start = trace.events.index(("", BACKWARD_START))
    assert all(event.kind.startswith(("forward", "pre", "global_pre", "global_forward"))
               for event in trace.events[:start])
    # backward runs the modules in reverse: the root's pre-hooks first, its full hooks last
    backward = [(event.module, event.kind) for event in trace.events[start + 1:]]
    assert backward[:2] == [("", "global_backward_pre_hook"), ("", "backward_pre_hook")]
    assert backward[-3:] == [("", "global_backward_hook"), ("", "backward_hook"), ("", "backward_hook")]
    assert [name for event, name in zip(trace.events, trace.hook_names) if event == ("0", "backward_hook")] == \
        ["bwd_first", "bwd"]


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_forward_and_backward_order_same_as_torch(torch_fw, modulecraft_fw, input_requires_grad):
    def traced(fw):
        inputs = leaf_input(fw) if input_requires_grad else fw.array(np.ones((3, 4)))
        registry = fw.nn.modules.module
        handles = [registry.register_module_forward_pre_hook(lambda module, args: None),
                   registry.register_module_full_backward_pre_hook(lambda module, grad_output: None),
                   registry.register_module_full_backward_hook(lambda module, grad_input, grad_output: None)]
        try:
            with pytest.warns(UserWarning) if not input_requires_grad else _no_warning():
                return trace_calls(backward_hooked(fw, []), inputs, backward=lambda output: output.sum())
        finally:
            for handle in handles:
                handle.remove()
    torch_trace, modulecraft_trace = traced(torch_fw), traced(modulecraft_fw)
    assert modulecraft_trace.events == torch_trace.events
    assert modulecraft_trace.hook_names == torch_trace.hook_names


def test_non_full_backward_hook_recorded_as_torch_fires_it(torch_fw, modulecraft_fw):
    def traced(fw):
        model = fw.nn.Sequential(fw.nn.Linear(4, 2), fw.nn.ReLU())
        model[0].register_backward_hook(lambda module, grad_input, grad_output: None)
        model[1].register_full_backward_hook(lambda module, grad_input, grad_output: None)
        with pytest.warns(FutureWarning, match="multiple autograd Nodes"):
            return trace_calls(model, leaf_input(fw), backward=lambda output: output.sum())
    torch_trace, modulecraft_trace = traced(torch_fw), traced(modulecraft_fw)
    assert modulecraft_trace.events == torch_trace.events
    assert [event.kind for event in torch_trace.events].count("backward_hook") == 2


def test_backward_hooks_restored_and_drawn(fw):
    model = backward_hooked(fw, [])
    before = {qualname: (dict(module._backward_hooks), dict(module._backward_pre_hooks))
              for qualname, module in model.named_modules()}
    trace = trace_calls(model, leaf_input(fw), backward=lambda output: output.sum())
    assert {qualname: (dict(module._backward_hooks), dict(module._backward_pre_hooks))
            for qualname, module in model.named_modules()} == before
    (axes,) = trace.draw().axes
    texts = [text.get_text() for text in axes.texts]
    assert texts.count(".backward()") == 1
    assert [text for text in texts if text not in ("forward", ".backward()")] == \
        [name for name in trace.hook_names if name]


class _no_warning:
    def __enter__(self):
        import warnings
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.simplefilter("error", UserWarning)

    def __exit__(self, *exc):
        return self._catcher.__exit__(*exc)
