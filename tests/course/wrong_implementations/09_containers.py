"""Typical mistakes in chapter 9 (containers); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c09_sequential_getitem',
        mistake='slice-renumbered',
        feedback='a slice returns a new container of the same class, keeping the old keys',
        edits=[
            ("        return self.__class__(OrderedDict(list(self._modules.items())[idx]))",
             "        return self.__class__(*list(self._modules.values())[idx])"),
        ],
    ),
    dict(
        grade_id='c09_sequential_getitem',
        mistake='slice-copies-modules',
        feedback='holds the same module objects',
        source='''import copy

def sequential_getitem(self, idx):
    if isinstance(idx, slice):
        return self.__class__(OrderedDict(copy.deepcopy(list(self._modules.items())[idx])))
    size = len(self)
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return list(self._modules.values())[idx % size]''',
    ),
    dict(
        grade_id='c09_sequential_getitem',
        mistake='lookup-by-key',
        feedback='negative indices count from the end',
        source='''def sequential_getitem(self, idx):
    if isinstance(idx, slice):
        return self.__class__(OrderedDict(list(self._modules.items())[idx]))
    if not -len(self) <= idx < len(self):
        raise IndexError(f"index {idx} is out of range")
    return self._modules[str(idx)]''',
    ),
    dict(
        grade_id='c09_sequential_getitem',
        mistake='negative-range-unchecked',
        feedback="named[-4] on three modules must raise IndexError",
        edits=[
            ("    if not -size <= idx < size:\n"
             "        raise IndexError(f\"index {idx} is out of range\")\n"
             "    return list(self._modules.values())[idx % size]",
             "    if idx >= size:\n"
             "        raise IndexError(f\"index {idx} is out of range\")\n"
             "    return list(self._modules.values())[idx % size]"),
        ],
    ),
    dict(
        grade_id='c09_sequential_delitem',
        mistake='no-renumbering',
        feedback='renumber the keys after deleting',
        edits=[
            ("\n    self._modules = OrderedDict((str(i), module) for i, module in enumerate(self._modules.values()))", ""),
        ],
    ),
    dict(
        grade_id='c09_sequential_delitem',
        mistake='key-from-index',
        feedback='keys and modules left after del s[0:2]',
        source='''def sequential_delitem(self, idx):
    if isinstance(idx, slice):
        idx = idx.start
    delattr(self, str(idx % len(self)))
    self._modules = OrderedDict((str(i), module) for i, module in enumerate(self._modules.values()))''',
    ),
    dict(
        grade_id='c09_sequential_delitem',
        mistake='named-keys-looked-up-by-number',
        feedback='removes the module at that position and renumbers',
        source='''def sequential_delitem(self, idx):
    if isinstance(idx, slice):
        for key in list(self._modules.keys())[idx]:
            delattr(self, key)
    else:
        key = str(idx % len(self))
        if key in self._modules:
            delattr(self, key)
    self._modules = OrderedDict((str(i), module) for i, module in enumerate(self._modules.values()))''',
    ),
    dict(
        grade_id='c09_predict_keys',
        mistake='slice-renumbers-prediction',
        feedback='a slice keeps the old keys',
        edits=[('keys_of_slice = ["act", "decoder"]', 'keys_of_slice = ["0", "1"]')],
    ),
    dict(
        grade_id='c09_predict_keys',
        mistake='names-survive-deletion',
        feedback='the name \'decoder\' is gone',
        edits=[('decoder_still_an_attribute = False', 'decoder_still_an_attribute = True')],
    ),
    dict(
        grade_id='c09_predict_keys',
        mistake='deletion-keeps-names',
        feedback='a deletion renumbers every key, names included',
        edits=[('keys_after_del = ["0", "1"]', 'keys_after_del = ["act", "decoder"]')],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='folds-non-consecutive',
        feedback='only consecutive equal reprs fold',
        source='''def modulelist_repr(self):
    reprs = [repr(child) for child in self]
    if not reprs:
        return self._get_name() + "()"
    positions = {}
    for i, text in enumerate(reprs):
        positions.setdefault(text, []).append(i)
    lines = []
    for text, where in positions.items():
        start, end = where[0], where[-1]
        line = f"({start}): {text}" if start == end else f"({start}-{end}): {len(where)} x {text}"
        lines.append(_addindent(line, 2))
    return self._get_name() + "(\\n  " + "\\n  ".join(lines) + "\\n)"''',
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='no-addindent',
        feedback='nested indentation',
        edits=[("        lines.append(_addindent(line, 2))", "        lines.append(line)")],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='count-off-by-one',
        feedback='fold runs of consecutive equal reprs',
        edits=[("{end - start + 1} x", "{end - start} x")],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='empty-list-crash',
        feedback='an empty list prints Name()',
        edits=[('    if not reprs:\n        return self._get_name() + "()"\n', "")],
    ),
    dict(
        grade_id='c09_sequential_insert',
        mistake='shift-from-front',
        feedback='shifting from the front copies the same module',
        edits=[
            ("    for i in range(n, index, -1):\n        self._modules[str(i)] = self._modules[str(i - 1)]",
             "    for i in range(index, n):\n        self._modules[str(i + 1)] = self._modules[str(i)]"),
        ],
    ),
    dict(
        grade_id='c09_sequential_insert',
        mistake='negative-index-kept',
        feedback='a negative index counts from the end',
        edits=[("    if index < 0:\n        index += n\n", "")],
    ),
    dict(
        grade_id='c09_sequential_insert',
        mistake='insert-range-unchecked',
        feedback='Index out of range',
        edits=[("    if not -n <= index <= n:\n        raise IndexError(f\"Index out of range: {index}\")\n", "")],
    ),
    dict(
        grade_id='c09_sequential_insert',
        mistake='insert-type-unchecked',
        feedback='module should be of type',
        edits=[("    if not isinstance(module, nn.Module):\n"
                "        raise AssertionError(f\"module should be of type: {nn.Module}\")\n", "")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='parameter-rewrapped',
        feedback='an existing Parameter is kept by identity',
        edits=[("    if isinstance(value, np.ndarray) and not isinstance(value, nn.Parameter):\n",
                "    if isinstance(value, np.ndarray):\n")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='array-not-registered',
        feedback='a plain array becomes a Parameter, registered under its index string',
        edits=[("    if isinstance(value, np.ndarray) and not isinstance(value, nn.Parameter):\n"
                "        value = nn.Parameter(value)\n", "")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='plain-dict-unsorted',
        feedback="ParameterDict inserts a plain dict's keys sorted",
        edits=[("        for key, parameter in sorted(parameters.items()):",
                "        for key, parameter in parameters.items():")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='moduledict-sorted',
        feedback="ModuleDict keeps a plain dict's order",
        edits=[("        for key, module in modules.items():",
                "        for key, module in sorted(modules.items()):")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='ordered-input-sorted',
        feedback='order kept for ordered inputs',
        edits=[("    if isinstance(parameters, (OrderedDict, nn.ParameterDict)):\n"
                "        for key, parameter in parameters.items():\n"
                "            self[key] = parameter\n"
                "    elif isinstance(parameters, Mapping):\n"
                "        for key, parameter in sorted(parameters.items()):\n"
                "            self[key] = parameter\n"
                "    else:\n"
                "        update_from_pairs(self, parameters, \"ParameterDict\")",
                "    for key, parameter in sorted(dict(parameters).items()):\n"
                "        self[key] = parameter")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='pair-length-unchecked',
        feedback='has length 1; 2 is required',
        edits=[("        if len(pair) != 2:\n"
                "            raise ValueError(f\"{name} update sequence element #{j} has length {len(pair)}; 2 is required\")\n",
                "")],
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='size-grown-after-store',
        feedback='append grows _size, then self[new_index] = value',
        edits=[("    self._size += 1\n    self[new_index] = value\n",
                "    self[new_index] = value\n    self._size += 1\n")],
    ),
]
