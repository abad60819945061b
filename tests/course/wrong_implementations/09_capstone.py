"""Typical mistakes in chapter 9 (the capstone); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c09_crafted',
        mistake='post-order-walk',
        feedback='named_modules of a crafted Sequential',
        source=r'''
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    if remove_duplicate:
        memo.add(self)
    for name, child in self._modules.items():
        if child is not None:
            yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)
    yield prefix, self


def train(self, mode=True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    self.training = mode
    for child in self.children():
        child.train(mode)
    return self


def run_forward_pre_hooks(module, args, kwargs):
    for hook_id, hook in (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def run_forward_hooks(module, args, kwargs, output, called):
    for hook_id, hook in (*registry._global_forward_hooks.items(), *module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output


def _call_impl(self, *args, **kwargs):
    if not (self._forward_pre_hooks or self._forward_hooks
            or registry._global_forward_pre_hooks or registry._global_forward_hooks):
        return self.forward(*args, **kwargs)
    called, output = set(), None
    try:
        args, kwargs = run_forward_pre_hooks(self, args, kwargs)
        output = self.forward(*args, **kwargs)
        return run_forward_hooks(self, args, kwargs, output, called)
    except Exception:
        for hook_id, hook in (*registry._global_forward_hooks.items(), *self._forward_hooks.items()):
            always = hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called
            if not always or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was silenced "
                              f"as another error was raised in forward: {error}")
        raise


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
    destination._metadata[prefix[:-1]] = {"version": self._version}
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination


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
                load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}, child_prefix)

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


class Crafted:
    """Your mechanisms; put this class first in the bases of a reference layer."""

    named_modules = named_modules
    train = train
    _call_impl = _call_impl
    _save_to_state_dict = _save_to_state_dict
    state_dict = state_dict
    load_state_dict = load_state_dict
''',
    ),
    dict(
        grade_id='c09_crafted',
        mistake='no-metadata',
        feedback='state_dict keys and metadata',
        source=r'''
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    if remove_duplicate:
        memo.add(self)
    yield prefix, self
    for name, child in self._modules.items():
        if child is not None:
            yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)


def train(self, mode=True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    self.training = mode
    for child in self.children():
        child.train(mode)
    return self


def run_forward_pre_hooks(module, args, kwargs):
    for hook_id, hook in (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def run_forward_hooks(module, args, kwargs, output, called):
    for hook_id, hook in (*registry._global_forward_hooks.items(), *module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output


def _call_impl(self, *args, **kwargs):
    if not (self._forward_pre_hooks or self._forward_hooks
            or registry._global_forward_pre_hooks or registry._global_forward_hooks):
        return self.forward(*args, **kwargs)
    called, output = set(), None
    try:
        args, kwargs = run_forward_pre_hooks(self, args, kwargs)
        output = self.forward(*args, **kwargs)
        return run_forward_hooks(self, args, kwargs, output, called)
    except Exception:
        for hook_id, hook in (*registry._global_forward_hooks.items(), *self._forward_hooks.items()):
            always = hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called
            if not always or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was silenced "
                              f"as another error was raised in forward: {error}")
        raise


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
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination


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
                load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}, child_prefix)

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


class Crafted:
    """Your mechanisms; put this class first in the bases of a reference layer."""

    named_modules = named_modules
    train = train
    _call_impl = _call_impl
    _save_to_state_dict = _save_to_state_dict
    state_dict = state_dict
    load_state_dict = load_state_dict
''',
    ),
    dict(
        grade_id='c09_crafted',
        mistake='hooks-skipped',
        feedback='output with a forward hook',
        source=r'''
def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    if memo is None:
        memo = set()
    if self in memo:
        return
    if remove_duplicate:
        memo.add(self)
    yield prefix, self
    for name, child in self._modules.items():
        if child is not None:
            yield from child.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)


def train(self, mode=True):
    if not isinstance(mode, bool):
        raise ValueError("training mode is expected to be boolean")
    self.training = mode
    for child in self.children():
        child.train(mode)
    return self


def run_forward_pre_hooks(module, args, kwargs):
    for hook_id, hook in (*registry._global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def run_forward_hooks(module, args, kwargs, output, called):
    for hook_id, hook in (*registry._global_forward_hooks.items(), *module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs or hook_id in registry._global_forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output


def _call_impl(self, *args, **kwargs):
    return self.forward(*args, **kwargs)
    called, output = set(), None
    try:
        args, kwargs = run_forward_pre_hooks(self, args, kwargs)
        output = self.forward(*args, **kwargs)
        return run_forward_hooks(self, args, kwargs, output, called)
    except Exception:
        for hook_id, hook in (*registry._global_forward_hooks.items(), *self._forward_hooks.items()):
            always = hook_id in self._forward_hooks_always_called or hook_id in registry._global_forward_hooks_always_called
            if not always or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
            except Exception as error:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was silenced "
                              f"as another error was raised in forward: {error}")
        raise


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
    destination._metadata[prefix[:-1]] = {"version": self._version}
    self._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in self._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
    return destination


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
                load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}, child_prefix)

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


class Crafted:
    """Your mechanisms; put this class first in the bases of a reference layer."""

    named_modules = named_modules
    train = train
    _call_impl = _call_impl
    _save_to_state_dict = _save_to_state_dict
    state_dict = state_dict
    load_state_dict = load_state_dict
''',
    ),
    dict(
        grade_id='c09_build_model',
        mistake='relu-before-batchnorm',
        feedback='repr of build_model(nn)',
        source=r"""
def build_model(layers, lazy=False):
    if lazy:
        first, last = layers.LazyLinear(8), layers.LazyLinear(3)
    else:
        first, last = layers.Linear(4, 8), layers.Linear(8, 3)
    return layers.Sequential(first, layers.ReLU(), layers.BatchNorm1d(8), layers.Dropout(0.25), last)
""",
    ),
    dict(
        grade_id='c09_build_model',
        mistake='lazy-ignored',
        feedback='layer classes of build_model(nn, lazy=True)',
        source=r"""
def build_model(layers, lazy=False):
    if False:
        first, last = layers.LazyLinear(8), layers.LazyLinear(3)
    else:
        first, last = layers.Linear(4, 8), layers.Linear(8, 3)
    return layers.Sequential(first, layers.BatchNorm1d(8), layers.ReLU(), layers.Dropout(0.25), last)
""",
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='no-eval',
        feedback='the restored model is in eval mode',
        source=r"""
def checkpoint(model, path):
    modulecraft.save(model.state_dict(), path)


def restore(path, model):
    model.load_state_dict(modulecraft.load(path))
    return model
""",
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='not-strict',
        feedback='restore must load strictly',
        source=r"""
def checkpoint(model, path):
    modulecraft.save(model.state_dict(), path)


def restore(path, model):
    model.load_state_dict(modulecraft.load(path), strict=False)
    return model.eval()
""",
    ),
    dict(
        grade_id='c09_checkpoint',
        mistake='parameters-only',
        feedback='Missing key(s) in state_dict',
        source=r"""
def checkpoint(model, path):
    modulecraft.save(dict(model.named_parameters()), path)


def restore(path, model):
    model.load_state_dict(modulecraft.load(path))
    return model.eval()
""",
    ),
]
