"""Typical mistakes in chapter 12 (the capstone); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c09_crafted',
        mistake='post-order-walk',
        feedback='named_modules of a crafted Sequential',
        edits=[
            ("    yield prefix, self\n",
             ""),
            ("            yield from child.named_modules(memo, prefix + (\".\" if prefix else \"\") + name, remove_duplicate)\n",
             "            yield from child.named_modules(memo, prefix + (\".\" if prefix else \"\") + name, remove_duplicate)\n"
             "    yield prefix, self\n"),
        ],
    ),
    dict(
        grade_id='c09_crafted',
        mistake='no-metadata',
        feedback='state_dict keys and metadata',
        edits=[
            ("    destination._metadata[prefix[:-1]] = {\"version\": self._version}\n",
             ""),
        ],
    ),
    dict(
        grade_id='c09_crafted',
        mistake='hooks-skipped',
        feedback='output with a forward hook',
        edits=[
            ("    if not (self._forward_pre_hooks or self._forward_hooks\n"
             "            or registry._global_forward_pre_hooks or registry._global_forward_hooks):\n"
             "        return self.forward(*args, **kwargs)\n",
             "    return self.forward(*args, **kwargs)\n"),
        ],
    ),
    dict(
        grade_id='c09_build_model',
        mistake='relu-before-batchnorm',
        feedback='repr of build_model(nn)',
        edits=[
            ("    return layers.Sequential(first, layers.BatchNorm1d(8), layers.ReLU(), layers.Dropout(0.25), last)",
             "    return layers.Sequential(first, layers.ReLU(), layers.BatchNorm1d(8), layers.Dropout(0.25), last)"),
        ],
    ),
    dict(
        grade_id='c09_build_model',
        mistake='lazy-ignored',
        feedback='layer classes of build_model(nn, lazy=True)',
        edits=[
            ("    if lazy:\n",
             "    if False:\n"),
        ],
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='no-eval',
        feedback='the restored model is in eval mode',
        edits=[
            ("    return model.eval()",
             "    return model"),
        ],
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='not-strict',
        feedback='restore must load strictly',
        edits=[
            ("    model.load_state_dict(modulecraft.load(path))\n",
             "    model.load_state_dict(modulecraft.load(path), strict=False)\n"),
        ],
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='parameters-only',
        feedback='Missing key(s) in state_dict',
        edits=[
            ("    modulecraft.save(model.state_dict(), path)\n",
             "    modulecraft.save(dict(model.named_parameters()), path)\n"),
        ],
    ),
]
