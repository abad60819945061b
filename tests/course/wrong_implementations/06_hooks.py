"""Typical mistakes in chapter 6 (hooks and _call_impl); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='local-first',
        feedback='global pre-hooks run before local ones',
        source=r"""
def run_forward_pre_hooks(module, args, kwargs):
    hooks = (*module._forward_pre_hooks.items(), *registry._global_forward_pre_hooks.items())
    for hook_id, hook in hooks:
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {result}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                if not isinstance(result, tuple):
                    result = (result,)
                args = result
    return args, kwargs
""",
    ),
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='no-tuple-wrap',
        feedback='a plain pre-hook returning a single value',
        source=r"""
def run_forward_pre_hooks(module, args, kwargs):
    hooks = (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items())
    for hook_id, hook in hooks:
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {result}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result
    return args, kwargs
""",
    ),
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='kwargs-ignored',
        feedback='missing 1 required positional argument',
        source=r"""
def run_forward_pre_hooks(module, args, kwargs):
    hooks = (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items())
    for hook_id, hook in hooks:
        if False:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {result}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                if not isinstance(result, tuple):
                    result = (result,)
                args = result
    return args, kwargs
""",
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='result-dropped',
        feedback='three forward hooks',
        source=r"""
def run_forward_hooks(module, args, kwargs, output, called):
    hooks = (*registry._global_forward_hooks.items(), *module._forward_hooks.items())
    for hook_id, hook in hooks:
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
    return output
""",
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='always-not-recorded',
        feedback='is added to `called`',
        source=r"""
def run_forward_hooks(module, args, kwargs, output, called):
    hooks = (*registry._global_forward_hooks.items(), *module._forward_hooks.items())
    for hook_id, hook in hooks:
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            pass
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output
""",
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='local-only',
        feedback='Global forward hooks must run first',
        source=r"""
def run_forward_hooks(module, args, kwargs, output, called):
    hooks = module._forward_hooks.items()
    for hook_id, hook in hooks:
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output
""",
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='no-fast-path',
        feedback='called through the fast path',
        source=r"""
def _call_impl(self, *args, **kwargs):
    global_pre, global_post = registry._global_forward_pre_hooks, registry._global_forward_hooks

    def always_called(hook_id):
        return hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called

    called = set()
    output = None
    try:
        for hook_id, hook in (*global_pre.items(), *self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):
            if always_called(hook_id):
                called.add(hook_id)
            if hook_id in self._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output
    except Exception:
        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):
            if not always_called(hook_id) or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn(
                    "module forward hook with ``always_call=True`` raised an exception that was silenced "
                    f"as another error was raised in forward: {error}"
                )
        raise
""",
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='no-always-call',
        feedback='only the always_call hook ran',
        source=r"""
def _call_impl(self, *args, **kwargs):
    global_pre, global_post = registry._global_forward_pre_hooks, registry._global_forward_hooks
    if not (self._forward_pre_hooks or self._forward_hooks or global_pre or global_post):
        return self.forward(*args, **kwargs)

    def always_called(hook_id):
        return hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called

    called = set()
    output = None
    try:
        for hook_id, hook in (*global_pre.items(), *self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):
            if always_called(hook_id):
                called.add(hook_id)
            if hook_id in self._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output
    except Exception:
        for hook_id, hook in ():
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn(
                    "module forward hook with ``always_call=True`` raised an exception that was silenced "
                    f"as another error was raised in forward: {error}"
                )
        raise
""",
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='error-swallowed',
        feedback='the error of a failing forward still reaches the caller',
        source=r"""
def _call_impl(self, *args, **kwargs):
    global_pre, global_post = registry._global_forward_pre_hooks, registry._global_forward_hooks
    if not (self._forward_pre_hooks or self._forward_hooks or global_pre or global_post):
        return self.forward(*args, **kwargs)

    def always_called(hook_id):
        return hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called

    called = set()
    output = None
    try:
        for hook_id, hook in (*global_pre.items(), *self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):
            if always_called(hook_id):
                called.add(hook_id)
            if hook_id in self._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output
    except Exception:
        for hook_id, hook in (*global_post.items(), *self._forward_hooks.items()):
            if not always_called(hook_id) or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn(
                    "module forward hook with ``always_call=True`` raised an exception that was silenced "
                    f"as another error was raised in forward: {error}"
                )
        return output
""",
    ),
]
