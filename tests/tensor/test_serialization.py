"""ag.save / ag.load: tensors and nested state dicts round-trip exactly; nothing is unpickled;
foreign, corrupt and hostile files fail with a clear RuntimeError."""

import io
import json
import pickle
import re
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import nn, optim


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    ag.save(obj, buffer)
    buffer.seek(0)
    return ag.load(buffer, **load_kwargs)


def test_module_state_dict_round_trips_through_a_path(tmp_path):
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, dtype=ag.float64))
    path = tmp_path / "model.ag"
    ag.save(model.state_dict(), path)
    loaded = ag.load(str(path))
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(model.state_dict())
    for (name, value), original in zip(loaded.items(), model.state_dict().values()):
        assert value.dtype == original.dtype and value.shape == original.shape, name
        np.testing.assert_array_equal(value.numpy(), original.numpy())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, dtype=ag.float64))
    fresh.load_state_dict(loaded)
    np.testing.assert_array_equal(fresh[2].weight.detach().numpy(), model[2].weight.detach().numpy())


def test_values_of_every_kind_keep_their_types():
    obj = {
        "f32": ag.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "f16": ag.tensor(np.array([0.5, -2.0], dtype=np.float16)),
        "i64": ag.tensor([1, 2, 3]),
        "bool": ag.tensor([True, False]),
        "scalar": ag.tensor(3.5, dtype=ag.float64),
        "array": np.array([[1, 2]], dtype=np.int32),
        "np_scalar": np.float64(2.25),
        "numbers": [1, 2.5, -0.0, float("inf"), float("-inf"), True, None, "text"],
        "tuple": (0.9, 0.999),
        0: "int key",
        2.5: "float key",
        None: {"nested": [{"deep": (1, [2, {"deeper": ag.tensor([7.0])}])}]},
    }
    loaded = _round_trip(obj)
    assert list(loaded) == list(obj)
    for key in ("f32", "f16", "i64", "bool", "scalar"):
        assert loaded[key].dtype == obj[key].dtype and loaded[key].shape == obj[key].shape
        np.testing.assert_array_equal(loaded[key].numpy(), obj[key].numpy())
    assert loaded["array"].dtype == np.int32 and loaded["array"].tolist() == [[1, 2]]
    assert isinstance(loaded["np_scalar"], np.float64) and loaded["np_scalar"] == 2.25
    assert loaded["numbers"][:3] == [1, 2.5, -0.0] and np.signbit(loaded["numbers"][2])
    assert loaded["numbers"][3:] == [float("inf"), float("-inf"), True, None, "text"]
    assert loaded["tuple"] == (0.9, 0.999) and isinstance(loaded["tuple"], tuple)
    assert loaded[0] == "int key" and loaded[2.5] == "float key"
    assert loaded[None]["nested"][0]["deep"][1][1]["deeper"].tolist() == [7.0]
    assert np.isnan(_round_trip(float("nan")))


def test_tensor_identity_requires_grad_and_parameters():
    weight = nn.Parameter(ag.tensor([1.0, 2.0]))
    frozen = nn.Parameter(ag.tensor([3.0]), requires_grad=False)
    leaf = ag.tensor([4.0], requires_grad=True)
    loaded = _round_trip({"encoder": weight, "decoder": weight, "frozen": frozen, "leaf": leaf, "plain": leaf.detach()})
    assert loaded["encoder"] is loaded["decoder"]  # tied weights stay tied
    assert isinstance(loaded["encoder"], nn.Parameter) and loaded["encoder"].requires_grad
    assert isinstance(loaded["frozen"], nn.Parameter) and not loaded["frozen"].requires_grad
    assert not isinstance(loaded["leaf"], nn.Parameter) and loaded["leaf"].requires_grad
    assert not loaded["plain"].requires_grad and loaded["plain"].is_leaf


def test_a_view_is_saved_as_what_it_shows():
    base = ag.arange(12, dtype=ag.float64).reshape(3, 4)
    loaded = _round_trip({"column": base[:, 1], "transposed": base.T})
    assert loaded["column"].tolist() == [1.0, 5.0, 9.0]
    np.testing.assert_array_equal(loaded["transposed"].numpy(), base.numpy().T)


def test_map_location_moves_every_tensor():
    loaded = _round_trip({"w": ag.tensor([1.0, 2.0])}, map_location="sim:0")
    assert str(loaded["w"].device) == "sim:0"
    assert str(_round_trip(ag.tensor([1.0], device="sim:1")).device) == "sim:1"
    with pytest.raises(Exception) as bad_device:
        ag.device("tpu:0")
    with pytest.raises(type(bad_device.value), match=re.escape(str(bad_device.value))):
        _round_trip(ag.tensor([1.0]), map_location="tpu:0")


