"""``backward(inputs=...)`` and the pruning of ``autograd.grad`` against torch: which nodes and hooks run, what
accumulates where, and the argument checks."""

import numpy as np
import pytest
import torch

import modulecraft

from .conftest import lib_leaf, on_both, outcome


def _chain_with_hooks(lib, log):
    """a -> b = a * 2 -> c = b * k (k a second leaf); every tensor and node hook appends its name to ``log``."""
    a, k = lib_leaf(lib, 1.0), lib_leaf(lib, 3.0)
    b = a * 2
    c = b * k
    for name, tensor in (("a", a), ("k", k), ("b", b), ("c", c)):
        tensor.register_hook(lambda grad, name=name: log.append(f"tensor {name}"))
    for name, node in (("b", b.grad_fn), ("c", c.grad_fn)):
        node.register_prehook(lambda grads, name=name: log.append(f"pre {name}"))
        node.register_hook(lambda grad_inputs, grad_outputs, name=name: log.append(f"post {name}"))
    return a, k, b, c


def _grads(*tensors):
    """The tensors' .grad as lists (None where there is none)."""
    return [None if t.grad is None else np.asarray(t.grad).tolist() for t in tensors]


@pytest.mark.parametrize("inputs", ["a", "b", "a b", "k", "c", "b c"])
def test_backward_with_inputs_runs_only_what_leads_to_them_and_accumulates_only_there(inputs):
    """The inputs' nodes and the nodes leading to them run, with their hooks; nothing else does (not even the
    tensor hooks of a leaf whose gradient arrives), only the inputs accumulate; a non-leaf input retains its grad."""
    def scenario(lib):
        log = []
        a, k, b, c = tensors = _chain_with_hooks(lib, log)
        named = dict(zip("akbc", tensors))
        c.backward(inputs=[named[name] for name in inputs.split()], retain_graph=True)
        first = (list(log), _grads(a, k), b.retains_grad, c.retains_grad)
        log.clear()
        c.backward(retain_graph=True)  # a later backward without inputs: every leaf, and the retained non-leaves
        return first, list(log), _grads(a, k), _grads(*[t for t in (b, c) if t.retains_grad])

    on_both(scenario)


def test_backward_with_a_scalar_input_and_an_unreachable_one():
    def scenario(lib):
        x, unused = lib_leaf(lib, 3.0), lib_leaf(lib, [1.0])
        (x ** 2).backward(inputs=x)
        lib.autograd.backward(x * 2, inputs=(unused,))  # not reachable: nothing happens (allow_unused implied)
        return x.grad, unused.grad

    on_both(scenario)


def _never_backward(base):
    class NeverBackward(base):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            raise AssertionError("this node leads to no input and must not run")

    return NeverBackward


def test_a_node_that_leads_to_no_input_does_not_run():
    """torch's unreachable-input discovery: a root whose graph does not reach the inputs does not run."""
    def scenario(lib):
        base = torch.autograd.Function if lib is torch else modulecraft.autograd.Function
        x = _never_backward(base).apply(lib_leaf(lib, [1.0]) * 2)
        y, z = lib_leaf(lib, [1.0]), lib_leaf(lib, [2.0])
        lib.autograd.backward(x.sum() + z.sum(), inputs=(y, z))
        unused, used = lib.autograd.grad(_never_backward(base).apply(lib_leaf(lib, [1.0]) * 2).sum() + z.sum(),
                                         (y, z), allow_unused=True)
        return y.grad, z.grad, unused, used

    on_both(scenario)


def test_inputs_given_as_a_dict_and_the_argument_checks():
    def scenario(lib):
        x, y = lib_leaf(lib, [3.0]), lib_leaf(lib, [1.0])
        lib.autograd.backward((x * y).sum(), inputs={"y": y})
        frozen = lib.tensor(np.ones(1, dtype=np.float32))
        return (_grads(x, y),
                outcome(lambda: (x * y).sum().backward(inputs=[]), "`inputs` argument to `backward()` cannot be empty"),
                outcome(lambda: (x * y).sum().backward(inputs=[frozen]),
                        "can't retain_grad on Tensor that has requires_grad=False"),
                outcome(lambda: (x * y).sum().backward(inputs=[np.ones(1)]),
                        "all inputs have to be Tensors or GradientEdges, but got numpy.ndarray"))

    on_both(scenario)


