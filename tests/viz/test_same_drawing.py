"""One call, two frameworks: a torch.nn model and a modulecraft.nn model of the same structure draw the same."""

import numpy as np
import pytest

from modulecraft.viz import check_state_dict, draw_state_dict_diff, draw_tree, trace_calls

from . import models, svg


@pytest.mark.parametrize("build", models.TREES, ids=lambda build: build.__name__)
def test_tree_drawings_match(torch_fw, modulecraft_fw, build):
    options = dict(order="dfs", extra_repr=True, fold_repeats=True)
    torch_drawing = draw_tree(build(torch_fw), **options)
    modulecraft_drawing = draw_tree(build(modulecraft_fw), **options)
    assert torch_drawing.source == modulecraft_drawing.source
    assert svg.parse(torch_drawing.svg()) == svg.parse(modulecraft_drawing.svg())


def test_state_dict_diffs_match(torch_fw, modulecraft_fw):
    def checkpoint(fw):
        model = models.deep(fw)
        state = dict(model.state_dict())
        del state["stem.bias"]
        state["blocks.0.0.weight"] = fw.zeros(5, 6)
        state["head.2.weight"] = fw.zeros(1)
        return model, state

    torch_drawing = draw_state_dict_diff(*checkpoint(torch_fw))
    modulecraft_drawing = draw_state_dict_diff(*checkpoint(modulecraft_fw))
    assert torch_drawing.source == modulecraft_drawing.source
    assert torch_drawing.report == modulecraft_drawing.report
    assert check_state_dict(*checkpoint(torch_fw))[0] == torch_drawing.report


def test_traces_match(torch_fw, modulecraft_fw):
    inputs = np.ones((2, 4), dtype=np.float32)
    torch_trace = trace_calls(models.mlp(torch_fw), torch_fw.array(inputs))
    modulecraft_trace = trace_calls(models.mlp(modulecraft_fw), modulecraft_fw.array(inputs))
    assert torch_trace.events == modulecraft_trace.events
    assert torch_trace.lanes == modulecraft_trace.lanes == ["", "0", "1", "2"]
