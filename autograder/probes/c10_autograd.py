"""Chapter 10's tests: recording, the engine's dependency counts, AccumulateGrad, the walk, the gradient checker,
the elementwise formulas and the transpose, the engine's check of what a node returns, backward formulas.

Fixtures never go through the learner's recording: nodes are made by hand (`Node`, the op's node class) with the
values their backward reads, so that a slip in one exercise costs points on that exercise only. The walk's
probes hand it their own graph, its dependency counts (counted while the probe builds the edges) and their own
`run_node`, which records what the walk makes it do: neither the learner's counts nor their formulas are involved.
"""
import sys

import numpy as np

from modulecraft import no_grad
from modulecraft.autograd.graph import _FREED, AccumulateGrad, Node
from modulecraft.autograd.ops.elementwise import (AddBackward0, DivBackward0, ExpBackward0, MulBackward0, NegBackward0,
                                                  PowBackward0, SubBackward0)
from modulecraft.autograd.ops.reductions import MeanBackward0, MeanBackward1, SumBackward0, SumBackward1
from modulecraft.autograd.tensor import Tensor, result
from modulecraft.nn.functional import (AddmmBackward0, LogSoftmaxBackward0, NllLossBackward0, ReluBackward0,
                                       TBackward0, _log_softmax_values)

from . import Reference, probe

YOURS = {
    "_recording": "modulecraft.nn.functional:_recording",
    "edges": "modulecraft.autograd.tensor:edges",
    "_dependencies": "modulecraft.autograd.engine:_dependencies",
    "accumulate_grad": "modulecraft.autograd.graph:AccumulateGrad.backward",
    "_walk": "modulecraft.autograd.engine:_walk",
    "numeric_gradient": "modulecraft.exercises.c10_autograd:numeric_gradient",
    "add_gradients": "modulecraft.autograd.ops.elementwise:AddBackward0.gradients",
    "sub_gradients": "modulecraft.autograd.ops.elementwise:SubBackward0.gradients",
    "mul_gradients": "modulecraft.autograd.ops.elementwise:MulBackward0.gradients",
    "div_gradients": "modulecraft.autograd.ops.elementwise:DivBackward0.gradients",
    "neg_backward": "modulecraft.autograd.ops.elementwise:NegBackward0.backward",
    "pow_backward": "modulecraft.autograd.ops.elementwise:PowBackward0.backward",
    "exp_backward": "modulecraft.autograd.ops.elementwise:ExpBackward0.backward",
    "t_backward": "modulecraft.nn.functional:TBackward0.backward",
    "validate_outputs": "modulecraft.autograd.engine:validate_outputs",
    "unbroadcast": "modulecraft.autograd.engine:unbroadcast",
    "mm_gradients": "modulecraft.autograd.ops.linalg:mm_gradients",
    "relu_backward": "modulecraft.nn.functional:ReluBackward0.backward",
    "sum_backward": "modulecraft.autograd.ops.reductions:SumBackward0.backward",
    "mean_backward": "modulecraft.autograd.ops.reductions:MeanBackward0.backward",
    "log_softmax_backward": "modulecraft.nn.functional:LogSoftmaxBackward0.backward",
    "nll_loss_backward": "modulecraft.nn.functional:NllLossBackward0.backward",
    "addmm_backward": "modulecraft.nn.functional:AddmmBackward0.backward",
}

ORDER_NAMES = ("SumBackward0", "AddBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad(a)",
               "AccumulateGrad(b)")


# -- fixtures ------------------------------------------------------------------------------------------------------
def leaf(draw, *shape, requires_grad=True):
    return Tensor(draw.array(*shape), requires_grad=requires_grad)


def away_from_zero(draw, *shape):
    """Values in [0.5, 2] with either sign: a divisor, a factor that hides nothing."""
    return draw.array(*shape, low=0.5, high=2.0) * np.where(draw.array(*shape) < 0, -1, 1).astype(np.float32)


class Made(Node):
    """A hand-made node (instances take attributes, such as how many outputs it has)."""


def produced(draw, *shape, output_nr=0):
    """A tensor recorded as output `output_nr` of a hand-made node (not through any recording code)."""
    node = Made(())
    node.num_outputs = output_nr + 1
    return result(draw.array(*shape), node, output_nr=output_nr)


def edge_kinds(edges_of, inputs):
    """Each edge as plain data: which node it points at (the input's grad_fn, its own accumulator...) and output_nr."""
    def kind(x, edge):
        if not (isinstance(edge, tuple) and len(edge) == 2):
            return ["not a pair", type(edge).__name__]
        node, output_nr = edge
        if node is None:
            return [None, output_nr]
        if isinstance(x, Tensor) and node is x._grad_fn:
            return ["the input's grad_fn", output_nr]
        if isinstance(node, AccumulateGrad):
            return ["AccumulateGrad of " + ("this input" if node.variable is x else "another tensor"), output_nr]
        return [type(node).__name__, output_nr]
    found = edges_of(tuple(inputs))
    return [type(found).__name__, [kind(x, edge) for x, edge in zip(inputs, found)], len(found)]


class Step(Node):
    """A node of a hand-made graph, named by its label."""

    def __init__(self, label, next_functions):
        super().__init__(next_functions)
        self.label = label


def random_graph(draw):
    """Nodes created leaves first (as a forward pass does), each with edges to earlier ones (repeats included: a
    tensor used twice) and sometimes a `(None, 0)` edge; returns the nodes, the last one being the root.

    Always, the root points at the two nodes before it and the first of those at the second: a node reached along
    two paths, with edges of its own."""
    nodes = []
    count = draw.int(5, 8)
    for index in range(count):
        targets = [draw.int(max(0, index - 3), index - 1) for _ in range(draw.int(1, 3))] if index else []
        if index == count - 1:
            targets = [index - 1, index - 2] + targets
        elif index == count - 2:
            targets = [index - 1] + targets
        edges_ = [(nodes[target], 0) for target in targets]
        if index and draw.int(0, 3) == 0:
            edges_.insert(draw.int(0, len(edges_)), (None, 0))
        nodes.append(Step(f"n{index}", tuple(edges_)))
    return nodes


