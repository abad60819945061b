"""draw_tree: the DOT source and the SVG that dot renders from it, on torch.nn and modulecraft.nn trees."""

import re

import pytest

from modulecraft.viz import draw_state_dict_diff, draw_tree

from . import models, svg


def names(model):
    return [name for name, _ in model.named_modules()]


@pytest.mark.parametrize("build", models.TREES, ids=lambda build: build.__name__)
def test_one_node_per_distinct_module(fw, build):
    model = build(fw)
    drawn = svg.modules(draw_tree(model).svg())
    assert sorted(drawn) == sorted(names(model))  # dot emits the nodes in its own order
    for qualname, module in model.named_modules():
        assert (qualname or "(root)") in drawn[qualname].texts
        assert type(module).__name__ in drawn[qualname].texts


@pytest.mark.parametrize("build", models.TREES, ids=lambda build: build.__name__)
def test_tree_edges_join_each_module_to_its_parent(fw, build):
    model = build(fw)
    tree_edges = svg.edges(draw_tree(model).svg(), "tree")
    assert sorted(edge.id for edge in tree_edges) == sorted(f"mc-tree-{name}" for name in names(model)[1:])
    assert not any(edge.dashed for edge in tree_edges)


@pytest.mark.parametrize("build", [models.shared, models.deep], ids=lambda build: build.__name__)
def test_children_drawn_left_to_right_in_registration_order(fw, build):
    model = build(fw)
    drawn = svg.modules(draw_tree(model).svg())
    for prefix, module in model.named_modules():
        children = [qualname for qualname in (f"{prefix}.{name}".lstrip(".") for name, _ in module.named_children())
                    if qualname in drawn]
        positions = [drawn[qualname].x for qualname in children]
        assert positions == sorted(positions), f"children of {prefix or '(root)'} out of order: {children}"


def test_shared_module_drawn_once_with_a_dashed_second_path(fw):
    model = models.shared(fw)
    rendered = draw_tree(model).svg()
    assert "again" not in svg.modules(rendered)  # named_modules' memo keeps the first path only
    (second_path,) = svg.edges(rendered, "shared-module")
    assert second_path.dashed and second_path.id == "mc-shared-again"
    assert second_path.texts == ["again"]
    assert re.search(r'^\s*"?\."? -> "?0"? .*style=dashed', draw_tree(model).source, re.MULTILINE)


def test_tied_parameter_listed_once_with_a_dashed_edge_to_its_owner(fw):
    model = models.shared(fw)
    drawing = draw_tree(model)
    rendered = drawing.svg()
    (tie,) = svg.edges(rendered, "shared-parameter")
    assert tie.dashed and tie.id == "mc-shared-tied.weight"
    assert 'tied:p0 -> 2:p0' in drawing.source  # from the tied row to the owner's row
    tied = svg.modules(rendered)["tied"]
    assert "shared with 2.weight" in tied.texts and "3×3" not in tied.texts  # the shape is drawn at the owner
    assert "3×3" in svg.modules(rendered)["2"].texts


def test_dfs_numbers_follow_named_modules(fw):
    model = models.deep(fw)
    drawn = svg.modules(draw_tree(model, order="dfs").svg())
    for number, qualname in enumerate(names(model), start=1):
        assert drawn[qualname].texts[0] == str(number)
    assert all(not text.isdigit() for text in svg.modules(draw_tree(model).svg())[""].texts[:1])


def test_collapsed_node_says_what_it_hides(fw):
    model = models.deep(fw)
    drawn = svg.modules(draw_tree(model, collapse=["blocks"]).svg())
    assert sorted(drawn) == ["", "blocks", "head", "head.0", "head.1", "stem"]
    assert "collapsed" in drawn["blocks"].classes
    block_parameters = sum(p.numel() if hasattr(p, "numel") and callable(p.numel) else p.size
                           for p in model["blocks"].parameters())
    assert block_parameters == 3 * (6 * 6 + 6 + 2 * 6)
    assert f"▸ collapsed: 12 modules, {block_parameters} parameters hidden" in drawn["blocks"].texts


