"""Isolation between scenarios: global hooks registered by one scenario never leak into the next."""

import pytest

from .backends import _backends

GLOBAL_HOOK_REGISTRIES = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


@pytest.fixture(autouse=True)
def clear_global_hooks():
    yield
    for lib in _backends.values():
        for registry in GLOBAL_HOOK_REGISTRIES:
            getattr(lib.hooks, registry, {}).clear()
        # Registering a global backward hook fixes the kind (full or not) for the process: unfix it.
        lib.hooks._global_is_full_backward_hook = None
