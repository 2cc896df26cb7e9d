"""Channels-last im2col columns (Note [Channels-last columns] in ops/windows.py): the convolution's
forward and weight gradient through them equal exact sums over the windows and torch's, on ``cpu``
and ``sim:0``, in 1-D, 2-D and 3-D, with padding, stride and dilation, through the batched
per-sample product and the one over all samples; the layouts are picked as the Note says."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag
from asyncgrad.ops import windows

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {  # x shape, w shape, (stride, pads, dilation, groups): each takes channels-last columns
    "lenet_conv2": ((3, 8, 12, 12), (16, 8, 5, 5), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)),
    "padded_strided": ((2, 16, 9, 8), (5, 16, 3, 3), ((2, 2), ((1, 1), (1, 1)), (1, 1), 1)),
    "uneven_pads_dilated": ((2, 20, 9, 10), (4, 20, 2, 3), ((1, 1), ((0, 1), (2, 1)), (2, 2), 1)),
    "more_channels_than_positions": ((2, 12, 4, 4), (40, 12, 3, 3), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)),
    "conv1d": ((3, 20, 12), (6, 20, 3), ((1,), ((1, 1),), (1,), 1)),
    "conv3d": ((2, 20, 5, 6, 5), (4, 20, 2, 2, 2), ((1, 2, 1), ((0, 0), (1, 0), (0, 0)), (1, 1, 2), 1)),
}


def _case(case, op_device):
    x_shape, w_shape, params = CASES[case]
    stride, pads, dilation, _ = params
    out = tuple(windows.out_size(n, k, s, d, b, a)
                for n, k, s, d, (b, a) in zip(x_shape[2:], w_shape[2:], stride, dilation, pads))
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    g = rng.standard_normal((x_shape[0], w_shape[0]) + out)
    return x, w, g, params, out, ag.device(op_device).backend


def _exact(x, w, params):
    """conv(x, w) (one group) as a sum over the windows of the padded input, in numpy."""
    stride, pads, dilation, _ = params
    xpad = np.pad(x, ((0, 0), (0, 0)) + pads)
    kernel = w.shape[2:]
    out = tuple(windows.out_size(n, k, s, d, 0, 0) for n, k, s, d in zip(xpad.shape[2:], kernel, stride, dilation))
    view = windows.windows(xpad, kernel, stride, dilation, out)  # (N, C, *K, *out)
    return np.tensordot(w, view, axes=(tuple(range(1, w.ndim)), tuple(range(1, w.ndim)))).swapaxes(0, 1)


@pytest.mark.parametrize("case", CASES)
def test_channels_last_is_taken(case, op_device):
    x, w, _, params, out, _ = _case(case, op_device)
    stride, _, dilation, groups = params
    assert windows._channels_last(x.shape[1], w.shape[2:], stride, dilation, out, groups)


@pytest.mark.parametrize("case", CASES)
def test_forward_and_weight_grad_equal_exact_sums(case, op_device):
    x, w, g, params, _, backend = _case(case, op_device)
    x_d, w_d, g_d = backend.from_host(x), backend.from_host(w), backend.from_host(g)
    y = backend.to_host(windows.conv_forward(x_d, w_d, params))
    np.testing.assert_allclose(y, _exact(x, w, params), rtol=1e-12, atol=1e-12)
    dw = backend.to_host(windows.conv_weight_grad(x_d, g_d, w.shape, params))
    assert dw.shape == w.shape
    expected = np.zeros(w.shape)  # <dw, u> = <conv(x, u), g> on the basis
    for index in np.ndindex(*w.shape):
        u = np.zeros(w.shape)
        u[index] = 1.0
        expected[index] = np.sum(_exact(x, u, params) * g)
    np.testing.assert_allclose(dw, expected, rtol=1e-10, atol=1e-10)
    if not has_torch():
        return
    import torch

    stride, pads, dilation, _ = params
    if any(b != a for b, a in pads):
        return  # torch pads symmetrically; the exact sums cover these
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[len(stride) - 1]
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = conv(xt, wt, None, stride, tuple(b for b, _ in pads), dilation)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_other_layouts_are_kept(op_device):
    """Few channels (LeNet's first layer), several groups, and long output rows keep the window view."""
    assert not windows._channels_last(1, (5, 5), (1, 1), (1, 1), (24, 24), 1)
    assert not windows._channels_last(16, (3, 3), (1, 1), (1, 1), (8, 8), 2)
    assert not windows._channels_last(4, (3, 3), (1, 1), (1, 1), (30, 30), 1)


async def test_conv2d_step_matches_torch_float32(op_device):
    """LeNet's second layer through conv2d and backward, float32, against torch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 8, 5, 5)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    xa, wa, ba = (ag.tensor(a, device=op_device, requires_grad=True) for a in (x, w, b))
    y = ag.nn.functional.conv2d(xa, wa, ba)
    await (y * y).sum().backward()
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.conv2d(xt, wt, bt)
    (yt * yt).sum().backward()
    np.testing.assert_allclose(y.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    for a, t in ((xa, xt), (wa, wt), (ba, bt)):
        np.testing.assert_allclose(a.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-3)
