_SETATTR = '''
def module_setattr(self, name, value):
    def remove_from(*dicts_or_sets):
        for container in dicts_or_sets:
            if name in container:
                if isinstance(container, dict):
                    del container[name]
                else:
                    container.discard(name)

    params = self.__dict__.get("_parameters")
    if isinstance(value, nn.Parameter):
        if params is None:
            raise AttributeError("cannot assign parameters before Module.__init__() call")
        remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
        self.register_parameter(name, value)
    elif params is not None and name in params:
        if value is not None:
            raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}'")
        self.register_parameter(name, value)
    else:
        modules = self.__dict__.get("_modules")
        if isinstance(value, nn.Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}'")
            modules[name] = value
        else:
            buffers = self.__dict__.get("_buffers")
            if isinstance(value, nn.Buffer) or buffers is not None and name in buffers:
                if isinstance(value, nn.Buffer):
                    persistent = value.persistent
                else:
                    persistent = name not in self._non_persistent_buffers_set
                self.register_buffer(name, value, persistent)
            else:
                object.__setattr__(self, name, value)
'''


def _variant(old, new):
    assert old in _SETATTR, old
    return _SETATTR.replace(old, new)


_GETATTR = '''
def module_getattr(self, name):
    for container in CONTAINERS:
        registered = self.__dict__.get(container)
        if registered is not None and name in registered:
            return registered[name]
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
'''

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c02_module_setattr",
        mistake="no-mutual-exclusion",
        feedback="step 1 removes the name from __dict__, _buffers and _modules",
        source=_SETATTR.replace("        remove_from(self.__dict__, self._buffers, self._modules, "
                                "self._non_persistent_buffers_set)\n", ""),
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="dict-not-cleared-for-modules",
        feedback="step 3 removes it from __dict__",
        source=_variant("remove_from(self.__dict__, self._parameters, self._buffers",
                        "remove_from(self._parameters, self._buffers"),
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="containers-read-as-attributes",
        feedback="read the containers with self.__dict__.get",
        source=_variant('params = self.__dict__.get("_parameters")', "params = self._parameters"),
    ),
    dict(
        grade_id="c02_module_setattr",
        mistake="buffers-forget-persistence",
        feedback="step 5 keeps its persistence",
        source=_variant("                    persistent = name not in self._non_persistent_buffers_set",
                        "                    persistent = True"),
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
        source=_GETATTR.replace("CONTAINERS", '("_modules", "_buffers", "_parameters")'),
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
        source='''
def module_delattr(self, name):
    if name in self._parameters:
        del self._parameters[name]
    elif name in self._buffers:
        del self._buffers[name]
        self._non_persistent_buffers_set.discard(name)
    elif name in self._modules:
        del self._modules[name]
''',
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
