"""A convolution's node keeps its forward's im2col columns for the weight's gradient (Note [A
convolution keeps its columns] in ops/conv.py): the gradients equal torch's in float64 through
every columns layout, the columns go when the node releases what it saved, a changed input
still raises torch's version error, saved-tensor hooks and the size limit keep nothing aside,
and a recorded (double) backward does not read them."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.devices.buffers import MIN_BYTES, _Slab
from asyncgrad.ops import conv, windows

CASES = {  # x shape, w shape, stride, padding, dilation, groups; the layout conv_columns picks
    "channels_last": ((3, 8, 12, 12), (16, 8, 5, 5), 1, 0, 1, 1, "last"),
    "whole_rows": ((2, 3, 10, 10), (4, 3, 3, 3), 1, 1, 1, 1, "rows"),
    "windows": ((3, 1, 28, 28), (8, 1, 5, 5), 1, 0, 1, 1, "windows"),
    "windows_grouped_more_channels_than_positions": ((2, 4, 5, 5), (12, 2, 3, 3), 2, 0, 1, 2, "windows"),
    "conv1d_strided_dilated": ((2, 3, 20), (5, 3, 3), 2, 1, 2, 1, None),
}


def _arrays(case):
    x_shape, w_shape = CASES[case][:2]
    rng = np.random.default_rng(11)
    return rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])


def _conv(case, lib, x, w, b):
    _, w_shape, stride, padding, dilation, groups, _ = CASES[case]
    f = lib.nn.functional.conv1d if len(w_shape) == 3 else lib.nn.functional.conv2d
    return f(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _torch_grads(case, x, w, b, requires_x=True):
    torch = pytest.importorskip("torch", reason="torch is the reference for the gradients")
    xt = torch.tensor(x, requires_grad=requires_x)
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    y = _conv(case, torch, xt, wt, bt)
    (y * y).sum().backward()
    return [t.grad.numpy() for t in ((xt, wt, bt) if requires_x else (wt, bt))]


@pytest.mark.parametrize("case", CASES)
async def test_weight_gradient_from_kept_columns_equals_torch(case):
    x, w, b = _arrays(case)
    xa = ag.tensor(x, requires_grad=True)
    wa, ba = ag.tensor(w, requires_grad=True), ag.tensor(b, requires_grad=True)
    y = _conv(case, ag, xa, wa, ba)
    columns = y.grad_fn.columns
    assert columns is not None
    layout = CASES[case][-1]
    if layout is not None:
        assert columns[0] == layout
    await (y * y).sum().backward()
    assert y.grad_fn.columns is None  # released with the saved input
    for got, expected in zip((xa.grad, wa.grad, ba.grad), _torch_grads(case, x, w, b)):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-10)


async def test_retain_graph_reads_the_columns_twice():
    case = "channels_last"
    x, w, b = _arrays(case)
    wa, ba = ag.tensor(w, requires_grad=True), ag.tensor(b, requires_grad=True)
    loss = (_conv(case, ag, ag.tensor(x), wa, ba) ** 2).sum()
    await loss.backward(retain_graph=True)
    first = wa.grad.numpy().copy()
    await loss.backward()
    np.testing.assert_allclose(wa.grad.numpy(), 2 * first, rtol=1e-12)
    np.testing.assert_allclose(first, _torch_grads(case, x, w, b, requires_x=False)[0], rtol=1e-10, atol=1e-10)


async def test_input_changed_in_place_raises_torchs_error():
    x, w, b = _arrays("windows")
    xa, wa = ag.tensor(x), ag.tensor(w, requires_grad=True)
    y = _conv("windows", ag, xa, wa, None)
    assert y.grad_fn.columns is not None
    xa.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        await y.sum().backward()


async def test_nothing_kept_under_saved_tensor_hooks():
    case = "channels_last"
    x, w, b = _arrays(case)
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    wa, ba = ag.tensor(w, requires_grad=True), ag.tensor(b, requires_grad=True)
    with ag.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = _conv(case, ag, ag.tensor(x), wa, ba)
    assert y.grad_fn.columns is None
    assert tuple(x.shape) in [tuple(s) for s in packed]
    await (y * y).sum().backward()
    np.testing.assert_allclose(wa.grad.numpy(), _torch_grads(case, x, w, b, requires_x=False)[0],
                               rtol=1e-10, atol=1e-10)


async def test_nothing_kept_past_the_limit_or_without_a_weight_gradient(monkeypatch):
    case = "channels_last"
    x, w, b = _arrays(case)
    assert _conv(case, ag, ag.tensor(x, requires_grad=True), ag.tensor(w), None).grad_fn.columns is None
    monkeypatch.setattr(conv, "KEPT_COLUMNS_BYTES", 1024)
    wa = ag.tensor(w, requires_grad=True)
    y = _conv(case, ag, ag.tensor(x), wa, None)
    assert y.grad_fn.columns is None
    await (y * y).sum().backward()
    ba = np.zeros_like(b)
    np.testing.assert_allclose(wa.grad.numpy(), _torch_grads(case, x, w, ba, requires_x=False)[0],
                               rtol=1e-10, atol=1e-10)


async def test_double_backward_equals_torch():
    torch = pytest.importorskip("torch", reason="torch is the reference for the gradients")
    case = "channels_last"
    x, w, b = _arrays(case)
    xa, wa = ag.tensor(x, requires_grad=True), ag.tensor(w, requires_grad=True)
    y = _conv(case, ag, xa, wa, None)
    assert y.grad_fn.columns is not None
    (gw,) = await ag.autograd.grad((y * y).sum(), (wa,), create_graph=True)
    await (gw * gw).sum().backward()
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (gwt,) = torch.autograd.grad((_conv(case, torch, xt, wt, None) ** 2).sum(), (wt,), create_graph=True)
    (gwt * gwt).sum().backward()
    np.testing.assert_allclose(gw.detach().numpy(), gwt.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(wa.grad.numpy(), wt.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_large_columns_are_a_recycled_buffer_equal_to_the_windows():
    x = np.random.default_rng(3).standard_normal((4, 8, 16, 16))
    layout, cols = windows.conv_columns(x, (5, 5), ((1, 1), ((0, 0), (0, 0)), (1, 1), 1), (12, 12))
    assert layout == "last" and cols.nbytes >= MIN_BYTES
    base = cols
    while base.base is not None:
        base = base.base
    assert type(base) is _Slab  # Note [Recycled product buffers]
    view = np.lib.stride_tricks.sliding_window_view(np.moveaxis(x, 1, -1), (5, 5), axis=(1, 2))
    expected = np.moveaxis(view, -3, -1).reshape(4, 144, 200)  # (N, P, K0, K1, C)
    np.testing.assert_array_equal(cols, expected)
