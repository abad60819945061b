_HOOK_DICTS = '''(
        "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
        "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
        "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
    )'''

# The start of the solution's _call_impl: the no-hook fast path, then the pre-hooks (global ones first).
_HOOK_GATE = (
    "    forward_call = self.forward\n"
    "    global_pre, global_post = module_impl._global_forward_pre_hooks, module_impl._global_forward_hooks\n"
    "    if not (self._forward_pre_hooks or self._forward_hooks or global_pre or global_post):\n"
    "        return forward_call(*args, **kwargs)\n"
    "    for hook in (*global_pre.values(), *self._forward_pre_hooks.values()):\n"
)

# The solution's refusal of extra arguments (keywords first, as torch 2.13's Module.__init__).
_REFUSE_KEYWORDS = (
    "    if kwargs:\n"
    "        raise TypeError(f\"{type(self).__name__}.__init__() got an unexpected keyword argument "
    "'{next(iter(kwargs))}'\")\n"
)
_REFUSE_POSITIONAL = (
    "    if args:\n"
    "        raise TypeError(f\"{type(self).__name__}.__init__() takes 1 positional argument but "
    "{len(args) + 1} were given\")\n"
)

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c01_module_init",
        mistake="plain-assignment",
        feedback="went through Module.__setattr__",
        edits=[
            ("    object.__setattr__(self, \"training\", True)\n"
             "    object.__setattr__(self, \"_parameters\", {})\n"
             "    object.__setattr__(self, \"_buffers\", {})\n"
             "    object.__setattr__(self, \"_non_persistent_buffers_set\", set())\n",
             "    self.training = True\n"
             "    self._parameters = {}\n"
             "    self._buffers = {}\n"
             "    self._non_persistent_buffers_set = set()\n"),
            ("        object.__setattr__(self, hooks, OrderedDict())\n"
             "    object.__setattr__(self, \"_modules\", {})",
             "        setattr(self, hooks, OrderedDict())\n"
             "    self._modules = {}"),
        ],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="missing-kwargs-hook-dicts",
        feedback="The attributes created by module_init",
        edits=[
            ("    for hooks in (\n"
             "        \"_forward_hooks\", \"_forward_hooks_with_kwargs\", \"_forward_hooks_always_called\",\n"
             "        \"_forward_pre_hooks\", \"_forward_pre_hooks_with_kwargs\",\n"
             "        \"_state_dict_hooks\", \"_state_dict_pre_hooks\", \"_load_state_dict_pre_hooks\", \"_load_state_dict_post_hooks\",\n"
             "    ):\n",
             "    for hooks in (\"_forward_hooks\", \"_forward_pre_hooks\", \"_state_dict_hooks\", \"_load_state_dict_pre_hooks\"):\n"),
        ],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="shared-containers",
        feedback="two modules share the same",
        source=f'''
_EMPTY = {{"_parameters": {{}}, "_buffers": {{}}, "_modules": {{}}, "_non_persistent_buffers_set": set()}}
_EMPTY.update({{hooks: OrderedDict() for hooks in ("_backward_pre_hooks", "_backward_hooks", *{_HOOK_DICTS})}})

def module_init(self):
    object.__setattr__(self, "training", True)
    object.__setattr__(self, "_is_full_backward_hook", None)
    for name, container in _EMPTY.items():
        object.__setattr__(self, name, container)
''',
    ),
    dict(
        grade_id="c01_forward_unimplemented",
        mistake="base-class-name",
        feedback="a module whose class defines no forward",
        source='''
def forward_unimplemented(self, *input):
    raise NotImplementedError('Module [Module] is missing the required "forward" function')
''',
    ),
    dict(
        grade_id="c01_forward_unimplemented",
        mistake="fixed-arity",
        feedback="it should accept *input",
        source='''
def forward_unimplemented(self, x):
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')
''',
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="pre-hook-result-not-wrapped",
        feedback="a pre-hook result that is not a tuple is wrapped",
        source='''
def call_impl(self, *args, **kwargs):
    for hook in (*module_impl._global_forward_pre_hooks.values(), *self._forward_pre_hooks.values()):
        new_args = hook(self, args)
        if new_args is not None:
            args = new_args
    result = self.forward(*args, **kwargs)
    for hook in (*module_impl._global_forward_hooks.values(), *self._forward_hooks.values()):
        new_result = hook(self, args, result)
        if new_result is not None:
            result = new_result
    return result
''',
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="class-forward",
        feedback="an instance attribute model.forward was ignored",
        edits=[
            (_HOOK_GATE,
             "    forward_call = type(self).forward.__get__(self)\n"
             "    for hook in (*module_impl._global_forward_pre_hooks.values(), *self._forward_pre_hooks.values()):\n"),
            ("    for hook in (*global_post.values(), *self._forward_hooks.values()):\n",
             "    for hook in (*module_impl._global_forward_hooks.values(), *self._forward_hooks.values()):\n"),
        ],
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="global-hooks-ignored",
        feedback="global hooks run before local ones",
        edits=[
            (_HOOK_GATE,
             "    for hook in self._forward_pre_hooks.values():\n"),
            ("    result = forward_call(*args, **kwargs)\n"
             "    for hook in (*global_post.values(), *self._forward_hooks.values()):\n",
             "    result = self.forward(*args, **kwargs)\n"
             "    for hook in self._forward_hooks.values():\n"),
        ],
    ),
]