def counts(dependencies_of, roots, nodes):
    labels = {id(node): node.label for node in nodes}
    found = dependencies_of(list(roots))
    return sorted([labels.get(id(node), "not a node of the graph"), count] for node, count in dict(found).items())


def node_of(node_class, saved, **attributes):
    node = node_class(((Node(()), 0),))
    node._saved = saved
    for name, value in attributes.items():
        setattr(node, name, value)
    return node


def arrays(values):
    """A formula's result as plain data: the type of the container, each gradient as an array or None."""
    if not isinstance(values, tuple):
        return ["not a tuple", type(values).__name__]
    return ["tuple", [None if v is None else np.asarray(v, dtype=np.float64) for v in values]]


# -- exercise 1: recording -----------------------------------------------------------------------------------------
@probe("c10_recording_visible")
def recording_visible(yours, draw, check):
    shape = (draw.int(1, 4), draw.int(1, 4))
    inputs = [leaf(draw, *shape), produced(draw, *shape, output_nr=draw.int(0, 2)),
              leaf(draw, *shape, requires_grad=False), float(draw.int(1, 9))]
    inputs = draw.shuffled(inputs)
    check("edges(inputs) for a leaf that requires grad, a recorded tensor, a plain tensor and a number (shuffled)",
          lambda: edge_kinds(yours.edges, inputs),
          hint="see 10.1: one pair per input, in order: (grad_fn, output_nr) for a recorded tensor, "
               "(weak_accumulator(x), 0) for a leaf that requires grad, (None, 0) otherwise.")
    flags = [draw.coin() for _ in range(3)]
    values = [leaf(draw, 2, requires_grad=flag) for flag in flags] + [draw.array(2)]
    check("_recording(*values) with grad mode on, for tensors that do or do not require grad",
          lambda: [yours._recording(*values), yours._recording(*values[:1]), yours._recording(values[-1])],
          hint="see 10.1: True when grad mode is on and at least one value is a Tensor that requires grad.")


@probe("c10_recording_hidden")
def recording_hidden(yours, draw, check):
    a, b = leaf(draw, draw.int(1, 5)), leaf(draw, draw.int(1, 5))
    pick = draw.coin()
    check("edges() twice on the same leaf gives the same AccumulateGrad node; another leaf gets another one",
          lambda: [yours.edges((a,))[0][0] is yours.edges((a,))[0][0],
                   yours.edges((a,))[0][0] is yours.edges(((b if pick else a),))[0][0]],
          hint="see 10.1: a leaf has one AccumulateGrad for as long as a graph holds it: weak_accumulator(x).")
    first = leaf(draw, 2, requires_grad=False) if draw.coin() else draw.array(2)
    values = [first] + draw.shuffled([leaf(draw, 2)] + [leaf(draw, 2, requires_grad=draw.coin())
                                                        for _ in range(draw.int(0, 2))])

    def under_no_grad():
        with no_grad():
            return yours._recording(*values)
    check("_recording(*values) under no_grad(), some of the values requiring grad", under_no_grad,
          hint="see 10.1: nothing is recorded while grad mode is off, whatever requires grad.")
    check("_recording(*values) with grad mode on, for the same values (the first does not require grad, a later "
          "one does)", lambda: yours._recording(*values),
          hint="see 10.1: with grad mode on, record as soon as any of the values is a Tensor that requires grad: "
               "look at every value, not only the first.")
    check("edges of no inputs, and of inputs none of which requires grad",
          lambda: [edge_kinds(yours.edges, []), edge_kinds(yours.edges, [draw.array(2), 3, None])],
          hint="see 10.1: an input that is not a Tensor requiring grad gets the edge (None, 0).")
    check("the output_nr of an edge to the second output of a node",
          lambda: edge_kinds(yours.edges, [produced(draw, 2, output_nr=draw.int(1, 3))]),
          hint="see 10.1: the second number of the pair is the tensor's _output_nr.")


# -- exercise 2: the engine (dependency counts here, AccumulateGrad below) -----------------------------------------
def dependencies_visible(yours, draw, check):
    nodes = random_graph(draw)
    check("_dependencies([root]) on a random graph: how many edges point at each node (node labels, counts)",
          lambda: counts(yours._dependencies, [nodes[-1]], nodes),
          hint="see 10.2: visit each node once; count every edge (a node used twice counts twice); the roots "
               "themselves are not counted; skip (None, 0) edges.")


def dependencies_hidden(yours, draw, check):
    nodes = random_graph(draw)
    extra = draw.int(0, len(nodes) - 2)
    check("_dependencies with two roots (the second also reachable from the first)",
          lambda: counts(yours._dependencies, [nodes[-1], nodes[extra]], nodes),
          hint="see 10.2: a root reached from another root has a count too.")


@probe("c10_engine_visible")
def engine_visible(yours, draw, check):
    dependencies_visible(yours, draw, check)
    accumulate_grad_visible(yours, draw, check)


@probe("c10_engine_hidden")
def engine_hidden(yours, draw, check):
    dependencies_hidden(yours, draw, check)
    accumulate_grad_hidden(yours, draw, check)


# -- exercise 3: predict the order (0 points: its form only) -------------------------------------------------------
def prediction_form(yours):
    predicted = list(ORDER_NAMES) if isinstance(yours, Reference) else yours.predicted_order
    return [type(predicted).__name__,
            all(isinstance(name, str) and name in ORDER_NAMES for name in predicted) if isinstance(
                predicted, list) else False]


