"""Typical mistakes in chapter 9 (containers); format in README.md."""

WRONG_IMPLEMENTATIONS = [
    dict(
        grade_id='c09_sequential_indexing',
        mistake='slice-renumbered',
        feedback='a slice returns a new container of the same class, keeping the old keys',
        edits=[
            ("        return self.__class__(OrderedDict(list(self._modules.items())[idx]))",
             "        return self.__class__(*list(self._modules.values())[idx])"),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='slice-copies-modules',
        feedback='holds the same module objects',
        edits=[
            ("def sequential_getitem(self, idx):", "import copy\n\ndef sequential_getitem(self, idx):"),
            ("        return self.__class__(OrderedDict(list(self._modules.items())[idx]))",
             "        return self.__class__(OrderedDict(copy.deepcopy(list(self._modules.items())[idx])))"),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='lookup-by-key',
        feedback='negative indices count from the end',
        edits=[
            ("    size = len(self)\n"
             "    idx = operator.index(idx)\n"
             "    if not -size <= idx < size:\n"
             "        raise IndexError(f\"index {idx} is out of range\")\n"
             "    return list(self._modules.values())[idx % size]",
             "    if not -len(self) <= idx < len(self):\n"
             "        raise IndexError(f\"index {idx} is out of range\")\n"
             "    return self._modules[str(idx)]"),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='negative-range-unchecked',
        feedback='must raise IndexError (the range check)',
        edits=[
            ("    if not -size <= idx < size:\n", "    if idx >= size:\n"),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='no-renumbering',
        feedback='renumber the keys after deleting',
        edits=[
            ("\n    self._modules = OrderedDict((str(i), module) for i, module in enumerate(self._modules.values()))", ""),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='key-from-index',
        feedback='keys and modules left after del s[0:',
        edits=[
            ("    if isinstance(idx, slice):\n"
             "        for key in list(self._modules.keys())[idx]:\n"
             "            delattr(self, key)\n"
             "    else:\n"
             "        delattr(self, self._get_item_by_idx(self._modules.keys(), idx))\n",
             "    if isinstance(idx, slice):\n"
             "        idx = idx.start\n"
             "    delattr(self, str(idx % len(self)))\n"),
        ],
    ),
    dict(
        grade_id='c09_sequential_indexing',
        mistake='named-keys-looked-up-by-number',
        feedback='removes the module at that position and renumbers',
        edits=[
            ("        delattr(self, self._get_item_by_idx(self._modules.keys(), idx))\n",
             "        key = str(idx % len(self))\n"
             "        if key in self._modules:\n"
             "            delattr(self, key)\n"),
        ],
    ),
    # The prediction earns no points (a constant answer cannot be graded securely): its tests check the form only.
    dict(
        grade_id='c09_predict_keys',
        mistake='keys-as-one-string',
        feedback='are lists of strings',
        edits=[('keys_of_slice = ["act", "decoder"]', 'keys_of_slice = "act, decoder"')],
    ),
    dict(
        grade_id='c09_predict_keys',
        mistake='attribute-as-string',
        feedback='is True or False',
        edits=[('decoder_still_an_attribute = False', 'decoder_still_an_attribute = "no"')],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='append-key-off-by-one',
        feedback='append uses the key str(len(self))',
        edits=[("    self.add_module(str(len(self)), module)", "    self.add_module(str(len(self) + 1), module)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='append-returns-none',
        feedback='append returns self',
        edits=[("    self.add_module(str(len(self)), module)\n    return self\n",
                "    self.add_module(str(len(self)), module)\n")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='append-key-after-last-key',
        feedback='append uses the key str(len(self))',
        edits=[("    self.add_module(str(len(self)), module)",
                "    last = next(reversed(self._modules), \"-1\")\n"
                "    self.add_module(str(int(last) + 1), module)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='append-type-unchecked',
        feedback='is not a Module subclass',
        edits=[("    self.add_module(str(len(self)), module)", "    self._modules[str(len(self))] = module")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='extend-returns-none',
        feedback='extend returns self',
        edits=[("        self.append(module)\n    return self\n", "        self.append(module)\n")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='extend-by-index',
        feedback='extend accepts any iterable, a generator too',
        edits=[("    for module in modules:\n        self.append(module)",
                "    for i in range(len(modules)):\n        self.append(modules[i])")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-grows-self',
        feedback='leaves both operands unchanged',
        edits=[("    return nn.Sequential().extend(self).extend(other)", "    return self.extend(other)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-copies-modules',
        feedback='the same objects (no copies)',
        edits=[("def sequential_append(self, module):", "import copy\n\ndef sequential_append(self, module):"),
               ("    return nn.Sequential().extend(self).extend(other)",
                "    return nn.Sequential().extend(copy.deepcopy(list(self))).extend(copy.deepcopy(list(other)))")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-keeps-old-keys',
        feedback="keys that restart at '0'",
        edits=[("    return nn.Sequential().extend(self).extend(other)",
                "    return nn.Sequential(OrderedDict([*self._modules.items(), *other._modules.items()]))")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-order-swapped',
        feedback='the modules of self, then of other',
        edits=[("    return nn.Sequential().extend(self).extend(other)",
                "    return nn.Sequential().extend(other).extend(self)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-keeps-subclass',
        feedback='a plain nn.Sequential()',
        edits=[("    return nn.Sequential().extend(self).extend(other)",
                "    return self.__class__().extend(self).extend(other)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-returns-notimplemented',
        feedback='torch raises ValueError itself',
        source='''def sequential_append(self, module):
    self.add_module(str(len(self)), module)
    return self


def sequential_extend(self, modules):
    for module in modules:
        self.append(module)
    return self


def sequential_add(self, other):
    if not isinstance(other, nn.Sequential):
        return NotImplemented
    return nn.Sequential().extend(self).extend(other)


def sequential_iadd(self, other):
    if not isinstance(other, nn.Sequential):
        return NotImplemented
    offset = len(self)
    for i, module in enumerate(other):
        self.add_module(str(offset + i), module)
    return self''',
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='add-type-unchecked',
        feedback='add operator supports only objects of Sequential class',
        edits=[("    if not isinstance(other, nn.Sequential):\n"
                "        raise ValueError(f\"add operator supports only objects of Sequential class, but {type(other)} is given.\")\n"
                "    return nn.Sequential()",
                "    return nn.Sequential()")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='iadd-returns-new',
        feedback='Python binds the name to what __iadd__ returns',
        edits=[("    for i, module in enumerate(other):\n"
                "        self.add_module(str(offset + i), module)\n"
                "    return self",
                "    return nn.Sequential().extend(self).extend(other)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='iadd-returns-none',
        feedback='+= must return self',
        edits=[("        self.add_module(str(offset + i), module)\n    return self",
                "        self.add_module(str(offset + i), module)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='iadd-offset-in-loop',
        feedback='offset = len(self) taken before the loop',
        edits=[("    offset = len(self)\n", ""),
               ("        self.add_module(str(offset + i), module)", "        self.add_module(str(len(self) + i), module)")],
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='iadd-type-unchecked',
        feedback='+= makes the same type check as +',
        edits=[("    if not isinstance(other, nn.Sequential):\n"
                "        raise ValueError(f\"add operator supports only objects of Sequential class, but {type(other)} is given.\")\n"
                "    offset = len(self)",
                "    offset = len(self)")],
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
        feedback='count = last - first + 1',
        edits=[("{end - start + 1} x", "{end - start} x")],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='folds-same-class',
        feedback='what folds is equal repr text, not equal classes',
        edits=[("        if runs and runs[-1][2] == text:\n",
                "        if runs and type(self[runs[-1][0]]) is type(self[i]):\n")],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='folds-same-object',
        feedback='equal reprs fold whether or not the children are the same object',
        edits=[("        if runs and runs[-1][2] == text:\n",
                "        if runs and self[runs[-1][0]] is self[i]:\n")],
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='run-of-one-counted',
        feedback="a child that is not repeated keeps its own line '(i): repr'",
        edits=[('        line = f"({start}): {text}" if start == end else f"({start}-{end}): {end - start + 1} x {text}"\n',
                '        line = f"({start}-{end}): {end - start + 1} x {text}"\n')],
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
    # Solutions that hand the exercise back to the reference: while grading, the reference's own is gone.
    dict(
        grade_id='c09_sequential_indexing',
        mistake='delegates-to-reference-indexing',
        feedback='does not exist while grading',
        source="sequential_getitem = nn.Sequential.__getitem__\nsequential_delitem = nn.Sequential.__delitem__",
    ),
    dict(
        grade_id='c09_sequential_growth',
        mistake='delegates-to-reference-growth',
        feedback='does not exist while grading',
        source=("sequential_append = nn.Sequential.append\nsequential_extend = nn.Sequential.extend\n"
                "sequential_add = nn.Sequential.__add__\nsequential_iadd = nn.Sequential.__iadd__"),
    ),
    dict(
        grade_id='c09_sequential_insert',
        mistake='delegates-to-reference-insert',
        feedback='does not exist while grading',
        source="sequential_insert = nn.Sequential.insert",
    ),
    dict(
        grade_id='c09_modulelist_repr',
        mistake='delegates-to-reference-repr',
        feedback='does not exist while grading',
        source="modulelist_repr = nn.ModuleList.__repr__",
    ),
    dict(
        grade_id='c09_parameter_containers',
        mistake='delegates-to-reference-parameters',
        feedback='does not exist while grading',
        source=("parameterlist_setitem = nn.ParameterList.__setitem__\nparameterlist_append = nn.ParameterList.append\n"
                "moduledict_update = nn.ModuleDict.update\nparameterdict_update = nn.ParameterDict.update\n"
                "from modulecraft.nn.modules.container import _update_pairs as update_from_pairs"),
    ),
]
