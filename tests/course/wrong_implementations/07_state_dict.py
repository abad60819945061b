"""Typical mistakes in chapter 7 (state_dict and loading); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='non-persistent-saved',
        feedback='keys of Saving().state_dict()',
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
        feedback='keys of Saving().state_dict()',
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, buf in self._buffers.items():
        if buf is not None and name not in self._non_persistent_buffers_set:
            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)
""",
    ),
    dict(
        grade_id='c07_state_dict',
        mistake='no-metadata',
        feedback='the _metadata of the same state_dict',
        edits=[
            ("        destination._metadata = OrderedDict()\n"
             "    destination._metadata[prefix[:-1]] = {\"version\": self._version}\n",
             ""),
        ],
    ),
    dict(
        grade_id='c07_state_dict',
        mistake='prefix-without-dot',
        feedback='keys of Collecting',
        edits=[
            ("            child.state_dict(destination=destination, prefix=prefix + name + \".\", keep_vars=keep_vars)\n",
             "            child.state_dict(destination=destination, prefix=prefix + name, keep_vars=keep_vars)\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='no-recursion',
        feedback='the values were copied into every layer',
        edits=[
            ("                load(child, child_state_dict, child_prefix)\n",
             "                pass\n"),
        ],
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='unexpected-first',
        feedback='the lines of that error message',
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
        feedback='the lines of that error message',
        edits=[
            ("    if strict:\n",
             "    if False:\n"),
        ],
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='no-version-check',
        feedback='must not be patched',
        edits=[
            ("    if version is None or version < 2:\n",
             "    if True:\n"),
        ],
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='ignores-prefix',
        feedback='inside a Sequential',
        edits=[
            ("        old_key, new_key = prefix + \"gain\", prefix + \"weight\"\n",
             "        old_key, new_key = \"gain\", \"weight\"\n"),
        ],
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='no-calls-default',
        feedback='Missing key(s) in state_dict: "calls"',
        edits=[
            ("        if prefix + \"calls\" not in state_dict:\n"
             "            state_dict[prefix + \"calls\"] = np.array(0, dtype=np.int64)\n",
             ""),
        ],
    ),
    dict(
        grade_id='c07_rename_load',
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
        grade_id='c07_rename_load',
        mistake='without-dot',
        feedback='Only keys starting with',
        edits=[
            ("RENAMES = {\"backbone.\": \"img_backbone.\", \"neck.\": \"img_neck.\"}\n",
             "RENAMES = {\"backbone\": \"img_backbone\", \"neck\": \"img_neck\"}\n"),
        ],
    ),
    dict(
        grade_id='c07_rename_load',
        mistake='neck-forgotten',
        feedback='missing keys after loading a Detector checkpoint',
        edits=[
            ("RENAMES = {\"backbone.\": \"img_backbone.\", \"neck.\": \"img_neck.\"}\n",
             "RENAMES = {\"backbone.\": \"img_backbone.\"}\n"),
        ],
    ),
]