@probe("c10_predict_order_visible")
def predict_order_visible(yours, draw, check):
    check("your prediction predicted_order is a list of the node names above (the cell under the tests shows the "
          "order)", lambda: prediction_form(yours),
          hint="assign a list of strings such as 'ExpBackward0' or 'AccumulateGrad(a)' to predicted_order.")


@probe("c10_predict_order_hidden")
def predict_order_hidden(yours, draw, check):
    check("predicted_order is a list of node names", lambda: prediction_form(yours),
          hint="assign a list of strings such as 'ExpBackward0' or 'AccumulateGrad(a)' to predicted_order.")


# -- (exercise 2) AccumulateGrad -----------------------------------------------------------------------------------
def accumulate_grad_visible(yours, draw, check):
    shape = (draw.int(1, 4), draw.int(1, 4))
    x = leaf(draw, *shape)
    node = AccumulateGrad(x)
    first, second = draw.array(*shape), draw.array(*shape)

    def first_gradient():
        also_held = [first]  # someone else holds the gradient (a hook, another node): .grad must be a copy
        returned = yours.accumulate_grad(node, first)
        also_held[0][...] = 100
        return [returned, None if x.grad is None else np.array(x.grad)]
    check("accumulate_grad(node, grad) into a leaf without .grad: what it returns, then .grad after the caller "
          "changed its array", first_gradient, close=True,
          hint="see 10.3: the first gradient becomes .grad as a copy with the leaf's dtype (someone else may hold "
               "and change the array); return ().")
    check(".grad after a second gradient, and whether it is still the same array",
          lambda: (lambda before: (yours.accumulate_grad(node, second),
                                   [np.array(x.grad), x.grad is before]))(x.grad)[1], close=True,
          hint="see 10.3: later gradients are added into .grad in place (np.add(..., out=...)), they never "
               "replace it.")


def accumulate_grad_hidden(yours, draw, check):
    n = draw.int(2, 5)
    x = leaf(draw, n)
    node = AccumulateGrad(x)
    grad = draw.array(n, dtype=np.float64)
    check("a float64 gradient for a float32 leaf: .grad's dtype and values",
          lambda: (yours.accumulate_grad(node, grad), [str(x.grad.dtype), np.array(x.grad, dtype=np.float64)])[1],
          close=True, hint="see 10.3: .grad has the leaf's dtype and shape (copy into an array like the leaf's).")


# -- exercise 4: the walk -------------------------------------------------------------------------------------------
class Relay(Node):
    """A node of a walk's graph: `factors` says what the probes' `run_node` sends along each edge (`factor *` the
    sum it received, or None: no gradient flows there); `_saved` holds a value, as a recorded operation's would."""

    def __init__(self, label, next_functions, factors):
        super().__init__(next_functions)
        self.label, self.factors, self._saved = label, factors, (label,)


def walk_graph(draw):
    """Nodes created leaves first, as a forward pass does: edges to earlier nodes (a repeated one: a tensor used
    twice), sometimes `(None, 0)`, sinks numbered as AccumulateGrad nodes (run as soon as ready), a node with two
    outputs, factors of 1 (the same array goes along each such edge, as AddBackward0 passes its gradient on) and None
    (nothing flows). Every node is reachable from the last one, the root. The root's first edges are fixed: to a
    node only the root points at (`side`, ready first but older than the next one), then one array as it is to the
    node two before the root and twice to the node just before it, which also points at the other: a node reached
    along two paths, and an array that must not change while it waits in a buffer.

    Returns the nodes and how many edges point at each, counted as the edges are drawn: the walk's `dependencies`."""
    count = draw.int(6, 9)
    side = count - 4
    two_outputs = draw.int(0, count - 3)
    nodes, pointing, unreached = [], {}, []
    for index in range(count):
        sink = index == 0 or (index < count - 2 and index not in (two_outputs, side) and draw.int(0, 2) == 0)
        targets = [] if sink else [draw.int(max(0, index - 3), index - 1) for _ in range(draw.int(1, 3))]
        if index > side:
            targets = [target for target in targets if target != side]
        fixed = []
        if index == count - 1:
            fixed = [side, index - 2, index - 1, index - 1]
            targets += [t for t in unreached if t < side]
        elif index == count - 2:
            fixed = [index - 1]
        edges_ = [(nodes[t], draw.int(0, 1) if t == two_outputs else 0) for t in fixed + targets]
        if targets and draw.int(0, 3) == 0:
            edges_.insert(draw.int(len(fixed), len(edges_)), (None, 0))
        factors = [1.0 if index == count - 1 and 0 < position < len(fixed) else
                   draw.choice((None, 1.0, 1.0, 2.0, 3.0, 4.0)) for position in range(len(edges_))]
        node = Relay(f"n{index}", tuple(edges_), factors)
        if sink:  # as a leaf's AccumulateGrad: the highest numbers (distinct here: no ties to break)
            node._sequence_nr = sys.maxsize - index
        if index == two_outputs:
            node.num_outputs = 2
        for target, _ in edges_:
            if target is not None:
                pointing[target] = pointing.get(target, 0) + 1
        unreached = [t for t in unreached if t not in fixed + targets] + [index]
        nodes.append(node)
    return nodes, pointing


class Runs:
    """The probes' `run_node`: records each call (which node, the gradients it was given), sends along the node's
    edges what its factors say, adds what the sinks (nodes without edges) receive into `sums`, reads the node's
    saved values first (which raises torch's error once they were released) and declines the nodes `declined`."""

    def __init__(self, declined=()):
        self.calls, self.sums, self.declined = [], {}, set(declined)

    def __call__(self, node, grads):
        received = [None if g is None else float(np.sum(g)) for g in grads]
        self.calls.append([node.label, received])
        if node.label in self.declined:
            return None
        node.saved_values()
        arrived = [g for g in received if g is not None]
        if not node.next_functions:
            self.sums[node.label] = self.sums.get(node.label, 0.0) + sum(arrived)
        if not arrived:
            return (None,) * len(node.next_functions)
        passed_on = np.array([sum(arrived)])
        return tuple(None if factor is None else passed_on if factor == 1.0 else passed_on * factor
                     for factor in node.factors)

    def order(self):
        return [label for label, _ in self.calls]

    def received(self):
        return sorted(self.calls, key=lambda call: call[0])  # a node called twice keeps its calls' order


