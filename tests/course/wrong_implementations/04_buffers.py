_REGISTER = '''
def register_buffer(self, name, tensor, persistent=True):
    if "_buffers" not in self.__dict__:
        raise AttributeError("cannot assign buffer before Module.__init__() call")
    elif not isinstance(name, str):
        raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
    elif "." in name:
        raise KeyError('buffer name can\\'t contain "."')
    elif name == "":
        raise KeyError('buffer name can\\'t be empty string ""')
    elif hasattr(self, name) and name not in self._buffers:
        raise KeyError(f"attribute '{name}' already exists")
    elif tensor is not None and not isinstance(tensor, np.ndarray):
        raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}'")
    self._buffers[name] = tensor
    if persistent:
        self._non_persistent_buffers_set.discard(name)
    else:
        self._non_persistent_buffers_set.add(name)
'''

_RUNNING_MEAN = '''
class RunningMean(nn.Module):
    def __init__(self, features, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_mean", np.zeros(features, dtype=np.float32))
        self.register_buffer("num_batches_tracked", np.array(0, dtype=np.int64))

    def forward(self, x):
        if self.training:
            mean = x.mean(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.num_batches_tracked += 1
        else:
            mean = self.running_mean
        return x - mean
'''


def _variant(text, old, new):
    assert old in text, old
    return text.replace(old, new)


WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c04_register_buffer",
        mistake="persistence-never-restored",
        feedback="discard the name from _non_persistent_buffers_set",
        source=_variant(_REGISTER, "        self._non_persistent_buffers_set.discard(name)\n", "        pass\n"),
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="no-existing-attribute-check",
        feedback="mentioning 'already exists'",
        source=_variant(_REGISTER, "    elif hasattr(self, name) and name not in self._buffers:\n"
                        "        raise KeyError(f\"attribute '{name}' already exists\")\n", ""),
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="non-persistent-not-stored",
        feedback="Where 'mask' (persistent=False) lives",
        source=_variant(_REGISTER, "    self._buffers[name] = tensor\n    if persistent:\n",
                        "    if persistent:\n        self._buffers[name] = tensor\n"),
    ),
    dict(
        grade_id="c04_saved_buffers",
        mistake="non-persistent-kept",
        feedback="leave out the names in _non_persistent_buffers_set",
        source='''
def saved_buffers(module):
    return {name: buffer for name, buffer in module._buffers.items() if buffer is not None}
''',
    ),
    dict(
        grade_id="c04_saved_buffers",
        mistake="none-kept",
        feedback="a None buffer is not saved",
        source='''
def saved_buffers(module):
    return {name: buffer for name, buffer in module._buffers.items()
            if name not in module._non_persistent_buffers_set}
''',
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="plain-attribute",
        feedback="Buffers of RunningMean(2)",
        source=_variant(_variant(_RUNNING_MEAN,
                                 'self.register_buffer("running_mean", np.zeros(features, dtype=np.float32))',
                                 "self.running_mean = np.zeros(features, dtype=np.float32)"),
                        'self.register_buffer("num_batches_tracked", np.array(0, dtype=np.int64))',
                        "self.num_batches_tracked = np.array(0, dtype=np.int64)"),
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="updates-in-eval",
        feedback="in eval mode",
        source=_variant(_RUNNING_MEAN, "        if self.training:\n", "        if True:\n"),
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="running-mean-parameter",
        feedback="running statistics are buffers, not parameters",
        source=_variant(_RUNNING_MEAN,
                        'self.register_buffer("running_mean", np.zeros(features, dtype=np.float32))',
                        "self.running_mean = nn.Parameter(np.zeros(features, dtype=np.float32))"),
    ),
]
