"""Checkpoints in modulecraft's first format (``.npz`` + JSON) keep loading: no learner's saved work is lost.

``fixtures/before_safetensors.npz`` was written by ``modulecraft.save`` before safetensors became the default
(``modulecraft.manual_seed(0)``; ``Sequential(Linear(3, 2), BatchNorm1d(2), LazyLinear(4))`` with
``running_mean`` set to ``[0.5, -1.5]``; its state_dict plus ``step = 7``).
"""

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

import modulecraft
from modulecraft import nn
from modulecraft.serialization import CheckpointError

FIXTURE = Path(__file__).parent / "fixtures" / "before_safetensors.npz"


def test_a_checkpoint_written_before_safetensors_still_loads_whatever_its_name(tmp_path):
    misnamed = tmp_path / "old.safetensors"
    misnamed.write_bytes(FIXTURE.read_bytes())
    for path in (FIXTURE, misnamed):
        state = modulecraft.load(path)
        assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                               "1.num_batches_tracked", "2.weight", "2.bias", "step"]
        assert dict(state._metadata) == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 2},
                                         "2": {"version": 1}}
        assert state["0.weight"].dtype == np.float32 and state["0.weight"].shape == (2, 3)
        np.testing.assert_allclose(state["0.bias"], [0.12313239, 0.2649998], rtol=1e-6)
        assert state["1.running_mean"].tolist() == [0.5, -1.5] and state["step"] == 7
        assert type(state["2.weight"]) is nn.UninitializedParameter


def test_it_loads_into_the_model_it_came_from():
    state = modulecraft.load(FIXTURE)
    del state["step"]
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2), nn.LazyLinear(4))
    assert str(model.load_state_dict(state)) == "<All keys matched successfully>"
    assert model[1].running_mean.tolist() == [0.5, -1.5] and model[2].has_uninitialized_params()


def test_the_npz_writer_is_still_there_on_request(tmp_path):
    path = tmp_path / "checkpoint.bin"
    modulecraft.save(modulecraft.load(FIXTURE), path, format="npz")
    with np.load(path, allow_pickle=False) as archive:
        assert "__modulecraft__" in archive.files
    assert list(modulecraft.load(path)) == list(modulecraft.load(FIXTURE))


def with_member(name: str, content: bytes) -> bytes:
    """The fixture with one member replaced."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(FIXTURE) as source, zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename, content if info.filename == name else source.read(info))
    return buffer.getvalue()


def npy(shape, data: bytes, descr="<f4") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + data


@pytest.mark.parametrize("shape", [(2**40,), (2**20, 2**20), (4,)], ids=["8 TiB", "4 TiB", "short"])
def test_an_npy_header_declaring_more_data_than_its_member_holds_is_refused_unallocated(shape):
    """numpy would allocate what the header declares (8 TiB: MemoryError) before finding the data missing."""
    with pytest.raises(CheckpointError, match="member '0.bias.npy' declares .* bytes of data for shape"):
        modulecraft.load(io.BytesIO(with_member("0.bias.npy", npy(shape, b"\0" * 8))))


def test_an_object_array_is_refused_without_unpickling():
    with pytest.raises(CheckpointError, match="member '0.bias.npy' holds Python objects, which only pickle could read"):
        modulecraft.load(io.BytesIO(with_member("0.bias.npy", npy((1,), b"\x80\x02N.", descr="|O"))))