def tied_graph(draw):
    """A root whose edges go to two or three sinks sharing one sequence number, as AccumulateGrad nodes share theirs:
    all ready at once when the root has run."""
    sinks = [Relay(f"s{index}", (), []) for index in range(draw.int(2, 3))]
    for sink in sinks:
        sink._sequence_nr = sys.maxsize
    root = Relay("root", tuple((sink, 0) for sink in draw.shuffled(sinks)),
                 [draw.choice((1.0, 2.0, 3.0)) for _ in sinks])
    return [*sinks, root], {sink: 1 for sink in sinks}


def freed(nodes):
    return [node.label for node in nodes if node._saved is _FREED]


def walk(yours, nodes, pointing, roots, root_grads, retain_graph, runs):
    yours._walk(list(roots), [np.array([g]) for g in root_grads], dict(pointing), retain_graph, runs)


ORDER_HINT = ("see 10.4: among the nodes that are ready, the one with the highest _sequence_nr (the newest) runs "
              "first, and every node runs through run_node (which also runs its hooks).")
SUM_HINT = ("see 10.4: a node runs once, after every edge counted for it in `dependencies` has delivered: a tensor "
            "used twice gets the sum of both parts; one summed gradient per output (None where nothing arrived); "
            "never add into a gradient in place (the same array may have gone along another edge too).")


@probe("c10_walk_visible")
def walk_visible(yours, draw, check):
    nodes, pointing = walk_graph(draw)
    runs, gradient = Runs(), float(draw.int(1, 4))
    check("_walk from one root: the gradients run_node was given for each node (label, one per output), by label",
          lambda: (walk(yours, nodes, pointing, [(nodes[-1], 0)], [gradient], False, runs), runs.received())[1],
          close=True, hint=SUM_HINT)
    check("the order in which run_node was called (node labels)", runs.order, hint=ORDER_HINT)
    check("the nodes whose saved values were released by that walk (retain_graph=False)", lambda: freed(nodes),
          hint="see 10.4: once a node ran, unless retain_graph, release its saved values (node.release_saved()).")
    check("a second walk over the same graph",
          lambda: (walk(yours, nodes, pointing, [(nodes[-1], 0)], [gradient], False, Runs()), "no error")[1],
          phrase="backward through the graph a second time",
          hint="see 10.4: a second backward through a graph whose saved values were released raises torch's error; "
               "if it ran silently, the first walk released nothing.")


@probe("c10_walk_hidden")
def walk_hidden(yours, draw, check):
    nodes, pointing = walk_graph(draw)
    other = draw.int(0, len(nodes) - 4)  # not one of the two the root sends its one array to
    other_output = draw.int(0, nodes[other].num_outputs - 1)
    roots = [(nodes[-1], 0), (nodes[other], other_output), (nodes[-1], 0)]
    gradients = [float(draw.int(1, 4)) for _ in roots]
    runs = Runs()
    check("_walk from three roots (the root given twice, a node the root also reaches), retain_graph=True: the "
          "gradients each node was given, by label",
          lambda: (walk(yours, nodes, pointing, roots, gradients, True, runs), runs.received())[1], close=True,
          hint=SUM_HINT + " Gradients given for the same root add up; a root that other nodes point at waits for "
                          "them too.")
    check("the order of the calls in that walk", runs.order, hint=ORDER_HINT)
    again = Runs()
    again.sums = runs.sums
    check("a second walk with retain_graph=True: the nodes released, and what the sinks received over both walks",
          lambda: (walk(yours, nodes, pointing, roots, gradients, True, again), [freed(nodes), runs.sums])[1],
          close=True, hint="see 10.4: with retain_graph=True nothing is released: the graph can be walked again "
                           "(the gradients add up).")
    declined = draw.choice([node.label for node in nodes[1:-2]])
    pruned = Runs([declined])
    check(f"a walk where run_node declines {declined} (returns None, as autograd.grad does for a node that leads to "
          "none of its inputs): the calls, then the nodes released",
          lambda: (walk(yours, nodes, pointing, [(nodes[-1], 0)], [gradients[0]], False, pruned),
                   [pruned.calls, freed(nodes)])[1], close=True,
          hint="see 10.4: when run_node returns None the node did not run: it sends nothing and keeps its saved "
               "values; a node that ran must release its saved values (retain_graph is False here).")
    nodes, pointing = tied_graph(draw)
    tied = Runs()
    check(f"a walk where {len(nodes) - 1} nodes sharing one _sequence_nr (as AccumulateGrad nodes share theirs) are "
          "ready at once: the gradients each node was given, by label",
          lambda: (walk(yours, nodes, pointing, [(nodes[-1], 0)], [gradients[0]], False, tied), tied.received())[1],
          close=True, hint="see 10.4: nodes with the same _sequence_nr can be ready at the same time, so your queue "
                           "must never compare two nodes (Python cannot): put something comparable and unique "
                           "between the number and the node.")


# -- exercise 5: the gradient checker ------------------------------------------------------------------------------
def cubic(w):
    """A scalar function whose third derivative is not zero: a one-sided difference is off by about eps."""
    return lambda x: float(np.sum(w * x ** 3))


