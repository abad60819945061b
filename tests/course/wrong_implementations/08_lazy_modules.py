"""Typical mistakes in chapter 8 (lazy modules); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c08_initialize_parameters',
        mistake='no-reset',
        feedback='the weights equal the reference LazyLinear',
        edits=[
            ("            self.bias.materialize((self.out_features,))\n"
             "        self.reset_parameters()",
             "            self.bias.materialize((self.out_features,))"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='first-dimension',
        feedback='in_features and parameter shapes',
        edits=[
            ("        self.in_features = np.shape(input)[-1]\n",
             "        self.in_features = np.shape(input)[0]\n"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='always-materialize',
        feedback='With no placeholder left',
        edits=[
            ("    if self.has_uninitialized_params():\n",
             "    if True:\n"),
        ],
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='no-class-swap',
        feedback='class and output shape after the first call',
        edits=[
            ("    delattr(module, \"_load_hook\")\n"
             "    if module.cls_to_become is not None:\n"
             "        module.__class__ = module.cls_to_become",
             "    delattr(module, \"_load_hook\")"),
        ],
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='hooks-kept',
        feedback='hooks left on the module after the first call',
        edits=[
            ("    module._initialize_hook.remove()\n"
             "    module._load_hook.remove()\n",
             ""),
        ],
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='attributes-kept',
        feedback='the hook attributes are gone',
        edits=[
            ("    delattr(module, \"_initialize_hook\")\n"
             "    delattr(module, \"_load_hook\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='parameters-only',
        feedback='Placeholder buffers are materialised too',
        edits=[
            ("    for name, param in [*self._parameters.items(), *self._buffers.items()]:\n",
             "    for name, param in self._parameters.items():\n"),
        ],
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='prefix-ignored',
        feedback='Build keys as prefix + name',
        edits=[
            ("        key = prefix + name\n",
             "        key = name\n"),
        ],
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='nothing-materialized',
        feedback='loading an nn.Linear(3, 2) state into LoadingLazy(2)',
        edits=[
            ("                param.materialize(incoming.shape)",
             "                pass"),
        ],
    ),
]
