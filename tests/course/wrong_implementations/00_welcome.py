WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c00_linear",
        mistake="bias-ignored",
        feedback="compute x @ weight.T + bias",
        source='''
def linear(x, weight, bias=None):
    return x @ weight.T
''',
    ),
    dict(
        grade_id="c00_linear",
        mistake="bias-always-added",
        feedback="add the bias only when it is not None",
        source='''
def linear(x, weight, bias=None):
    return x @ weight.T + bias
''',
    ),
    dict(
        grade_id="c00_count_parameters",
        mistake="counts-arrays-not-values",
        feedback="count values, not arrays",
        source='''
def count_parameters(module):
    return len(list(module.parameters()))
''',
    ),
    dict(
        grade_id="c00_count_parameters",
        mistake="own-parameters-only",
        feedback="count the parameters of the children too",
        source='''
def count_parameters(module):
    return sum(p.size for p in module._parameters.values() if p is not None)
''',
    ),
    dict(
        grade_id="c00_count_parameters",
        mistake="shared-counted-twice",
        feedback="count them once",
        source='''
def count_parameters(module):
    return sum(p.size for _, p in module.named_parameters(remove_duplicate=False))
''',
    ),
    dict(
        grade_id="c00_tiny_mlp",
        mistake="no-super-init",
        feedback="cannot assign module before Module.__init__() call",
        edits=[
            ("        super().__init__()\n",
             ""),
        ],
    ),
    dict(
        grade_id="c00_tiny_mlp",
        mistake="activation-skipped",
        feedback="check the order and the activation",
        edits=[
            ("        return self.output(self.activation(self.hidden(x)))",
             "        return self.output(self.hidden(x))"),
        ],
    ),
    dict(
        grade_id="c00_predict_names",
        mistake="predicts-renumbered-children",
        feedback="keep their position as name, parameterless layers included",
        source='''
def prediction(layers):
    names = []
    linears = [kind for kind in layers if kind.startswith("Linear")]
    for position, kind in enumerate(linears):
        names.append(f"{position}.weight")
        if kind == "Linear":
            names.append(f"{position}.bias")
    return names
''',
    ),
    dict(
        grade_id="c00_predict_names",
        mistake="predicts-bias-always",
        feedback="a Linear built with bias=False has a weight only",
        source='''
def prediction(layers):
    return [f"{position}.{name}" for position, kind in enumerate(layers) if kind.startswith("Linear")
            for name in ("weight", "bias")]
''',
    ),
    dict(
        grade_id="c00_fixed_stack",
        mistake="plain-list-kept",
        feedback="a plain list is an ordinary attribute",
        edits=[
            ("        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])\n",
             "        self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]\n"),
        ],
    ),
    dict(
        grade_id="c00_fixed_stack",
        mistake="numbered-attributes",
        feedback="keep the name layers and use nn.ModuleList",
        source='''
class FixedStack(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            setattr(self, f"layer{i}", nn.Linear(a, b))

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x
''',
    ),
    dict(
        grade_id="c00_linear",
        mistake="delegates-to-reference",
        feedback="does not exist while grading",
        source="linear = nn.functional.linear",
    ),
]