@probe("c10_numeric_gradient_visible")
def numeric_gradient_visible(yours, draw, check):
    x, w = draw.array(draw.int(1, 3), draw.int(2, 4), dtype=np.float64), float(away_from_zero(draw, 1)[0])
    check(f"numeric_gradient(f, x) for f(x) = sum(w * x ** 3), x of shape {x.shape}",
          lambda: np.asarray(yours.numeric_gradient(cubic(w), x), dtype=np.float64), close=True,
          hint="see 10.5: one central difference (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) per entry i of x, "
               "into an array of x's shape.")
    eps = 0.05
    check(f"numeric_gradient(f, x, eps={eps}) for the same f: the step you were given, a central difference",
          lambda: np.asarray(yours.numeric_gradient(cubic(w), x, eps), dtype=np.float64), close=True,
          hint="see 10.5: use eps as given, on both sides of x: the central difference's error shrinks like "
               "eps ** 2, a one-sided one's only like eps.")


@probe("c10_numeric_gradient_hidden")
def numeric_gradient_hidden(yours, draw, check):
    x = draw.array(draw.int(2, 4))  # float32
    w = draw.array(*x.shape, dtype=np.float64)
    check("numeric_gradient of sum(w * exp(x)) at a float32 x (default eps)",
          lambda: np.asarray(yours.numeric_gradient(lambda x_: float(np.sum(w * np.exp(x_))), x), dtype=np.float64),
          close=True, hint="see 10.5: compute in float64 whatever x's dtype: in float32 a step of 1e-6 is lost in "
                           "rounding.")
    x64 = draw.array(draw.int(2, 4), dtype=np.float64)
    kept, intact = np.array(x64), []

    def f(x_):
        intact.append(bool(np.array_equal(x64, kept)))  # stepped and put back, it may still look unchanged after
        return float(np.sum(x_ ** 2))
    check("a float64 x while numeric_gradient calls f, and after it: unchanged?",
          lambda: (yours.numeric_gradient(f, x64), [all(intact), bool(np.array_equal(x64, kept))])[1],
          hint="see 10.5: leave the caller's x unchanged, also while f runs: step a float64 copy.")


# -- exercise 6: elementwise formulas and the transpose ----------------------------------------------------------
BINARY = {"add": AddBackward0, "sub": SubBackward0, "mul": MulBackward0, "div": DivBackward0}
ELEMENTWISE_HINT = ("see 10.6: out[i] depends on a[i] and b[i] alone: differentiate out[i] in a[i] with b[i] held "
                    "fixed (then in b[i] with a[i] fixed), sign included, multiply by grad[i], and write that for "
                    "every i at once; the node holds what the table of 10.6 says. Check each gradient with your "
                    "numeric_gradient (the cell under exercise 6 does).")


def binary_node(name, a, b):
    """The node of `a <op> b` as recorded: only Mul and Div keep their inputs."""
    return node_of(BINARY[name], (a, b) if name in ("mul", "div") else None)


def passed_on(gradients, node, grad, first, second):
    """What a two-input node passes on: the pair its formula returns, None for an input that needs no gradient."""
    found = gradients(node, grad, first, second)
    try:
        grad_a, grad_b = found
    except (TypeError, ValueError):
        return ["not a pair", type(found).__name__]
    return arrays((grad_a if first else None, grad_b if second else None))


@probe("c10_elementwise_visible")
def elementwise_visible(yours, draw, check):
    shape = (draw.int(1, 3), draw.int(2, 4))
    a, b, grad = draw.array(*shape), away_from_zero(draw, *shape), draw.array(*shape)
    for name in BINARY:
        node = binary_node(name, a, b)
        check(f"{name}_gradients(node, grad, True, True) for a and b of shape {shape}",
              lambda: passed_on(getattr(yours, f"{name}_gradients"), node, grad, True, True), close=True,
              hint=ELEMENTWISE_HINT)
    check(f"neg_backward(node, grad) and exp_backward(node, grad) for an input of shape {shape}",
          lambda: [arrays(yours.neg_backward(node_of(NegBackward0, None), grad)),
                   arrays(yours.exp_backward(node_of(ExpBackward0, (np.exp(a),)), grad))], close=True,
          hint=ELEMENTWISE_HINT + " ExpBackward0 holds exp(a), its output, not a.")
    exponent = draw.choice((2, 3, 4))
    check(f"pow_backward(node, grad) for a ** {exponent}",
          lambda: arrays(yours.pow_backward(node_of(PowBackward0, (a,), exponent=exponent), grad)), close=True,
          hint=ELEMENTWISE_HINT + " The exponent is self.exponent, a number.")
    n, m = draw.sample(range(2, 6), 2)  # a gradient reshaped instead of transposed has the right shape only
    check(f"t_backward(node, grad) for a ({n}, {m}) input: grad has the transpose's shape ({m}, {n})",
          lambda: arrays(yours.t_backward(node_of(TBackward0, None), draw.array(m, n))), close=True,
          hint="see 10.6: the transpose moves entry [i, j] of a to [j, i] of out, changing no value: the gradient of "
               "a[i, j] is the entry of grad at out's position. Compare with your numeric_gradient.")