WRONG_IMPLEMENTATIONS += [
    dict(
        grade_id="c01_predict_hooks",
        mistake="predicts-local-hooks-first",
        feedback="global hooks run before local ones",
        source='''
def prediction(x):
    doubled = 2 * (x + 1)
    return [f"forward({x + 1})", f"hook A({doubled})", f"hook B({doubled})", f"global({doubled})",
            f"returned {doubled + 10}"]
''',
    ),
    dict(
        grade_id="c01_predict_hooks",
        mistake="predicts-pre-hook-ignored",
        feedback="the pre-hook's single value replaces the input",
        source='''
def prediction(x):
    return [f"forward({x})", f"global({2 * x})", f"hook A({2 * x})", f"hook B({2 * x})", f"returned {2 * x + 10}"]
''',
    ),
    dict(
        grade_id="c01_predict_hooks",
        mistake="predicts-hook-result-ignored",
        feedback="B's return value replaces what model(x) returns",
        source='''
def prediction(x):
    doubled = 2 * (x + 1)
    return [f"forward({x + 1})", f"global({doubled})", f"hook A({doubled})", f"hook B({doubled})",
            f"returned {doubled}"]
''',
    ),
    dict(
        grade_id="c01_fixed_pipeline",
        mistake="encoder-forward-still-called",
        feedback="not self.encoder.forward(...)",
        edits=[("return self.head(self.encoder(x))", "return self.head(self.encoder.forward(x))")],
    ),
    dict(
        grade_id="c01_fixed_pipeline",
        mistake="head-forward-still-called",
        feedback="call self.head(...) so its hooks run",
        edits=[("return self.head(self.encoder(x))", "return self.head.forward(self.encoder(x))")],
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="hooks-see-original-args",
        feedback="each hook must see the args and result as the hooks before it left them",
        edits=[
            ("    for hook in (*global_pre.values(), *self._forward_pre_hooks.values()):\n"
             "        new_args = hook(self, args)\n"
             "        if new_args is not None:\n"
             "            args = new_args if isinstance(new_args, tuple) else (new_args,)\n",
             "    replaced = args\n"
             "    for hook in (*global_pre.values(), *self._forward_pre_hooks.values()):\n"
             "        new_args = hook(self, args)\n"
             "        if new_args is not None:\n"
             "            replaced = new_args if isinstance(new_args, tuple) else (new_args,)\n"
             "    args = replaced\n"),
        ],
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="local-forward-hooks-first",
        feedback="global hooks run before local ones",
        edits=[
            ("    for hook in (*global_post.values(), *self._forward_hooks.values()):\n",
             "    for hook in (*self._forward_hooks.values(), *global_post.values()):\n"),
        ],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="extra-arguments-ignored",
        feedback="accepting them silently hides",
        edits=[(_REFUSE_KEYWORDS + _REFUSE_POSITIONAL, "")],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="no-extra-arguments-in-signature",
        feedback="Python's own error names module_init",
        edits=[("def module_init(self, *args, **kwargs):\n", "def module_init(self):\n"),
               (_REFUSE_KEYWORDS + _REFUSE_POSITIONAL, "")],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="positional-refused-before-keyword",
        feedback="a keyword argument is refused first",
        edits=[(_REFUSE_KEYWORDS + _REFUSE_POSITIONAL, _REFUSE_POSITIONAL + _REFUSE_KEYWORDS)],
    ),
    dict(
        grade_id="c01_module_init",
        mistake="init-delegates-to-reference",
        feedback="does not exist while grading",
        source="module_init = nn.Module.__init__",
    ),
    dict(
        grade_id="c01_forward_unimplemented",
        mistake="forward-delegates-to-reference",
        feedback="does not exist while grading",
        source="forward_unimplemented = nn.Module.forward",
    ),
    dict(
        grade_id="c01_call_impl",
        mistake="call-delegates-to-reference",
        feedback="does your code call modulecraft's own version",
        source='''
def call_impl(self, *args, **kwargs):
    return nn.Module._call_impl(self, *args, **kwargs)
''',
    ),
]
