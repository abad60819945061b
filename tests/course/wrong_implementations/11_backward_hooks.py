"""Typical mistakes in chapter 11 (gradients and backward hooks); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c11_zero_grad",
        mistake="zero-grad-default-zeros",
        feedback="set_to_none=True is the default",
        edits=[("def zero_grad(self, set_to_none=True):", "def zero_grad(self, set_to_none=False):")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="zero-grad-new-array",
        feedback="same array as before?",
        edits=[("                p.grad[...] = 0\n", "                p.grad = np.zeros_like(p.grad)\n")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="set-to-none-ignored",
        feedback="zero_grad(set_to_none=False)",
        edits=[("            if set_to_none:\n"
                "                p.grad = None\n"
                "            else:\n"
                "                p.grad[...] = 0\n",
                "            p.grad = None\n")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="zeros-for-a-missing-grad",
        feedback="must leave a grad that is None as None",
        edits=[("        if p.grad is not None:\n"
                "            if set_to_none:\n"
                "                p.grad = None\n"
                "            else:\n"
                "                p.grad[...] = 0\n",
                "        if set_to_none:\n"
                "            p.grad = None\n"
                "        elif p.grad is None:\n"
                "            p.grad = np.zeros(p.shape, dtype=p.dtype)\n"
                "        else:\n"
                "            p.grad[...] = 0\n")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="zero-grad-times-zero",
        feedback="multiplying by 0 keeps NaN",
        edits=[("                p.grad[...] = 0\n", "                p.grad *= 0\n")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="requires-grad-not-returning-self",
        feedback="returns self?",
        edits=[("    return self", "    return None")],
    ),
    dict(
        grade_id="c11_zero_grad",
        mistake="requires-grad-own-parameters-only",
        feedback="requires_grad_(False) on the parent",
        edits=[("    for p in self.parameters():\n        p.requires_grad_(requires_grad)\n",
                "    for p in self.parameters(recurse=False):\n        p.requires_grad_(requires_grad)\n")],
    ),
    # The prediction earns no points (a constant answer cannot be graded securely): its tests check the form only.
    dict(
        grade_id="c11_predict_order",
        mistake="label-missing",
        feedback="prediction holds each of the seven labels once",
        edits=[('"bpre root", "bwd 1", "bwd 0", "bwd root"]', '"bpre root", "bwd 1", "bwd 0"]')],
    ),
    dict(
        grade_id="c11_predict_order",
        mistake="labels-as-one-string",
        feedback="prediction is a list of seven strings",
        source='prediction = "fwd 0, fwd 1, fwd root, bpre root, bwd 1, bwd 0, bwd root"',
    ),
    dict(
        grade_id="c11_hook_function",
        mistake="not-marked-non-differentiable",
        feedback="marks those that do not require grad non-differentiable",
        edits=[("        ctx.mark_non_differentiable(*[arg for arg, needed in zip(args, ctx.needs_input_grad) "
                "if not needed])\n", "")],
    ),
    dict(
        grade_id="c11_hook_function",
        mistake="requires-grad-of-a-plain-array",
        feedback="a plain numpy array has no requires_grad",
        edits=[("ctx.mark_non_differentiable(*[arg for arg, needed in zip(args, ctx.needs_input_grad) if not needed])",
                "ctx.mark_non_differentiable(*[arg for arg in args if not arg.requires_grad])")],
    ),
    dict(
        grade_id="c11_hook_function",
        mistake="returns-copies",
        feedback="not copies",
        edits=[("        ctx.mark_non_differentiable(*[arg for arg, needed in zip(args, ctx.needs_input_grad) "
                "if not needed])\n        return args\n",
                "        copies = tuple(arg.copy() for arg in args)\n"
                "        ctx.mark_non_differentiable(*[copy for copy, needed in zip(copies, ctx.needs_input_grad) "
                "if not needed])\n        return copies\n")],
    ),
    dict(
        grade_id="c11_hook_function",
        mistake="none-for-inputs-without-grad",
        feedback="never None",
        edits=[("        return grads",
                "        return tuple(grad if needed else None for grad, needed in zip(grads, ctx.needs_input_grad))")],
    ),
    # Apply then returns the tensor itself, not a tuple of one: Exercise 3's other checks pass, and BackwardHook
    # fails in Exercises 4 and 5 with torch's "Please open an issue", which their feedback must not blame on them.
    dict(
        grade_id="c11_hook_function",
        mistake="single-output-not-a-tuple",
        feedback="forward returns a tuple of its inputs even when there is one",
        dependents_feedback="fix BackwardHookFunction first",
        edits=[("        return args\n", "        return args[0] if len(args) == 1 else args\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="keyword-arguments-dropped",
        feedback="keyword arguments reach forward as they came",
        edits=[("    result = self.forward(*args, **kwargs)\n", "    result = self.forward(*args)\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="output-wrapped-before-forward-hooks",
        feedback="wrap the output after the forward hooks",
        edits=[("    result = run_forward_hooks(self, args, result)\n"
                "    if backward_hook is not None:\n"
                "        result = backward_hook.setup_output_hook(result)\n",
                "    if backward_hook is not None:\n"
                "        result = backward_hook.setup_output_hook(result)\n"
                "    result = run_forward_hooks(self, args, result)\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="inputs-wrapped-before-forward-pre-hooks",
        feedback="wrap the inputs after the forward pre-hooks",
        edits=[("    args = run_forward_pre_hooks(self, args)\n", ""),
               ("        args = backward_hook.setup_input_hook(args)\n",
                "        args = backward_hook.setup_input_hook(args)\n    args = run_forward_pre_hooks(self, args)\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="wrapped-inputs-not-used",
        feedback="wrap the inputs (setup_input_hook) before forward",
        edits=[("        args = backward_hook.setup_input_hook(args)\n", "        backward_hook.setup_input_hook(args)\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="wrapped-output-not-returned",
        feedback="the output (setup_output_hook) after",
        edits=[("        result = backward_hook.setup_output_hook(result)\n",
                "        backward_hook.setup_output_hook(result)\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="global-backward-hooks-ignored",
        feedback="A global full backward hook must fire too",
        edits=[("    full_backward_hooks, non_full_backward_hooks = self._get_backward_hooks()\n",
                "    own = list(self._backward_hooks.values())\n"
                "    full_backward_hooks = own if self._is_full_backward_hook else []\n"
                "    non_full_backward_hooks = own if self._is_full_backward_hook is False else []\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="pre-hooks-alone-not-wired",
        feedback="a BackwardHook is needed for backward pre-hooks even without full hooks",
        edits=[("    if full_backward_hooks or backward_pre_hooks:\n", "    if full_backward_hooks:\n")],
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="non-full-hooks-forgotten",
        feedback="A non-full backward hook (register_backward_hook) must fire",
        edits=[("    if non_full_backward_hooks:\n"
                "        self._register_non_full_backward_hooks(non_full_backward_hooks, args, result)\n", "")],
    ),
    dict(
        grade_id="c11_watch_gradients",
        mistake="late-binding-layer-name",
        feedback="bind each layer's name when the hook is made",
        edits=[("        def log_norm(module, grad_input, grad_output, name=name):\n",
                "        def log_norm(module, grad_input, grad_output):\n")],
    ),
    dict(
        grade_id="c11_watch_gradients",
        mistake="clipped-gradient-not-returned",
        feedback="a tensor hook replaces the gradient only by returning it",
        edits=[("        return grad * (max_norm / norm) if norm > max_norm else grad\n",
                "        if norm > max_norm:\n            grad = grad * (max_norm / norm)\n")],
    ),
    dict(
        grade_id="c11_watch_gradients",
        mistake="element-wise-clip",
        feedback="norms of every parameter's .grad after clipping to",
        edits=[("        return grad * (max_norm / norm) if norm > max_norm else grad\n",
                "        return np.clip(grad, -max_norm, max_norm)\n")],
    ),
    dict(
        grade_id="c11_watch_gradients",
        mistake="logging-handles-dropped",
        feedback="Removing the returned handles must stop the logging hooks",
        edits=[("        handles.append(module.register_full_backward_hook(log_norm))\n",
                "        module.register_full_backward_hook(log_norm)\n")],
    ),
    # Solutions that hand the exercise back to the reference: while grading, the reference's own is gone.
    dict(
        grade_id="c11_zero_grad",
        mistake="delegates-to-reference-zero-grad",
        feedback="does not exist while grading",
        source="zero_grad = nn.Module.zero_grad\nrequires_grad_ = nn.Module.requires_grad_",
    ),
    dict(
        grade_id="c11_hook_function",
        mistake="delegates-to-reference-hook-function",
        feedback="does not exist while grading",
        source="class BackwardHookFunction(_functions.BackwardHookFunction):\n    pass",
    ),
    dict(
        grade_id="c11_call_impl",
        mistake="delegates-to-reference-call-impl",
        feedback="does not exist while grading",
        source="call_impl = nn.Module._call_impl",
    ),
    dict(
        grade_id="c11_watch_gradients",
        mistake="delegates-to-reference-watcher",
        feedback="does not exist while grading",
        source="from modulecraft.exercises.c11_backward_hooks import watch_gradients",
    ),
]
