# Not the mistake: the entries' original copies raised TypeError without the solution's "(... expected)" hint,
# and that is kept so the submitted code is unchanged. Applied after each entry's own edit.
_SHORT_MESSAGES = [
    ("            raise TypeError(\n"
     "                f\"cannot assign '{type(value).__name__}' as parameter '{name}' (nn.Parameter or None expected)\"\n"
     "            )\n",
     "            raise TypeError(f\"cannot assign '{type(value).__name__}' as parameter '{name}'\")\n"),
    ("                raise TypeError(\n"
     "                    f\"cannot assign '{type(value).__name__}' as child module '{name}' (nn.Module or None expected)\"\n"
     "                )\n",
     "                raise TypeError(f\"cannot assign '{type(value).__name__}' as child module '{name}'\")\n"),
]

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c02_module_setattr",
        mistake="no-mutual-exclusion",
        feedback="step 1 removes the name from __dict__, _buffers and _modules",
        edits=[
            ("        remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)\n",
             ""),
            *_SHORT_MESSAGES,
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="dict-not-cleared-for-modules",
        feedback="step 3 removes it from __dict__",
        edits=[
            ("            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)\n",
             "            remove_from(self._parameters, self._buffers, self._non_persistent_buffers_set)\n"),
            *_SHORT_MESSAGES,
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="containers-read-as-attributes",
        feedback="read the containers with self.__dict__.get",
        edits=[
            ("    params = self.__dict__.get(\"_parameters\")\n",
             "    params = self._parameters\n"),
            *_SHORT_MESSAGES,
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="buffers-forget-persistence",
        feedback="step 5 keeps its persistence",
        edits=[
            ("                    persistent = name not in self._non_persistent_buffers_set\n",
             "                    persistent = True\n"),
            *_SHORT_MESSAGES,
        ],
    ),
    dict(
        grade_id="c02_module_getattr",
        mistake="recursing-lookup",
        feedback="module_getattr recursed",
        source='''
def module_getattr(self, name):
    for container in (self._parameters, self._buffers, self._modules):
        if name in container:
            return container[name]
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
''',
    ),
    dict(
        grade_id="c02_module_getattr",
        mistake="key-error",
        feedback="Reading a missing attribute",
        source='''
def module_getattr(self, name):
    state = self.__dict__
    for container in ("_parameters", "_buffers"):
        if name in state.get(container, {}):
            return state[container][name]
    return state.get("_modules", {})[name]
''',
    ),
    dict(
        grade_id="c02_module_getattr",
        mistake="modules-first",
        feedback="look in _parameters first",
        edits=[
            ("    for container in (\"_parameters\", \"_buffers\", \"_modules\"):\n",
             "    for container in (\"_modules\", \"_buffers\", \"_parameters\"):\n"),
        ],
    ),
    dict(
        grade_id="c02_module_delattr",
        mistake="non-persistent-name-kept",
        feedback="discard it from _non_persistent_buffers_set",
        source='''
def module_delattr(self, name):
    for container in (self._parameters, self._buffers, self._modules):
        if name in container:
            del container[name]
            return
    object.__delattr__(self, name)
''',
    ),
    dict(
        grade_id="c02_module_delattr",
        mistake="plain-attributes-ignored",
        feedback="Where 'note' lives after del",
        edits=[
            ("        del self._modules[name]\n"
             "    else:\n"
             "        object.__delattr__(self, name)",
             "        del self._modules[name]"),
        ],
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="digits-kept",
        feedback="names starting with a digit",
        source='''
def module_dir(self):
    return sorted([*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers])
''',
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="registered-names-missing",
        feedback="combine the class attributes, __dict__ and the three containers",
        source='''
def module_dir(self):
    return sorted(key for key in [*dir(type(self)), *self.__dict__] if not key[0].isdigit())
''',
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="unsorted",
        feedback="module_dir(module) returns a sorted list",
        source='''
def module_dir(self):
    keys = [*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers]
    return [key for key in keys if not key[0].isdigit()]
''',
    ),
]
