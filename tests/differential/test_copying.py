"""pickle and copy.deepcopy: structure, values, modes and sharing survive; nothing is shared with the original."""

import copy
import pickle

import pytest

from .models import net, set_values
from .observe import differential

COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda obj: pickle.loads(pickle.dumps(obj))}


def picklable_model(lib):
    """Built from library classes only (a class local to a function cannot be pickled), with a tied weight."""
    nn = lib.nn
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    model[2][0].weight = model[0].weight
    model[1].register_buffer("note", lib.ones(1), persistent=False)
    model[2].eval()
    model[0].bias.requires_grad_(False)
    return set_values(lib, model)


def copy_trace(lib, original, clone):
    params = list(clone.named_parameters(remove_duplicate=False))
    return (
        repr(clone), [(name, m.training) for name, m in clone.named_modules(remove_duplicate=False)],
        params, [p.requires_grad for _, p in params], list(clone.named_buffers()),
        [m._non_persistent_buffers_set for m in clone.modules()],
        any(lib.shares_memory(a, b) for a, b in zip(original.parameters(), clone.parameters())),
        any(a is b for a, b in zip(original.modules(), clone.modules())),
    )


@pytest.mark.parametrize("how", COPIES)
@differential
def test_copy_of_a_library_model(lib, how):
    model = picklable_model(lib)
    clone = COPIES[how](model)
    return copy_trace(lib, model, clone), clone[2][0].weight is clone[0].weight


@differential
def test_deepcopy_of_a_custom_model_keeps_aliases(lib):
    model = net(lib)
    clone = copy.deepcopy(model)
    return (copy_trace(lib, model, clone), clone.alias is clone.a, clone.head.weight is clone.seq[0].weight,
            clone.eval()(lib.arange(2, 2)))


@differential
def test_deepcopy_keeps_hooks_which_then_see_the_copy(lib):
    log = []
    model = lib.nn.Sequential(lib.nn.ReLU())
    model[0].register_forward_hook(lambda module, args, out: log.append(module is model[0]))
    clone = copy.deepcopy(model)
    clone(lib.ones(1))
    return log, [len(m._forward_hooks) for m in clone.modules()]


@differential
def test_unpickling_a_module_from_an_older_version_fills_in_missing_state(lib):
    """torch's __setstate__ adds the hook dicts that older pickles lack; so must ours."""
    model = lib.nn.Linear(1, 1)
    state = model.__getstate__()
    missing = ("_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs",
               "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
               "_non_persistent_buffers_set", "_backward_pre_hooks", "_is_full_backward_hook")
    old_state = {key: value for key, value in state.items() if key not in missing}
    revived = type(model).__new__(type(model))
    revived.__setstate__(old_state)
    return [(name, type(getattr(revived, name, None))) for name in missing], revived(lib.ones(1)).shape
