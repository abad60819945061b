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
        feedback='named_parameters of Walker',
        edits=[
            ("            if value is None or id(value) in memo:\n",
             "            if id(value) in memo:\n"),
        ],
    ),
    dict(
        grade_id='c05_train',
        mistake='no-recursion',
        feedback='every module in the tree has training == False',
        edits=[
            ("    for child in self.children():\n"
             "        child.train(mode)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_train',
        mistake='train-no-return',
        feedback='eval() returns the module itself',
        edits=[
            ("        child.train(mode)\n"
             "    return self",
             "        child.train(mode)"),
        ],
    ),
    dict(
        grade_id='c05_train',
        mistake='no-bool-check',
        feedback="train('yes') is refused",
        edits=[
            ("    if not isinstance(mode, bool):\n"
             "        raise ValueError(\"training mode is expected to be boolean\")\n",
             ""),
        ],
    ),
    dict(
        grade_id='c05_apply',
        mistake='pre-order',
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
        grade_id='c05_apply',
        mistake='apply-no-return',
        feedback='apply returns the module itself',
        edits=[
            ("    fn(self)\n"
             "    return self",
             "    fn(self)"),
        ],
    ),
]
