"""The backward engine: runs a recorded graph from its roots to its leaves (torch's ``Engine``).

Order, as torch's: a node runs once every gradient flowing into it has arrived and been summed; among the
nodes that are ready, the one created last runs first (highest sequence number), and ``AccumulateGrad``
nodes run before any other. Around each node: the tensor hooks of its outputs (then ``retain_grad``), its
pre-hooks, the node itself, the check of what it returned (``validate_outputs``: each gradient summed to its
input's shape), its hooks. Unless ``retain_graph``, each node drops its saved values once run.

The walk (``_walk``: when each node runs, on what, and freeing) is apart from how a node runs (``_run_node`` for
``backward``, hooks included; ``_capturing`` for ``autograd.grad``): chapter 10's learners write the walk, and
hooks fire the same under theirs.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from modulecraft.autograd import grad_mode
from modulecraft.autograd.graph import AccumulateGrad, Node

__all__ = ["backward", "grad", "run_backward"]


def _hook_name(hook) -> str:
    return getattr(hook, "__name__", repr(hook))


def _checked_replacements(hook, originals, replaced) -> list:
    """What a hook returned instead of ``originals``, with torch's checks: count, None, shape, dtype."""
    replaced = list(replaced)
    if len(replaced) != len(originals):
        raise RuntimeError(f"hook '{_hook_name(hook)}' has returned an incorrect number of values (got "
                           f"{len(replaced)}, but expected {len(originals)})")
    for index, (original, value) in enumerate(zip(originals, replaced)):
        if value is not None and value is not original:  # a gradient handed back unchanged needs no check
            replaced[index] = _checked_replacement(hook, original, value)
    return replaced


def _checked_replacement(hook, original, value):
    """One gradient returned by a hook: same shape and dtype as the one it replaces (as torch checks)."""
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    value = np.asarray(value.view(np.ndarray) if isinstance(value, np.ndarray) else value)
    if value.shape != np.shape(original):
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")
    original_dtype = np.result_type(original)
    if value.dtype != original_dtype:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the type of value (was {original_dtype} got "
                           f"{value.dtype})")
    return value


def _run_tensor_pre_hooks(node: Node, grads: list) -> None:
    """The hooks of the node's output tensors: ``register_hook``'s, then ``retain_grad`` (torch's order)."""
    for output_nr, hook in node._tensor_pre_hooks():
        replaced = hook(grads[output_nr])
        if replaced is not None:
            grads[output_nr] = _checked_replacement(hook, grads[output_nr], replaced)
    tables = node._hook_tables
    if tables is not None:
        for output_nr, tensor_ref in tables.retains_grad.items():
            tensor = tensor_ref()
            if tensor is not None and grads[output_nr] is not None:
                tensor._retain(grads[output_nr])


def _call_node(node: Node, grads: list) -> tuple:
    """Run ``node`` on the gradients of its outputs with all its hooks; return one gradient per edge."""
    tables = node._hook_tables
    _run_tensor_pre_hooks(node, grads)
    if tables is not None and tables.pre_hooks:
        for hook in tuple(tables.pre_hooks.values()):
            replaced = hook(tuple(grads))
            if replaced is not None:
                grads = _checked_replacements(hook, grads, replaced)
        replaced = None  # only grads holds the gradients now: AccumulateGrad adopts one no one else holds
    for grad in grads:
        if grad is not None:
            grad = None  # only grads holds the gradients: AccumulateGrad adopts one no one else holds
            grad_inputs = validate_outputs(node, node.apply(grads))
            break
    else:  # no gradient at all: the node does not run
        grad_inputs = (None,) * len(node.next_functions)
    if tables is not None and tables.hooks:
        grad_outputs = tuple(grads)
        for hook in tuple(tables.hooks.values()):
            replaced = hook(tuple(grad_inputs), grad_outputs)
            if replaced is not None:
                grad_inputs = _checked_replacements(hook, grad_inputs, replaced)
    return grad_inputs


