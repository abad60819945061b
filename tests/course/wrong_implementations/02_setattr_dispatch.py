WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c02_module_setattr",
        mistake="no-mutual-exclusion",
        feedback="step 1 removes the name from __dict__, _buffers and _modules",
        edits=[
            ("        remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)\n",
             ""),
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="dict-not-cleared-for-modules",
        feedback="step 3 removes it from __dict__",
        edits=[
            ("            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)\n",
             "            remove_from(self._parameters, self._buffers, self._non_persistent_buffers_set)\n"),
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="containers-read-as-attributes",
        feedback="read the containers with self.__dict__.get",
        edits=[
            ("    params = self.__dict__.get(\"_parameters\")\n",
             "    params = self._parameters\n"),
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="buffers-forget-persistence",
        feedback="step 5 keeps its persistence",
        edits=[
            ("                    persistent = name not in self._non_persistent_buffers_set\n",
             "                    persistent = True\n"),
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
        feedback="Reading the missing attribute",
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
        feedback="fall back to object.__delattr__",
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
    dict(
        grade_id="c02_module_setattr",
        mistake="buffer-value-unchecked",
        feedback="step 5 checks the value itself",
        edits=[
            ("                if value is not None and not isinstance(value, np.ndarray):\n"
             "                    raise TypeError(f\"cannot assign '{typename(value)}' as buffer '{name}' \"\n"
             "                                    \"(modulecraft.nn.Buffer, numpy.ndarray or None expected)\")\n",
             ""),
        ],
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="set-removes-duplicates",
        feedback="do not use a set",
        source='''
def module_dir(self):
    keys = {*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers}
    return sorted(key for key in keys if not key[0].isdigit())
''',
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="blog-dir-kept",
        feedback="_buffers included",
        source='''
def module_dir(self):
    keys = set(dir(type(self))) | set(self.__dict__) | set(self._parameters) | set(self._modules)
    return sorted(key for key in keys if not key[0].isdigit())
''',
    ),
    dict(
        grade_id="c02_add_module",
        mistake="name-checked-before-module",
        feedback="the module's type first",
        edits=[
            ("    if not isinstance(module, nn.Module) and module is not None:\n"
             "        raise TypeError(f\"{typename(module)} is not a Module subclass\")\n"
             "    elif not isinstance(name, str):\n",
             "    if not isinstance(name, str):\n"),
            ("        raise KeyError('module name can\\'t be empty string \"\"')\n",
             "        raise KeyError('module name can\\'t be empty string \"\"')\n"
             "    elif not isinstance(module, nn.Module) and module is not None:\n"
             "        raise TypeError(f\"{typename(module)} is not a Module subclass\")\n"),
        ],
    ),
    dict(
        grade_id="c02_add_module",
        mistake="existing-attribute-not-checked",
        feedback="hasattr(self, name) and name not in self._modules",
        edits=[
            ("    elif hasattr(self, name) and name not in self._modules:\n"
             "        raise KeyError(f\"attribute '{name}' already exists\")\n",
             ""),
        ],
    ),
    dict(
        grade_id="c02_add_module",
        mistake="registration-hooks-ignored",
        feedback="run each hook(self, name, module) in order",
        edits=[
            ("    for hook in module_impl._global_module_registration_hooks.values():\n"
             "        output = hook(self, name, module)\n"
             "        if output is not None:\n"
             "            module = output\n",
             ""),
        ],
    ),
    dict(
        grade_id="c02_add_module",
        mistake="hook-result-not-stored",
        feedback="each seeing the module an earlier hook returned",
        edits=[
            ("        output = hook(self, name, module)\n"
             "        if output is not None:\n"
             "            module = output\n",
             "        hook(self, name, module)\n"),
        ],
    ),
    dict(
        grade_id="c02_predict_filing",
        mistake="predicts-container-names-joined",
        feedback="name the containers '__dict__', '_parameters'",
        source='''
def prediction(first, second):
    if second == "Parameter":
        return "_parameters"
    if second == "Linear":
        return "_modules"
    return "_buffers" if second.startswith("Buffer") else "__dict__"
''',
    ),
    dict(
        grade_id="c02_predict_filing",
        mistake="predicts-exception-classes",
        feedback="or 'TypeError' or 'KeyError'",
        source='''
def prediction(first, second):
    return TypeError if first in ("Parameter", "Linear") and second not in (first, "None") else KeyError
''',
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="module-hooks-ignored",
        feedback="run each hook(self, name, value) in order",
        edits=[
            ("        for hook in module_impl._global_module_registration_hooks.values():\n"
             "            output = hook(self, name, module)\n"
             "            if output is not None:\n"
             "                module = output\n",
             ""),
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="module-hook-result-dropped",
        feedback="each seeing what the previous one returned",
        edits=[
            ("            output = hook(self, name, module)\n"
             "            if output is not None:\n"
             "                module = output\n",
             "            hook(self, name, module)\n"),
        ],
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="setattr-delegates-to-reference",
        feedback="does not exist while grading",
        source="module_setattr = nn.Module.__setattr__",
    ),
    dict(
        grade_id="c02_module_getattr",
        mistake="getattr-delegates-to-reference",
        feedback="does not exist while grading",
        source="module_getattr = nn.Module.__getattr__",
    ),
    dict(
        grade_id="c02_module_delattr",
        mistake="delattr-delegates-to-reference",
        feedback="does not exist while grading",
        source="module_delattr = nn.Module.__delattr__",
    ),
    dict(
        grade_id="c02_module_dir",
        mistake="dir-delegates-to-reference",
        feedback="does not exist while grading",
        source="module_dir = nn.Module.__dir__",
    ),
    dict(
        grade_id="c02_add_module",
        mistake="add-module-delegates-to-reference",
        feedback="does your code call modulecraft's own version",
        source='''
def add_module(self, name, module):
    return nn.Module.add_module(self, name, module)
''',
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="module-before-parameter-name",
        feedback="step 2 comes before step 3",
        edits=[("    elif params is not None and name in params:\n",
                "    elif params is not None and name in params and not isinstance(value, nn.Module):\n")],
    ),
    dict(
        grade_id="c02_module_delattr",
        mistake="deletes-from-every-container",
        feedback="the other entry stays",
        source='''
def module_delattr(self, name):
    found = False
    for container in (self._parameters, self._buffers, self._modules):
        if name in container:
            del container[name]
            found = True
    self._non_persistent_buffers_set.discard(name)
    if not found:
        object.__delattr__(self, name)
''',
    ),
    dict(
        grade_id="c02_module_delattr",
        mistake="modules-deleted-first",
        feedback="the first that holds it in __getattr__'s order",
        source='''
def module_delattr(self, name):
    if name in self._modules:
        del self._modules[name]
    elif name in self._parameters:
        del self._parameters[name]
    elif name in self._buffers:
        del self._buffers[name]
        self._non_persistent_buffers_set.discard(name)
    else:
        object.__delattr__(self, name)
''',
    ),
]
