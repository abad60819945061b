"""Typical mistakes in the autograd chapter (recording, engine, backward formulas); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    # -- exercise 1: recording
    dict(
        grade_id="c10_recording",
        mistake="records-under-no-grad",
        feedback="under no_grad()",
        edits=[("    if not is_grad_enabled():\n        return False\n", "")],
    ),
    dict(
        grade_id="c10_recording",
        mistake="new-accumulator-per-use",
        feedback="the same AccumulateGrad node",
        edits=[("found.append((weak_accumulator(x), 0))", "found.append((AccumulateGrad(x), 0))")],
    ),
    dict(
        grade_id="c10_recording",
        mistake="output-nr-always-zero",
        feedback="_output_nr",
        edits=[("found.append((x.grad_fn, x._output_nr))", "found.append((x.grad_fn, 0))")],
    ),
    dict(
        grade_id="c10_recording",
        mistake="edges-as-list",
        feedback="edges(inputs)",
        edits=[("    return tuple(found)", "    return found")],
    ),
    dict(
        grade_id="c10_recording",
        mistake="recording-looks-at-first-value",
        feedback="not only the first",
        edits=[("    return any(isinstance(value, Tensor) and value.requires_grad for value in values)",
                "    return bool(values) and isinstance(values[0], Tensor) and values[0].requires_grad")],
    ),
    dict(
        grade_id="c10_recording",
        mistake="delegates-to-reference-recording",
        feedback="does not exist while grading",
        source='''from modulecraft.autograd.tensor import edges

_recording = F._recording''',
    ),
    # -- exercise 2: dependency counts and AccumulateGrad
    dict(
        grade_id="c10_engine",
        mistake="counts-nodes-not-edges",
        feedback="a node used twice counts twice",
        edits=[("            dependencies[following] = dependencies.get(following, 0) + 1\n"
                "            if following not in seen:\n",
                "            if following not in seen:\n"
                "                dependencies[following] = 1\n")],
    ),
    dict(
        grade_id="c10_engine",
        mistake="revisits-nodes",
        feedback="visit each node once",
        edits=[("            if following not in seen:\n"
                "                seen.add(following)\n"
                "                stack.append(following)\n",
                "            stack.append(following)\n")],
    ),
    dict(
        grade_id="c10_engine",
        mistake="accumulate-replaces-grad",
        feedback="never replace it",
        edits=[("    if variable._grad is None:\n        variable._grad = np.array(grad, dtype=variable.dtype)\n"
                "    else:\n        np.add(variable._grad, grad, out=variable._grad, casting=\"unsafe\")\n",
                "    variable._grad = np.array(grad, dtype=variable.dtype)\n")],
    ),
    dict(
        grade_id="c10_engine",
        mistake="accumulate-keeps-callers-array",
        feedback="as a copy",
        edits=[("variable._grad = np.array(grad, dtype=variable.dtype)", "variable._grad = grad")],
    ),
    dict(
        grade_id="c10_engine",
        mistake="accumulate-into-new-array",
        feedback="in place",
        edits=[("np.add(variable._grad, grad, out=variable._grad, casting=\"unsafe\")",
                "variable._grad = (variable._grad + grad).astype(variable.dtype)")],
    ),
    dict(
        grade_id="c10_engine",
        mistake="delegates-to-reference-engine",
        feedback="does not exist while grading",
        source='''_dependencies = engine._dependencies
accumulate_grad = AccumulateGrad.backward''',
    ),
    # -- exercise 3 (0 points): its wrong answers, for the visible test's feedback
    dict(
        grade_id="c10_predict_order",
        mistake="predicts-creation-order-reversed",
        feedback="predicted_order",
        edits=[('predicted_order = ["SumBackward0", "AddBackward0", "MulBackward0", "AccumulateGrad(b)", '
                '"ExpBackward0",\n                   "AccumulateGrad(a)"]',
                'predicted_order = ["SumBackward0", "AddBackward0", "MulBackward0", "ExpBackward0", '
                '"AccumulateGrad(a)",\n                   "AccumulateGrad(b)"]')],
    ),
    dict(
        grade_id="c10_predict_order",
        mistake="predicts-depth-first",
        feedback="predicted_order",
        edits=[('predicted_order = ["SumBackward0", "AddBackward0", "MulBackward0", "AccumulateGrad(b)", '
                '"ExpBackward0",\n                   "AccumulateGrad(a)"]',
                'predicted_order = ["SumBackward0", "AddBackward0", "ExpBackward0", "AccumulateGrad(a)", '
                '"MulBackward0",\n                   "AccumulateGrad(b)"]')],
    ),
    # -- exercise 4: the walk
    dict(
        grade_id="c10_walk",
        mistake="runs-on-first-gradient",
        feedback="a tensor used twice gets the sum of both parts",
        edits=[("            deliver(following, output_nr, grad)\n"
                "            dependencies[following] -= 1\n"
                "            if dependencies[following] == 0:\n"
                "                heapq.heappush(ready, (-following._sequence_nr, next(tickets), following))",
                "            if following not in buffers:\n"
                "                heapq.heappush(ready, (-following._sequence_nr, next(tickets), following))\n"
                "            deliver(following, output_nr, grad)")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="oldest-ready-first",
        feedback="the highest _sequence_nr (the newest) runs first",
        edits=[("(-node._sequence_nr, next(tickets), node)", "(node._sequence_nr, next(tickets), node)"),
               ("(-following._sequence_nr, next(tickets), following)",
                "(following._sequence_nr, next(tickets), following)")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="ready-in-arrival-order",
        feedback="the highest _sequence_nr (the newest) runs first",
        edits=[("heapq.heappush(ready, (-node._sequence_nr, next(tickets), node))",
                "ready.append((-node._sequence_nr, next(tickets), node))"),
               ("heapq.heappush(ready, (-following._sequence_nr, next(tickets), following))",
                "ready.append((-following._sequence_nr, next(tickets), following))"),
               ("node = heapq.heappop(ready)[2]", "node = ready.pop(0)[2]")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="never-frees",
        feedback="release its saved values",
        edits=[("        if not retain_graph:\n            node.release_saved()\n", "")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="frees-despite-retain-graph",
        feedback="with retain_graph=True nothing is released",
        edits=[("        if not retain_graph:\n            node.release_saved()\n", "        node.release_saved()\n")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="declined-node-freed",
        feedback="keeps its saved values",
        edits=[("        if sent is None:  # declined: it did not run\n            continue\n"
                "        if not retain_graph:\n            node.release_saved()\n",
                "        if not retain_graph:\n            node.release_saved()\n"
                "        if sent is None:  # declined: it did not run\n            continue\n")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="sums-in-place",
        feedback="never add into a gradient in place",
        edits=[("            buffer[output_nr] = grad if buffer[output_nr] is None else buffer[output_nr] + grad\n",
                "            if buffer[output_nr] is None:\n"
                "                buffer[output_nr] = grad\n"
                "            else:\n"
                "                buffer[output_nr] += grad\n")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="one-gradient-per-node",
        feedback="one summed gradient per output",
        edits=[("buffers.setdefault(node, [None] * node.num_outputs)", "buffers.setdefault(node, [None])"),
               ("buffer[output_nr] = grad if buffer[output_nr] is None else buffer[output_nr] + grad",
                "buffer[0] = grad if buffer[0] is None else buffer[0] + grad")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="roots-run-at-once",
        feedback="a root that other nodes point at waits for them too",
        edits=[("        if node not in buffers and node not in dependencies:\n",
                "        if node not in buffers:\n")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="heap-compares-nodes",
        feedback="must never compare two nodes",
        edits=[("            heapq.heappush(ready, (-node._sequence_nr, next(tickets), node))",
                "            heapq.heappush(ready, (-node._sequence_nr, node))"),
               ("        node = heapq.heappop(ready)[2]", "        node = heapq.heappop(ready)[1]"),
               ("                heapq.heappush(ready, (-following._sequence_nr, next(tickets), following))",
                "                heapq.heappush(ready, (-following._sequence_nr, following))")],
    ),
    dict(
        grade_id="c10_walk",
        mistake="delegates-to-reference-walk",
        feedback="does not exist while grading",
        source='''_walk = engine._walk''',
    ),
    # -- exercise 5: the gradient checker
    dict(
        grade_id="c10_numeric_gradient",
        mistake="numeric-one-sided",
        feedback="a one-sided one's only like eps",
        edits=[("gradient[index] = (f(x + step) - f(x - step)) / (2 * eps)",
                "gradient[index] = (f(x + step) - f(x)) / eps")],
    ),
    dict(
        grade_id="c10_numeric_gradient",
        mistake="numeric-ignores-eps",
        feedback="use eps as given",
        edits=[("step[index] = eps", "step[index] = 1e-6"),
               ("(f(x + step) - f(x - step)) / (2 * eps)", "(f(x + step) - f(x - step)) / 2e-6")],
    ),
    dict(
        grade_id="c10_numeric_gradient",
        mistake="numeric-keeps-float32",
        feedback="compute in float64",
        edits=[("x = np.array(x, dtype=np.float64)", "x = np.array(x)")],
    ),
    dict(
        grade_id="c10_numeric_gradient",
        mistake="numeric-steps-callers-x",
        feedback="leave the caller's x unchanged",
        source='''def numeric_gradient(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        x[index] += eps
        above = f(x)
        x[index] -= 2 * eps
        below = f(x)
        x[index] += eps
        gradient[index] = (above - below) / (2 * eps)
    return gradient''',
    ),
    dict(
        grade_id="c10_numeric_gradient",
        mistake="delegates-to-reference-checker",
        feedback="does not exist while grading",
        source='''from modulecraft.exercises.c10_autograd import numeric_gradient''',
    ),
    # -- exercise 6: elementwise formulas and the transpose
    dict(
        grade_id="c10_elementwise",
        mistake="sub-same-sign",
        feedback="sub_gradients(node, grad, True, True)",
        edits=[("return (grad if first else None), (-grad if second else None)",
                "return (grad if first else None), (grad if second else None)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="mul-own-factor",
        feedback="mul_gradients(node, grad, True, True)",
        edits=[("return (grad * b if first else None), (grad * a if second else None)",
                "return (grad * a if first else None), (grad * b if second else None)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="div-divisor-forgets-numerator",
        feedback="div_gradients(node, grad, True, True)",
        edits=[("(-grad * a / (b * b) if second else None)", "(-grad / (b * b) if second else None)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="neg-passes-as-is",
        feedback="neg_backward(node, grad)",
        edits=[("    return (-grad,)\n", "    return (grad,)\n")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="pow-exponent-not-lowered",
        feedback="pow_backward(node, grad) for a **",
        edits=[("a ** (self.exponent - 1)", "a ** self.exponent")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="pow-zero-not-a-number",
        feedback="its gradient is 0 everywhere, a == 0 included",
        edits=[("    if self.exponent == 0:  # a constant: 0 everywhere, where the general rule would compute 0 * 0 ** -1\n"
                "        return (np.zeros_like(grad * a),)\n", "")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="exp-recomputes-from-output",
        feedback="holds exp(a), its output",
        edits=[("    return (grad * out,)", "    return (grad * np.exp(out),)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="exp-reads-private-saved",
        feedback="saved_values()",
        edits=[("    (out,) = self.saved_values()\n    return (grad * out,)", "    (out,) = self._saved\n    return (grad * out,)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="transpose-reshaped",
        feedback="t_backward(node, grad)",
        edits=[("    return (grad.T,)", "    return (grad.reshape(grad.shape[::-1]),)")],
    ),
    dict(
        grade_id="c10_elementwise",
        mistake="delegates-to-reference-elementwise",
        feedback="does not exist while grading",
        source='''add_gradients = elementwise.AddBackward0.gradients
sub_gradients = elementwise.SubBackward0.gradients
mul_gradients = elementwise.MulBackward0.gradients
div_gradients = elementwise.DivBackward0.gradients
neg_backward = elementwise.NegBackward0.backward
pow_backward = elementwise.PowBackward0.backward
exp_backward = elementwise.ExpBackward0.backward
t_backward = F.TBackward0.backward''',
    ),
    # -- exercise 7: the engine's check of what a node returns, matrix products
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="validate-accepts-any-broadcast",
        feedback="the input's shape must broadcast to the gradient's",
        edits=[("                extra = len(got) - len(shape)\n"
                "                if extra < 0 or any(size not in (1, size_got) for size, size_got in zip(shape, got[extra:])):\n"
                "                    raise",
                "                try:\n"
                "                    np.broadcast_shapes(got, shape)  # they broadcast together: not the same question\n"
                "                except ValueError:\n"
                "                    raise")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="validate-skips-leaves",
        feedback="a 0-d gradient going to a leaf",
        edits=[("        if following is not None and grad is not None:\n",
                "        if following is not None and grad is not None and not isinstance(following, AccumulateGrad):\n")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="validate-never-sums",
        feedback="is summed with unbroadcast",
        edits=[("                grad = unbroadcast(grad, shape)\n", "")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="validate-checks-none-edges",
        feedback="(None, 0) edges and None gradients pass as they are",
        edits=[("        if following is not None and grad is not None:\n", "        if grad is not None:\n")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="unbroadcast-leading-axes-only",
        feedback="stretched",
        edits=[("    if stretched:\n        grad = grad.sum(axis=stretched, keepdims=True)\n", "")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="unbroadcast-drops-size-one-axes",
        feedback="keepdims",
        edits=[("grad = grad.sum(axis=stretched, keepdims=True)", "grad = grad.sum(axis=stretched)")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="mm-transposes-swapped",
        feedback="grad_a has a's shape",
        edits=[("return (grad @ b.T if first else None), (a.T @ grad if second else None)",
                "return (grad @ b if first else None), (a @ grad if second else None)")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="mm-ignores-flags",
        feedback="None for the other",
        edits=[("return (grad @ b.T if first else None), (a.T @ grad if second else None)",
                "return grad @ b.T, a.T @ grad")],
    ),
    dict(
        grade_id="c10_matmul_broadcast",
        mistake="delegates-to-reference-matmul",
        feedback="does not exist while grading",
        source='''validate_outputs = engine.validate_outputs
unbroadcast = engine.unbroadcast
mm_gradients = linalg.mm_gradients''',
    ),
    # -- exercise 8: ReLU, sum, mean, log-softmax, the loss
    dict(
        grade_id="c10_formulas",
        mistake="relu-passes-at-zero",
        feedback="the gradient passes where the output is positive",
        edits=[("return (grad * (out > 0),)", "return (grad * (out >= 0),)")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="mean-forgets-to-divide",
        feedback="how many values it averaged",
        edits=[("return sum_backward(self, grad / int(np.prod(reduced)))", "return sum_backward(self, grad)")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="log-softmax-sums-every-axis",
        feedback="a sum along self.axis only",
        edits=[("return (grad - np.exp(out) * grad.sum(axis=self.axis, keepdims=True),)",
                "return (grad - np.exp(out) * grad.sum(),)")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="nll-mean-over-samples",
        feedback="divides by the total weight",
        edits=[("per_sample = np.where(valid, per_sample / total, 0) if total == 0 else per_sample / total",
                "per_sample = per_sample / len(target)")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="nll-sign-flipped",
        feedback="only x[i, t_i] takes part in loss_i",
        edits=[("    per_sample = -weights * grad", "    per_sample = weights * grad")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="relu-reads-private-saved",
        feedback="saved_values()",
        edits=[("    (out,) = self.saved_values()\n    return (grad * (out > 0),)",
                "    (out,) = self._saved\n    return (grad * (out > 0),)")],
    ),
    dict(
        grade_id="c10_formulas",
        mistake="delegates-to-reference-formulas",
        feedback="does not exist while grading",
        source='''relu_backward = F.ReluBackward0.backward
sum_backward = reductions.SumBackward0.backward
mean_backward = reductions.MeanBackward0.backward
log_softmax_backward = F.LogSoftmaxBackward0.backward
nll_loss_backward = F.NllLossBackward0.backward''',
    ),
    # -- exercise 9: linear's backward
    dict(
        grade_id="c10_fix_addmm",
        mistake="keeps-colleagues-transpose",
        feedback="weight.T's shape",
        edits=[("grad_weight_t = inputs.T @ grad if", "grad_weight_t = grad.T @ inputs if")],
    ),
    dict(
        grade_id="c10_fix_addmm",
        mistake="bias-summed-over-features",
        feedback="a shape the engine can sum to it",
        edits=[("grad_bias = grad if bias", "grad_bias = grad.sum(axis=1) if bias")],
    ),
    dict(
        grade_id="c10_fix_addmm",
        mistake="gradients-for-none-edges",
        feedback="None for each edge that is (None, 0)",
        edits=[(" if bias is not None else None", ""), (" if input_edge is not None else None", ""),
               (" if weight_edge is not None else None", "")],
    ),
    dict(
        grade_id="c10_fix_addmm",
        mistake="delegates-to-reference-addmm",
        feedback="does not exist while grading",
        source='''addmm_backward = F.AddmmBackward0.backward''',
    ),
]
