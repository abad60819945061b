"""Buffers are stored as the object assigned, as torch stores the tensor itself (issue 20, items 1 and 2).

A module keeps the very object it was given (``module.buf is buf``), so a ``Buffer`` keeps its flag: assigning a
registered buffer under a second name registers a second buffer, and registration hooks see an object that can
carry attributes.
"""

from .models import where
from .observe import differential


def _aliased(lib, persistent):
    class Aliased(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.buffer1 = lib.Buffer(lib.arange(2), persistent=persistent)
            self.buffer2 = self.buffer1
            self.register_buffer("plain", lib.zeros(1))
            self.plain_alias = self.plain

    return Aliased()


@differential
def test_a_registered_buffer_assigned_under_a_second_name_is_a_second_buffer(lib):
    module, hidden = _aliased(lib, persistent=True), _aliased(lib, persistent=False)
    before = [module.buffer2 is module.buffer1, where(module, "buffer2")[:2], where(module, "plain_alias")[:2],
              list(module.state_dict()), list(hidden.state_dict()), sorted(hidden._non_persistent_buffers_set),
              [name for name, _ in module.named_buffers(remove_duplicate=False)]]
    module.double()
    return before, [module.buffer1.dtype, module.buffer2.dtype, module.plain.dtype,
                    [value.dtype for value in module.state_dict().values()]]


@differential
def test_a_module_keeps_the_buffer_object_it_was_given(lib):
    module = lib.nn.Module()
    assigned, registered, plain = lib.Buffer(lib.zeros(1)), lib.Buffer(lib.ones(2)), lib.zeros(3)
    module.assigned = assigned
    module.register_buffer("registered", registered, persistent=False)
    module.register_buffer("plain", plain)
    state = module.state_dict(keep_vars=True)
    return (module.assigned is assigned, module.registered is registered, module.plain is plain,
            module.get_buffer("assigned") is assigned, state["assigned"] is assigned, state["plain"] is plain,
            [b is o for b, o in zip(module.buffers(), (assigned, registered, plain))])


@differential
def test_buffer_registration_hooks_receive_the_buffer_itself(lib):
    received = []

    def mark(module, name, buffer):
        received.append(buffer)
        buffer.registered = name

    handle = lib.hooks.register_module_buffer_registration_hook(mark)
    module = lib.nn.Module()
    assigned, registered = lib.Buffer(lib.zeros(1)), lib.Buffer(lib.ones(1))
    module.assigned = assigned
    module.register_buffer("registered", registered)
    handle.remove()
    return ([r is b for r, b in zip(received, (assigned, registered))],
            [getattr(b, "registered", None) for b in module.buffers()])


@differential
def test_buffers_have_requires_grad_and_requires_grad_leaves_them_alone(lib):
    module = lib.nn.Module()
    module.weight = lib.Parameter(lib.ones(2))
    module.plain = lib.Buffer(lib.zeros(2))
    module.tracked = lib.Buffer(lib.leaf([1.0, 2.0]))
    before = [b.requires_grad for b in module.buffers()]
    module.requires_grad_(False)
    frozen = [module.weight.requires_grad, [b.requires_grad for b in module.buffers()]]
    return before, frozen, module.requires_grad_() is module, module.weight.requires_grad
