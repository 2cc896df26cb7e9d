"""Whole-row im2col columns (Note [Whole-row columns] in ops/windows.py): the convolution's forward
and weight gradient through them equal the exact-columns kernels and torch's, on ``cpu`` and
``sim:0``, in 1-D and 2-D, with padding, dilation, groups and a strided first dim; an input
holding inf or NaN gets the exact columns for the weight gradient (zero times garbage is NaN)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag
from asyncgrad.ops import windows

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {  # x shape, w shape, (stride, pads, dilation, groups): each takes whole rows
    "thin_conv2": ((4, 2, 12, 12), (16, 2, 5, 5), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)),
    "padding_3x3": ((2, 3, 8, 8), (4, 3, 3, 3), ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)),
    "dilation_groups": ((2, 4, 9, 10), (6, 2, 2, 3), ((1, 1), ((0, 0), (1, 2)), (2, 2), 2)),
    "strided_rows": ((2, 2, 11, 7), (3, 2, 3, 3), ((2, 1), ((1, 1), (1, 1)), (1, 1), 1)),
    "conv1d": ((3, 2, 12), (5, 2, 4), ((1,), ((1, 1),), (1,), 1)),
}


def _case(case, op_device):
    x_shape, w_shape, params = CASES[case]
    stride, pads, dilation, _ = params
    out = tuple(windows.out_size(n, k, s, d, b, a)
                for n, k, s, d, (b, a) in zip(x_shape[2:], w_shape[2:], stride, dilation, pads))
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    g = rng.standard_normal((x_shape[0], w_shape[0]) + out)
    return x, w, g, params, ag.device(op_device).backend


def _exact_forward(x, w, params):
    """conv(x, w) from the exact windows, summed in numpy: the reference the kernels must equal."""
    stride, pads, dilation, groups = params
    xpad = np.pad(x, ((0, 0), (0, 0)) + pads)
    kernel = w.shape[2:]
    out = tuple(windows.out_size(n, k, s, d, 0, 0) for n, k, s, d in zip(xpad.shape[2:], kernel, stride, dilation))
    view = windows.windows(xpad, kernel, stride, dilation, out)  # (N, C, *K, *out)
    og, cg = w.shape[0] // groups, w.shape[1]
    parts = []
    for grp in range(groups):
        v = view[:, grp * cg:(grp + 1) * cg]
        wg = w[grp * og:(grp + 1) * og]
        parts.append(np.tensordot(wg, v, axes=(tuple(range(1, w.ndim)), tuple(range(1, w.ndim)))).swapaxes(0, 1))
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("case", CASES)
def test_row_columns_are_taken(case, op_device):
    x, w, _, params, backend = _case(case, op_device)
    stride, pads, dilation, groups = params
    xpad = windows.pad(backend.from_host(x), pads)
    out = tuple(windows.out_size(n, k, s, d, 0, 0) for n, k, s, d in zip(xpad.shape[2:], w.shape[2:], stride, dilation))
    assert windows._row_columns(xpad, w.shape[2:], stride, dilation, out, groups) is not None
    assert not windows._channels_last(x.shape[1], w.shape[2:], stride, dilation, out, groups)


@pytest.mark.parametrize("case", CASES)
def test_forward_and_weight_grad_agree(case, op_device):
    x, w, g, params, backend = _case(case, op_device)
    x_d, w_d, g_d = backend.from_host(x), backend.from_host(w), backend.from_host(g)
    y = backend.to_host(windows.conv_forward(x_d, w_d, params))
    np.testing.assert_allclose(y, _exact_forward(x, w, params), rtol=1e-12, atol=1e-12)
    dw = backend.to_host(windows.conv_weight_grad(x_d, g_d, w.shape, params))
    # <dw, u> = <conv(x, u), g> for every u: checked on the basis through the exact forward
    expected = np.zeros(w.shape)
    for index in np.ndindex(*w.shape):
        u = np.zeros(w.shape)
        u[index] = 1.0
        expected[index] = np.sum(_exact_forward(x, u, params) * g)
    np.testing.assert_allclose(dw, expected, rtol=1e-10, atol=1e-10)
    if not has_torch():
        return
    import torch

    stride, pads, dilation, groups = params
    if any(b != a for b, a in pads):
        return  # torch pads symmetrically; the exact reference above covers these
    conv = torch.nn.functional.conv1d if len(stride) == 1 else torch.nn.functional.conv2d
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = conv(xt, wt, None, stride, tuple(b for b, _ in pads), dilation, groups)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_non_finite_input_takes_exact_columns(bad, op_device):
    """An inf in the last columns of a row: whole rows would read it at the next row's garbage
    columns, where the zero-padded gradient times inf is NaN in weight entries torch keeps finite."""
    x, w, g, params, backend = _case("thin_conv2", op_device)
    x[:, :, :, -1] = bad
    dw = backend.to_host(windows.conv_weight_grad(backend.from_host(x), backend.from_host(g), w.shape, params))
    assert np.isfinite(dw[:, :, :, 0]).all()  # kernel column 0 never reads the input's last column
    if has_torch():
        import torch

        xt, wt = torch.tensor(x), torch.tensor(w, requires_grad=True)
        torch.nn.functional.conv2d(xt, wt).backward(torch.tensor(g))
        np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-10, atol=1e-10, equal_nan=True)
