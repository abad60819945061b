_PARAMETER = '''
class Parameter(np.ndarray):
    _is_param = True

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = np.empty(0, dtype=np.float32)
        param = np.asarray(data).view(cls)
        param.requires_grad = requires_grad
        return param

    def __array_finalize__(self, obj):
        self.requires_grad = getattr(obj, "requires_grad", True)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        if type(array) is not np.ndarray:
            return array
        return array[()] if return_scalar else array
'''

_REGISTER = '''
def register_parameter(self, name, param):
    if "_parameters" not in self.__dict__:
        raise AttributeError("cannot assign parameter before Module.__init__() call")
    elif not isinstance(name, str):
        raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
    elif "." in name:
        raise KeyError('parameter name can\\'t contain "."')
    elif name == "":
        raise KeyError('parameter name can\\'t be empty string ""')
    elif hasattr(self, name) and name not in self._parameters:
        raise KeyError(f"attribute '{name}' already exists")
    if param is not None and not isinstance(param, nn.Parameter):
        raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}'")
    self._parameters[name] = param
'''

_SCALE = '''
class Scale(nn.Module):
    def __init__(self, features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(np.ones(features, dtype=np.float32))
        if bias:
            self.bias = nn.Parameter(np.zeros(features, dtype=np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        out = x * self.weight
        if self.bias is not None:
            out = out + self.bias
        return out
'''


def _variant(text, old, new):
    assert old in text, old
    return text.replace(old, new)


WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c03_parameter",
        mistake="no-is-param-flag",
        feedback="set the class attribute _is_param = True",
        source=_variant(_PARAMETER, "    _is_param = True\n", ""),
    ),
    dict(
        grade_id="c03_parameter",
        mistake="requires-grad-default-false",
        feedback="the default is True",
        source=_variant(_PARAMETER, "def __new__(cls, data=None, requires_grad=True)",
                        "def __new__(cls, data=None, requires_grad=False)"),
    ),
    dict(
        grade_id="c03_parameter",
        mistake="copies-data",
        feedback="which does not copy",
        source=_variant(_PARAMETER, "np.asarray(data).view(cls)", "np.array(data).view(cls)"),
    ),
    dict(
        grade_id="c03_parameter",
        mistake="arithmetic-stays-parameter",
        feedback="arithmetic results must be plain np.ndarray",
        source=_PARAMETER.split("\n    def __array_wrap__")[0] + "\n",
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="no-existing-attribute-check",
        feedback="mentioning 'already exists'",
        source=_variant(_REGISTER, "    elif hasattr(self, name) and name not in self._parameters:\n"
                        "        raise KeyError(f\"attribute '{name}' already exists\")\n", ""),
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="any-array-accepted",
        feedback="only a Parameter or None may be registered",
        source=_variant(_REGISTER, "not isinstance(param, nn.Parameter)", "not isinstance(param, np.ndarray)"),
    ),
    dict(
        grade_id="c03_register_parameter",
        mistake="none-rejected",
        feedback="None is a valid parameter",
        source=_variant(_REGISTER, "if param is not None and not isinstance", "if not isinstance"),
    ),
    dict(
        grade_id="c03_scale",
        mistake="bias-none-attribute",
        feedback="must be registered as a None parameter",
        source=_variant(_SCALE, 'self.register_parameter("bias", None)', "self.bias = None"),
    ),
    dict(
        grade_id="c03_scale",
        mistake="float64-weight",
        feedback="ones of shape (features,), dtype float32",
        source=_variant(_SCALE, "nn.Parameter(np.ones(features, dtype=np.float32))", "nn.Parameter(np.ones(features))"),
    ),
    dict(
        grade_id="c03_scale",
        mistake="plain-arrays",
        feedback="assign nn.Parameter objects in __init__",
        source=_variant(_variant(_SCALE, "nn.Parameter(np.ones(features, dtype=np.float32))",
                                 "np.ones(features, dtype=np.float32)"),
                        "nn.Parameter(np.zeros(features, dtype=np.float32))", "np.zeros(features, dtype=np.float32)"),
    ),
]