def unbroadcast(grad, shape: tuple):
    """Sum ``grad`` down to ``shape``: over the leading axes broadcasting added, and the axes it stretched."""
    grad_shape = grad.shape if isinstance(grad, np.ndarray) else np.shape(grad)
    if grad_shape == shape:
        return grad
    extra = len(grad_shape) - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
        if grad.shape == shape:  # only leading axes were added (a bias): nothing was stretched
            return grad
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def validate_outputs(node: Node, grad_inputs) -> tuple:
    """What ``node`` returned, each gradient summed to the shape of the input it goes to (torch's engine does it
    for every node, so formulas may return a broadcast input's gradient with the output's shape). A gradient
    whose input's shape cannot be broadcast to its own raises torch's error, which names the node."""
    validated = grad_inputs if type(grad_inputs) is tuple else tuple(grad_inputs)
    for index, ((following, output_nr), grad) in enumerate(zip(node.next_functions, validated)):
        if following is None or grad is None:
            continue
        # Read directly rather than through gradient_shape and np.shape: this runs for every edge of every node.
        shapes = following._shapes
        shape = following.gradient_shape(output_nr) if shapes is None else shapes[output_nr]
        got = grad.shape if isinstance(grad, np.ndarray) else np.shape(grad)
        if shape is None or got == shape:
            continue
        # Summing gives the input's shape exactly when that shape broadcasts to the gradient's: an axis of the
        # input whose size is neither 1 nor the gradient's is left as the gradient's.
        summed = unbroadcast(grad, shape) if len(got) >= len(shape) else None
        if summed is None or getattr(summed, "shape", None) != shape:
            raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {index} - got "
                               f"{list(got)} but expected shape compatible with {list(shape)}")
        validated = validated[:index] + (summed,) + validated[index + 1:]
    return validated


def _dependencies(roots: Sequence[Node]) -> dict:
    """How many edges point at each node reachable from ``roots``."""
    dependencies: dict = {}
    stack = list(roots)
    seen = set(stack)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is None:
                continue
            dependencies[nxt] = dependencies.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return dependencies


def _needed(roots: Sequence[Node], targets: set) -> set:
    """The nodes from which some node in ``targets`` can be reached (those autograd.grad must run)."""
    needed: set = set()
    visited: set = set()
    for root in roots:
        stack = [(root, iter(root.next_functions))]
        visited.add(root)
        while stack:
            node, edges = stack[-1]
            for nxt, _ in edges:
                if nxt is not None and nxt not in visited:
                    visited.add(nxt)
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
            else:
                stack.pop()
                if any(nxt in targets or nxt in needed for nxt, _ in node.next_functions):
                    needed.add(node)
    return needed


def _walk(roots: Sequence[tuple], root_grads: Sequence, dependencies: dict, retain_graph: bool, run_node) -> None:
    """Run the graph from the edges ``roots`` (given ``root_grads``), each node once, in torch's order.

    A node runs once every edge counted for it in ``dependencies`` (edges into it; consumed) has delivered,
    on the sum of what arrived for each of its outputs. ``run_node(node, grads)`` runs it, hooks included, and
    returns one gradient per edge of ``next_functions`` (``None``: nothing flows there), or ``None`` when the
    node is not to run at all (then nothing is sent from it and its saved values stay). Ready nodes run highest
    sequence number first; the heap is keyed on that number alone, as torch's, so that the nodes sharing one
    (``AccumulateGrad``) come out in the order torch's heap gives them. Unless ``retain_graph``, a node that ran
    releases its saved values.
    """
    buffers: dict = {}
    ready: list = []
    pop, push, buffer_of = heapq.heappop, heapq.heappush, buffers.get
    for (node, output_nr), grad in zip(roots, root_grads):
        buffer = buffer_of(node)
        if buffer is None:
            buffer = buffers[node] = [None] * node.num_outputs
            if node not in dependencies:
                entry = _Ready(-node._sequence_nr)
                entry.node = node
                push(ready, entry)  # one by one, in the roots' order, as torch's graph root sends them
        buffer[output_nr] = grad if buffer[output_nr] is None else buffer[output_nr] + grad
    grad = None
    while ready:
        node = pop(ready).node
        grads = buffers.pop(node)
        grad_inputs = run_node(node, grads)
        if grad_inputs is None:
            continue
        if not retain_graph:
            node.release_saved()
        for (nxt, output_nr), grad in zip(node.next_functions, grad_inputs):
            if nxt is None:
                continue
            buffer = buffer_of(nxt)
            if buffer is None:
                buffer = buffers[nxt] = [None] * nxt.num_outputs
            if grad is not None:
                previous = buffer[output_nr]
                buffer[output_nr] = grad if previous is None else previous + grad
            remaining = dependencies[nxt] - 1
            dependencies[nxt] = remaining
            if remaining == 0:
                entry = _Ready(-nxt._sequence_nr)
                entry.node = nxt
                push(ready, entry)
        # From here on only the buffers hold the gradients: AccumulateGrad adopts one no one else holds.
        grads = grad_inputs = grad = None


