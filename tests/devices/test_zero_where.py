"""The backend primitive ``zero_where`` (Note [Branchless zero_where]) and what uses it: relu's
gradient (torch's threshold_backward) keeps torch's zeros under inf and NaN gradients, and max
pooling's gradient goes to the first maximum of each window, as torch's does."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_zero_where_exact(op_device, dtype):
    if dtype == "float16" and op_device != "cpu":
        pytest.skip("array_api_strict has no float16")
    backend = ag.device(op_device).backend
    values = np.array([1.5, -0.0, np.inf, -np.inf, np.nan, 3.0, -2.0, 0.0], dtype=dtype)
    cond = np.array([True, False, True, False, True, False, True, False])
    out = backend.to_host(backend.zero_where(backend.from_host(cond), backend.from_host(values)))
    expected = np.where(cond, np.zeros((), dtype), values)
    assert out.dtype == np.dtype(dtype)
    assert np.array_equal(out, expected, equal_nan=True)
    assert not np.signbit(out[cond]).any()  # +0.0, as where's zero


async def test_relu_gradient_under_inf_and_nan(op_device):
    x = ag.tensor([-1.0, 2.0, np.nan, -3.0, 0.0, 4.0], device=op_device, requires_grad=True)
    g = ag.tensor([np.inf, np.nan, 5.0, np.nan, np.inf, -np.inf], device=op_device)
    await x.relu().backward(g)
    expected = np.array([0.0, np.nan, 5.0, 0.0, 0.0, -np.inf])
    assert np.array_equal(x.grad.cpu().numpy(), expected, equal_nan=True)
    if has_torch():
        import torch

        t = torch.tensor(x.detach().cpu().numpy(), requires_grad=True)
        t.relu().backward(torch.tensor(g.cpu().numpy()))
        assert np.array_equal(t.grad.numpy(), expected, equal_nan=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=1, dilation=2)])
async def test_max_pool_gradient_with_ties(op_device, kw):
    """Integer-valued inputs tie often; NaN is the maximum of its window. Gradients against torch's."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 3, (2, 3, 7, 6)).astype(np.float64)
    data[0, 1, 2, 3] = np.nan
    grad = rng.standard_normal((2, 3) + tuple(ag.nn.functional.max_pool2d(ag.tensor(data), **kw).shape[2:]))
    x = ag.tensor(data, device=op_device, requires_grad=True)
    await ag.nn.functional.max_pool2d(x, **kw).backward(ag.tensor(grad, device=op_device))
    if has_torch():
        import torch

        t = torch.tensor(data, requires_grad=True)
        torch.nn.functional.max_pool2d(t, **kw).backward(torch.tensor(grad))
        np.testing.assert_allclose(x.grad.cpu().numpy(), t.grad.numpy(), rtol=0, atol=1e-12)
    else:  # every output's gradient lands somewhere, once
        np.testing.assert_allclose(x.grad.cpu().numpy().sum(), grad.sum())


@pytest.mark.parametrize("value", [2.0, -1.5, 0.0])
async def test_relu_of_a_0d_tensor(op_device, value):
    """A 0-d relu (of a sum: numpy reduces to scalars) takes where's path, not the bit trick (numpy
    scalars take no ``out=``): the gradient is torch's threshold_backward, 0 at 0."""
    x = ag.tensor([value, value], device=op_device, requires_grad=True)
    await x.sum().relu().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [1.0, 1.0] if value > 0 else [0.0, 0.0])
