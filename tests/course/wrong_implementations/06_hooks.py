"""Typical mistakes in chapter 6 (hooks and _call_impl); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c06_register_hooks',
        mistake='prepend-ignored',
        feedback='pre-hooks registered with prepend=',
        edits=[
            ("    if prepend:\n"
             "        self._forward_pre_hooks.move_to_end(handle.id, last=False)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='prepend-moves-to-end',
        feedback='pre-hooks registered with prepend=',
        edits=[
            ("        self._forward_pre_hooks.move_to_end(handle.id, last=False)\n",
             "        self._forward_pre_hooks.move_to_end(handle.id)\n"),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='pre-hook-kwargs-not-recorded',
        feedback='with_kwargs hooks get the keyword arguments',
        edits=[
            ("    if with_kwargs:\n"
             "        self._forward_pre_hooks_with_kwargs[handle.id] = True\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='side-tables-not-given-to-handle',
        feedback="tables holding a forward hook's id",
        edits=[
            ("    handle = RemovableHandle(self._forward_hooks,\n"
             "                             extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])\n",
             "    handle = RemovableHandle(self._forward_hooks)\n"),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='pre-hook-side-table-not-given-to-handle',
        feedback='must clean _forward_pre_hooks_with_kwargs too',
        edits=[
            ("    handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)\n",
             "    handle = RemovableHandle(self._forward_pre_hooks)\n"),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='forward-hook-prepend-ignored',
        feedback='prepend=True puts a forward hook first',
        edits=[
            ("    if prepend:\n"
             "        self._forward_hooks.move_to_end(handle.id, last=False)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='global-always-call-in-wrong-table',
        feedback='a global always_call hook',
        edits=[
            ("        registry._global_forward_hooks_always_called[handle.id] = True\n",
             "        registry._global_forward_hooks_with_kwargs[handle.id] = True\n"),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='global-with-kwargs-forgotten',
        feedback='register_module_forward_hook(with_kwargs=True',
        edits=[
            ("    if with_kwargs:\n"
             "        registry._global_forward_hooks_with_kwargs[handle.id] = True\n",
             ""),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='ids-by-count',
        feedback='its ids come from one counter',
        source='''class _CountedHandle:
    def __init__(self, table, extra):
        self.table, self.extra, self.id = table, extra, len(table)

    def remove(self):
        for table in (self.table, *self.extra):
            table.pop(self.id, None)


def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
    handle = _CountedHandle(self._forward_pre_hooks, [self._forward_pre_hooks_with_kwargs])
    self._forward_pre_hooks[handle.id] = hook
    if with_kwargs:
        self._forward_pre_hooks_with_kwargs[handle.id] = True
    if prepend:
        self._forward_pre_hooks.move_to_end(handle.id, last=False)
    return handle


def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
    handle = _CountedHandle(self._forward_hooks, [self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
    self._forward_hooks[handle.id] = hook
    if with_kwargs:
        self._forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        self._forward_hooks_always_called[handle.id] = True
    if prepend:
        self._forward_hooks.move_to_end(handle.id, last=False)
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    handle = RemovableHandle(registry._global_forward_hooks, extra_dict=registry._global_forward_hooks_always_called)
    registry._global_forward_hooks[handle.id] = hook
    if with_kwargs:
        registry._global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        registry._global_forward_hooks_always_called[handle.id] = True
    return handle''',
    ),
    dict(
        grade_id='c06_predict_firing',
        mistake='order-as-one-string',
        feedback='firing_order is a list of the event names above',
        edits=[
            ('firing_order = ["global pre", "pre B", "pre A", "forward", "global hook", "hook D", "hook C"]',
             'firing_order = "global pre, pre B, pre A, forward, global hook, hook D, hook C"'),
        ],
    ),
    dict(
        grade_id='c06_predict_firing',
        mistake='events-renamed',
        feedback='firing_order_when_forward_fails is a list of the event names above',
        edits=[
            ('firing_order_when_forward_fails = ["global pre", "pre B", "pre A", "forward", "hook C"]',
             'firing_order_when_forward_fails = ["global pre", "pre B", "pre A", "forward", "always-call hook"]'),
        ],
    ),
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
        feedback='replaces args by a 1-tuple',
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
        grade_id='c06_run_forward_pre_hooks',
        mistake='pair-not-checked',
        feedback='must raise RuntimeError',
        edits=[
            ("                if not (isinstance(result, tuple) and len(result) == 2):\n"
             "                    raise RuntimeError(\n"
             "                        \"forward pre-hook must return None or a tuple of (new_args, new_kwargs), \"\n"
             "                        f\"but got {result}.\"\n"
             "                    )\n"
             "                args, kwargs = result\n",
             "                args, kwargs = result[0], result[1]\n"),
        ],
    ),
    dict(
        grade_id='c06_run_forward_pre_hooks',
        mistake='chain-starts-from-original-args',
        feedback='Each pre-hook must see the args left by the previous one',
        edits=[
            ("            result = hook(module, args)\n",
             "            result = hook(module, original_args)\n"),
            ("    hooks = (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items())\n",
             "    original_args = args\n"
             "    hooks = (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items())\n"),
        ],
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='colleagues-version',
        feedback='three forward hooks',
        source='''def run_forward_hooks(module, args, kwargs, output, called):
    result = output
    for hook_id, hook in (*registry._global_forward_hooks.items(), *module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs:
            new = hook(module, args, kwargs, output)
        else:
            new = hook(module, args, output)
        if new is not None:
            result = new
    return result''',
    ),
    dict(
        grade_id='c06_run_forward_hooks',
        mistake='global-side-tables-ignored',
        feedback='Global with_kwargs forward hooks',
        edits=[
            ("        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:\n",
             "        if hook_id in module._forward_hooks_always_called:\n"),
            ("        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:\n",
             "        if hook_id in module._forward_hooks_with_kwargs:\n"),
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
    dict(
        grade_id='c06_registration_hooks',
        mistake='parameter-hooks-for-none',
        feedback='a None parameter is stored without running the parameter hooks',
        edits=[
            ("    if param is None:\n"
             "        self._parameters[name] = None\n"
             "        return\n"
             "    if not isinstance(param, nn.Parameter):\n",
             "    if param is not None and not isinstance(param, nn.Parameter):\n"),
        ],
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='buffer-hooks-skip-none',
        feedback='buffer hooks run for None too',
        edits=[
            ("    for hook in registry._global_buffer_registration_hooks.values():\n"
             "        output = hook(self, name, tensor)\n",
             "    for hook in registry._global_buffer_registration_hooks.values() if tensor is not None else ():\n"
             "        output = hook(self, name, tensor)\n"),
        ],
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='replacement-ignored',
        feedback='with two hooks (x',
        edits=[
            ("    for hook in registry._global_parameter_registration_hooks.values():\n"
             "        output = hook(self, name, param)\n"
             "        if output is not None:\n"
             "            param = output\n",
             "    for hook in registry._global_parameter_registration_hooks.values():\n"
             "        hook(self, name, param)\n"),
        ],
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='chain-broken',
        feedback='with two hooks (x',
        edits=[
            ("    for hook in registry._global_parameter_registration_hooks.values():\n"
             "        output = hook(self, name, param)\n"
             "        if output is not None:\n"
             "            param = output\n"
             "    self._parameters[name] = param\n",
             "    result = param\n"
             "    for hook in registry._global_parameter_registration_hooks.values():\n"
             "        output = hook(self, name, param)\n"
             "        if output is not None:\n"
             "            result = output\n"
             "    self._parameters[name] = result\n"),
        ],
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='persistent-ignored',
        feedback='a buffer hook that replaces None',
        edits=[
            ("    if persistent:\n"
             "        self._non_persistent_buffers_set.discard(name)\n"
             "    else:\n"
             "        self._non_persistent_buffers_set.add(name)",
             ""),
        ],
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='no-name-checks',
        feedback='Run the name checks first',
        edits=[
            ("    self._check_member_name(\"parameter\", \"_parameters\", name)\n", ""),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='call-impl-local-first',
        feedback='Global hooks run before the module',
        edits=[
            ("        for hook_id, hook in (*global_pre.items(), *self._forward_pre_hooks.items()):\n",
             "        for hook_id, hook in (*self._forward_pre_hooks.items(), *global_pre.items()):\n"),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='always-called-twice',
        feedback='must not run a second time',
        edits=[
            ("            if not always_called(hook_id) or hook_id in called:\n",
             "            if not always_called(hook_id):\n"),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='hook-error-not-warned',
        feedback='must be turned into a warning',
        edits=[
            ("            except Exception as error:\n"
             "                warnings.warn(\n",
             "            except ZeroDivisionError as error:\n"
             "                raise\n"
             "            except Exception as error:\n"
             "                warnings.warn(\n"),
        ],
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='forward-hook-result-dropped',
        feedback='forward hook (forward doubles)',
        edits=[
            ("                result = hook(self, args, output)\n"
             "            if result is not None:\n"
             "                output = result\n"
             "        return output\n",
             "                result = hook(self, args, output)\n"
             "        return output\n"),
        ],
    ),
    dict(
        grade_id='c06_register_hooks',
        mistake='delegates-to-reference',
        feedback='does not exist while grading',
        source='''register_forward_pre_hook = nn.Module.register_forward_pre_hook
register_forward_hook = nn.Module.register_forward_hook
register_module_forward_hook = registry.register_module_forward_hook''',
    ),
    dict(
        grade_id='c06_call_impl',
        mistake='delegates-to-reference-call-impl',
        feedback='does not exist while grading',
        source='''_call_impl = nn.Module._call_impl''',
    ),
    dict(
        grade_id='c06_registration_hooks',
        mistake='delegates-to-reference-registration',
        feedback='does not exist while grading',
        source='''register_parameter = nn.Module.register_parameter
register_buffer = nn.Module.register_buffer''',
    ),
]