@probe("c10_elementwise_hidden")
def elementwise_hidden(yours, draw, check):
    shape = (draw.int(2, 4),)
    a, grad = draw.array(*shape), draw.array(*shape)
    number = draw.choice((2.0, 0.5, -3.0, 4.0))
    check(f"mul_gradients and div_gradients for a * {number} and a / {number} (b is a number that needs no "
          "gradient: first=True, second=False)",
          lambda: [passed_on(yours.mul_gradients, binary_node("mul", a, number), grad, True, False),
                   passed_on(yours.div_gradients, binary_node("div", a, number), grad, True, False)], close=True,
          hint=ELEMENTWISE_HINT + " b may be a number: the formula must work with one.")
    b = away_from_zero(draw, *shape)
    check("sub_gradients and div_gradients when only b needs a gradient (first=False, second=True)",
          lambda: [passed_on(yours.sub_gradients, binary_node("sub", a, b), grad, False, True),
                   passed_on(yours.div_gradients, binary_node("div", a, b), grad, False, True)], close=True,
          hint=ELEMENTWISE_HINT)
    with_zero = np.array(a)
    with_zero[draw.int(0, shape[0] - 1)] = 0
    check("pow_backward for a ** 0 at an a with a zero entry",
          lambda: arrays(yours.pow_backward(node_of(PowBackward0, (with_zero,), exponent=0), grad)), close=True,
          hint="see 10.6: a ** 0 is 1 whatever a is, so its gradient is 0 everywhere, a == 0 included (the general "
               "rule would compute 0 * 0 ** -1 there, which is not a number): torch returns zeros.")
    exponent = draw.choice((-2, -1, 0.5, 1.5))
    positive = np.abs(b)
    check(f"pow_backward for a ** {exponent}, a positive",
          lambda: arrays(yours.pow_backward(node_of(PowBackward0, (positive,), exponent=exponent), grad)),
          close=True, hint=ELEMENTWISE_HINT + " The exponent may be negative or a fraction.")
    check("exp_backward on a node whose saved values were freed by a first backward",
          lambda: arrays(yours.exp_backward(node_of(ExpBackward0, _FREED), grad)),
          phrase="backward through the graph a second time",
          hint="see 10.3: read the output with self.saved_values(), which raises torch's error once freed.")


# -- exercise 7: the engine's check (validate_outputs), unbroadcast, matmul -----------------------------------------
class ProbeBackward0(Node):
    """A node whose returned gradients the probes hand to validate_outputs."""


def shaped_target(draw, shape):
    """An edge towards a tensor of `shape`: a leaf's AccumulateGrad, or an output of a hand-made node."""
    if draw.coin():
        return (AccumulateGrad(leaf(draw, *shape)), 0)
    output_nr = draw.int(0, 1)
    return (produced(draw, *shape, output_nr=output_nr)._grad_fn, output_nr)


def validated(validate_outputs, node, grads):
    return arrays(validate_outputs(node, tuple(grads)))


VALIDATE_HINT = ("see 10.7: for each edge (following, output_nr) with a gradient: the same shape as "
                 "following.gradient_shape(output_nr) passes; a shape the input's can be broadcast to is summed with "
                 "unbroadcast (over the leading axes, then with keepdims over the stretched ones); (None, 0) edges and "
                 "None gradients pass as they are; return a tuple.")
REFUSE_HINT = ("see 10.7: the input's shape must broadcast to the gradient's (align from the right: each size of the "
               "input equal to the gradient's or 1, and no more axes than the gradient); else raise torch's "
               "RuntimeError naming the node, the edge's index, both shapes.")


def validate_visible(yours, draw, check):
    n, k, j = draw.int(2, 4), draw.int(2, 4), draw.int(2, 4)
    targets = [shaped_target(draw, (n,)), (None, 0), shaped_target(draw, (k, 1)), shaped_target(draw, (j,))]
    grads = [draw.array(draw.int(1, 3), n), draw.array(2), draw.array(k, draw.int(2, 4)), draw.array(j)]
    order = draw.shuffled(range(4))
    node = ProbeBackward0(tuple(targets[i] for i in order))
    check("validate_outputs(node, grads) for gradients with a leading axis, for a (None, 0) edge, with a stretched "
          "size-1 axis, of the input's shape (shuffled)",
          lambda: validated(yours.validate_outputs, node, [grads[i] for i in order]), close=True, hint=VALIDATE_HINT)
    m = draw.int(2, 4)
    wrong = ProbeBackward0((shaped_target(draw, (m,)), (None, 0)))
    check(f"validate_outputs for a gradient of shape ({m + 1},) going to an input of shape ({m},)",
          lambda: validated(yours.validate_outputs, wrong, [draw.array(m + 1), None]), hint=REFUSE_HINT)


def validate_hidden(yours, draw, check):
    n = draw.int(2, 4)
    # A leaf's AccumulateGrad gets no check of its own (torch's has none either): the engine's is the only one.
    leaf_edge = (AccumulateGrad(leaf(draw, n)), 0)
    output_nr = draw.int(0, 1)
    recorded_edge = (produced(draw, n, output_nr=output_nr)._grad_fn, output_nr)
    for label, grad, edge in (("a 0-d gradient going to a leaf", np.asarray(draw.array(1)[0]), leaf_edge),
                              ("a (1,) gradient going to a recorded tensor", draw.array(1), recorded_edge)):
        node = ProbeBackward0(((None, 0), edge))
        check(f"validate_outputs for {label} of shape ({n},) (it broadcasts to ({n},), the other way round)",
              lambda: validated(yours.validate_outputs, node, [None, grad]), hint=REFUSE_HINT)
    unknown = ProbeBackward0(((Node(()), 0), shaped_target(draw, (1, n))))
    check("validate_outputs when the shape is unknown (gradient_shape gives None), and for a gradient summed over "
          "both a leading and a stretched axis",
          lambda: validated(yours.validate_outputs, unknown, [draw.array(3), draw.array(2, 3, n)]), close=True,
          hint=VALIDATE_HINT)


# (exercise 7) unbroadcast and matmul ------------------------------------------------------------------------------
def broadcast_case(draw, leading):
    """An input shape whose first axis (size 1) was stretched, maybe a second axis too, plus `leading` new axes."""
    shape = (1,) + ((draw.choice((1, draw.int(2, 4))),) if draw.coin() else ())
    stretched = (draw.int(2, 4),) + tuple(draw.int(2, 4) if size == 1 and draw.coin() else size for size in shape[1:])
    out = tuple(draw.int(1, 3) for _ in range(leading)) + stretched
    return shape, draw.array(*out)


MM_HINT = ("see 10.7: derive one entry, d loss / d a[i, k], and check the shapes: grad_a has a's shape, grad_b "
           "b's; compare with your numeric_gradient.")


