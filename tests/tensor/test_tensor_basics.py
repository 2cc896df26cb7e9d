"""Tensor basics: factories and dtype rules, repr, detach, devices, host values, default dtype."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import AG, has_torch, run_torch

import asyncgrad as ag

# --------------------------------------------------------------------------- factories and dtypes
FACTORY_DTYPES = {
    "python float": (lambda lib: lib.tensor(1.5), "float32"),
    "python int": (lambda lib: lib.tensor(3), "int64"),
    "python bool": (lambda lib: lib.tensor(True), "bool"),
    "mixed list": (lambda lib: lib.tensor([1, 2.5]), "float32"),
    "int list": (lambda lib: lib.tensor([[1, 2], [3, 4]]), "int64"),
    "numpy float64": (lambda lib: lib.tensor(np.array([1.0, 2.0])), "float64"),
    "numpy float32": (lambda lib: lib.tensor(np.array([1.0], dtype=np.float32)), "float32"),
    "numpy int32": (lambda lib: lib.tensor(np.array([1], dtype=np.int32)), "int32"),
    "numpy float64 scalar": (lambda lib: lib.tensor(np.float64(2.0)), "float64"),
    "numpy int32 scalar": (lambda lib: lib.tensor(np.int32(2)), "int32"),
    "explicit dtype": (lambda lib: lib.tensor([1, 2], dtype=lib.float64), "float64"),
    "zeros": (lambda lib: lib.zeros(2, 3), "float32"),
    "ones tuple": (lambda lib: lib.ones((2, 3)), "float32"),
    "empty": (lambda lib: lib.empty(2), "float32"),
    "full int": (lambda lib: lib.full((2,), 3), "int64"),
    "full float": (lambda lib: lib.full((2,), 3.0), "float32"),
    "full bool": (lambda lib: lib.full((2,), True), "bool"),
    "eye": (lambda lib: lib.eye(3), "float32"),
    "arange int": (lambda lib: lib.arange(5), "int64"),
    "arange float": (lambda lib: lib.arange(0, 1, 0.25), "float32"),
    "linspace": (lambda lib: lib.linspace(0, 1, 5), "float32"),
    "randn": (lambda lib: lib.randn(2, 3), "float32"),
    "rand": (lambda lib: lib.rand(2), "float32"),
    "randint": (lambda lib: lib.randint(0, 5, (3,)), "int64"),
    "zeros_like int": (lambda lib: lib.zeros_like(lib.tensor([1, 2])), "int64"),
    "ones_like dtype": (lambda lib: lib.ones_like(lib.tensor([1, 2]), dtype=lib.float64), "float64"),
    "full_like": (lambda lib: lib.full_like(lib.ones(2, dtype=lib.float64), 7), "float64"),
    "rand_like": (lambda lib: lib.rand_like(lib.ones(2)), "float32"),
    "randn_like": (lambda lib: lib.randn_like(lib.ones(2, dtype=lib.float64)), "float64"),
}


@pytest.mark.parametrize("case", list(FACTORY_DTYPES))
def test_factory_dtypes(case):
    fn, expected = FACTORY_DTYPES[case]
    t = fn(AG)
    assert isinstance(t, ag.Tensor) and t.dtype == np.dtype(expected) and t.is_leaf and not t.requires_grad
    if has_torch():
        assert str(run_torch(fn).dtype) == f"torch.{expected}"


def test_factory_values_and_shapes():
    assert ag.zeros(2, 3).shape == (2, 3) and ag.zeros((2, 3)).tolist() == [[0.0] * 3] * 2
    assert ag.ones([2]).tolist() == [1.0, 1.0]
    assert ag.full((2, 2), 1.5).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert ag.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert ag.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert ag.arange(4).tolist() == [0, 1, 2, 3]
    assert ag.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ag.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    r = ag.randint(3, 6, (100,))
    assert r.numpy().min() >= 3 and r.numpy().max() <= 5
    assert ag.randint(4, size=(2, 2)).shape == (2, 2)
    u = ag.rand(1000)
    assert 0.0 <= u.numpy().min() and u.numpy().max() < 1.0


def test_factories_requires_grad_and_device():
    for t in (ag.zeros(2, requires_grad=True), ag.ones(2, requires_grad=True), ag.randn(2, requires_grad=True),
              ag.tensor([1.0], requires_grad=True), ag.full((2,), 1.0, requires_grad=True),
              ag.linspace(0, 1, 3, requires_grad=True), ag.eye(2, requires_grad=True)):
        assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None
    t = ag.ones(2, device="sim:0")
    assert t.device == ag.device("sim:0") and t.device is ag.device("sim:0") and str(t.device) == "sim:0"
    assert ag.zeros_like(t).device is t.device


def test_manual_seed_is_reproducible():
    ag.manual_seed(123)
    a = ag.randn(3, 4)
    b = ag.rand(2)
    c = ag.randint(0, 100, (5,))
    ag.manual_seed(123)
    np.testing.assert_array_equal(a.numpy(), ag.randn(3, 4).numpy())
    np.testing.assert_array_equal(b.numpy(), ag.rand(2).numpy())
    np.testing.assert_array_equal(c.numpy(), ag.randint(0, 100, (5,)).numpy())
    assert not np.array_equal(a.numpy(), ag.randn(3, 4).numpy())


def test_tensor_copies_and_from_numpy_shares():
    a = np.array([1.0, 2.0])
    t = ag.tensor(a)
    a[0] = 10.0
    assert t.tolist() == [1.0, 2.0]
    s = ag.from_numpy(a)
    a[1] = 20.0
    assert s.tolist() == [10.0, 20.0] and s.dtype == ag.float64
    s.add_(1.0)
    assert a.tolist() == [11.0, 21.0]
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ag.from_numpy([1.0])
    t2 = ag.tensor(t)
    assert not np.shares_memory(t2.numpy(), t.numpy()) and t2.tolist() == t.tolist()


def test_set_default_dtype():
    assert ag.get_default_dtype() == ag.float32
    try:
        ag.set_default_dtype(ag.float64)
        assert ag.get_default_dtype() == ag.float64
        assert ag.tensor(1.5).dtype == ag.float64
        assert ag.tensor([1, 2.0]).dtype == ag.float64
        assert ag.zeros(2).dtype == ag.float64 and ag.randn(2).dtype == ag.float64
        assert ag.arange(0.0, 1.0, 0.5).dtype == ag.float64
        assert ag.tensor(1).dtype == ag.int64
        assert ag.tensor(np.array([1.0], dtype=np.float32)).dtype == ag.float32
        assert (ag.tensor([1, 2]) / 2).dtype == ag.float64
        assert ag.tensor([1, 2]).exp().dtype == ag.float64
    finally:
        ag.set_default_dtype(ag.float32)
    assert ag.tensor(1.5).dtype == ag.float32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        ag.set_default_dtype(ag.int64)


# --------------------------------------------------------------------------- dtype promotion in ops
PROMOTION = {
    "float32 * 2.0": (lambda lib: lib.ones(2, dtype=lib.float32) * 2.0, "float32"),
    "int64 * 2": (lambda lib: lib.tensor([1, 2]) * 2, "int64"),
    "int64 * 2.5": (lambda lib: lib.tensor([1, 2]) * 2.5, "float32"),
    "int64 / int64": (lambda lib: lib.tensor([1, 2]) / lib.tensor([2, 2]), "float32"),
    "int64 / 2": (lambda lib: lib.tensor([1, 2]) / 2, "float32"),
    "int64 ** 0.5": (lambda lib: lib.tensor([1, 2]) ** 0.5, "float32"),
    "2.0 ** int64": (lambda lib: 2.0 ** lib.tensor([1, 2]), "float32"),
    "int64 ** 2": (lambda lib: lib.tensor([1, 2]) ** 2, "int64"),
    "float32 + float64": (lambda lib: lib.ones(2, dtype=lib.float32) + lib.ones(2, dtype=lib.float64), "float64"),
    "float32 + 0-d float64": (lambda lib: lib.ones(2, dtype=lib.float32) + lib.tensor(np.array(1.0)), "float32"),
    "int64 + 0-d float32": (lambda lib: lib.tensor([1, 2]) + lib.tensor(np.array(1.0, np.float32)), "float32"),
    "int64 + 0-d float64": (lambda lib: lib.tensor([1, 2]) + lib.tensor(np.array(1.0)), "float64"),
    "int64 + float32": (lambda lib: lib.tensor([1, 2]) + lib.ones(2, dtype=lib.float32), "float32"),
    "int32 + int64": (lambda lib: lib.tensor(np.array([1], np.int32)) + lib.tensor([1]), "int64"),
    "0-d int64 + int32": (lambda lib: lib.tensor(np.array(1)) + lib.tensor(np.array([1], np.int32)), "int32"),
    "bool + bool": (lambda lib: lib.tensor([True]) + lib.tensor([True]), "bool"),
    "bool * 1.5": (lambda lib: lib.tensor([True]) * 1.5, "float32"),
    "int64.exp()": (lambda lib: lib.tensor([1, 2]).exp(), "float32"),
    "int64.sum()": (lambda lib: lib.tensor([1, 2]).sum(), "int64"),
    "bool.sum()": (lambda lib: lib.tensor([True, False]).sum(), "int64"),
    "int64.clamp(0.5, 1)": (lambda lib: lib.tensor([1, -2]).clamp(0.5, 1), "float32"),
    "int64.clamp(0, 1)": (lambda lib: lib.tensor([1, -2]).clamp(0, 1), "int64"),
    "where int64, 0.5": (lambda lib: lib.where(lib.tensor([True, False]), lib.tensor([1, 2]), 0.5), "float32"),
    "maximum int64, float32": (lambda lib: lib.maximum(lib.tensor([1, 2]), lib.ones(2, dtype=lib.float32)),
                               "float32"),
    "cat float32, float64": (lambda lib: lib.cat([lib.ones(2, dtype=lib.float32), lib.ones(2, dtype=lib.float64)]),
                             "float64"),
    "cat int64, float32": (lambda lib: lib.cat([lib.tensor([1]), lib.ones(2, dtype=lib.float32)]), "float32"),
    "stack int32, int64": (lambda lib: lib.stack([lib.tensor(np.array([1], np.int32)), lib.tensor([1])]), "int64"),
    "stack bool, float64": (lambda lib: lib.stack([lib.tensor([True]), lib.ones(1, dtype=lib.float64)]), "float64"),
    "int64 < 0.5": (lambda lib: lib.tensor([1, 2]) < 0.5, "bool"),
}


@pytest.mark.parametrize("case", list(PROMOTION))
def test_dtype_promotion_follows_torch(case):
    fn, expected = PROMOTION[case]
    assert fn(AG).dtype == np.dtype(expected)
    if has_torch():
        assert str(run_torch(fn).dtype) == f"torch.{expected}"


async def test_gradients_keep_each_input_dtype():
    a = ag.ones(2, dtype=ag.float32, requires_grad=True)
    b = ag.tensor(3.0, dtype=ag.float64, requires_grad=True)
    y = a * b
    assert y.dtype == ag.float32
    await y.sum().backward()
    assert a.grad.dtype == ag.float32 and b.grad.dtype == ag.float64
    assert a.grad.tolist() == [3.0, 3.0] and b.grad.item() == 2.0


# --------------------------------------------------------------------------- metadata and host values
def test_metadata():
    t = ag.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.dim() == 3
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.numel() == 24 and len(t) == 2
    assert t.is_floating_point() and not ag.tensor([1]).is_floating_point()
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ag.tensor(1.0))


def test_item_tolist_numpy():
    t = ag.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert t.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert t[0, 0].item() == 1.5 and isinstance(t[0, 0].item(), float)
    assert ag.tensor([7]).item() == 7 and isinstance(ag.tensor([7]).item(), int)
    assert ag.tensor(True).item() is True
    arr = t.numpy()
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32
    arr[0, 0] = 100.0  # numpy() shares memory, as torch
    assert t[0, 0].item() == 100.0
    np.testing.assert_array_equal(np.asarray(t), arr)
    assert float(ag.tensor(2.5)) == 2.5 and int(ag.tensor(3)) == 3
    assert [x.item() for x in ag.tensor([1.0, 2.0])] == [1.0, 2.0]
    assert ag.tensor(2.0).tolist() == 2.0


def test_numpy_of_tensor_requiring_grad_raises():
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad. Use "
                                           "tensor.detach\\(\\).numpy\\(\\) instead."):
        x.numpy()
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        (x * 2).numpy()
    assert x.detach().numpy().tolist() == [1.0, 1.0]
    assert np.asarray(x).tolist() == [1.0, 1.0]  # __array__ is allowed, as in torch's np.asarray(t.detach())


def test_comparisons_give_bool_without_grad():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for result, expected in ((x < 2, [True, False, False]), (x <= 2, [True, True, False]),
                             (x > 2, [False, False, True]), (x >= 2, [False, True, True]),
                             (x == 2, [False, True, False]), (x != 2, [True, False, True]),
                             (x == ag.tensor([1.0, 0.0, 3.0]), [True, False, True]), (~(x > 2), [True, True, False])):
        assert result.dtype == ag.bool and not result.requires_grad and result.grad_fn is None
        assert result.tolist() == expected


# --------------------------------------------------------------------------- repr
def test_repr():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert "grad_fn=<MulBackward0>" in repr(y) and repr(y).startswith("tensor(")
    assert "requires_grad=True" in repr(x) and "grad_fn" not in repr(x)
    assert "grad_fn=<SumBackward0>" in repr(y.sum())
    assert repr(ag.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=asyncgrad.float64" in repr(ag.tensor([1.0], dtype=ag.float64))  # torch.float64, renamed
    assert "dtype" not in repr(ag.tensor([1.0]))
    assert "device='sim:0'" in repr(ag.ones(1, device="sim:0"))
    with ag.no_grad():
        assert "grad_fn" not in repr(x * 2)


# --------------------------------------------------------------------------- detach
def test_detach_shares_memory_and_version_counter():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    for src in (x, y):
        d = src.detach()
        assert not d.requires_grad and d.is_leaf and d.grad_fn is None
        assert np.shares_memory(d.numpy(), src.detach().numpy())
        assert d._vc is src._vc
        before = src._version
        d.add_(1.0)
        assert src._version == before + 1
    assert x.tolist() == [2.0, 3.0]
    assert y.detach().tolist() == [4.0, 7.0]


def test_detach_in_place():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.detach_() is y
    assert y.grad_fn is None and not y.requires_grad and y.is_leaf
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        (x * 2)[0:1].detach_()


async def test_detach_stops_gradient():
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    y = x * x.detach()
    (g,) = await ag.grad(y.sum(), x)
    assert g.tolist() == [1.0, 2.0]


async def test_no_grad_records_nothing():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with ag.no_grad():
        y = (x * 2).exp().sum()
        assert not ag.is_grad_enabled()
    assert y.grad_fn is None and not y.requires_grad
    assert ag.is_grad_enabled()
    z = x * 2
    assert z.requires_grad and z.grad_fn.name() == "MulBackward0"


# --------------------------------------------------------------------------- devices
async def test_to_sim_device_is_differentiable():
    x = ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64, requires_grad=True)
    y = x.to("sim:0")
    assert y.device is ag.device("sim:0") and y.grad_fn.name() == "ToCopyBackward0"
    host = ag.tensor([1.0, 2.0])
    copy = host.to("sim:0")
    host.fill_(9.0)  # a transfer copies: the sim tensor keeps the values it was given
    assert copy.cpu().tolist() == [1.0, 2.0]
    z = (y * y).sum()
    assert z.device is ag.device("sim:0")
    await z.backward()
    assert x.grad.device is ag.device("cpu") and x.grad.tolist() == [2.0, 4.0, 6.0]
    (g,) = await ag.grad((x.to("sim:0") * 3).sum(), x)
    assert g.device is ag.device("cpu") and g.tolist() == [3.0, 3.0, 3.0]


async def test_to_device_and_back_and_second_order():
    x = ag.tensor([0.5, -1.0], dtype=ag.float64, requires_grad=True)
    y = (x.to("sim:1") ** 3).cpu()
    assert y.device is ag.device("cpu") and y.grad_fn.name() == "ToCopyBackward0"
    (g,) = await ag.grad(y.sum(), x, create_graph=True)
    assert g.device is ag.device("cpu") and g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, -1.0]) ** 2)
    (gg,) = await ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * np.array([0.5, -1.0]))


def test_to_same_device_or_dtype_is_identity():
    x = ag.ones(2, requires_grad=True)
    assert x.to("cpu") is x and x.cpu() is x and x.to(ag.float32) is x
    s = ag.ones(2, device="sim:0")
    assert s.to("sim:0") is s
    both = x.to("sim:0", ag.float64)
    assert both.device is ag.device("sim:0") and both.dtype == ag.float64
    kw = x.to(device="sim:0", dtype=ag.float64)
    assert kw.device is ag.device("sim:0") and kw.dtype == ag.float64


async def test_leaf_on_sim_device_gets_gradient_there():
    w = ag.ones(3, device="sim:0", requires_grad=True)
    x = ag.tensor([1.0, 2.0, 3.0], device="sim:0")
    await (w * x).sum().backward()
    assert w.grad.device is ag.device("sim:0") and w.grad.tolist() == [1.0, 2.0, 3.0]


# --------------------------------------------------------------------------- autograd state
def test_requires_grad_flags():
    x = ag.ones(2)
    assert not x.requires_grad and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    y = ag.ones(2, requires_grad=True) * 2
    assert y.requires_grad and not y.is_leaf
    assert y.requires_grad_(True) is y


async def test_grad_of_scalar_tensors_is_an_array():
    """Gradients that numpy reduces to a scalar come back as 0-d tensors (regression)."""
    a = ag.tensor(1.0, requires_grad=True)
    b = ag.tensor(2.0, requires_grad=True)
    s = ag.stack([a, b])
    await (s * ag.tensor([3.0, 4.0])).sum().backward()
    assert isinstance(a.grad.numpy(), np.ndarray) and a.grad.shape == () and a.grad.item() == 3.0
    c = ag.tensor(2.0, requires_grad=True)
    x = ag.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x[1:, ::2] * x[0, 1] * c
    await y.sum().backward()
    assert isinstance(c.grad.numpy(), np.ndarray) and c.grad.item() == (3.0 + 5.0) * 1.0
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 16.0, 0.0], [2.0, 0.0, 2.0]])