class _Ready(int):
    """A node in the ready queue (``.node``): minus its sequence number, compared as that number alone (the highest
    number comes out first, as in torch's heap; nodes sharing one, AccumulateGrad's, come out in the order the heap
    gives them and are never compared themselves). An int, so that the heap compares in C, not in a Python method."""

    node: Node


def _run_node(node: Node, grads: list) -> tuple:
    """What ``backward`` runs for each node: the node with its hooks (a node without any, directly)."""
    if node._hook_tables is None and len(grads) == 1 and grads[0] is not None:  # the common case: no hooks
        if type(node) is not AccumulateGrad:
            return validate_outputs(node, node.backward(grads[0]))
        if node.variable._backward_hooks is None:
            return node.backward(grads[0])  # a leaf's node has no edges: nothing to validate
    return _call_node(node, grads)


def _capturing(captures: dict, needed: set, captured: list):
    """What ``autograd.grad`` runs for each node: keep the gradients of the captured edges; run only the nodes
    that lead to one (``needed``). As torch's, a node holding a captured edge that is not needed runs its tensors'
    hooks (then the gradient is kept); the others neither run nor send anything."""
    capturing = {node for node, _ in captures}

    def run_node(node: Node, grads: list):
        if node not in needed:
            if node not in capturing:
                return None
            _run_tensor_pre_hooks(node, grads)
        for output_nr, grad in enumerate(grads):
            for position in captures.get((node, output_nr), ()):
                captured[position] = grad
        return _call_node(node, grads) if node in needed else None
    return run_node


def _pruned(needed: set):
    """What ``backward(inputs=...)`` runs for each node: the ``needed`` ones (the inputs' nodes and those leading
    to one), as ``backward`` does; the others, as torch's, neither run (nor their hooks) nor send anything."""
    def run_node(node: Node, grads: list):
        return _run_node(node, grads) if node in needed else None
    return run_node


def run_backward(roots: Sequence[tuple], root_grads: Sequence, retain_graph: bool,
                 captures: dict | None = None, targets: set | None = None) -> list | None:
    """Propagate ``root_grads`` from the edges ``roots`` through the graph.

    Without ``captures`` (``backward``), every reachable node runs and leaves accumulate into ``.grad``; with
    ``targets`` (``backward(inputs=...)``: the inputs' nodes), only those and the nodes leading to one of them.
    With ``captures`` (``autograd.grad``: a dict ``(node, output_nr) -> positions``), only the nodes leading
    to a captured edge run, nothing is accumulated, and the captured gradients are returned by position.
    """
    root_nodes = list(dict.fromkeys(node for node, _ in roots))
    dependencies = _dependencies(root_nodes)
    run_node, captured = _run_node, None
    if captures is not None:
        captured = [None] * sum(len(positions) for positions in captures.values())
        run_node = _capturing(captures, _needed(root_nodes, {node for node, _ in captures}), captured)
    elif targets is not None:
        run_node = _pruned(_needed(root_nodes, targets) | targets)
    state = grad_mode.state  # no_grad's switch, without its object (one backward can be a few microseconds)
    enabled, state.enabled = state.enabled, False
    try:
        _walk(roots, root_grads, dependencies, retain_graph, run_node)
    finally:
        state.enabled = enabled
    return captured


def _requires_grad(value) -> bool:
    """Whether ``value`` is a tensor that requires grad (read, not imported: the tensor module imports this one)."""
    return getattr(value, "_requires_grad", False)


def _as_tuple(values) -> tuple:
    if values is None:
        return ()
    if isinstance(values, (tuple, list)):
        return tuple(values)
    return (values,)