def test_optimizer_state_dict_round_trips_and_resumes():
    params = [ag.tensor([1.0, -2.0], dtype=ag.float64, requires_grad=True), ag.tensor(0.5, requires_grad=True)]
    opt = optim.Adam(params, lr=0.1, amsgrad=True)
    for step in range(3):
        for p in params:
            p.grad = ag.full_like(p, step + 1.0)
        opt.step()
    loaded = _round_trip(opt.state_dict())
    assert sorted(loaded["state"]) == [0, 1] and loaded["param_groups"][0]["betas"] == (0.9, 0.999)
    copies = [ag.tensor(p.detach().numpy().copy(), requires_grad=True) for p in params]
    resumed = optim.Adam(copies)
    resumed.load_state_dict(loaded)
    for p, q in zip(params, copies):
        p.grad = q.grad = ag.full_like(p, -1.0)
    opt.step()
    resumed.step()
    for p, q in zip(params, copies):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


@pytest.mark.parametrize("value,what", [(object(), "a object"), ({"a": [1, {2, 3}]}, "obj['a'][1], a set"),
                                        ({(1, 2): 3}, "the key (1, 2)"), (1 + 2j, "a complex"),
                                        (np.array([object()]), "dtype object")])
def test_unsupported_values_are_refused_before_writing(tmp_path, value, what):
    path = tmp_path / "never.ag"
    with pytest.raises(TypeError, match=what.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        ag.save(value, path)
    assert not path.exists()


def test_a_file_that_is_not_a_zip(tmp_path):
    path = tmp_path / "noise.ag"
    path.write_bytes(b"this is not a checkpoint at all" * 10)
    with pytest.raises(RuntimeError, match="noise.ag is not an asyncgrad save file, or it is corrupt"):
        ag.load(path)


def test_a_truncated_file(tmp_path):
    path = tmp_path / "cut.ag"
    ag.save({"w": ag.randn(100, 100)}, path)
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(RuntimeError, match="cut.ag is not an asyncgrad save file, or it is corrupt"):
        ag.load(path)


def test_a_damaged_array_entry(tmp_path):
    path = tmp_path / "bad.ag"
    ag.save({"w": ag.tensor([1.0, 2.0])}, path)
    with zipfile.ZipFile(path) as archive:
        structure = archive.read("asyncgrad/structure.json")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("asyncgrad/structure.json", structure)
        archive.writestr("asyncgrad/data/0.npy", b"\x93NUMPY garbage")
    with pytest.raises(RuntimeError, match="bad.ag is a damaged asyncgrad save file"):
        ag.load(path)


def test_a_torch_checkpoint_is_named_and_not_unpickled(torch, tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(RuntimeError, match="looks like a torch.save file. asyncgrad does not unpickle"):
        ag.load(path)


class _Trap:
    """Unpickling this would call ``_spring``; a safe loader never does."""

    sprung = False

    def __reduce__(self):
        return (_spring, ())


def _spring():
    _Trap.sprung = True
    return "sprung"


def test_pickled_arrays_inside_the_archive_are_never_unpickled(tmp_path):
    path = tmp_path / "hostile.ag"
    payload = io.BytesIO()
    np.lib.format.write_array(payload, np.array([_Trap()], dtype=object), allow_pickle=True)
    structure = {"format": "asyncgrad", "version": 1, "root": {"ndarray": 0, "scalar": False}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("asyncgrad/structure.json", json.dumps(structure))
        archive.writestr("asyncgrad/data/0.npy", payload.getvalue())
    with pytest.raises(RuntimeError, match="damaged asyncgrad save file: ValueError: Object arrays cannot be loaded"):
        ag.load(path)
    assert not _Trap.sprung
    assert pickle.loads(pickle.dumps(_Trap())) == "sprung" and _Trap.sprung  # the trap is real


def test_foreign_zip_and_wrong_format_or_version(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(RuntimeError, match=r"other.zip is a zip archive but not an asyncgrad save file"):
        ag.load(path)
    for header, message in [({"format": "other", "version": 1, "root": 1}, "names no asyncgrad format"),
                            ({"format": "asyncgrad", "version": 99, "root": 1}, "format version 99"),
                            ({"format": "asyncgrad", "version": 1, "root": {"what": 1}}, "damaged")]:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("asyncgrad/structure.json", json.dumps(header))
        with pytest.raises(RuntimeError, match=message):
            ag.load(path)