def test_depth_limit_collapses_everything_below(fw):
    drawn = svg.modules(draw_tree(models.deep(fw), depth=1).svg())
    assert sorted(drawn) == ["", "blocks", "head", "stem"]
    assert "▸ collapsed: 2 modules, 54 parameters hidden" in drawn["head"].texts
    assert list(svg.modules(draw_tree(models.deep(fw), depth=0).svg())) == [""]


def test_identical_sibling_blocks_fold_into_one_node(fw):
    model = models.deep(fw, blocks=4)
    drawn = svg.modules(draw_tree(model, fold_repeats=True).svg())
    assert "blocks.0" in drawn and not {"blocks.1", "blocks.2", "blocks.3", "blocks.1.0"} & drawn.keys()
    assert "folded" in drawn["blocks.0"].classes
    assert "× 4" in drawn["blocks.0"].texts
    assert "blocks.0 … blocks.3 are identical" in drawn["blocks.0"].texts
    assert "Σ 54 parameters each, × 4" in drawn["blocks.0"].texts
    model["blocks"][2][0].eval()  # a block that differs breaks the run
    drawn = svg.modules(draw_tree(model, fold_repeats=True).svg())
    assert {"blocks.0", "blocks.2", "blocks.3"} <= drawn.keys() and "blocks.1" not in drawn


def test_marks_for_mode_hooks_lazy_buffers_and_frozen_parameters(fw):
    model = models.stateful(fw)
    drawn = svg.modules(draw_tree(model).svg())
    assert {"pre ×1", "fwd ×1"} <= set(drawn["1"].texts)
    assert "lazy" in drawn["0"].texts and drawn["0"].texts.count("uninitialised") == 2
    assert "○ non-persistent" in drawn["1"].texts
    assert drawn["1"].texts.count("grad") == 1 and "no grad" in drawn["1"].texts  # weight trains, bias frozen
    deep = svg.modules(draw_tree(models.deep(fw)).svg())
    assert {name for name, node in deep.items() if "eval" in node.classes} == {"head", "head.0", "head.1"}
    assert "buffer" in deep["head.1"].texts


def test_global_hooks_are_named_in_the_title(fw):
    module_hooks = fw.nn.modules.module
    handle = module_hooks.register_module_forward_pre_hook(lambda module, args: None)
    try:
        source = draw_tree(models.mlp(fw)).source
    finally:
        handle.remove()
    assert "global hooks (fire around every module's forward): 1 pre-hook(s), 0 forward hook(s)" in source
    assert "global hooks" not in draw_tree(models.mlp(fw)).source


def test_highlight_lights_the_node_or_what_stands_for_it(fw):
    model = models.deep(fw)
    lit = lambda rendered: {name for name, node in svg.modules(rendered).items() if "highlighted" in node.classes}
    assert lit(draw_tree(model, highlight="head.1").svg()) == {"head.1"}
    assert lit(draw_tree(model, highlight=["", "stem"]).svg()) == {"", "stem"}
    assert lit(draw_tree(model, highlight="blocks.1.0", collapse=["blocks"]).svg()) == {"blocks"}
    assert lit(draw_tree(models.shared(fw), highlight="again").svg()) == {"0"}  # a second path lights the module


def test_layout_options_and_no_clipping(fw):
    model = models.mlp(fw)
    source = draw_tree(model, direction="LR", font_size=20, extra_repr=True).source
    assert "rankdir=LR" in source and 'fontname="DejaVu Sans,sans-serif"' in source and "fontsize=20" in source
    assert not re.search(r"\bsize=", source)  # graphviz's size attribute clips drawings in JupyterLab
    assert "in_features=4, out_features=8, bias=True" in source
    assert draw_tree(model).source == draw_tree(models.mlp(fw)).source  # stable: nothing depends on id()


def test_font_size_from_the_environment(fw, monkeypatch):
    monkeypatch.setenv("MODULECRAFT_VIZ_FONTSIZE", "24")
    assert "fontsize=24" in draw_tree(models.mlp(fw)).source
    monkeypatch.setenv("MODULECRAFT_VIZ_FONTSIZE", "huge")
    with pytest.raises(ValueError, match="MODULECRAFT_VIZ_FONTSIZE='huge' is not a number"):
        draw_tree(models.mlp(fw))


