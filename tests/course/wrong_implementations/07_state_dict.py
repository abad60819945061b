"""Typical mistakes in chapter 7 (state_dict and loading); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='non-persistent-saved',
        feedback='keys of Saving().state_dict()',
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.view(np.ndarray)
    for name, buf in self._buffers.items():
        if buf is not None:
            destination[prefix + name] = buf if keep_vars else buf.view(np.ndarray)
""",
    ),
    dict(
        grade_id='c07_save_to_state_dict',
        mistake='objects-not-views',
        feedback='value types without keep_vars',
        source=r"""
def _save_to_state_dict(self, destination, prefix, keep_vars):
    for name, param in self._parameters.items():
        if param is not None:
            destination[prefix + name] = param
    for name, buf in self._buffers.items():
        if buf is not None and name not in self._non_persistent_buffers_set:
            destination[prefix + name] = buf
""",
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
        source=r"""
def state_dict(self, *, destination=None, prefix="", keep_vars=False):
    if destination is None:
        destination = OrderedDict()
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination
""",
    ),
    dict(
        grade_id='c07_state_dict',
        mistake='prefix-without-dot',
        feedback='keys of Collecting',
        source=r"""
def state_dict(self, *, destination=None, prefix="", keep_vars=False):
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    destination._metadata[prefix[:-1]] = {"version": self._version}
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name, keep_vars=keep_vars)
    return destination
""",
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='no-recursion',
        feedback='the values were copied into every layer',
        source=r"""
def load_state_dict(self, state_dict, strict=True):
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing_keys, unexpected_keys, error_msgs = [], [], []
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)
    if metadata is not None:
        state_dict._metadata = metadata

    def load(module, local_state_dict, prefix=""):
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                     missing_keys, unexpected_keys, error_msgs)
        for name, child in module._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                pass

    load(self, state_dict)
    if strict:
        if unexpected_keys:
            error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in unexpected_keys)))
        if missing_keys:
            error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in missing_keys)))
    if error_msgs:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
            type(self).__name__, "\n\t".join(error_msgs)))
    return _IncompatibleKeys(missing_keys, unexpected_keys)
""",
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='unexpected-first',
        feedback='the lines of that error message',
        source=r"""
def load_state_dict(self, state_dict, strict=True):
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing_keys, unexpected_keys, error_msgs = [], [], []
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)
    if metadata is not None:
        state_dict._metadata = metadata

    def load(module, local_state_dict, prefix=""):
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                     missing_keys, unexpected_keys, error_msgs)
        for name, child in module._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                load(child, child_state_dict, child_prefix)

    load(self, state_dict)
    if strict:
        if False:
            error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in unexpected_keys)))
        if missing_keys:
            error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in missing_keys)))
    if strict and unexpected_keys:
        error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
            ", ".join(f'"{k}"' for k in unexpected_keys)))
    if error_msgs:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
            type(self).__name__, "\n\t".join(error_msgs)))
    return _IncompatibleKeys(missing_keys, unexpected_keys)
""",
    ),
    dict(
        grade_id='c07_load_state_dict',
        mistake='strict-ignored',
        feedback='the lines of that error message',
        source=r"""
def load_state_dict(self, state_dict, strict=True):
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing_keys, unexpected_keys, error_msgs = [], [], []
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)
    if metadata is not None:
        state_dict._metadata = metadata

    def load(module, local_state_dict, prefix=""):
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                     missing_keys, unexpected_keys, error_msgs)
        for name, child in module._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                load(child, child_state_dict, child_prefix)

    load(self, state_dict)
    if False:
        if unexpected_keys:
            error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in unexpected_keys)))
        if missing_keys:
            error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in missing_keys)))
    if error_msgs:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
            type(self).__name__, "\n\t".join(error_msgs)))
    return _IncompatibleKeys(missing_keys, unexpected_keys)
""",
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='no-version-check',
        feedback='must not be patched',
        source=r"""
def gain_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
    version = local_metadata.get("version", None)
    if True:
        old_key, new_key = prefix + "gain", prefix + "weight"
        if old_key in state_dict and new_key not in state_dict:
            state_dict[new_key] = state_dict.pop(old_key)
        if prefix + "calls" not in state_dict:
            state_dict[prefix + "calls"] = np.array(0, dtype=np.int64)
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='ignores-prefix',
        feedback='inside a Sequential',
        source=r"""
def gain_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
    version = local_metadata.get("version", None)
    if version is None or version < 2:
        old_key, new_key = "gain", "weight"
        if old_key in state_dict and new_key not in state_dict:
            state_dict[new_key] = state_dict.pop(old_key)
        if prefix + "calls" not in state_dict:
            state_dict[prefix + "calls"] = np.array(0, dtype=np.int64)
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
    dict(
        grade_id='c07_gain_load',
        mistake='no-calls-default',
        feedback='Missing key(s) in state_dict: "calls"',
        source=r"""
def gain_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
    version = local_metadata.get("version", None)
    if version is None or version < 2:
        old_key, new_key = prefix + "gain", prefix + "weight"
        if old_key in state_dict and new_key not in state_dict:
            state_dict[new_key] = state_dict.pop(old_key)
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
    dict(
        grade_id='c07_rename_load',
        mistake='prefix-ignored',
        feedback='Inside another model the keys start with',
        source=r"""
RENAMES = {"backbone.": "img_backbone.", "neck.": "img_neck."}


def multimodal_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs):
    for key in list(state_dict):
        for old, new in RENAMES.items():
            if key.startswith(old):
                state_dict[new + key[len(old):]] = state_dict.pop(key)
                break
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
    dict(
        grade_id='c07_rename_load',
        mistake='without-dot',
        feedback='Only keys starting with',
        source=r"""
RENAMES = {"backbone": "img_backbone", "neck": "img_neck"}


def multimodal_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs):
    for key in list(state_dict):
        for old, new in RENAMES.items():
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)
                break
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
    dict(
        grade_id='c07_rename_load',
        mistake='neck-forgotten',
        feedback='missing keys after loading a Detector checkpoint',
        source=r"""
RENAMES = {"backbone.": "img_backbone."}


def multimodal_load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs):
    for key in list(state_dict):
        for old, new in RENAMES.items():
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)
                break
    nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                    unexpected_keys, error_msgs)
""",
    ),
]
