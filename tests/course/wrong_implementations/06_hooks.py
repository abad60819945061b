"""Typical mistakes in chapter 6 (hooks and _call_impl); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='local-first',
        feedback='global pre-hooks run before local ones',
        edits=[
            ("    hooks = (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items())\n",
             "    hooks = (*module._forward_pre_hooks.items(), *registry._global_forward_pre_hooks.items())\n"),
        ],
    ),
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='no-tuple-wrap',
        feedback='a plain pre-hook returning a single value',
        edits=[
            ("                if not isinstance(result, tuple):\n"
             "                    result = (result,)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='kwargs-ignored',
        feedback='missing 1 required positional argument',
        edits=[
            ("        if hook_id in module._forward_pre_hooks_with_kwargs:\n",
             "        if False:\n"),
        ],
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='result-dropped',
        feedback='three forward hooks',
        edits=[
            ("        if result is not None:\n"
             "            output = result\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='always-not-recorded',
        feedback='is added to `called`',
        edits=[
            ("            called.add(hook_id)\n",
             "            pass\n"),
        ],
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='local-only',
        feedback='Global forward hooks must run first',
        edits=[
            ("    hooks = (*registry._global_forward_hooks.items(), *module._forward_hooks.items())\n",
             "    hooks = module._forward_hooks.items()\n"),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='no-fast-path',
        feedback='called through the fast path',
        edits=[
            ("    if not (self._forward_pre_hooks or self._forward_hooks or global_pre or global_post):\n"
             "        return self.forward(*args, **kwargs)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='no-always-call',
        feedback='only the always_call hook ran',
        edits=[
            ("        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):\n"
             "            if not always_called(hook_id) or hook_id in called:\n"
             "                continue\n",
             "        for hook_id, hook in ():\n"),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='error-swallowed',
        feedback='the error of a failing forward still reaches the caller',
        edits=[
            ("                )\n"
             "        raise",
             "                )\n"
             "        return output"),
        ],
    ),
]
