"""isin, signbit, count_nonzero, triu_indices and tril_indices: values and dtypes against torch on
``cpu`` and ``sim:0`` (array_api_strict), no node ever (torch's test_non_differentiable_ops and
test_integer_outputs), and torch's errors word for word."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch", reason="these ops are checked against torch")

DEVICES = pytest.mark.parametrize("device", ["cpu", "sim:0"])

X = np.array([[0.0, -1.5, 2.0, 0.0], [3.0, -0.0, np.nan, 2.0], [-2.0, 0.0, 1.0, 5.0]])


def same(ours: ag.Tensor, theirs: torch.Tensor) -> None:
    assert repr(ours.dtype) == repr(theirs.dtype).replace("torch.", "asyncgrad.")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())


@DEVICES
def test_isin_against_torch(device):
    a, t = ag.tensor(X, device=device, requires_grad=True), torch.tensor(X)
    ints, tints = ag.tensor([[1, 2, 3], [4, 2, 0]], device=device), torch.tensor([[1, 2, 3], [4, 2, 0]])
    for test in ([2.0, -0.0, np.nan, 7.0], [[5.0], [1.0]], []):
        for invert in (False, True):
            out = ag.isin(a, ag.tensor(test, dtype=ag.float64, device=device), invert=invert)
            same(out, torch.isin(t, torch.tensor(test, dtype=torch.float64), invert=invert))
            assert not out.requires_grad and out.grad_fn is None
    same(ag.isin(ints, ag.tensor([2.5, 3.0], device=device)), torch.isin(tints, torch.tensor([2.5, 3.0])))
    same(ag.isin(ints, 2), torch.isin(tints, 2))
    same(ag.isin(2, ints), torch.isin(2, tints))
    same(ag.isin(ints, ints[0], assume_unique=True), torch.isin(tints, tints[0], assume_unique=True))
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin\\(\\): Bool"):
        ag.isin(ag.tensor([True], device=device), ints)
    with pytest.raises(TypeError, match=r"isin\(\) received an invalid combination of arguments - got \(int, int\)"):
        ag.isin(1, 2)


@DEVICES
def test_signbit_against_torch(device):
    for values, dtype in ((X, ag.float64), ([-3, 0, 4], ag.int64), ([True, False], ag.bool), (X, ag.float32)):
        ours = ag.signbit(ag.tensor(values, dtype=dtype, device=device))
        same(ours, torch.signbit(torch.tensor(values, dtype=getattr(torch, repr(dtype).split(".")[1]))))
    x = ag.tensor(X, device=device, requires_grad=True)
    assert not x.signbit().requires_grad


@DEVICES
def test_count_nonzero_against_torch(device):
    x, t = ag.tensor(X, device=device, requires_grad=True), torch.tensor(X)
    for dim in (None, 0, 1, -1, (0, 1), (1,)):
        out = x.count_nonzero(dim) if dim is not None else x.count_nonzero()
        same(out, t.count_nonzero(dim) if dim is not None else t.count_nonzero())
        assert not out.requires_grad
    same(ag.count_nonzero(ag.tensor([True, False, True], device=device)),
         torch.count_nonzero(torch.tensor([True, False, True])))
    same(ag.count_nonzero(ag.tensor(0.0, device=device)), torch.count_nonzero(torch.tensor(0.0)))
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.count_nonzero((0, 0))
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)"):
        x.count_nonzero(3)


@DEVICES
@pytest.mark.parametrize("fn", ["triu_indices", "tril_indices"])
def test_triangle_indices_against_torch(device, fn):
    for row, col, offset in ((3, 4, 0), (3, 4, -1), (4, 3, 2), (5, 5, -7), (3, 3, 10), (0, 3, 0), (1, 1, 0)):
        ours = getattr(ag, fn)(row, col, offset, device=device)
        assert ours.device == ag.device(device)
        same(ours, getattr(torch, fn)(row, col, offset))
    same(getattr(ag, fn)(3, 2, dtype=ag.int32), getattr(torch, fn)(3, 2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="row must be non-negative, got-1"):
        getattr(ag, fn)(-1, 2)
    with pytest.raises(RuntimeError, match="col must be non-negative, got-3"):
        getattr(ag, fn)(3, -3)
    with pytest.raises(RuntimeError, match=f"\"{fn}\" not implemented for 'Float'"):
        getattr(ag, fn)(3, 3, dtype=ag.float32)
