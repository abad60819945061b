WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c04_register_buffer",
        mistake="persistence-never-restored",
        feedback="discard the name from _non_persistent_buffers_set",
        edits=[
            ("        self._non_persistent_buffers_set.discard(name)\n",
             "        pass\n"),
        ],
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="no-existing-attribute-check",
        feedback="an existing attribute may not become a buffer",
        edits=[
            ("    elif hasattr(self, name) and name not in self._buffers:\n"
             "        raise KeyError(f\"attribute '{name}' already exists\")\n",
             ""),
        ],
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="non-persistent-not-stored",
        feedback="registered with persistent=False lives",
        edits=[
            ("    self._buffers[name] = tensor\n"
             "    if persistent:\n",
             "    if persistent:\n"
             "        self._buffers[name] = tensor\n"),
        ],
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
        feedback="Buffers of RunningMean(",
        edits=[
            ("        self.register_buffer(\"running_mean\", np.zeros(features, dtype=np.float32))\n"
             "        self.register_buffer(\"num_batches_tracked\", np.array(0, dtype=np.int64))\n",
             "        self.running_mean = np.zeros(features, dtype=np.float32)\n"
             "        self.num_batches_tracked = np.array(0, dtype=np.int64)\n"),
        ],
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="updates-in-eval",
        feedback="in eval mode",
        edits=[
            ("        if self.training:\n",
             "        if True:\n"),
        ],
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="running-mean-parameter",
        feedback="running statistics are buffers, not parameters",
        edits=[
            ("        self.register_buffer(\"running_mean\", np.zeros(features, dtype=np.float32))\n",
             "        self.running_mean = nn.Parameter(np.zeros(features, dtype=np.float32))\n"),
        ],
    ),
    dict(
        grade_id="c04_predict_state",
        mistake="predicts-keys-as-one-string",
        feedback="return a list of strings such as 'scale'",
        source='''
def predicted_state_keys(module):
    return ", ".join([*module._parameters, *module._buffers])
''',
    ),
    dict(
        grade_id="c04_predict_state",
        mistake="predicts-key-value-pairs",
        feedback="without calling state_dict",
        source='''
def predicted_state_keys(module):
    return [(name, value) for name, value in {**module._parameters, **module._buffers}.items() if value is not None]
''',
    ),
    dict(
        grade_id="c04_fixed_encoding",
        mistake="table-still-saved",
        feedback="register it with persistent=False",
        edits=[
            (", persistent=False)\n", ")\n"),
        ],
    ),
    dict(
        grade_id="c04_fixed_encoding",
        mistake="table-plain-attribute",
        feedback="not a plain attribute",
        edits=[
            ("        self.register_buffer(\"table\", np.sin(np.arange(length, dtype=np.float32)), persistent=False)\n",
             "        self.table = np.sin(np.arange(length, dtype=np.float32))\n"),
        ],
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="value-checked-first",
        feedback="the name is checked before the value",
        edits=[
            ("    elif tensor is not None and not isinstance(tensor, np.ndarray):\n"
             "        raise TypeError(f\"cannot assign '{typename(tensor)}' object to buffer '{name}' \"\n"
             "                        \"(numpy.ndarray or None required)\")\n",
             ""),
            ("    if \"_buffers\" not in self.__dict__:\n",
             "    if tensor is not None and not isinstance(tensor, np.ndarray):\n"
             "        raise TypeError(f\"cannot assign '{typename(tensor)}' object to buffer '{name}' \"\n"
             "                        \"(numpy.ndarray or None required)\")\n"
             "    elif \"_buffers\" not in self.__dict__:\n"),
        ],
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="stores-a-copy",
        feedback="store the array itself",
        edits=[
            ("    self._buffers[name] = tensor\n",
             "    self._buffers[name] = None if tensor is None else tensor.copy()\n"),
        ],
    ),
    dict(
        grade_id="c04_saved_buffers",
        mistake="copies-buffers",
        feedback="return the buffer objects themselves",
        edits=[
            ("        name: buffer\n",
             "        name: buffer.copy()\n"),
        ],
    ),
    dict(
        grade_id="c04_register_buffer",
        mistake="delegates-register-buffer",
        feedback="maximum recursion depth",
        source='''
def register_buffer(self, name, tensor, persistent=True):
    return nn.Module.register_buffer(self, name, tensor, persistent)
''',
    ),
    dict(
        grade_id="c04_saved_buffers",
        mistake="delegates-saved-buffers",
        feedback="does not exist while grading",
        source="from modulecraft.exercises.c04_buffers import saved_buffers",
    ),
    dict(
        grade_id="c04_predict_state",
        mistake="delegates-prediction",
        feedback="does not exist while grading",
        source="from modulecraft.exercises.c04_buffers import predicted_state_keys",
    ),
    dict(
        grade_id="c04_running_mean",
        mistake="delegates-running-mean",
        feedback="does not exist while grading",
        source='''
from modulecraft.exercises import c04_buffers


class RunningMean(c04_buffers.RunningMean):
    pass
''',
    ),
    dict(
        grade_id="c04_fixed_encoding",
        mistake="delegates-fixed-encoding",
        feedback="does not exist while grading",
        source='''
from modulecraft.exercises import c04_buffers


class FixedEncoding(c04_buffers.FixedEncoding):
    pass
''',
    ),
]