@probe("c10_matmul_broadcast_visible")
def matmul_broadcast_visible(yours, draw, check):
    validate_visible(yours, draw, check)
    shape, grad = broadcast_case(draw, draw.int(1, 2))
    check(f"unbroadcast(grad, shape) for a gradient of shape {grad.shape} and an input of shape {shape}",
          lambda: np.asarray(yours.unbroadcast(grad, shape)), close=True,
          hint="see 10.7: sum over the leading axes broadcasting added, then (keepdims) over each axis of size "
               "1 in the input that was stretched.")
    n, k, m = draw.sample(range(1, 6), 3)  # three different sizes: a transpose too many or too few shows
    a, b, g = draw.array(n, k), draw.array(k, m), draw.array(n, m)
    check("mm_gradients(grad, a, b, True, True) for 2-D a and b",
          lambda: arrays(tuple(yours.mm_gradients(g, a, b, True, True))), close=True,
          hint=MM_HINT)


@probe("c10_matmul_broadcast_hidden")
def matmul_broadcast_hidden(yours, draw, check):
    validate_hidden(yours, draw, check)
    shape, grad = broadcast_case(draw, 0)
    check(f"unbroadcast for a gradient of shape {grad.shape} and an input of shape {shape} (no leading axes)",
          lambda: np.asarray(yours.unbroadcast(grad, shape)), close=True,
          hint="see 10.7: an axis of size 1 that was stretched is summed with keepdims=True.")
    same = draw.array(draw.int(1, 3), draw.int(1, 3))
    check("unbroadcast for a gradient that already has the input's shape",
          lambda: np.asarray(yours.unbroadcast(same, same.shape)), close=True,
          hint="see 10.7: nothing to sum: return the gradient as it is.")
    n, k, m = draw.int(1, 4), draw.int(1, 4), draw.int(1, 4)
    a, b, g = draw.array(k, n).T, draw.array(k, m), draw.array(n, m)
    first = draw.coin()
    check("mm_gradients with only one operand needing a gradient (the other gets None), a column-major a",
          lambda: arrays(tuple(yours.mm_gradients(g, a, b, first, not first))), close=True,
          hint="see 10.7: the flags say which gradients to compute; None for the other.")


# -- exercise 8: ReLU, sum, mean, log-softmax, the loss ----------------------------------------------------------------------
def reduction_node(node_class, shape, axes, keepdims):
    return node_of(node_class, None, shape=shape, axes=axes, keepdims=keepdims)


def reduced_shape(shape, axes, keepdims):
    if axes is None:
        return () if not keepdims else (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape) if keepdims or i not in axes)


@probe("c10_formulas_visible")
def formulas_visible(yours, draw, check):
    shape = (draw.int(2, 4), draw.int(2, 5))
    out = np.maximum(draw.array(*shape), 0)
    out.flat[draw.int(0, out.size - 1)] = 0  # at least one zero output: no gradient passes there
    grad = draw.array(*shape)
    check("relu_backward(node, grad): the gradient passes where the output is positive",
          lambda: arrays(yours.relu_backward(node_of(ReluBackward0, (out,)), grad)), close=True,
          hint="see 10.8: where ReLU's output is 0 no gradient passes (at x == 0 too, by torch's convention); "
               "elsewhere it is the identity. The output is self.saved_values()[0].")
    axis = draw.int(0, 1)
    reduced = draw.array(*reduced_shape(shape, (axis,), False))
    check(f"sum_backward and mean_backward for a reduction over axis {axis} of a {shape} input",
          lambda: [arrays(yours.sum_backward(reduction_node(SumBackward1, shape, (axis,), False), reduced)),
                   arrays(yours.mean_backward(reduction_node(MeanBackward1, shape, (axis,), False), reduced))],
          close=True, hint="see 10.8: each input entry gets the gradient of the sum it went into: put the "
                           "reduced axes back, spread over the input's shape; a mean is a sum divided by how many "
                           "values it averaged.")
    logits = draw.array(*shape)
    log_p = _log_softmax_values(logits, 1)
    node, grad = nll_node(draw, "mean", weighted=False, ignoring=False)
    check("nll_loss_backward(node, grad) for a mean over the batch, no class weights",
          lambda: arrays(yours.nll_loss_backward(node, grad)), close=True, hint=NLL_HINT)
    check("log_softmax_backward(node, grad) over axis 1",
          lambda: arrays(yours.log_softmax_backward(node_of(LogSoftmaxBackward0, (log_p,), axis=1), grad)),
          close=True, hint="see 10.8: every out[i] depends on every x[j] along the axis, so x[j]'s gradient "
                           "collects a term from each out[i] of its own slice: a sum along self.axis only; "
                           "exp(out) is the softmax. Compare with your numeric_gradient.")


