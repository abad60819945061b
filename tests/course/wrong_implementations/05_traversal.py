"""Typical mistakes in chapter 5 (tree walks); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c05_named_modules',
        mistake='no-memo',
        feedback='a shared leaf is listed once',
        source=r"""
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    yield prefix, self
    for name, child in self._modules.items():
        if child is None:
            continue
        child_prefix = prefix + ("." if prefix else "") + name
        yield from child.named_modules(memo, child_prefix, remove_duplicate)
""",
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='post-order',
        feedback='pre-order names of a small tree of Nodes',
        source=r"""
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    if remove_duplicate:
        memo.add(self)
    for name, child in self._modules.items():
        if child is None:
            continue
        child_prefix = prefix + ("." if prefix else "") + name
        yield from child.named_modules(memo, child_prefix, remove_duplicate)
    yield prefix, self
""",
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='always-dot',
        feedback='pre-order names of a small tree of Nodes',
        source=r"""
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    if remove_duplicate:
        memo.add(self)
    yield prefix, self
    for name, child in self._modules.items():
        if child is None:
            continue
        child_prefix = prefix + "." + name
        yield from child.named_modules(memo, child_prefix, remove_duplicate)
""",
    ),
    dict(
        grade_id='c05_named_modules',
        mistake='ignores-remove-duplicate',
        feedback='remove_duplicate=False lists the shared leaf twice',
        source=r"""
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    memo.add(self)
    yield prefix, self
    for name, child in self._modules.items():
        if child is None:
            continue
        child_prefix = prefix + ("." if prefix else "") + name
        yield from child.named_modules(memo, child_prefix, remove_duplicate)
""",
    ),
    dict(
        grade_id='c05_named_members',
        mistake='no-dedup',
        feedback='named_parameters of Walker',
        source=r"""
def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
    memo = set()
    if recurse:
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
    else:
        modules = [(prefix, self)]
    for module_prefix, module in modules:
        for name, value in get_members_fn(module):
            if value is None:
                continue
            if remove_duplicate:
                memo.add(id(value))
            yield module_prefix + ("." if module_prefix else "") + name, value
""",
    ),
    dict(
        grade_id='c05_named_members',
        mistake='memo-always',
        feedback='lists the tied weight under both names',
        source=r"""
def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
    memo = set()
    if recurse:
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
    else:
        modules = [(prefix, self)]
    for module_prefix, module in modules:
        for name, value in get_members_fn(module):
            if value is None or id(value) in memo:
                continue
            memo.add(id(value))
            yield module_prefix + ("." if module_prefix else "") + name, value
""",
    ),
    dict(
        grade_id='c05_named_members',
        mistake='keeps-none',
        feedback='named_parameters of Walker',
        source=r"""
def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
    memo = set()
    if recurse:
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
    else:
        modules = [(prefix, self)]
    for module_prefix, module in modules:
        for name, value in get_members_fn(module):
            if id(value) in memo:
                continue
            if remove_duplicate:
                memo.add(id(value))
            yield module_prefix + ("." if module_prefix else "") + name, value
""",
    ),
    dict(
        grade_id='c05_train',
        mistake='no-recursion',
        feedback='every module in the tree has training == False',
        source=r"""
def train(self, mode=True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    self.training = mode
    return self
""",
    ),
    dict(
        grade_id='c05_train',
        mistake='train-no-return',
        feedback='eval() returns the module itself',
        source=r"""
def train(self, mode=True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    self.training = mode
    for child in self.children():
        child.train(mode)
""",
    ),
    dict(
        grade_id='c05_train',
        mistake='no-bool-check',
        feedback="train('yes') is refused",
        source=r"""
def train(self, mode=True):
    self.training = mode
    for child in self.children():
        child.train(mode)
    return self
""",
    ),
    dict(
        grade_id='c05_apply',
        mistake='pre-order',
        feedback='apply visits the children before their parent',
        source=r"""
def apply(self, fn):
    fn(self)
    for child in self.children():
        child.apply(fn)
    return self
""",
    ),
    dict(
        grade_id='c05_apply',
        mistake='apply-no-return',
        feedback='apply returns the module itself',
        source=r"""
def apply(self, fn):
    for child in self.children():
        child.apply(fn)
    fn(self)
""",
    ),
]
