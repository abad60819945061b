"""Typical mistakes in chapter 13 (the capstone); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c13_crafted',
        mistake='post-order-walk',
        feedback='named_modules of a crafted Sequential',
        edits=[
            ("    yield prefix, self\n",
             ""),
            ("            yield from child.named_modules(memo, prefix + (\".\" if prefix else \"\") + name, remove_duplicate)\n",
             "            yield from child.named_modules(memo, prefix + (\".\" if prefix else \"\") + name, remove_duplicate)\n"
             "    yield prefix, self\n"),
        ],
    ),
    dict(
        grade_id='c13_crafted',
        mistake='no-metadata',
        feedback='state_dict keys and metadata',
        edits=[
            ("    destination._metadata[prefix[:-1]] = {\"version\": self._version}\n",
             ""),
        ],
    ),
    dict(
        grade_id='c13_crafted',
        mistake='hooks-skipped',
        feedback='output with a forward hook',
        edits=[
            ("    if not (self._forward_pre_hooks or self._forward_hooks\n"
             "            or registry._global_forward_pre_hooks or registry._global_forward_hooks):\n"
             "        return self.forward(*args, **kwargs)\n",
             "    return self.forward(*args, **kwargs)\n"),
        ],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='no-zero-grad',
        feedback='losses of two epochs',
        edits=[
            ("        optimizer.zero_grad()\n",
             ""),
        ],
    ),
    dict(
        grade_id='c13_train_epoch',
        mistake='zero-grad-after-backward',
        feedback='losses of two epochs',
        edits=[
            ("        optimizer.zero_grad()\n",
             ""),
            ("        loss.backward()\n",
             "        loss.backward()\n        optimizer.zero_grad()\n"),
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
        grade_id='c13_crafted',
        mistake='delegates-to-reference-crafted',
        feedback='does not exist while grading',
        source=("named_modules = nn.Module.named_modules\ntrain = nn.Module.train\n"
                "_save_to_state_dict = nn.Module._save_to_state_dict\nstate_dict = nn.Module.state_dict\n"
                "load_state_dict = nn.Module.load_state_dict\n_call_impl = nn.Module._call_impl"),
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
]
