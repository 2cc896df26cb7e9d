"""The kernels of a 2-D convolution's input gradient (``windows.conv_input_grad``): im2col's
columns folded back, the banded weight (Note [Banded weight]) and the shifted gradient rows (Note
[Shifted gradient rows], where the last dim has stride and dilation 1), each against the columns
and against torch's ``conv2d_input``, on ``cpu`` and ``sim:0``, with stride, padding, dilation and
groups; and which one the cost model picks."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import has_torch

import asyncgrad as ag
from asyncgrad.ops import windows

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {  # x shape, w shape, (stride, pads, dilation, groups)
    "lenet_conv2": ((4, 8, 12, 12), (16, 8, 5, 5), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)),
    "stride_padding": ((2, 2, 7, 6), (3, 2, 3, 3), ((2, 2), ((1, 1), (1, 1)), (1, 1), 1)),
    "dilation_asymmetric": ((1, 2, 7, 8), (2, 2, 2, 3), ((1, 2), ((2, 2), (1, 1)), (2, 1), 1)),
    "uneven_pads_groups": ((2, 6, 11, 9), (9, 2, 3, 2), ((2, 1), ((1, 1), (0, 2)), (1, 2), 3)),
    "wide_image": ((2, 3, 32, 32), (64, 3, 3, 3), ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)),
    "rows_stride_dilation_groups": ((2, 6, 13, 7), (9, 2, 3, 3), ((2, 1), ((1, 2), (2, 0)), (3, 1), 3)),
    "kernel_wider_than_output": ((2, 2, 5, 4), (3, 2, 2, 4), ((1, 1), ((0, 1), (1, 2)), (1, 1), 1)),
}


def _arrays(case, op_device):
    x_shape, w_shape, params = CASES[case]
    rng = np.random.default_rng(11)
    stride, pads, dilation, _ = params
    out = tuple(windows.out_size(n, k, s, d, b, a)
                for n, k, s, d, (b, a) in zip(x_shape[2:], w_shape[2:], stride, dilation, pads))
    w = rng.standard_normal(w_shape)
    g = rng.standard_normal((x_shape[0], w_shape[0]) + out)
    dev = ag.device(op_device)
    return x_shape, params, w, g, dev.backend.from_host(w), dev.backend.from_host(g), dev


@pytest.mark.parametrize("case", CASES)
def test_kernels_agree_with_torch(case, op_device):
    x_shape, params, w, g, w_dev, g_dev, dev = _arrays(case, op_device)
    banded = dev.backend.to_host(windows.banded_input_grad(g_dev, w_dev, x_shape, params))
    columns = dev.backend.to_host(windows.columns_input_grad(g_dev, w_dev, x_shape, params))
    assert banded.shape == columns.shape == x_shape
    np.testing.assert_allclose(banded, columns, rtol=1e-12, atol=1e-12)
    stride, _, dilation, _ = params
    if stride[1] == 1 and dilation[1] == 1:  # Note [Shifted gradient rows]
        shifted = dev.backend.to_host(windows.shifted_rows_input_grad(g_dev, w_dev, x_shape, params))
        assert shifted.shape == x_shape
        np.testing.assert_allclose(shifted, columns, rtol=1e-12, atol=1e-12)
    if not has_torch():
        return
    import torch

    stride, pads, dilation, groups = params
    if any(b != a for b, a in pads):  # torch's conv2d_input pads symmetrically: pad, then crop
        padded = (x_shape[0], x_shape[1]) + tuple(n + b + a for n, (b, a) in zip(x_shape[2:], pads))
        full = torch.nn.grad.conv2d_input(padded, torch.tensor(w), torch.tensor(g), stride, 0, dilation, groups)
        expected = full[:, :, pads[0][0]:pads[0][0] + x_shape[2], pads[1][0]:pads[1][0] + x_shape[3]].numpy()
    else:
        expected = torch.nn.grad.conv2d_input(x_shape, torch.tensor(w), torch.tensor(g), stride,
                                              tuple(b for b, _ in pads), dilation, groups).numpy()
    np.testing.assert_allclose(banded, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("case", "picked"), [("lenet_conv2", "shifted_rows"), ("wide_image", "columns"),
                                               ("uneven_pads_groups", "banded")])
def test_cost_model_picks(case, picked, op_device, monkeypatch):
    """LeNet's small planes take the shifted rows; a 32-wide image with 64 output channels, where
    the band would cost ``P1 / K1`` times the multiply-adds and the shifted rows ``P1 / O1`` times
    and two copies of a large gradient, keeps the columns; a dilated last dim, which the shifted
    rows cannot take, the band."""
    x_shape, params, _, _, w_dev, g_dev, _ = _arrays(case, op_device)
    calls = []
    for name in ("banded", "columns", "shifted_rows"):
        kernel = getattr(windows, f"{name}_input_grad")
        monkeypatch.setattr(windows, f"{name}_input_grad",
                            lambda *args, _k=kernel, _n=name: calls.append(_n) or _k(*args))
    windows.conv_input_grad(g_dev, w_dev, x_shape, params)
    assert calls == [picked]


STRIDED = {  # x shape, w shape, (stride, pads, dilation, groups): Note [Strided input gradients by phase]
    "convtranspose_k4_s2": ((2, 3, 10, 10), (4, 3, 4, 4), ((2, 2), ((1, 1), (1, 1)), (1, 1), 1)),
    "stride_padding": CASES["stride_padding"],
    "dilation_with_stride": ((1, 2, 13, 11), (3, 2, 3, 2), ((3, 2), ((2, 2), (0, 1)), (2, 3), 1)),
    "output_padding_tail": ((2, 2, 9, 8), (2, 2, 3, 3), ((2, 3), ((1, 1), (0, 0)), (1, 1), 1)),
    "one_d": ((3, 4, 17), (5, 4, 5), ((3,), ((2, 2),), (2,), 1)),
    "three_d": ((1, 2, 7, 6, 5), (3, 2, 3, 2, 3), ((2, 2, 1), ((1, 1), (0, 0), (1, 1)), (1, 1, 1), 1)),
}


@pytest.mark.parametrize("case", STRIDED)
def test_strided_input_gradient_by_phase_is_the_columns_fold(case, op_device):
    x_shape, w_shape, params = STRIDED[case]
    stride, pads, dilation, _ = params
    out = tuple(windows.out_size(n, k, s, d, b, a)
                for n, k, s, d, (b, a) in zip(x_shape[2:], w_shape[2:], stride, dilation, pads))
    rng = np.random.default_rng(5)
    backend = ag.device(op_device).backend
    w = backend.from_host(rng.standard_normal(w_shape))
    g = backend.from_host(rng.standard_normal((x_shape[0], w_shape[0]) + out))
    by_phase = backend.to_host(windows.phase_input_grad(g, w, x_shape, params))
    columns = backend.to_host(windows.columns_input_grad(g, w, x_shape, params))
    assert by_phase.shape == x_shape
    np.testing.assert_allclose(by_phase, columns, rtol=1e-12, atol=1e-12)
    assert np.array_equal(backend.to_host(windows.conv_input_grad(g, w, x_shape, params)), by_phase)  # picked



SHIFTED = {  # x shape, w shape, conv2d keywords: stride and dilation 1 along the last dim
    "plain": ((2, 3, 6, 6), (4, 3, 3, 3), {}),
    "padding_groups_row_stride": ((2, 4, 7, 6), (6, 2, 3, 2), dict(padding=1, groups=2, stride=(2, 1),
                                                                  dilation=(2, 1))),
}


@pytest.mark.parametrize("case", SHIFTED)
async def test_shifted_rows_through_conv2d_first_and_second_order(case, op_device, monkeypatch):
    """conv2d's gradients and their second order (finite differences and torch, float64) with
    every input gradient taken by the shifted rows (Note [Shifted gradient rows])."""
    from helpers import check_gradgrad, check_op

    x_shape, w_shape, kw = SHIFTED[case]
    calls = []

    def shifted_only(g, w, shape, params):
        calls.append(params)
        return windows.shifted_rows_input_grad(g, w, shape, params)

    monkeypatch.setattr(windows, "conv_input_grad", shifted_only)

    def conv(lib, *tensors):
        return (lib.F if lib.name == "torch" else ag.nn.functional).conv2d(*tensors, **kw)

    await check_op(conv, x_shape, w_shape, (w_shape[0],), name="ConvolutionBackward0")
    assert calls
    await check_gradgrad(conv, x_shape, w_shape)
