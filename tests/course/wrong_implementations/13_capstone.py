"""Typical mistakes in chapter 13 (the capstone); format in README.md."""

# state_dict saving the children's entries before the module's own (the own save moved after the loop)
CHILDREN_FIRST = [
    ("    self._save_to_state_dict(destination, prefix, keep_vars)\n    for name, child in self._modules.items():\n",
     "    for name, child in self._modules.items():\n"),
    ("keep_vars=keep_vars)\n    for hook in self._state_dict_hooks.values():\n",
     "keep_vars=keep_vars)\n    self._save_to_state_dict(destination, prefix, keep_vars)\n"
     "    for hook in self._state_dict_hooks.values():\n"),
]

WRONG_IMPLEMENTATIONS = [
    # 13.1: one mechanism each (the chapters' slips, pasted)
    dict(
        grade_id='c13_mine_modules',
        mistake='getattr-misses-buffers',
        feedback="has no attribute 'running_mean'",
        edits=[('    for container in ("_parameters", "_buffers", "_modules"):\n',
                '    for container in ("_parameters", "_modules"):\n')],
    ),
    dict(
        grade_id='c13_mine_modules',
        mistake='persistent-inverted',
        feedback='a non-persistent buffer',
        edits=[("    if persistent:\n        self._non_persistent_buffers_set.discard(name)\n",
                "    if not persistent:\n        self._non_persistent_buffers_set.discard(name)\n")],
    ),
    dict(
        grade_id='c13_mine_walks',
        mistake='post-order-walk',
        feedback='named_modules and named_parameters',
        edits=[("    yield prefix, self\n    for name, child in self._modules.items():\n",
                "    for name, child in self._modules.items():\n"),
               ("        yield from child.named_modules(memo, child_prefix, remove_duplicate)\n",
                "        yield from child.named_modules(memo, child_prefix, remove_duplicate)\n"
                "    yield prefix, self\n")],
    ),
    dict(
        grade_id='c13_mine_walks',
        mistake='train-not-recursive',
        feedback='the mode of every module',
        edits=[("    for child in self.children():\n        child.train(mode)\n", "")],
    ),
    dict(
        grade_id='c13_mine_forward_hooks',
        mistake='hooks-skipped',
        feedback='a pre-hook scaling its input',
        edits=[("    if not (self._forward_pre_hooks or self._forward_hooks or global_pre or global_post):\n"
                "        return self.forward(*args, **kwargs)\n", "    return self.forward(*args, **kwargs)\n")],
    ),
    dict(
        grade_id='c13_mine_forward_hooks',
        mistake='hook-result-ignored',
        feedback="a hook's result replaces the output",
        edits=[("            if result is not None:\n                output = result\n        return output\n",
                "        return output\n")],
    ),
    dict(
        grade_id='c13_mine_state_dict',
        mistake='no-metadata',
        feedback='_metadata',
        edits=[('    destination._metadata[prefix[:-1]] = local_metadata\n', "")],
    ),
    dict(
        grade_id='c13_mine_state_dict',
        mistake='children-first',
        feedback='own entries come first',
        edits=[*CHILDREN_FIRST],
    ),
    dict(
        grade_id='c13_mine_lazy',
        mistake='materialize-keeps-class',
        feedback='a lazy model after its first call',
        edits=[("    self.__class__ = self.cls_to_become\n\n\ndef _infer_parameters", "\n\ndef _infer_parameters")],
    ),
    dict(
        grade_id='c13_mine_lazy',
        mistake='no-reset-parameters',
        feedback='reset_parameters',
        edits=[("        self.reset_parameters()\n", "")],
    ),
    dict(
        grade_id='c13_mine_recording',
        mistake='records-under-no-grad',
        feedback='under no_grad',
        edits=[("    if not is_grad_enabled():\n        return False\n", "")],
    ),
    dict(
        grade_id='c13_mine_recording',
        mistake='edges-skip-grad-fn',
        feedback='autograd recording (10)',  # seed 220: the losses agree, the graph check (its own hint) fails first
        edits=[("        elif x.grad_fn is not None:\n            found.append((x.grad_fn, x._output_nr))\n", "")],
    ),
    dict(
        grade_id='c13_mine_recording',
        mistake='recording-first-value-only',
        feedback='_recording looks at every value',
        edits=[("    return any(isinstance(value, Tensor) and value.requires_grad for value in values)\n",
                "    return isinstance(values[0], Tensor) and values[0].requires_grad\n")],
    ),
    dict(
        grade_id='c13_mine_formulas',
        mistake='transpose-not-transposed',
        feedback='the transpose of its weight',
        edits=[("def t_backward(self, grad):\n    return (grad.T,)\n", "def t_backward(self, grad):\n    return (grad,)\n")],
    ),
    # 13.1, Exercise 9: batch norm's backward, derived (slips of the derivation)
    dict(
        grade_id='c13_mine_batch_norm',
        mistake='mean-held-constant',
        feedback='depend on every input of that channel',
        edits=[("scale * (grad_x_hat - grad_x_hat.mean(axis=axes, keepdims=True)\n", "scale * (grad_x_hat\n")],
    ),
    dict(
        grade_id='c13_mine_batch_norm',
        mistake='variance-held-constant',
        feedback='depend on every input of that channel',
        edits=[("keepdims=True)\n                                  - x_hat * (grad_x_hat * x_hat).mean(axis=axes, "
                "keepdims=True))\n", "keepdims=True))\n")],
    ),
    dict(
        grade_id='c13_mine_batch_norm',
        mistake='unbiased-variance',
        feedback='biased batch variance (divided by N)',
        edits=[("- x_hat * (grad_x_hat * x_hat).mean(axis=axes, keepdims=True))\n",
                "- x_hat * (grad_x_hat * x_hat).sum(axis=axes, keepdims=True) / (len(x) - 1))\n")],
    ),
    dict(
        grade_id='c13_mine_batch_norm',
        mistake='eps-outside-sqrt',
        feedback='1 / sqrt(running_var + eps)',
        edits=[("1 / np.sqrt(running_var + self.eps)", "1 / (np.sqrt(running_var) + self.eps)")],
    ),
    dict(
        grade_id='c13_mine_batch_norm',
        mistake='weight-grad-of-raw-input',
        feedback='the normalised input',
        edits=[("(grad * x_hat).sum(axis=axes)", "(grad * x).sum(axis=axes)")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='zero-grad-multiplies-by-zero',
        feedback='multiplying by 0 keeps inf and nan',
        edits=[("                p.grad[...] = 0", "                p.grad *= 0")],
    ),
    dict(
        grade_id='c13_mine_engine',
        mistake='walk-compares-nodes',
        feedback="not supported between instances",
        dependents_feedback="Raised in your `_walk`",
        edits=[("(-node._sequence_nr, next(tickets), node)", "(-node._sequence_nr, node)"),
               ("node = heapq.heappop(ready)[2]", "node = heapq.heappop(ready)[1]"),
               ("(-following._sequence_nr, next(tickets), following)", "(-following._sequence_nr, following)")],
    ),
    dict(
        grade_id='c13_mine_engine',
        mistake='grad-overwritten',
        feedback='without zero_grad',
        edits=[("    if variable._grad is None:\n", "    if True:\n")],
    ),
    dict(
        grade_id='c13_mine_engine',
        mistake='counted-once',
        feedback='used twice',
        edits=[("            dependencies[following] = dependencies.get(following, 0) + 1\n",
                "            dependencies[following] = 1\n")],
    ),
    dict(
        grade_id='c13_mine_engine',
        mistake='walk-never-frees',
        feedback='a second backward through the same graph',
        edits=[("        if not retain_graph:\n            node.release_saved()\n", "")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='hook-function-marks-nothing',
        feedback='they get zeros in grad_input',
        edits=[("        ctx.mark_non_differentiable(*[arg for arg, needed in zip(args, ctx.needs_input_grad) if not needed])\n",
                "")],
    ),
    dict(
        grade_id='c13_mine_formulas',
        mistake='validate-never-sums',
        feedback='gradients of the cross-entropy',
        edits=[("                grad = unbroadcast(grad, shape)\n", "")],
    ),
    dict(
        grade_id='c13_mine_formulas',
        mistake='relu-by-gradient-sign',
        feedback='gradients of the cross-entropy',
        edits=[("    return (grad * (out > 0),)\n", "    return (grad * (grad > 0),)\n")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='output-not-wrapped',
        feedback='what the hooks saw at each step',
        edits=[("    if backward_hook is not None:\n        result = backward_hook.setup_output_hook(result)\n", "")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='zero-grad-zeros-instead-of-none',
        feedback='after model.zero_grad()',
        edits=[("            if set_to_none:\n                p.grad = None\n            else:\n                p.grad[...] = 0",
                "            p.grad[...] = 0")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='zero-grad-skips-children',
        feedback='after model.zero_grad()',
        edits=[("def zero_grad(self, set_to_none=True):\n    for p in self.parameters():\n",
                "def zero_grad(self, set_to_none=True):\n    for p in self.parameters(recurse=False):\n")],
    ),
    dict(
        grade_id='c13_mine_backward_hooks',
        mistake='pre-hooks-dropped',
        feedback='backward pre-hook',
        edits=[("BackwardHook(self, full_backward_hooks, backward_pre_hooks)",
                "BackwardHook(self, full_backward_hooks, [])")],
    ),
    dict(
        grade_id='c13_mine_optimizer',
        mistake='momentum-ignored',
        feedback='after SGD steps',
        edits=[("                        g = state[\"momentum_buffer\"]\n", "")],
    ),
    dict(
        grade_id='c13_mine_optimizer',
        mistake='stops-at-missing-grad',
        feedback='frozen',
        edits=[("                        continue\n                    g = p.grad\n",
                "                        break\n                    g = p.grad\n")],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='no-zero-grad',
        feedback='losses of two epochs',
        edits=[
            ("        model.zero_grad()\n",
             ""),
        ],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='zero-grad-after-backward',
        feedback='losses of two epochs',
        edits=[
            ("        model.zero_grad()\n",
             ""),
            ("        loss.backward()\n",
             "        loss.backward()\n        model.zero_grad()\n"),
        ],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='no-train-mode',
        feedback='training mode after train_epoch',
        edits=[
            ("    model.train()\n",
             ""),
        ],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='not-shuffled',
        feedback='batches of the seeded permutation',
        edits=[
            ("    order = np.random.default_rng(seed).permutation(len(x))\n",
             "    order = np.arange(len(x))\n"),
        ],
    ),
    dict(
        grade_id='c13_accuracy',
        mistake='no-eval',
        feedback='running statistics changed by accuracy',
        edits=[
            ("    model.eval()\n",
             ""),
        ],
    ),
    dict(
        grade_id='c13_accuracy',
        mistake='eval-not-called',
        feedback='running statistics changed by accuracy',
        edits=[
            ("    model.eval()\n",
             "    model.eval\n"),
        ],
    ),
    dict(
        grade_id='c13_accuracy',
        mistake='graph-recorded',
        feedback='a graph was recorded',
        edits=[
            ("    with modulecraft.no_grad():\n        logits = model(x)\n",
             "    logits = model(x)\n"),
        ],
    ),
    # The prediction earns no points (a constant answer cannot be graded securely): its tests check the form only.
    dict(
        grade_id='c13_predict_hooks',
        mistake='order-as-one-string',
        feedback="your prediction of the hooks' order is a list",
        edits=[('hook_order = ["forward 0", "forward 1", "forward 2", "forward 3", "backward 3", "backward 0"]',
                'hook_order = "forward 0, forward 1, forward 2, forward 3, backward 3, backward 0"')],
    ),
    dict(
        grade_id='c13_predict_hooks',
        mistake='grad-input-not-a-tuple',
        feedback="first_layer_grad_input is a tuple",
        edits=[("first_layer_grad_input = (None,)", "first_layer_grad_input = None")],
    ),
    dict(
        grade_id='c13_statistics',
        mistake='late-binding',
        feedback='keys and lengths of stats after one step',
        edits=[
            ("        def forward_hook(module, args, output, record=record):\n",
             "        def forward_hook(module, args, output):\n"),
        ],
    ),
    dict(
        grade_id='c13_statistics',
        mistake='non-full-backward-hook',
        feedback='need full backward hooks',
        edits=[
            ("            handles.append(layer.register_full_backward_hook(backward_hook))\n",
             "            handles.append(layer.register_backward_hook(backward_hook))\n"),
        ],
    ),
    dict(
        grade_id='c13_statistics',
        mistake='grad-input-norm',
        feedback='one training step with the statistics hooks',
        edits=[
            ("np.linalg.norm(grad_output[0])", "np.linalg.norm(grad_input[0])"),
        ],
    ),
    dict(
        grade_id='c13_statistics',
        mistake='input-statistics',
        feedback="mean of the ReLU's output",
        edits=[
            ('            record["mean"].append(float(output.mean()))\n'
             '            record["std"].append(float(output.std()))\n',
             '            record["mean"].append(float(args[0].mean()))\n'
             '            record["std"].append(float(args[0].std()))\n'),
        ],
    ),
    dict(
        grade_id='c13_statistics',
        mistake='backward-handles-dropped',
        feedback='handles of all six hooks',
        edits=[
            ("            handles.append(layer.register_full_backward_hook(backward_hook))\n",
             "            layer.register_full_backward_hook(backward_hook)\n"),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='optimizer-state-not-loaded',
        feedback='losses of three more steps',
        edits=[
            ('    optimizer.load_state_dict({"state": state, "param_groups": flat["param_groups"]})\n',
             ""),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='string-indices',
        feedback='losses of three more steps',
        edits=[
            ("            state.setdefault(int(index), {})[name] = value\n",
             "            state.setdefault(index, {})[name] = value\n"),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='parameters-only',
        feedback='Missing key(s) in state_dict',
        edits=[
            ('    modulecraft.save(model.state_dict(), folder / "model.safetensors")\n',
             '    modulecraft.save(dict(model.named_parameters()), folder / "model.safetensors")\n'),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='not-strict',
        feedback='must load the model strictly',
        edits=[
            ('    model.load_state_dict(modulecraft.load(folder / "model.safetensors"))\n',
             '    model.load_state_dict(modulecraft.load(folder / "model.safetensors"), strict=False)\n'),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='save-not-written',
        feedback='the files save_checkpoint(model, optimizer, folder) writes in folder',
        edits=[
            ('    folder = Path(folder)\n'
             '    modulecraft.save(model.state_dict(), folder / "model.safetensors")\n'
             '    state = optimizer.state_dict()\n'
             '    flat = {"param_groups": state["param_groups"]}\n'
             '    for index, values in state["state"].items():\n'
             '        for name, value in values.items():\n'
             '            flat[f"state.{index}.{name}"] = value\n'
             '    modulecraft.save(flat, folder / "optimizer.safetensors")\n',
             '    raise NotImplementedError\n'),
        ],
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='writes-nothing',
        feedback='the files save_checkpoint(model, optimizer, folder) writes in folder',
        edits=[
            ('    modulecraft.save(model.state_dict(), folder / "model.safetensors")\n', ""),
            ('    modulecraft.save(flat, folder / "optimizer.safetensors")\n', ""),
        ],
    ),
    # Solutions that hand the exercise back to the reference: while grading, the reference's own is gone.
    dict(
        grade_id='c13_mine_walks',
        mistake='delegates-to-reference-walks',
        feedback='maximum recursion depth',
        source=("def named_modules(self, *args, **kwargs):\n    return nn.Module.named_modules(self, *args, **kwargs)\n\n\n"
                "def _named_members(self, *args, **kwargs):\n    return nn.Module._named_members(self, *args, **kwargs)\n\n\n"
                "def named_children(self):\n    return nn.Module.named_children(self)\n\n\n"
                "def train(self, mode=True):\n    return nn.Module.train(self, mode)\n\n\n"
                "def eval(self):\n    return nn.Module.eval(self)"),
    ),
    dict(
        grade_id='c13_mine_optimizer',
        mistake='delegates-to-reference-optimizer',
        feedback='does not exist while grading',
        source=("class SGD(optim.SGD):\n    pass\n\n\n"
                "def optimizer_state_dict(optimizer):\n    return optim.Optimizer.state_dict(optimizer)"),
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='delegates-to-reference-train-epoch',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c13_capstone import train_epoch",
    ),
    dict(
        grade_id='c13_accuracy',
        mistake='delegates-to-reference-accuracy',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c13_capstone import accuracy",
    ),
    dict(
        grade_id='c13_statistics',
        mistake='delegates-to-reference-statistics',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c13_capstone import attach_statistics",
    ),
    dict(
        grade_id='c13_checkpoint',
        mistake='delegates-to-reference-checkpoint',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c13_capstone import save_checkpoint, load_checkpoint",
    ),
    # 13.8: the whole run
    dict(
        grade_id='c13_run_experiment',
        mistake='run-hooks-left-attached',
        feedback='removes every hook it attached',
        edits=[("    for handle in handles:\n        handle.remove()\n", "")],
    ),
    dict(
        grade_id='c13_run_experiment',
        mistake='run-checkpoint-before-training',
        feedback='losses of a lazy model resumed from the checkpoint',
        edits=[("    save_checkpoint(model, optimizer, folder)\n", ""),
               ("    stats, handles = attach_statistics(model)\n",
                "    stats, handles = attach_statistics(model)\n    save_checkpoint(model, optimizer, folder)\n")],
    ),
    dict(
        grade_id='c13_run_experiment',
        mistake='run-same-seed-every-epoch',
        feedback='train_epoch with seeds 0, 1',
        edits=[("nn.CrossEntropyLoss(), x, y, seed=epoch)]", "nn.CrossEntropyLoss(), x, y)]")],
    ),
    dict(
        grade_id='c13_run_experiment',
        mistake='run-statistics-after-training',
        feedback="the hooks record during the run's steps only",
        edits=[("    stats, handles = attach_statistics(model)\n", ""),
               ("    for handle in handles:\n", "    stats, handles = attach_statistics(model)\n    for handle in handles:\n")],
    ),
    dict(
        grade_id='c13_run_experiment',
        mistake='delegates-to-reference-run',
        feedback='does not exist while grading',
        source="from modulecraft.exercises.c13_capstone import run_experiment",
    ),
]
