WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c03_parameter",
        mistake="no-is-param-flag",
        feedback="set the class attribute _is_param = True",
        edits=[
            ("    _is_param = True\n",
             ""),
        ],
    ),
    dict(
        grade_id="c03_parameter",
        mistake="requires-grad-default-false",
        feedback="the default is True",
        edits=[
            ("    def __new__(cls, data=None, requires_grad=True):\n",
             "    def __new__(cls, data=None, requires_grad=False):\n"),
        ],
    ),
    dict(
        grade_id="c03_parameter",
        mistake="copies-data",
        feedback="Parameter(values) made a copy of values",
        edits=[
            ("        param = np.asarray(data).view(cls)\n",
             "        param = np.array(data).view(cls)\n"),
        ],
    ),
    dict(
        grade_id="c03_parameter",
        mistake="arithmetic-stays-parameter",
        feedback="arithmetic results must be plain np.ndarray",
        edits=[
            ("        self.requires_grad = getattr(obj, \"requires_grad\", True)\n"
             "\n"
             "    def __array_wrap__(self, array, context=None, return_scalar=False):\n"
             "        if type(array) is not np.ndarray:  # an in-place operation wrote into this parameter\n"
             "            return array\n"
             "        return array[()] if return_scalar else array",
             "        self.requires_grad = getattr(obj, \"requires_grad\", True)"),
        ],
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="no-existing-attribute-check",
        feedback="an existing attribute may not become a parameter",
        edits=[
            ("    elif hasattr(self, name) and name not in self._parameters:\n"
             "        raise KeyError(f\"attribute '{name}' already exists\")\n"
             "\n",
             ""),
        ],
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="any-array-accepted",
        feedback="only a Parameter or None may be registered",
        edits=[
            ("    if param is not None and not isinstance(param, nn.Parameter):\n",
             "    if param is not None and not isinstance(param, np.ndarray):\n"),
        ],
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="none-rejected",
        feedback="None is a valid parameter",
        edits=[
            ("    if param is not None and not isinstance(param, nn.Parameter):\n",
             "    if not isinstance(param, nn.Parameter):\n"),
        ],
    ),
    dict(
        grade_id="c03_scale",
        mistake="bias-none-attribute",
        feedback="must be registered as a None parameter",
        edits=[
            ("            self.register_parameter(\"bias\", None)\n",
             "            self.bias = None\n"),
        ],
    ),
    dict(
        grade_id="c03_scale",
        mistake="float64-weight",
        feedback="ones of shape (features,), dtype float32",
        edits=[
            ("        self.weight = nn.Parameter(np.ones(features, dtype=np.float32))\n",
             "        self.weight = nn.Parameter(np.ones(features))\n"),
        ],
    ),
    dict(
        grade_id="c03_scale",
        mistake="plain-arrays",
        feedback="assign nn.Parameter objects in __init__",
        edits=[
            ("        self.weight = nn.Parameter(np.ones(features, dtype=np.float32))\n",
             "        self.weight = np.ones(features, dtype=np.float32)\n"),
            ("            self.bias = nn.Parameter(np.zeros(features, dtype=np.float32))\n",
             "            self.bias = np.zeros(features, dtype=np.float32)\n"),
        ],
    ),
    dict(
        grade_id="c03_predict_registration",
        mistake="predicts-exception-classes",
        feedback="(a string), without calling",
        source='''
def predicted_outcome(module, name, value):
    if not isinstance(name, str):
        return TypeError
    if "." in name or name == "" or hasattr(module, name) and name not in module._parameters:
        return KeyError
    if value is not None and not isinstance(value, nn.Parameter):
        return TypeError
    return "ok"
''',
    ),
    dict(
        grade_id="c03_predict_registration",
        mistake="predicts-accepted-as-bool",
        feedback="return 'ok', 'KeyError', 'TypeError' or 'AttributeError'",
        edits=[('    return "ok"', '    return True')],
    ),
    dict(
        grade_id="c03_fixed_experts",
        mistake="dict-of-parameters-kept",
        feedback="a dict of parameters is an ordinary attribute",
        source='''
class FixedExperts(nn.Module):
    def __init__(self, count, features):
        super().__init__()
        self.scales = {f"scale_{i}": nn.Parameter(np.full(features, i + 1, dtype=np.float32)) for i in range(count)}

    def forward(self, x):
        for scale in self.scales.values():
            x = x * scale
        return x
''',
    ),
    dict(
        grade_id="c03_fixed_experts",
        mistake="registered-copies",
        feedback="not copies kept elsewhere",
        source='''
class FixedExperts(nn.Module):
    def __init__(self, count, features):
        super().__init__()
        scales = [nn.Parameter(np.full(features, i + 1, dtype=np.float32)) for i in range(count)]
        object.__setattr__(self, "scales", scales)
        for i, scale in enumerate(scales):
            self.register_parameter(f"scale_{i}", nn.Parameter(scale.copy()))

    def forward(self, x):
        for scale in self.scales:
            x = x * scale
        return x
''',
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="value-checked-first",
        feedback="the name is checked before the value",
        edits=[
            ("    if param is not None and not isinstance(param, nn.Parameter):\n"
             "        raise TypeError(f\"cannot assign '{typename(param)}' object to parameter '{name}' \"\n"
             "                        \"(modulecraft.nn.Parameter or None required)\")\n",
             ""),
            ("    if \"_parameters\" not in self.__dict__:\n",
             "    if param is not None and not isinstance(param, nn.Parameter):\n"
             "        raise TypeError(f\"cannot assign '{typename(param)}' object to parameter '{name}' \"\n"
             "                        \"(modulecraft.nn.Parameter or None required)\")\n"
             "    elif \"_parameters\" not in self.__dict__:\n"),
        ],
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="stores-a-copy",
        feedback="register_parameter stored a copy of p",
        edits=[
            ("    self._parameters[name] = param",
             "    self._parameters[name] = None if param is None else nn.Parameter(np.array(param))"),
        ],
    ),
    dict(
        grade_id="c03_parameter",
        mistake="delegates-parameter",
        feedback="does not exist while grading",
        source='''
from modulecraft.exercises import c03_parameters


class Parameter(c03_parameters.Parameter):
    pass
''',
    ),
    dict(
        grade_id="c03_parameter",
        mistake="subclasses-nn-parameter",
        feedback="inherits from modulecraft's nn.Parameter",
        source='''
class Parameter(nn.Parameter):
    pass
''',
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="delegates-register-parameter",
        feedback="maximum recursion depth",
        source='''
def register_parameter(self, name, param):
    return nn.Module.register_parameter(self, name, param)
''',
    ),
    dict(
        grade_id="c03_predict_registration",
        mistake="delegates-prediction",
        feedback="does not exist while grading",
        source="from modulecraft.exercises.c03_parameters import predicted_outcome",
    ),
    dict(
        grade_id="c03_scale",
        mistake="delegates-scale",
        feedback="does not exist while grading",
        source='''
from modulecraft.exercises import c03_parameters


class Scale(c03_parameters.Scale):
    pass
''',
    ),
    dict(
        grade_id="c03_fixed_experts",
        mistake="delegates-fixed-experts",
        feedback="does not exist while grading",
        source='''
from modulecraft.exercises import c03_parameters


class FixedExperts(c03_parameters.FixedExperts):
    pass
''',
    ),
]
