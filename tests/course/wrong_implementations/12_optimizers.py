"""Typical mistakes in chapter 12 (optimizers and the training loop); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id="c12_param_groups",
        mistake="norm-layers-decayed",
        feedback="a normalisation layer's parameters",
        edits=[('        if last == "bias" or isinstance(modules[owner], NORM_LAYERS):\n',
                '        if last == "bias":\n')],
    ),
    dict(
        grade_id="c12_param_groups",
        mistake="chosen-by-shape",
        feedback="chosen by name, not by shape",
        edits=[('        if last == "bias" or isinstance(modules[owner], NORM_LAYERS):\n',
                '        if param.ndim == 1:\n')],
    ),
    dict(
        grade_id="c12_param_groups",
        mistake="shared-parameters-twice",
        feedback="each parameter appears once",
        edits=[("    for name, param in model.named_parameters():\n",
                "    for name, param in model.named_parameters(remove_duplicate=False):\n"),
               ("    modules = dict(model.named_modules())\n",
                "    modules = dict(model.named_modules(remove_duplicate=False))\n")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="momentum-buffer-not-kept",
        feedback="kept in state[p] between steps",
        edits=[('                        state = self.state[p]\n'
                '                        if "momentum_buffer" not in state:\n'
                '                            state["momentum_buffer"] = np.array(g, copy=True)\n'
                '                        else:\n'
                '                            state["momentum_buffer"] *= group["momentum"]\n'
                '                            state["momentum_buffer"] += g\n'
                '                        g = state["momentum_buffer"]\n',
                '                        buffer = np.zeros_like(g)\n'
                '                        buffer = group["momentum"] * buffer + g\n'
                '                        g = buffer\n')],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="weight-decay-after-momentum",
        feedback="the decay goes into the gradient before the momentum buffer",
        edits=[('                    if group["weight_decay"] != 0:\n'
                '                        g = g + group["weight_decay"] * np.asarray(p)\n', ''),
               ('                    p -= group["lr"] * g\n',
                '                    p -= group["lr"] * (g + group["weight_decay"] * np.asarray(p))\n')],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="buffer-is-the-grad",
        feedback="must be a copy of the first gradient",
        edits=[('state["momentum_buffer"] = np.array(g, copy=True)', 'state["momentum_buffer"] = g')],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="none-grad-not-skipped",
        feedback="whose grad is None is skipped",
        edits=[("                    if p.grad is None:\n                        continue\n", "")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="none-grad-ends-the-group",
        feedback="the parameters after it in its group still step",
        edits=[("                    if p.grad is None:\n                        continue\n",
                "                    if p.grad is None:\n                        break\n")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="sgd-state-keyed-by-id",
        feedback="state[p] holds the momentum_buffer",
        edits=[("                        state = self.state[p]\n", "                        state = self.state[id(p)]\n")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="zero-grad-always-zeros",
        feedback="sets every grad to None by default",
        edits=[("                    if set_to_none:\n"
                "                        p.grad = None\n"
                "                    else:\n"
                "                        p.grad[...] = 0",
                "                    p.grad[...] = 0")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="sgd-zero-grad-times-zero",
        feedback="0 * inf is NaN",
        edits=[("                        p.grad[...] = 0", "                        p.grad *= 0")],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="sgd-step-outside-no-grad",
        feedback="under modulecraft.no_grad()",
        edits=[('        with modulecraft.no_grad():\n'
                '            for group in self.param_groups:\n'
                '                for p in group["params"]:\n'
                '                    if p.grad is None:\n'
                '                        continue\n'
                '                    g = p.grad\n'
                '                    if group["weight_decay"] != 0:\n'
                '                        g = g + group["weight_decay"] * np.asarray(p)\n'
                '                    if group["momentum"] != 0:\n'
                '                        state = self.state[p]\n'
                '                        if "momentum_buffer" not in state:\n'
                '                            state["momentum_buffer"] = np.array(g, copy=True)\n'
                '                        else:\n'
                '                            state["momentum_buffer"] *= group["momentum"]\n'
                '                            state["momentum_buffer"] += g\n'
                '                        g = state["momentum_buffer"]\n'
                '                    p -= group["lr"] * g\n',
                '        for group in self.param_groups:\n'
                '            for p in group["params"]:\n'
                '                if p.grad is None:\n'
                '                    continue\n'
                '                g = p.grad\n'
                '                if group["weight_decay"] != 0:\n'
                '                    g = g + group["weight_decay"] * np.asarray(p)\n'
                '                if group["momentum"] != 0:\n'
                '                    state = self.state[p]\n'
                '                    if "momentum_buffer" not in state:\n'
                '                        state["momentum_buffer"] = np.array(g, copy=True)\n'
                '                    else:\n'
                '                        state["momentum_buffer"] *= group["momentum"]\n'
                '                        state["momentum_buffer"] += g\n'
                '                    g = state["momentum_buffer"]\n'
                '                p -= group["lr"] * g\n')],
    ),
    dict(
        grade_id="c12_sgd",
        mistake="zero-grad-new-array",
        feedback="fills the same grad arrays with zeros",
        edits=[("                        p.grad[...] = 0", "                        p.grad = np.zeros_like(p.grad)")],
    ),
    # The prediction earns no points (a constant answer cannot be graded securely): its tests check the form only.
    dict(
        grade_id="c12_predict_indices",
        mistake="one-list-of-params",
        feedback="your prediction has the form",
        edits=[('"params": [[0, 1], [2, 3, 4, 5]]', '"params": [0, 1, 2, 3, 4, 5]')],
    ),
    dict(
        grade_id="c12_predict_indices",
        mistake="indices-as-names",
        feedback="your prediction holds lists of integers",
        edits=[('"state": [0, 1, 2, 3, 4]}', '"state": ["0.weight", "3.weight", "0.bias", "1.weight", "1.bias"]}')],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="indices-restart-per-group-in-state-dict",
        feedback="numbered across the groups",
        edits=[("    index_of = {}\n", ""),
               ("    for group in optimizer.param_groups:\n",
                "    for group in optimizer.param_groups:\n        index_of = {}\n"),
               ("    state = {index_of[id(p)]: value for p, value in optimizer.state.items()}\n",
                "    state = {index: optimizer.state[p] for group in optimizer.param_groups\n"
                "             for index, p in enumerate(group[\"params\"]) if p in optimizer.state}\n")],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="state-keyed-by-id",
        feedback="keyed by index, not by id",
        edits=[("    state = {index_of[id(p)]: value for p, value in optimizer.state.items()}\n",
                "    state = {id(p): value for p, value in optimizer.state.items()}\n")],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="groups-overwritten-with-indices",
        feedback="saving never changes the optimizer",
        edits=[('        packed = {key: value for key, value in group.items() if key != "params"}\n',
                "        packed = group\n")],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="group-options-dropped",
        feedback="keeps all its options",
        edits=[('        packed = {key: value for key, value in group.items() if key != "params"}\n',
                "        packed = {}\n")],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="state-copied",
        feedback="not a copy",
        edits=[("    state = {index_of[id(p)]: value for p, value in optimizer.state.items()}\n",
                "    state = {index_of[id(p)]: dict(value) for p, value in optimizer.state.items()}\n")],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-no-bias-correction",
        feedback="bias correction",
        edits=[('                    m_hat = state["exp_avg"] / (1 - beta1**t)\n'
                '                    v_hat = state["exp_avg_sq"] / (1 - beta2**t)\n',
                '                    m_hat = state["exp_avg"]\n'
                '                    v_hat = state["exp_avg_sq"]\n')],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-decay-added-to-the-update",
        feedback="the decay enters the gradient before the averages",
        edits=[('                    if group["weight_decay"] != 0:\n'
                '                        g = g + group["weight_decay"] * np.asarray(p)\n', ''),
               ('                    p -= group["lr"] * m_hat / (np.sqrt(v_hat) + group["eps"])\n',
                '                    p -= group["lr"] * (m_hat / (np.sqrt(v_hat) + group["eps"])\n'
                '                                        + group["weight_decay"] * np.asarray(p))\n')],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-one-step-count-per-optimizer",
        feedback="not once per optimizer.step()",
        edits=[('        loss = closure() if closure is not None else None\n        with modulecraft.no_grad():\n'
                '            for group in self.param_groups:\n                beta1, beta2 = group["betas"]\n',
                '        loss = closure() if closure is not None else None\n'
                '        self.steps_taken = getattr(self, "steps_taken", 0) + 1\n'
                '        with modulecraft.no_grad():\n'
                '            for group in self.param_groups:\n                beta1, beta2 = group["betas"]\n'),
               ('                    state["step"] += 1\n                    t = float(state["step"])\n'
                '                    state["exp_avg"] *= beta1\n                    state["exp_avg"] += (1 - beta1) * g\n',
                '                    state["step"] = np.array(self.steps_taken, dtype=np.float32)\n'
                '                    t = float(state["step"])\n'
                '                    state["exp_avg"] *= beta1\n                    state["exp_avg"] += (1 - beta1) * g\n')],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-eps-inside-the-root",
        feedback="eps is added to the square root of the bias-corrected average",
        edits=[('np.sqrt(v_hat) + group["eps"]', 'np.sqrt(v_hat + group["eps"])')],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-eps-before-bias-correction",
        feedback="not before the bias correction",
        edits=[('                    p -= group["lr"] * m_hat / (np.sqrt(v_hat) + group["eps"])\n',
                '                    p -= group["lr"] * m_hat / ((np.sqrt(state["exp_avg_sq"]) + group["eps"])\n'
                '                                                / np.sqrt(1 - beta2**t))\n')],
    ),
    dict(
        grade_id="c12_adam",
        mistake="adam-state-named-m-and-v",
        feedback="named as torch's",
        edits=[('                        state["exp_avg"] = np.zeros_like(np.asarray(p))\n'
                '                        state["exp_avg_sq"] = np.zeros_like(np.asarray(p))\n'
                '                    state["step"] += 1\n'
                '                    t = float(state["step"])\n'
                '                    state["exp_avg"] *= beta1\n'
                '                    state["exp_avg"] += (1 - beta1) * g\n'
                '                    state["exp_avg_sq"] *= beta2\n'
                '                    state["exp_avg_sq"] += (1 - beta2) * g * g\n'
                '                    m_hat = state["exp_avg"] / (1 - beta1**t)\n'
                '                    v_hat = state["exp_avg_sq"] / (1 - beta2**t)\n'
                '                    p -= group["lr"] * m_hat / (np.sqrt(v_hat) + group["eps"])\n',
                '                        state["m"] = np.zeros_like(np.asarray(p))\n'
                '                        state["v"] = np.zeros_like(np.asarray(p))\n'
                '                    state["step"] += 1\n'
                '                    t = float(state["step"])\n'
                '                    state["m"] *= beta1\n'
                '                    state["m"] += (1 - beta1) * g\n'
                '                    state["v"] *= beta2\n'
                '                    state["v"] += (1 - beta2) * g * g\n'
                '                    m_hat = state["m"] / (1 - beta1**t)\n'
                '                    v_hat = state["v"] / (1 - beta2**t)\n'
                '                    p -= group["lr"] * m_hat / (np.sqrt(v_hat) + group["eps"])\n')],
    ),
    dict(
        grade_id="c12_adamw",
        mistake="adamw-decay-in-the-gradient",
        feedback="does not enter the gradient",
        edits=[("                    p *= 1 - group[\"lr\"] * group[\"weight_decay\"]\n", ""),
               ("                    state[\"exp_avg\"] += (1 - beta1) * p.grad\n"
                "                    state[\"exp_avg_sq\"] *= beta2\n"
                "                    state[\"exp_avg_sq\"] += (1 - beta2) * p.grad * p.grad\n",
                "                    g = p.grad + group[\"weight_decay\"] * np.asarray(p)\n"
                "                    state[\"exp_avg\"] += (1 - beta1) * g\n"
                "                    state[\"exp_avg_sq\"] *= beta2\n"
                "                    state[\"exp_avg_sq\"] += (1 - beta2) * g * g\n")],
    ),
    dict(
        grade_id="c12_adamw",
        mistake="adamw-eps-inside-the-root",
        feedback="a misplaced eps hides",
        edits=[('np.sqrt(v_hat) + group["eps"]', 'np.sqrt(v_hat + group["eps"])')],
    ),
    dict(
        grade_id="c12_adamw",
        mistake="adamw-shrinks-parameters-without-gradient",
        feedback="is not shrunk either",
        edits=[("                for p in group[\"params\"]:\n"
                "                    if p.grad is None:\n"
                "                        continue\n"
                "                    p *= 1 - group[\"lr\"] * group[\"weight_decay\"]\n",
                "                for p in group[\"params\"]:\n"
                "                    p *= 1 - group[\"lr\"] * group[\"weight_decay\"]\n"
                "                    if p.grad is None:\n"
                "                        continue\n")],
    ),
    dict(
        grade_id="c12_adamw",
        mistake="adamw-default-decay-of-adam",
        feedback="default weight_decay, 0.01",
        edits=[("    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):\n"
                "        super().__init__(params, lr=lr",
                "    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):\n"
                "        super().__init__(params, lr=lr")],
    ),
    # Solutions that hand the exercise back to the reference: while grading, the reference's own is gone.
    dict(
        grade_id="c12_param_groups",
        mistake="delegates-to-reference-param-groups",
        feedback="does not exist while grading",
        source="NORM_LAYERS = (nn.BatchNorm1d,)\nfrom modulecraft.exercises.c12_optimizers import param_groups",
    ),
    dict(
        grade_id="c12_sgd",
        mistake="delegates-to-reference-sgd",
        feedback="does not exist while grading",
        source="class SGD(optim.SGD):\n    pass",
    ),
    dict(  # a step of its own, the gradients zeroed by the base class's zero_grad (torch's SGD inherits it)
        grade_id="c12_sgd",
        mistake="delegates-to-reference-zero-grad",
        feedback="does not exist while grading",
        edits=[("        for group in self.param_groups:\n"
                "            for p in group[\"params\"]:\n"
                "                if p.grad is not None:\n"
                "                    if set_to_none:\n"
                "                        p.grad = None\n"
                "                    else:\n"
                "                        p.grad[...] = 0",
                "        super().zero_grad(set_to_none)")],
    ),
    dict(
        grade_id="c12_state_dict",
        mistake="delegates-to-reference-state-dict",
        feedback="does not exist while grading",
        source="optimizer_state_dict = optim.Optimizer.state_dict",
    ),
    dict(
        grade_id="c12_adam",
        mistake="delegates-to-reference-adam",
        feedback="does not exist while grading",
        source="class Adam(optim.Adam):\n    pass",
    ),
    dict(
        grade_id="c12_adamw",
        mistake="delegates-to-reference-adamw",
        feedback="does not exist while grading",
        source="class AdamW(optim.AdamW):\n    pass",
    ),
]
