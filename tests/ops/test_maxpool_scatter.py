"""Max pooling's gradient where windows do not overlap (Note [Max-pool scatter by flat index]):
the flat-index store against the slab-by-slab masked fold it replaces, and against torch's
gradient, with padding, dilation, ceil_mode, 1-D pooling and inf/NaN gradients, on cpu and sim:0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag
from asyncgrad.ops import windows

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

DISJOINT = [dict(kernel_size=2), dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=(3, 4)),
            dict(kernel_size=2, stride=3, dilation=2), dict(kernel_size=3, ceil_mode=True),
            dict(kernel_size=(3, 2), stride=(3, 2), padding=(1, 1), ceil_mode=True)]


def _slabs(g, arg, x_shape, kernel, stride, dilation, pads, out, backend):
    """The fold every max-pool gradient took before: one masked slab per kernel position."""
    return windows.fold_slabs(lambda index, offset: backend.zero_where(arg != index, g), g, x_shape, kernel, stride,
                              dilation, pads, out)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", DISJOINT)
async def test_disjoint_windows_match_slabs_and_torch(op_device, kw, dtype):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 4, (2, 3, 9, 11)).astype(dtype)  # small integers: ties in most windows
    x = ag.tensor(data, device=op_device, requires_grad=True)
    y = ag.nn.functional.max_pool2d(x, **kw)
    grad = rng.standard_normal(tuple(y.shape)).astype(dtype)
    grad.flat[[0, 5, 7]] = [np.inf, np.nan, -np.inf]
    await y.backward(ag.tensor(grad, device=op_device))
    kernel, stride, pads, dilation, x_shape, out, arg = y.grad_fn.info
    assert all(s >= d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))  # the disjoint path
    backend = ag.device(op_device).backend
    expected = backend.to_host(_slabs(backend.from_host(grad), arg, x_shape, kernel, stride, dilation, pads, out,
                                      backend))
    got = x.grad.cpu().numpy()
    assert got.dtype == np.dtype(dtype)
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.isnan(got).sum(), 1) and np.isinf(got).sum() == 2  # each stored once, nowhere else
    if has_torch():
        import torch

        t = torch.tensor(data, requires_grad=True)
        torch.nn.functional.max_pool2d(t, **kw).backward(torch.tensor(grad))
        assert np.array_equal(got, t.grad.numpy(), equal_nan=True)


async def test_max_pool1d_and_unbatched(op_device):
    rng = np.random.default_rng(4)
    data = rng.standard_normal((3, 2, 10))
    x = ag.tensor(data, device=op_device, requires_grad=True)
    await ag.nn.functional.max_pool1d(x, 3, padding=1).sum().backward()
    windows_per_row = math.floor((10 + 2 - 3) / 3) + 1
    assert x.grad.cpu().numpy().sum() == 3 * 2 * windows_per_row  # one 1 per window
    if has_torch():
        import torch

        t = torch.tensor(data, requires_grad=True)
        torch.nn.functional.max_pool1d(t, 3, padding=1).sum().backward()
        assert np.array_equal(x.grad.cpu().numpy(), t.grad.numpy())