def _root_edges(outputs: tuple, grad_outputs: tuple) -> tuple[list, list]:
    """The edges and initial gradients of ``outputs``, with torch's checks and implicit scalar gradient.

    As torch, outputs and gradients are paired up as ``zip`` does (extra gradients are ignored), then a
    missing gradient is an error, then an output that is not in a graph.
    """
    grads = []
    for index, (output, grad) in enumerate(zip(outputs, grad_outputs)):
        if grad is None:
            if _requires_grad(output):
                if output.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                grad = np.ones(output.shape, dtype=output.dtype)
        else:
            grad = np.asarray(grad)
            if grad.shape != np.shape(output):
                raise RuntimeError(f"Mismatch in shape: grad_output[{index}] has a shape of {grad.shape} and "
                                   f"output[{index}] has a shape of {np.shape(output)}.")
        grads.append(grad)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    for index, output in enumerate(outputs):
        if not _requires_grad(output):
            raise RuntimeError(f"element {index} of tensors does not require grad and does not have a grad_fn")
    return [output._edge() for output in outputs], grads


def _reject_create_graph(create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(
            "create_graph=True is not supported by modulecraft: backward computes gradients with plain numpy "
            "and records no graph, so higher-order gradients are not available")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, grad_variables=None,
             inputs=None) -> None:
    """Accumulate the gradients of ``tensors`` (weighted by ``grad_tensors``) into the leaves' ``.grad``.

    ``grad_tensors`` may be omitted for outputs with one element. ``retain_graph`` keeps the saved values
    for another backward. With ``inputs`` (tensors, or a dict of them), only those accumulate, and only the part
    of the graph leading to them runs; a non-leaf input keeps its ``.grad`` from then on (``retain_grad``).
    Higher-order gradients (``create_graph=True``) are not supported.
    """
    _reject_create_graph(create_graph)
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    inputs = _backward_inputs(inputs)
    outputs = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(outputs)
    edges, root_grads = _root_edges(outputs, grads)
    targets = None
    if inputs is not None:
        targets = set()
        for tensor in inputs:
            if not hasattr(tensor, "_edge"):  # a Tensor (not imported: the tensor module imports this one)
                raise RuntimeError("all inputs have to be Tensors or GradientEdges, but got "
                                   f"{type(tensor).__module__}.{type(tensor).__qualname__}")
            tensor.retain_grad()  # as torch: the gradient of a non-leaf input is kept in its .grad
            targets.add(tensor._edge()[0])
    run_backward(edges, root_grads, bool(retain_graph), targets=targets)


def _backward_inputs(inputs) -> tuple | None:
    """``backward``'s ``inputs`` as a tuple, with torch's checks (None: every leaf)."""
    if inputs is None:
        return None
    if isinstance(inputs, Mapping):
        if type(inputs) is not dict:
            raise TypeError(f"`inputs` argument to `backward()` must be a dict, not {type(inputs).__name__}. "
                            "Other Mapping types are not supported.")
        inputs = tuple(inputs.values())
    inputs = (inputs,) if isinstance(inputs, np.ndarray) else tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    return inputs


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused: bool | None = None, materialize_grads: bool = False) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs``, returned instead of accumulated.

    Only the part of the graph that leads to ``inputs`` runs; ``.grad`` is left alone. An input the outputs
    do not depend on raises unless ``allow_unused`` (then its gradient is None, or zeros with
    ``materialize_grads``). Higher-order gradients (``create_graph=True``) are not supported.
    """
    _reject_create_graph(create_graph)
    if materialize_grads:
        allow_unused = True if allow_unused is None else allow_unused
        if not allow_unused:
            raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                             "but got: allow_unused=False.")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grads = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    edges, root_grads = _root_edges(outputs, grads)
    captures: dict = {}
    for position, tensor in enumerate(inputs):
        if not _requires_grad(tensor):
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        captures.setdefault(tensor._edge(), []).append(position)
    retain = bool(retain_graph) if retain_graph is not None else create_graph
    captured = run_backward(edges, root_grads, retain, captures)
    result = []
    for index, (tensor, value) in enumerate(zip(inputs, captured)):
        if value is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {index} appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                value = np.zeros(tensor.shape, dtype=tensor.dtype)
        result.append(value)
    return tuple(result)
