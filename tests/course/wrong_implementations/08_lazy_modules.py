"""Typical mistakes in chapter 8 (lazy modules); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c08_initialize_parameters',
        mistake='no-reset',
        feedback='the weights equal the reference LazyLinear',
        source=r"""
def initialize_parameters(self, input):
    if self.has_uninitialized_params():
        self.in_features = np.shape(input)[-1]
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
""",
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='first-dimension',
        feedback='in_features and parameter shapes',
        source=r"""
def initialize_parameters(self, input):
    if self.has_uninitialized_params():
        self.in_features = np.shape(input)[0]
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
        self.reset_parameters()
""",
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='always-materialize',
        feedback='With no placeholder left',
        source=r"""
def initialize_parameters(self, input):
    if True:
        self.in_features = np.shape(input)[-1]
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
        self.reset_parameters()
""",
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='no-class-swap',
        feedback='class and output shape after the first call',
        source=r"""
def _infer_parameters(self, module, args, kwargs=None):
    kwargs = kwargs if kwargs else {}
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    module._load_hook.remove()
    delattr(module, "_initialize_hook")
    delattr(module, "_load_hook")
""",
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='hooks-kept',
        feedback='hooks left on the module after the first call',
        source=r"""
def _infer_parameters(self, module, args, kwargs=None):
    kwargs = kwargs if kwargs else {}
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
    delattr(module, "_initialize_hook")
    delattr(module, "_load_hook")
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become
""",
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='attributes-kept',
        feedback='the hook attributes are gone',
        source=r"""
def _infer_parameters(self, module, args, kwargs=None):
    kwargs = kwargs if kwargs else {}
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    module._load_hook.remove()
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become
""",
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='parameters-only',
        feedback='Placeholder buffers are materialised too',
        source=r"""
def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for name, param in self._parameters.items():
        key = prefix + name
        if param is not None and key in state_dict:
            incoming = state_dict[key]
            if is_lazy(param) and not is_lazy(incoming):
                param.materialize(incoming.shape)
""",
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='prefix-ignored',
        feedback='Build keys as prefix + name',
        source=r"""
def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for name, param in [*self._parameters.items(), *self._buffers.items()]:
        key = name
        if param is not None and key in state_dict:
            incoming = state_dict[key]
            if is_lazy(param) and not is_lazy(incoming):
                param.materialize(incoming.shape)
""",
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='nothing-materialized',
        feedback='loading an nn.Linear(3, 2) state into LoadingLazy(2)',
        source=r"""
def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for name, param in [*self._parameters.items(), *self._buffers.items()]:
        key = prefix + name
        if param is not None and key in state_dict:
            incoming = state_dict[key]
            if is_lazy(param) and not is_lazy(incoming):
                pass
""",
    ),
]
