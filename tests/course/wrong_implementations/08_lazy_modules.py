"""Typical mistakes in chapter 8 (lazy modules); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c08_materialize',
        mistake='new-object',
        feedback='materialize works in place',
        source='''def materialize(self, shape, device=None, dtype=None):
    return nn.Parameter(np.zeros(shape, dtype=self.dtype if dtype is None else dtype), self.requires_grad)''',
    ),
    dict(
        grade_id='c08_materialize',
        mistake='class-not-swapped',
        feedback='type and shape of Placeholder() after materialize(',
        edits=[
            ("\n    self.__class__ = self.cls_to_become", ""),
        ],
    ),
    dict(
        grade_id='c08_materialize',
        mistake='dtype-ignored',
        feedback='dtype of Placeholder() after materialize(',
        edits=[
            ("    if dtype is not None:\n"
             "        self.dtype = np.dtype(dtype)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c08_materialize',
        mistake='int-shape-refused',
        feedback='(an int)',
        edits=[
            ("    if isinstance(shape, int):\n"
             "        shape = (shape,)\n",
             ""),
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
        grade_id='c08_infer_parameters',
        mistake='swap-without-check',
        feedback='has not been fully initialized',
        edits=[
            ("    if module.has_uninitialized_params():\n"
             "        raise RuntimeError(f\"module {self._get_name()} has not been fully initialized\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='kwargs-dropped',
        feedback='Keyword arguments of the call must reach initialize_parameters',
        edits=[
            ("    module.initialize_parameters(*args, **kwargs)\n",
             "    module.initialize_parameters(*args)\n"),
        ],
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='swap-to-own-class',
        feedback='Without cls_to_become the class must stay',
        edits=[
            ("    if module.cls_to_become is not None:\n"
             "        module.__class__ = module.cls_to_become",
             "    module.__class__ = nn.Linear"),
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
        feedback='state into LoadingLazy(',
        edits=[
            ("                param.materialize(incoming.shape)",
             "                pass"),
        ],
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='colleagues-version',
        feedback='loading a checkpoint without the bias with strict=False',
        source='''def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                    error_msgs):
    for name, param in self._parameters.items():
        if is_lazy(param):
            param.materialize(state_dict[prefix + name].shape)''',
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='lazy-into-lazy',
        feedback='placeholders into placeholders',
        edits=[
            ("            if is_lazy(param) and not is_lazy(incoming):\n",
             "            if is_lazy(param):\n"),
        ],
    ),
    dict(
        grade_id='c08_predict_after_load',
        mistake='class-not-named',
        feedback='your predictions have the right types',
        edits=[
            ('class_after_load = "LazyLinear"\n', 'class_after_load = nn.LazyLinear\n'),
        ],
    ),
    dict(
        grade_id='c08_predict_after_load',
        mistake='exception-class-not-named',
        feedback='error_on_wrong_width is the name of an exception class',
        edits=[
            ('error_on_wrong_width = "AssertionError"', 'error_on_wrong_width = AssertionError'),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='no-reset',
        feedback='the weights drawn by reset_parameters',
        edits=[
            ("            self.bias.materialize((self.out_features,))\n"
             "        self.reset_parameters()",
             "            self.bias.materialize((self.out_features,))"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='first-dimension',
        feedback='in_features, parameter shapes',
        edits=[
            ("    width = np.shape(input)[-1]\n",
             "    width = np.shape(input)[0]\n"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='always-materialize',
        feedback='with nothing left to do',
        edits=[
            ("    if self.has_uninitialized_params():\n",
             "    if True:\n"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='no-loaded-branch',
        feedback='after loading an nn.Linear(',
        edits=[
            ("\n    if self.in_features == 0:\n"
             "        if width != self.weight.shape[-1]:\n"
             "            raise AssertionError(f\"The in_features inferred from input: {width} is not equal to \"\n"
             "                                 f\"in_features from self.weight: {self.weight.shape[-1]}\")\n"
             "        self.in_features = width",
             ""),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='loaded-branch-unchecked',
        feedback='features is refused',
        edits=[
            ("        if width != self.weight.shape[-1]:\n"
             "            raise AssertionError(f\"The in_features inferred from input: {width} is not equal to \"\n"
             "                                 f\"in_features from self.weight: {self.weight.shape[-1]}\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='loaded-branch-sets-before-check',
        feedback='check the width before setting in_features',
        edits=[
            ("        if width != self.weight.shape[-1]:\n",
             "        self.in_features = width\n"
             "        if width != self.weight.shape[-1]:\n"),
        ],
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='loaded-branch-redraws',
        feedback='weight kept',
        edits=[
            ("{self.weight.shape[-1]}\")\n"
             "        self.in_features = width",
             "{self.weight.shape[-1]}\")\n"
             "        self.in_features = width\n"
             "        self.reset_parameters()"),
        ],
    ),
    dict(
        grade_id='c08_materialize',
        mistake='delegates-to-reference',
        feedback='does not exist while grading',
        source='''materialize = nn.UninitializedParameter.materialize''',
    ),
    dict(
        grade_id='c08_infer_parameters',
        mistake='delegates-to-reference-infer',
        feedback='does not exist while grading',
        source='''_infer_parameters = LazyModuleMixin._infer_parameters''',
    ),
    dict(
        grade_id='c08_lazy_load_hook',
        mistake='delegates-to-reference-load-hook',
        feedback='does not exist while grading',
        source='''_lazy_load_hook = LazyModuleMixin._lazy_load_hook''',
    ),
    dict(
        grade_id='c08_initialize_parameters',
        mistake='delegates-to-reference-initialize',
        feedback='does not exist while grading',
        source='''initialize_parameters = nn.LazyLinear.initialize_parameters''',
    ),
]