@probe("c10_formulas_hidden")
def formulas_hidden(yours, draw, check):
    shape = (draw.int(1, 3), draw.int(1, 3), draw.int(2, 3))
    keepdims = draw.coin()
    for node_class, name in ((SumBackward0, "sum"), (MeanBackward0, "mean")):
        grad = draw.array(*reduced_shape(shape, None, keepdims))
        method = getattr(yours, f"{name}_backward")
        check(f"{name}_backward for a full reduction of a {shape} input (keepdims={keepdims})",
              lambda: arrays(method(reduction_node(node_class, shape, None, keepdims), grad)), close=True,
              hint="see 10.8: axes None means every axis was reduced.")
    axes = tuple(sorted(draw.sample(range(3), 2)))
    grad = draw.array(*reduced_shape(shape, axes, True))
    check(f"mean_backward over axes {axes} with keepdims=True",
          lambda: arrays(yours.mean_backward(reduction_node(MeanBackward1, shape, axes, True), grad)), close=True,
          hint="see 10.8: with keepdims the reduced axes are still there (size 1); divide by the product of "
               "their sizes.")
    rows = draw.array(draw.int(2, 4), draw.int(2, 4))
    log_p, grad = _log_softmax_values(rows, 0), draw.array(*rows.shape)
    check("log_softmax_backward over axis 0",
          lambda: arrays(yours.log_softmax_backward(node_of(LogSoftmaxBackward0, (log_p,), axis=0), grad)),
          close=True, hint="see 10.8: the sum runs along self.axis.")
    for reduction in ("mean", draw.choice(["sum", "none"])):
        node, grad = nll_node(draw, reduction, weighted=True, ignoring=True)
        check(f"nll_loss_backward with class weights and an ignored sample, reduction={reduction!r}",
              lambda: arrays(yours.nll_loss_backward(node, grad)), close=True, hint=NLL_HINT)
    node, grad = nll_node(draw, "mean", weighted=False, ignoring=False, one_dimensional=True)
    check("nll_loss_backward for a single (C,) input", lambda: arrays(yours.nll_loss_backward(node, grad)),
          close=True, hint="see 10.8: a (C,) input is one sample: its gradient has the input's shape (C,).")
    check("relu_backward on a node whose saved values were freed by a first backward",
          lambda: arrays(yours.relu_backward(node_of(ReluBackward0, _FREED), draw.array(2))),
          phrase="backward through the graph a second time",
          hint="see 10.3: read the output with self.saved_values(), which raises torch's error once freed.")


def nll_node(draw, reduction, *, weighted, ignoring, one_dimensional=False):
    """NllLossBackward0 as nll_loss records it (saved: each sample's class, weight, whether it counts, their total)."""
    n, classes = draw.int(2, 5), draw.int(2, 4)
    target = np.array([draw.int(0, classes - 1) for _ in range(1 if one_dimensional else n)])
    valid = np.ones(target.shape, dtype=bool)
    if ignoring:
        valid[draw.int(0, target.size - 1)] = False
    # weights below 1: the total weight of the samples that count is never their number (a mean over samples shows)
    class_weights = draw.array(classes, low=0.3, high=0.9) if weighted else np.ones(classes, dtype=np.float32)
    weights = np.where(valid, class_weights[target], 0).astype(np.float32)
    node = node_of(NllLossBackward0, (target, weights, valid, weights.sum()), reduction=reduction,
                   shape=(classes,) if one_dimensional else (n, classes))
    grad = draw.array(n) if reduction == "none" else np.asarray(away_from_zero(draw, 1)[0])
    return node, grad


NLL_HINT = ("see 10.8: only x[i, t_i] takes part in loss_i, so each row's gradient is 0 but at its class; the mean "
            "divides by the total weight (not by N); an ignored sample has weight 0.")


# -- exercise 9: find the bug in linear's backward ---------------------------------------------------------------
def addmm_node(draw, bias, needs_input):
    n, k, m = draw.int(2, 4), *draw.sample(range(2, 6), 2)  # in and out sizes differ: a transposed gradient shows
    x, weight, grad = draw.array(n, k), draw.array(m, k), draw.array(n, m)
    node = AddmmBackward0(((Node(()) if bias else None, 0), (Node(()) if needs_input else None, 0), (Node(()), 0)))
    node._saved = (x, weight.T)
    return node, grad


def summed(gradients, shapes):
    """The gradients as the engine passes them on: each summed to its input's shape, if it can be (the bias's may
    come with the output's shape, as torch's). Computed here: while grading, modulecraft's own sum is the learner's."""
    if not isinstance(gradients, tuple):
        return ["not a tuple", type(gradients).__name__]
    found = []
    for grad, shape in zip(gradients, shapes):
        if grad is None:
            found.append(None)
            continue
        grad = np.asarray(grad, dtype=np.float64)
        extra = grad.ndim - len(shape)
        if extra < 0 or any(size not in (1, size_got) for size, size_got in zip(shape, grad.shape[extra:])):
            found.append(["a gradient of shape", list(grad.shape), "for an input of shape", list(shape)])
            continue
        grad = grad.sum(axis=tuple(range(extra)))
        stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
        found.append(grad.sum(axis=stretched, keepdims=True) if stretched else grad)
    return ["tuple", found, len(gradients)]


def addmm_shapes(node):
    inputs, weight_t = node._saved
    return [weight_t.shape[1:], inputs.shape, weight_t.shape]  # the bias has one value per output


@probe("c10_fix_addmm_visible")
def fix_addmm_visible(yours, draw, check):
    node, grad = addmm_node(draw, True, True)
    check("addmm_backward(node, grad) for linear with a bias, in and out sizes different: the gradients of bias, "
          "input and weight.T (each summed to its input's shape, as the engine does)",
          lambda: summed(yours.addmm_backward(node, grad), addmm_shapes(node)), close=True,
          hint="see 10.9: one gradient per edge, in torch's order (bias, input, weight.T), each with its input's "
               "shape or (the bias's) a shape the engine can sum to it: weight.T's has weight.T's shape. Check each "
               "with your numeric_gradient on a layer whose in and out sizes differ.")


@probe("c10_fix_addmm_hidden")
def fix_addmm_hidden(yours, draw, check):
    node, grad = addmm_node(draw, draw.coin(), False)
    check("addmm_backward when the input needs no gradient (and the bias may not either)",
          lambda: summed(yours.addmm_backward(node, grad), addmm_shapes(node)), close=True,
          hint="see 10.9: None for each edge that is (None, 0).")
    node, grad = addmm_node(draw, True, draw.coin())
    check("the gradients for a drawn batch size, summed to their inputs' shapes",
          lambda: summed(yours.addmm_backward(node, grad), addmm_shapes(node)), close=True,
          hint="see 10.9: each gradient has its input's shape, or (the bias's) a shape the engine can sum to it.")
