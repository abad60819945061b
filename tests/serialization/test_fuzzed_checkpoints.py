"""Fuzzing: whatever bytes of a real checkpoint are flipped or cut, ``modulecraft.load`` gives the right state_dict
or our ``CheckpointError``, never another exception, a crash or a half-read dict."""

import io
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import modulecraft
from modulecraft.serialization import CheckpointError
from modulecraft.serialization.zip_members import ZipMembers

from .archives import folder_of, members, replaced, torch_saved

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def source_state():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    state = model.state_dict()
    state["transposed"] = state["0.weight"].t()
    state["mask"] = torch.tensor([True, False])
    state["half"] = torch.tensor([0.5, 1.5], dtype=torch.float16)
    return state


TORCH_FILE = torch_saved(source_state())
EXPECTED = modulecraft.load(io.BytesIO(TORCH_FILE))
PICKLE = members(TORCH_FILE)[folder_of(members(TORCH_FILE)) + "data.pkl"]


def describe(state):
    """Everything a correct load must reproduce: keys in order, dtypes, shapes, values, metadata."""
    return ([(key, value.dtype.str, value.shape, value.tolist()) for key, value in state.items()],
            dict(getattr(state, "_metadata", {})))


def damaged(data: bytes, flips, cut):
    buffer = bytearray(data)
    for position, mask in flips:
        buffer[position % len(buffer)] ^= mask
    return bytes(buffer[:cut]) if cut is not None else bytes(buffer)


def plain_values(obj):
    """Only what a state_dict may hold: containers, plain values and numeric arrays."""
    if isinstance(obj, dict):
        return type(obj) in (dict, OrderedDict) and all(map(plain_values, obj)) and all(map(plain_values, obj.values()))
    if isinstance(obj, (list, tuple)):
        return type(obj) in (list, tuple) and all(map(plain_values, obj))
    if isinstance(obj, np.ndarray):
        return type(obj) is np.ndarray and not obj.dtype.hasobject
    return obj is None or type(obj) in (bool, int, float, complex, str, bytes)


def structure(state):
    """What a correct load must reproduce whatever the values: keys in order, dtypes, shapes, metadata."""
    return [(key, value.dtype.str, value.shape) for key, value in state.items()], dict(getattr(state, "_metadata", {}))


STORAGE_SPANS = [(member.start, member.start + member.size) for name, member in ZipMembers(
    io.BytesIO(TORCH_FILE), "torch.save", zipfile.ZipFile(io.BytesIO(TORCH_FILE)).infolist()).members.items()
    if "/data/" in name]

flips = st.lists(st.tuples(st.integers(0, 2**16), st.integers(1, 255)), max_size=4)
cuts = st.none() | st.integers(0, len(TORCH_FILE))


@FUZZ
@given(flips, cuts)
@example([(61235, 158), (44284, 167), (16295, 249), (38847, 202)], None)  # zipfile: NotImplementedError
def test_a_damaged_torch_file_loads_correctly_or_fails_clearly(changes, cut):
    """CRCs cover the pickle and the small members, and storages' sizes are checked: damage anywhere is caught or
    changes nothing that matters, except a flipped storage byte, which (as with torch.load, which checks no CRC
    either) changes a value and nothing else."""
    try:
        loaded = modulecraft.load(io.BytesIO(damaged(TORCH_FILE, changes, cut)))
    except CheckpointError:
        return
    in_storages = [position % len(TORCH_FILE) for position, _ in changes
                   if any(start <= position % len(TORCH_FILE) < end for start, end in STORAGE_SPANS)]
    if in_storages:
        assert structure(loaded) == structure(EXPECTED)
    else:
        assert describe(loaded) == describe(EXPECTED)


@FUZZ
@given(flips, st.none() | st.integers(0, len(PICKLE)))
def test_a_damaged_pickle_with_valid_crcs_loads_only_plain_values_or_fails_clearly(changes, cut):
    """Past the CRCs, a flipped byte may make another valid pickle (a renamed key, another number): that loads,
    but only as containers, plain values and arrays; anything else is our error."""
    data = replaced(TORCH_FILE, {"data.pkl": damaged(PICKLE, changes, cut)})
    try:
        loaded = modulecraft.load(io.BytesIO(data))
    except CheckpointError:
        return
    assert plain_values(loaded)


def our_safetensors_file():
    buffer = io.BytesIO()
    modulecraft.save(EXPECTED, buffer)
    return buffer.getvalue()


SAFETENSORS_FILE = our_safetensors_file()


@FUZZ
@given(flips, st.none() | st.integers(0, len(SAFETENSORS_FILE)))
def test_a_damaged_safetensors_file_loads_plain_values_or_fails_clearly(changes, cut):
    """safetensors has no checksum: flipped data bytes are other values, anything structural is our error."""
    try:
        loaded = modulecraft.load(io.BytesIO(damaged(SAFETENSORS_FILE, changes, cut)))
    except CheckpointError:
        return
    assert plain_values(loaded)


NPZ_FILE = (Path(__file__).parent / "fixtures" / "before_safetensors.npz").read_bytes()


@FUZZ
@given(flips, st.none() | st.integers(0, len(NPZ_FILE)))
def test_a_damaged_npz_file_loads_correctly_or_fails_clearly(changes, cut):
    """The zip's CRCs cover every .npy member, so damage is caught or changes nothing that matters."""
    try:
        loaded = modulecraft.load(io.BytesIO(damaged(NPZ_FILE, changes, cut)))
    except CheckpointError:
        return
    expected = modulecraft.load(io.BytesIO(NPZ_FILE))
    assert repr(list(loaded.items())) == repr(list(expected.items())) and loaded._metadata == expected._metadata
