"""asyncgrad's dtypes as torch's dtype objects over numpy dtypes (Note [Dtypes are numpy dtypes
underneath] in asyncgrad/dtypes.py): torch's attributes, numpy's equality, hash and conversions,
one object per dtype on every device."""

import copy
import pickle

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("name", NAMES)
def test_attributes_as_torch(name):
    d, td = getattr(ag, name), getattr(torch, name)
    assert (d.is_floating_point, d.is_complex, d.is_signed, d.itemsize) == (
        td.is_floating_point, td.is_complex, td.is_signed, td.itemsize)
    assert repr(d) == repr(td).replace("torch.", "asyncgrad.") == str(d)
    assert d.to_real() is d


@pytest.mark.parametrize("name", NAMES)
def test_numpy_equality_hash_and_conversion(name):
    d, nd = getattr(ag, name), np.dtype(name)
    assert d == nd and nd == d and d == nd.type and nd.type == d
    assert not (d != nd) and hash(d) == hash(nd)
    assert {nd: 1}[d] == 1 and {d: 2}[nd] == 2
    assert np.dtype(d) is nd and np.zeros(2, dtype=d).dtype is nd and np.ones(2).astype(d).dtype is nd
    assert (d.kind, d.char, d.name, d.type, d.str, d.byteorder) == (nd.kind, nd.char, nd.name, nd.type, nd.str,
                                                                   nd.byteorder)
    assert pickle.loads(pickle.dumps(d)) is d and copy.deepcopy(d) is d


def test_distinct_dtypes_differ():
    assert ag.float32 != ag.float64 and ag.float32 != np.float64 and np.float64 != ag.float32
    assert ag.float is ag.float32 and ag.double is ag.float64 and ag.long is ag.int64 and ag.half is ag.float16


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", ["bool", "uint8", "int32", "int64", "float32", "float64"])
def test_tensor_dtype_is_the_interned_object(device, name):
    d = getattr(ag, name)
    t = ag.zeros(3, dtype=d, device=device)
    assert t.dtype is d and isinstance(t.dtype, ag.dtype)
    assert ag.zeros(2, dtype=np.dtype(name), device=device).dtype is d
    assert ag.zeros(2, dtype=name, device=device).dtype is d
    assert (t + t).dtype is d and t.to(ag.float64).dtype is ag.float64


async def test_gradient_dtype_and_engine_metadata():
    """Leaves and intermediate nodes keep numpy's dtype in their metadata; gradients come out in the
    tensor's dtype object, with and without create_graph."""
    x = ag.ones(3, dtype=ag.float64, requires_grad=True)
    y = (x.float() * 2.0).sum()
    (g,) = await ag.grad(y, x, create_graph=True)
    assert g.dtype is ag.float64
    await y.backward()
    assert x.grad.dtype is ag.float64


def test_set_default_dtype_takes_dtype_objects():
    try:
        ag.set_default_dtype(ag.float64)
        assert ag.get_default_dtype() is ag.float64 and ag.ones(1).dtype is ag.float64
        with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
            ag.set_default_dtype(ag.int64)
    finally:
        ag.set_default_dtype(ag.float32)
    assert ag.get_default_dtype() is ag.float32


def test_is_floating_point_and_is_complex_functions():
    assert ag.is_floating_point(ag.ones(1)) and not ag.is_floating_point(ag.ones(1, dtype=ag.int64))
    assert not ag.is_complex(ag.ones(1)) and not ag.ones(1).is_complex()
    for fn in (ag.is_floating_point, ag.is_complex):
        with pytest.raises(TypeError) as theirs:
            getattr(torch, fn.__name__)(1)
        with pytest.raises(TypeError) as ours:
            fn(1)
        assert str(ours.value) == str(theirs.value)


def test_to_complex_refused():
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Long"):
        ag.int64.to_complex()
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Long"):
        torch.int64.to_complex()
    with pytest.raises(TypeError, match="complex"):
        ag.float32.to_complex()


def test_finfo_iinfo():
    assert ag.finfo(ag.float32).eps == torch.finfo(torch.float32).eps
    assert ag.finfo().eps == ag.finfo(ag.get_default_dtype()).eps
    assert ag.iinfo(ag.int64).max == torch.iinfo(torch.int64).max
    assert ag.iinfo(ag.uint8).min == 0
    with pytest.raises(TypeError):
        ag.finfo(ag.int64)
    with pytest.raises(TypeError):
        ag.iinfo(ag.float32)