def test_bad_options_say_what_is_wrong(fw):
    model = models.mlp(fw)
    with pytest.raises(KeyError, match=r"collapse= names no registered submodule: \['nope'\]"):
        draw_tree(model, collapse=["nope"])
    with pytest.raises(ValueError, match="order must be None or 'dfs'"):
        draw_tree(model, order="bfs")
    with pytest.raises(ValueError, match="direction must be 'TB'"):
        draw_tree(model, direction="up")


def test_legend_is_a_separate_node(fw):
    rendered = draw_tree(models.mlp(fw)).svg()
    legend = [element for element in svg.parse(rendered) if "legend" in element.classes]
    assert len(legend) == 1 and "forward pre-hooks registered here" in legend[0].texts
    assert not [element for element in svg.parse(draw_tree(models.mlp(fw), legend=False).svg())
                if "legend" in element.classes]


def test_any_module_dict_key_is_a_node(fw):
    keys = ["a-b", "node", "x:y", "50%", "edge"]  # punctuation, DOT keywords, graphviz's port separator
    model = fw.nn.ModuleDict({key: fw.nn.ReLU() for key in keys})
    rendered = draw_tree(model).svg()
    assert sorted(svg.modules(rendered)) == sorted(["", *keys])
    assert sorted(edge.id for edge in svg.edges(rendered, "tree")) == sorted(f"mc-tree-{key}" for key in keys)


def test_a_dfs_without_memo_shows_the_module_it_yields_twice(fw):
    model = models.shared(fw)
    # what a learner's named_modules without a memo yields: every path, the shared Linear twice
    model.named_modules = lambda: type(model).named_modules(model, remove_duplicate=False)
    rendered = draw_tree(model, order="dfs").svg()
    drawn = svg.modules(rendered)
    assert sorted(drawn) == ["", "0", "1", "2", "again", "tied"]
    assert "duplicate" in drawn["again"].classes and "duplicate" not in drawn["0"].classes
    assert "yielded again (first as 0)" in drawn["again"].texts and drawn["again"].texts[0] == "5"
    assert "mc-tree-again" in {edge.id for edge in svg.edges(rendered, "tree")}
    assert not svg.edges(rendered, "shared-module")


def test_state_summary_lists_each_entry_with_only_what_is_unusual(fw):
    drawn = svg.modules(draw_tree(models.stateful(fw), state="summary").svg())
    assert drawn["1"].texts[-3:] == ["weight 4×4, bias 4 no grad", "○ mask 4", "Σ 20 parameters"]
    assert "weight uninitialised, bias uninitialised" in drawn["0"].texts
    batch_norm = svg.modules(draw_tree(models.deep(fw), state="summary").svg())["head.1"]
    assert ["weight 6, bias 6", "running_mean 6, running_var 6", "num_batches_tracked scalar int64"] == [
        text for text in batch_norm.texts if "6" in text or "scalar" in text][-3:]  # wrapped at about 60 characters
    rendered = draw_tree(models.shared(fw), state="summary")
    assert "weight shared with 2.weight, bias 3" in svg.modules(rendered.svg())["tied"].texts
    assert "tied -> 2 " in rendered.source  # the tie joins the nodes: a summary has no row to point at
    legend = next(element for element in svg.parse(rendered.svg()) if "legend" in element.classes)
    assert "parameters: name shape (dtype if not float32, 'no grad' if frozen)" in legend.texts


def test_state_tables_up_to_a_hundred_drawn_modules_then_summaries(fw):
    big = fw.nn.Sequential(*[fw.nn.Linear(2, 2) for _ in range(100)])  # 101 modules
    table_row = {"weight", "2×2", "float32", "grad"}
    assert "weight 2×2, bias 2" in svg.modules(draw_tree(big).svg())["0"].texts
    assert table_row <= set(svg.modules(draw_tree(big, fold_repeats=True).svg())["0"].texts)  # 2 drawn modules
    assert table_row <= set(svg.modules(draw_tree(big, state="table").svg())["0"].texts)
    assert table_row <= set(svg.modules(draw_state_dict_diff(big, big.state_dict()).svg())["0"].texts)  # marked rows
    assert "weight" not in draw_tree(models.mlp(fw), state="none").source
    with pytest.raises(ValueError, match=r"state must be one of \('auto', 'table', 'summary', 'none'\)"):
        draw_tree(big, state="rows")
