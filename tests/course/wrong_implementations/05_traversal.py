"""Typical mistakes in chapter 5 (tree walks); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c05_named_modules',
        mistake='no-memo',
        feedback='a shared leaf is listed once',
        edits=[
            ("    if self in memo:\n"
             "        return\n"
             "    if remove_duplicate:\n"
             "        memo.add(self)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='post-order',
        feedback='pre-order names of a small tree of Nodes',
        edits=[
            ("    yield prefix, self\n",
             ""),
            ("        yield from child.named_modules(memo, child_prefix, remove_duplicate)",
             "        yield from child.named_modules(memo, child_prefix, remove_duplicate)\n"
             "    yield prefix, self"),
        ],
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='always-dot',
        feedback='pre-order names of a small tree of Nodes',
        edits=[
            ("        child_prefix = prefix + (\".\" if prefix else \"\") + name\n",
             "        child_prefix = prefix + \".\" + name\n"),
        ],
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='ignores-remove-duplicate',
        feedback='remove_duplicate=False lists the shared leaf twice',
        edits=[
            ("    if remove_duplicate:\n"
             "        memo.add(self)\n",
             "    memo.add(self)\n"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='no-dedup',
        feedback='named_parameters of Walker',
        edits=[
            ("            if value is None or id(value) in memo:\n",
             "            if value is None:\n"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='memo-always',
        feedback='lists the tied weight under both names',
        edits=[
            ("            if remove_duplicate:\n"
             "                memo.add(id(value))\n",
             "            memo.add(id(value))\n"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='keeps-none',
        feedback='Members registered as None must be skipped',
        edits=[
            ("            if value is None or id(value) in memo:\n",
             "            if id(value) in memo:\n"),
        ],
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='memo-not-passed-on',
        feedback='a shared leaf is listed once',
        edits=[
            ("        yield from child.named_modules(memo, child_prefix, remove_duplicate)",
             "        yield from child.named_modules(None, child_prefix, remove_duplicate)"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='members-recurse-ignored',
        feedback='recurse=False must list only',
        edits=[
            ("    if recurse:\n"
             "        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)\n"
             "    else:\n"
             "        modules = [(prefix, self)]\n",
             "    modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)\n"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='prefix-not-passed',
        feedback='Names must start with the prefix',
        edits=[
            ("        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)\n",
             "        modules = self.named_modules(remove_duplicate=remove_duplicate)\n"),
        ],
    ),
    dict(
        grade_id='c05_named_members',
        mistake='children-only',
        feedback='named_parameters must reach every depth',
        edits=[
            ("        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)\n",
             "        modules = [(prefix, self), *self.named_children()]\n"),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='children-no-dedup',
        feedback='named_children of Nav(first=shared, gap=None, second=shared, head=Linear)',
        edits=[
            ("        if module is not None and module not in memo:\n"
             "            memo.add(module)\n",
             "        if module is not None:\n"),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='children-keep-none',
        feedback='named_children of Nav(first=shared, gap=None, second=shared, head=Linear)',
        edits=[
            ("        if module is not None and module not in memo:\n",
             "        if module not in memo:\n"),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='submodule-through-modules-dict',
        feedback='a parameter is not a module',
        edits=[
            ("        if not hasattr(module, item):\n", "        if item not in module._modules:\n"),
            ("        module = getattr(module, item)\n", "        module = module._modules[item]\n"),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='submodule-no-module-check',
        feedback='a parameter is not a module',
        edits=[
            ("        if not isinstance(module, nn.Module):\n"
             "            raise AttributeError(\"`\" + item + \"` is not an nn.Module\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='submodule-root-name-in-error',
        feedback='a missing step names the module where it failed',
        edits=[
            ("raise AttributeError(module._get_name() + \" has no attribute `\" + item + \"`\")",
             "raise AttributeError(self._get_name() + \" has no attribute `\" + target + \"`\")"),
        ],
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='submodule-empty-path',
        feedback="get_submodule('') returns the module itself",
        edits=[
            ("    if target == \"\":\n"
             "        return self\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_predict_apply',
        mistake='predicts-pre-order',
        feedback='the order in which tree.apply(fn) calls fn',
        edits=[
            ("    order = []\n", "    order = [module.label]\n"),
            ("    return order + [module.label]", "    return order"),
        ],
    ),
    dict(
        grade_id='c05_predict_apply',
        mistake='predicts-apply-memo',
        feedback='no memo shared across the tree',
        source='''def predicted_apply_order(module, memo=None):
    memo = set() if memo is None else memo
    memo.add(module)
    order = []
    for child in module.children():
        if child not in memo:
            order.extend(predicted_apply_order(child, memo))
    return order + [module.label]''',
    ),
    dict(
        grade_id='c05_predict_apply',
        mistake='predicts-children-in-reverse',
        feedback='the order in which tree.apply(fn) calls fn',
        edits=[
            ("    for child in module.children():\n", "    for child in reversed(list(module.children())):\n"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='colleagues-version',
        feedback='after eval(), every module in the tree has training == False',
        source='''def train(self, mode=True):
    for module in self.modules():
        module.training = mode
    return self


def eval(self):
    self.training = False
    return self


def apply(self, fn):
    for module in self.modules():
        fn(module)
    return self''',
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='train-skips-overrides',
        feedback="except the one whose train() refuses",
        edits=[
            ("    self.training = mode\n"
             "    for child in self.children():\n"
             "        child.train(mode)\n",
             "    for module in self.modules():\n"
             "        module.training = mode\n"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='no-recursion',
        feedback='every module in the tree has training == False',
        edits=[
            ("    for child in self.children():\n"
             "        child.train(mode)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='train-no-return',
        feedback='eval() returns the module itself',
        edits=[
            ("        child.train(mode)\n"
             "    return self",
             "        child.train(mode)"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='no-bool-check',
        feedback="is refused",
        edits=[
            ("    if not isinstance(mode, bool):\n"
             "        raise ValueError(\"training mode is expected to be boolean\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='eval-sets-self-only',
        feedback='eval() must switch the whole tree',
        edits=[
            ("    return self.train(False)\n",
             "    self.training = False\n"
             "    return self\n"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='eval-bypasses-train',
        feedback='eval() must go through train(False)',
        edits=[
            ("    return self.train(False)\n",
             "    for module in self.modules():\n"
             "        module.training = False\n"
             "    return self\n"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='apply-pre-order',
        feedback='apply visits the children before their parent',
        edits=[
            ("def apply(self, fn):\n",
             "def apply(self, fn):\n"
             "    fn(self)\n"),
            ("    fn(self)\n"
             "    return self",
             "    return self"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='apply-no-return',
        feedback='apply returns the module itself',
        edits=[
            ("    fn(self)\n"
             "    return self",
             "    fn(self)"),
        ],
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='apply-through-modules',
        feedback='a module shared by two parents is visited once under each of them',
        edits=[
            ("    for child in self.children():\n"
             "        child.apply(fn)\n"
             "    fn(self)\n",
             "    for module in reversed(list(self.modules())):\n"
             "        fn(module)\n"),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='parents-first',
        feedback='the order in which _apply calls fn',
        edits=[
            ("    if recurse:\n"
             "        for child in self.children():\n"
             "            child._apply(fn)\n",
             ""),
            ("            self._buffers[key] = fn(buf)\n",
             "            self._buffers[key] = fn(buf)\n"
             "    if recurse:\n"
             "        for child in self.children():\n"
             "            child._apply(fn)\n"),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='apply-fn-no-recursion',
        feedback='the order in which _apply calls fn',
        edits=[
            ("    if recurse:\n"
             "        for child in self.children():\n"
             "            child._apply(fn)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='recurse-ignored',
        feedback='recurse=False must convert only',
        edits=[
            ("    if recurse:\n"
             "        for child in self.children():\n",
             "    for child in self.children():\n"),
            ("            child._apply(fn)\n",
             "        child._apply(fn)\n"),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='buffers-forgotten',
        feedback='then own buffers',
        edits=[
            ("    for key, buf in self._buffers.items():\n"
             "        if buf is not None:\n"
             "            self._buffers[key] = fn(buf)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='plain-array-stored',
        feedback='a frozen weight after',
        edits=[
            ("        converted = nn.Parameter(applied, param.requires_grad)\n",
             "        converted = applied\n"),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='requires-grad-lost',
        feedback='a frozen weight after',
        edits=[
            ("        converted = nn.Parameter(applied, param.requires_grad)\n",
             "        converted = nn.Parameter(applied)\n"),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='always-new-parameter',
        feedback='the module must keep that very object',
        edits=[
            ("        if applied is param:\n"
             "            continue\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='grad-forgotten',
        feedback="A parameter's grad is converted with it",
        edits=[
            ("        if param.grad is not None:\n"
             "            converted.grad = fn(param.grad)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='none-not-skipped',
        feedback='None parameters and buffers are skipped',
        edits=[
            ("        if param is None:\n"
             "            continue\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='delegates-named-modules',
        feedback='maximum recursion depth',
        source='''def named_modules(self, *args, **kwargs):
    return nn.Module.named_modules(self, *args, **kwargs)''',
    ),
    dict(
        grade_id='c05_named_members',
        mistake='delegates-named-members',
        feedback='maximum recursion depth',
        source='''def _named_members(self, *args, **kwargs):
    return nn.Module._named_members(self, *args, **kwargs)''',
    ),
    dict(
        grade_id='c05_children_and_get_submodule',
        mistake='delegates-children',
        feedback='maximum recursion depth',
        source='''def named_children(self):
    return nn.Module.named_children(self)


def get_submodule(self, target):
    return nn.Module.get_submodule(self, target)''',
    ),
    dict(
        grade_id='c05_predict_apply',
        mistake='delegates-prediction',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c05_traversal import predicted_apply_order",
    ),
    dict(
        grade_id='c05_modes_and_apply',
        mistake='delegates-modes',
        feedback='maximum recursion depth',
        source='''def train(self, mode=True):
    return nn.Module.train(self, mode)


def eval(self):
    return nn.Module.eval(self)


def apply(self, fn):
    return nn.Module.apply(self, fn)''',
    ),
    dict(
        grade_id='c05_apply_fn',
        mistake='delegates-apply-fn',
        feedback='maximum recursion depth',
        source='''def _apply(self, fn, recurse=True):
    return nn.Module._apply(self, fn, recurse)''',
    ),
]
