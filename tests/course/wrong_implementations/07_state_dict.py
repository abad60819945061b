"""Typical mistakes in chapter 7 (state_dict and loading); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='non-persistent-saved',
        feedback="keys of a Saving module's state_dict",
        edits=[
            ("        if buf is not None and name not in self._non_persistent_buffers_set:\n",
             "        if buf is not None:\n"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='objects-not-views',
        feedback='value types without keep_vars',
        edits=[
            ("            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)\n",
             "            destination[prefix + name] = param\n"),
            ("            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)",
             "            destination[prefix + name] = buf"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='buffers-first',
        feedback="keys of a Saving module's state_dict",
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, buf in self._buffers.items():
        if buf is not None and name not in self._non_persistent_buffers_set:
            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)


def state_dict(self, *, destination=None, prefix="", keep_vars=False):
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    destination._metadata[prefix[:-1]] = {"version": self._version}
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination
""",
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='no-metadata',
        feedback='the _metadata of the same state_dict',
        edits=[
            ("        destination._metadata = OrderedDict()\n", ""),
            ("    destination._metadata[prefix[:-1]] = local_metadata\n", ""),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='prefix-without-dot',
        feedback="keys of a Saving module's state_dict",
        edits=[
            ("            child.state_dict(destination=destination, prefix=prefix + name + \".\", keep_vars=keep_vars)\n",
             "            child.state_dict(destination=destination, prefix=prefix + name, keep_vars=keep_vars)\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='no-recursion',
        feedback='every module received the entries under its prefix',
        edits=[
            ("                load(child, child_state_dict, child_prefix)\n",
             "                pass\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='unexpected-first',
        feedback='the lines of the error message of a strict load',
        edits=[
            ("        if unexpected_keys:\n",
             "        if False:\n"),
            ("                \", \".join(f'\"{k}\"' for k in missing_keys)))\n",
             "                \", \".join(f'\"{k}\"' for k in missing_keys)))\n"
             "    if strict and unexpected_keys:\n"
             "        error_msgs.insert(0, \"Unexpected key(s) in state_dict: {}. \".format(\n"
             "            \", \".join(f'\"{k}\"' for k in unexpected_keys)))\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='strict-ignored',
        feedback='the lines of the error message of a strict load',
        edits=[
            ("    if strict:\n",
             "    if False:\n"),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='no-version-check',
        feedback='must not be patched',
        edits=[
            ("    if version is None or version < 2:\n",
             "    if True:\n"),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='ignores-prefix',
        feedback='inside a Sequential',
        edits=[
            ("        old_key, new_key = prefix + \"gain\", prefix + \"weight\"\n",
             "        old_key, new_key = \"gain\", \"weight\"\n"),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='no-calls-default',
        feedback='Missing key(s) in state_dict: "calls"',
        edits=[
            ("        if prefix + \"calls\" not in state_dict:\n"
             "            state_dict[prefix + \"calls\"] = np.array(0, dtype=np.int64)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='prefix-ignored',
        feedback='Inside another model the keys start with',
        edits=[
            ("            if key.startswith(prefix + old):\n"
             "                state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)\n",
             "            if key.startswith(old):\n"
             "                state_dict[new + key[len(old):]] = state_dict.pop(key)\n"),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='without-dot',
        feedback='Only keys starting with',
        edits=[
            ("RENAMES = {\"backbone.\": \"img_backbone.\", \"neck.\": \"img_neck.\"}\n",
             "RENAMES = {\"backbone\": \"img_backbone\", \"neck\": \"img_neck\"}\n"),
        ],
    ),
    dict(
        grade_id='c07_overrides',
        mistake='neck-forgotten',
        feedback='(missing, unexpected) keys after loading a Detector checkpoint',
        edits=[
            ("RENAMES = {\"backbone.\": \"img_backbone.\", \"neck.\": \"img_neck.\"}\n",
             "RENAMES = {\"backbone.\": \"img_backbone.\"}\n"),
        ],
    ),
    dict(
        grade_id='c07_predict_shared',
        mistake='keys-as-one-string',
        feedback='predicted_keys is a list',
        edits=[
            ('predicted_keys = ["0.weight", "0.bias", "1.weight", "1.bias"]\n',
             'predicted_keys = "0.weight, 0.bias, 1.weight, 1.bias"\n'),
        ],
    ),
    dict(
        grade_id='c07_predict_shared',
        mistake='count-as-string',
        feedback='predicted_parameter_count is an int',
        edits=[
            ("predicted_parameter_count = 2", 'predicted_parameter_count = "2"'),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='post-hooks-ignored',
        feedback='with a post-hook that removes it from missing_keys',
        edits=[
            ("        for hook in module._load_state_dict_post_hooks.values():\n"
             "            if hook(module, incompatible_keys) is not None:\n",
             "        for hook in ():\n"
             "            if hook(module, incompatible_keys) is not None:\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='assign-ignored',
        feedback='assign=True reaches every module',
        edits=[
            ("        if assign:\n"
             "            local_metadata[\"assign_to_params_buffers\"] = assign\n",
             ""),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='post-hooks-before-children',
        feedback='after its children (and their hooks) have loaded',
        edits=[
            ("        for name, child in module._modules.items():\n"
             "            if child is not None:\n"
             "                child_prefix = prefix + name + \".\"\n"
             "                child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}\n"
             "                load(child, child_state_dict, child_prefix)\n",
             ""),
            ("                    \"values, if incompatible_keys need to be modified, it should be done inplace.\")\n",
             "                    \"values, if incompatible_keys need to be modified, it should be done inplace.\")\n"
             "        for name, child in module._modules.items():\n"
             "            if child is not None:\n"
             "                child_prefix = prefix + name + \".\"\n"
             "                child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}\n"
             "                load(child, child_state_dict, child_prefix)\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='non-persistent-buffers-loaded',
        feedback='into a Fixed strictly',
        edits=[
            ("    local_state = {name: value for name, value in [*self._parameters.items(), *persistent.items()]\n",
             "    local_state = {name: value for name, value in [*self._parameters.items(), *self._buffers.items()]\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='no-shape-check',
        feedback='loading a bias of shape (1,) into the (',
        edits=[
            ("        if input_param.shape != param.shape:\n", "        if False:\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='assign-loses-requires-grad',
        feedback='assign=True keeps a frozen parameter frozen',
        edits=[
            ("                input_param = nn.Parameter(input_param, param.requires_grad)\n",
             "                input_param = nn.Parameter(input_param)\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='none-parameter-not-unexpected',
        feedback='a None parameter',
        edits=[
            ("                if rest and first not in self._modules or not rest and first not in local_state:\n",
             "                if rest and first not in self._modules or not rest and first not in self._parameters \\\n"
             "                        and first not in self._buffers:\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='assign-skips-shape-check',
        feedback='assign=True checks the shape too',
        edits=[
            ("        if input_param.shape != param.shape:\n",
             "        if not assign and input_param.shape != param.shape:\n"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='saved-as-copy',
        feedback='must be a view of the parameter, not a copy',
        edits=[
            ("            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)\n",
             "            destination[prefix + name] = param if keep_vars else np.array(param)\n"),
            ("            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)",
             "            destination[prefix + name] = buf if keep_vars else np.array(buf)"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='children-first',
        feedback='its own entries come first, then each child',
        edits=[
            ("    self._save_to_state_dict(destination, prefix, keep_vars)\n", ""),
            ("    return destination", "    self._save_to_state_dict(destination, prefix, keep_vars)\n    return destination"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='walks-named-modules',
        feedback='a module is saved once per path',
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)
    for name, buf in self._buffers.items():
        if buf is not None and name not in self._non_persistent_buffers_set:
            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)


def state_dict(self, *, destination=None, prefix="", keep_vars=False):
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    for name, module in self.named_modules(prefix=prefix[:-1]):
        destination._metadata[name] = {"version": module._version}
        module._save_to_state_dict(destination, name + "." if name else "", keep_vars)
    return destination
""",
    ),
    dict(
        grade_id='c07_own_load',
        mistake='own-load-ignores-prefix',
        feedback='every key is prefix + name',
        edits=[("        key = prefix + name\n", "        key = name\n")],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='unexpected-prefix-not-stripped',
        feedback='strip the prefix before taking the first part of a key',
        edits=[('                first, *rest = key[len(prefix):].split(".", 1)\n',
                '                first, *rest = key.split(".", 1)\n')],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='values-not-copied',
        feedback='rebinding a name (param = input_param) copies nothing',
        edits=[("            param[...] = input_param\n", "            param = input_param\n")],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='assign-copies',
        feedback="puts the checkpoint's own array into the module, not a copy",
        edits=[('    assign = local_metadata.get("assign_to_params_buffers", False)\n',
                '    assign = local_metadata.get("assign", False)\n')],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='always-assigns',
        feedback="storing the checkpoint's array itself (setattr, or self._parameters[name] = ...) is what "
                 "assign=True does, not a copy",
        edits=[("        if assign:\n"
                "            if isinstance(param, nn.Parameter):\n"
                "                input_param = nn.Parameter(input_param, param.requires_grad)\n"
                "            setattr(self, name, input_param)\n"
                "        else:\n"
                "            param[...] = input_param\n",
                "        if isinstance(param, nn.Parameter):\n"
                "            input_param = nn.Parameter(input_param, param.requires_grad)\n"
                "        setattr(self, name, input_param)\n")],
    ),
    dict(
        grade_id='c07_iris_net',
        mistake='no-relu',
        feedback='drawn flowers after the load',
        edits=[
            ("        return self.out(self.act(self.hidden(x)))\n", "        return self.out(self.hidden(x))\n"),
        ],
    ),
    dict(
        grade_id='c07_iris_net',
        mistake='iris-prefix-ignored',
        feedback='Inside another model',
        edits=[
            ("                if key.startswith(prefix + old):\n"
             "                    state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)\n",
             "                if key.startswith(old):\n"
             "                    state_dict[new + key[len(old):]] = state_dict.pop(key)\n"),
        ],
    ),
    dict(
        grade_id='c07_iris_net',
        mistake='relu-counted-as-a-layer',
        feedback='IrisNet().load_state_dict(torch_state) (strict)',
        edits=[
            ('TORCH_NAMES = {"0.": "hidden.", "2.": "out."}\n', 'TORCH_NAMES = {"0.": "hidden.", "1.": "out."}\n'),
        ],
    ),
    # the hooks around saving (7.2) and at the start of one module's load (7.4, step 1)
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='state-dict-hooks-skipped',
        feedback='of self._state_dict_pre_hooks',
        edits=[
            ("    for hook in self._state_dict_pre_hooks.values():\n        hook(self, prefix, keep_vars)\n", ""),
            ("    for hook in self._state_dict_hooks.values():\n", "    for hook in ():\n"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='state-dict-post-hooks-before-children',
        feedback="so a post-hook sees the children's entries too",
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)
    for name, buf in self._buffers.items():
        if buf is not None and name not in self._non_persistent_buffers_set:
            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)


def state_dict(self, *, destination=None, prefix="", keep_vars=False):
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    meta = destination._metadata[prefix[:-1]] = {"version": self._version}
    for hook in self._state_dict_pre_hooks.values():
        hook(self, prefix, keep_vars)
    self._save_to_state_dict(destination, prefix, keep_vars)
    for hook in self._state_dict_hooks.values():  # the module's own entries are saved: its hooks run now
        if hook(self, destination, prefix, meta) is not None and getattr(hook, "_from_public_api", False):
            raise RuntimeError("state_dict post-hook must return None")
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination
""",
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='post-hook-result-ignored',
        feedback='must return None',
        edits=[
            ("        result = hook(self, destination, prefix, local_metadata)\n"
             "        if result is not None:\n"
             "            if getattr(hook, \"_from_public_api\", False):\n"
             "                raise RuntimeError(\"state_dict post-hook must return None\")\n"
             "            destination = result\n",
             "        hook(self, destination, prefix, local_metadata)\n"),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='load-pre-hooks-skipped',
        feedback='first call each hook(state_dict',
        edits=[
            ("    for hook in self._load_state_dict_pre_hooks.values():\n"
             "        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)\n", ""),
        ],
    ),
    dict(
        grade_id='c07_own_load',
        mistake='load-pre-hooks-after-reading',
        feedback='the hook edits state_dict before the module reads it',
        edits=[
            ("    for hook in self._load_state_dict_pre_hooks.values():\n"
             "        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)\n", ""),
            ("    if strict:\n        for key in state_dict:\n",
             "    for hook in self._load_state_dict_pre_hooks.values():\n"
             "        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)\n"
             "    if strict:\n        for key in state_dict:\n"),
        ],
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='delegates-to-reference',
        feedback='does not exist while grading',
        source='''_save_to_state_dict = nn.Module._save_to_state_dict
state_dict = nn.Module.state_dict''',
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='delegates-to-reference-driver',
        feedback='does not exist while grading',
        source='''load_state_dict = nn.Module.load_state_dict''',
    ),
    dict(
        grade_id='c07_own_load',
        mistake='delegates-to-reference-own-load',
        feedback='does not exist while grading',
        source='''load_from_state_dict = nn.Module._load_from_state_dict''',
    ),
]