def test_autograd_grad_runs_the_tensor_hooks_of_captured_nodes_only():
    """A captured node that leads to no other input runs its tensors' hooks and retain_grad, not the node; a node
    that is neither captured nor leads to a captured one gets nothing, hooks included (torch skips it)."""
    def scenario(lib):
        log = []
        a, k, b, c = _chain_with_hooks(lib, log)
        d = c * 3
        c.retain_grad()
        grads = lib.autograd.grad(d, (c,), retain_graph=True)  # c's node is captured, not needed
        first = list(log), c.grad
        log.clear()
        grads += lib.autograd.grad(d, (b,), retain_graph=True)  # c's node runs and sends to k: k's hooks stay off
        return [np.asarray(grad).tolist() for grad in grads], first, list(log), _grads(a, k)

    on_both(scenario)


def test_grad_variables_is_the_deprecated_name_of_grad_tensors():
    def scenario(lib):
        x = lib_leaf(lib, [1.0, 2.0])
        with pytest.warns(FutureWarning, match="`grad_variables` is deprecated"):
            lib.autograd.backward(x * 2, grad_variables=[lib.tensor(np.ones(2, dtype=np.float32))])
        both = outcome(lambda: lib.autograd.backward(x * 2, grad_tensors=[x], grad_variables=[x]),
                       "`grad_tensors` and `grad_variables` (deprecated) arguments both passed")
        return x.grad, both

    with pytest.warns(FutureWarning):
        on_both(scenario)


def test_how_many_hooks_fire_under_grad_and_backward_with_and_without_inputs():
    """torch's hook edge case: counts of tensor hooks, node pre-hooks and node post-hooks on a -> b -> c."""
    def scenario(lib):
        a = lib_leaf(lib, 1.0)
        b = a * 2
        c = b * 2
        counts = [0, 0, 0]
        for tensor in (a, b, c):
            tensor.register_hook(lambda grad: counts.__setitem__(0, counts[0] + 1))
        for node in (b.grad_fn, c.grad_fn):
            node.register_prehook(lambda grads: counts.__setitem__(1, counts[1] + 1))
            node.register_hook(lambda grad_inputs, grad_outputs: counts.__setitem__(2, counts[2] + 1))
        seen = []
        for call in (lambda: lib.autograd.grad(c, inputs=(b,), retain_graph=True),
                     lambda: lib.autograd.grad(c, inputs=(a, b), retain_graph=True),
                     lambda: c.backward(retain_graph=True),
                     lambda: c.backward(inputs=(a, b), retain_graph=True)):
            counts[:] = [0, 0, 0]
            call()
            seen.append(list(counts))
        return seen

    on_both(scenario)


def test_backward_with_some_parameters_as_inputs_runs_the_module_hooks_on_the_way_to_them():
    """Module backward hooks ride on nodes too: only the layers between the loss and the inputs see gradients."""
    def scenario(lib):
        model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.ReLU(), lib.nn.Linear(2, 1))
        with (torch.no_grad() if lib is torch else modulecraft.no_grad()):
            for parameter in model.parameters():
                parameter[...] = 0.5
        log = []
        for index, layer in enumerate(model):
            layer.register_full_backward_hook(lambda module, grad_input, grad_output, index=index: log.append(
                ("full", index, [grad is None for grad in grad_input])))
            layer.register_full_backward_pre_hook(lambda module, grad_output, index=index: log.append(("pre", index)))
        x = lib.tensor(np.ones((2, 3), dtype=np.float32), requires_grad=True)
        loss = model(x).sum()
        loss.backward(inputs=[model[2].weight], retain_graph=True)
        first = list(log), _grads(*model.parameters())
        log.clear()
        loss.backward(inputs=list(model[0].parameters()))
        return first, list(log), _grads(*model.parameters(), x)

    on_both(scenario)
