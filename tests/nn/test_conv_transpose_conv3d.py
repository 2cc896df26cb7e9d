"""Transposed convolutions (1-D, 2-D, 3-D) and conv3d against finite differences and PyTorch, on
``cpu`` and ``sim:0``, first and second order, with torch's errors and the layers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


CONV_TRANSPOSE = {  # (d, input, weight (C_in, C_out / groups, *K), keywords)
    "1d_plain": (1, (2, 3, 5), (3, 2, 3), {}),
    "1d_stride_pad_outpad": (1, (2, 3, 4), (3, 3, 3), dict(stride=2, padding=2, output_padding=1)),
    "1d_groups_dilation": (1, (2, 4, 4), (4, 2, 3), dict(stride=3, padding=1, output_padding=2, groups=2,
                                                         dilation=2)),
    "2d_plain": (2, (2, 3, 4, 5), (3, 2, 3, 2), {}),
    "2d_stride_padding": (2, (1, 2, 4, 4), (2, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    "2d_asymmetric_groups": (2, (2, 4, 3, 4), (4, 1, 2, 3), dict(stride=(2, 1), padding=(1, 0), groups=2,
                                                                 dilation=(1, 2))),
    "2d_outpad_past_stride": (2, (1, 2, 3, 3), (2, 2, 2, 2), dict(stride=1, output_padding=1, dilation=2)),
    "3d_plain": (3, (1, 2, 3, 3, 3), (2, 2, 2, 2, 2), {}),
    "3d_stride_groups": (3, (2, 4, 2, 3, 2), (4, 1, 2, 2, 3), dict(stride=(2, 1, 2), padding=(0, 1, 1), groups=2,
                                                                   output_padding=(1, 0, 1))),
}


@pytest.mark.parametrize("case", CONV_TRANSPOSE)
@pytest.mark.parametrize("bias", [True, False])
async def test_conv_transpose(case, bias):
    d, x_shape, w_shape, kw = CONV_TRANSPOSE[case]
    inputs = (x_shape, w_shape) + (((w_shape[1] * kw.get("groups", 1),),) if bias else ())
    fn = f"conv_transpose{d}d"
    await check_op(lambda lib, *t: getattr(F(lib), fn)(*t, **kw), *inputs, name="ConvolutionBackward0")


@pytest.mark.parametrize("case", ["1d_groups_dilation", "2d_stride_padding", "2d_outpad_past_stride"])
async def test_conv_transpose_second_order(case):
    d, x_shape, w_shape, kw = CONV_TRANSPOSE[case]
    fn = f"conv_transpose{d}d"
    await check_gradgrad(lambda lib, x, w, b: getattr(F(lib), fn)(x, w, b, **kw), x_shape, w_shape,
                         (w_shape[1] * kw.get("groups", 1),))


async def test_unbatched_conv_transpose_is_a_squeezed_batch_of_one():
    await check_op(lambda lib, x, w: F(lib).conv_transpose2d(x, w, stride=2), (2, 3, 3), (2, 3, 2, 2),
                   name="SqueezeBackward1")
    await check_op(lambda lib, x, w: F(lib).conv_transpose1d(x, w, padding=1), (3, 4), (3, 1, 3),
                   name="SqueezeBackward1")


CONV3D = {
    "plain": ((2, 2, 4, 3, 4), (3, 2, 2, 2, 2), {}),
    "stride_padding_dilation": ((1, 2, 5, 5, 4), (2, 2, 3, 2, 2), dict(stride=(2, 1, 2), padding=1,
                                                                       dilation=(1, 2, 1))),
    "groups_same": ((1, 4, 3, 4, 3), (4, 2, 3, 2, 3), dict(groups=2, padding="same")),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", CONV3D)
async def test_conv3d(case):
    x_shape, w_shape, kw = CONV3D[case]
    await check_op(lambda lib, x, w, b: F(lib).conv3d(x, w, b, **kw), x_shape, w_shape, (w_shape[0],),
                   name="ConvolutionBackward0")


async def test_conv3d_second_order_and_unbatched():
    await check_gradgrad(lambda lib, x, w: F(lib).conv3d(x, w, stride=2, padding=1), (1, 2, 3, 4, 3), (2, 2, 2, 2, 2))
    await check_op(lambda lib, x, w: F(lib).conv3d(x, w), (2, 3, 3, 3), (1, 2, 2, 2, 2), name="SqueezeBackward1")


@pytest.mark.parametrize("call, match", [
    (lambda lib: F(lib).conv_transpose2d(lib.zeros(2, 3, 5, 5), lib.zeros(4, 2, 3, 3)),
     r"Given transposed=1, weight of size \[4, 2, 3, 3\], expected input\[2, 3, 5, 5\] to have 4 channels, but got "
     r"3 channels instead"),
    (lambda lib: F(lib).conv_transpose2d(lib.zeros(2, 3, 5, 5), lib.zeros(3, 2, 3, 3), stride=2, output_padding=2),
     "output padding must be smaller than either stride or dilation, but got output_padding_height: 2 "
     "output_padding_width: 2 stride_height: 2 stride_width: 2 dilation_height: 1 dilation_width: 1"),
    (lambda lib: F(lib).conv_transpose2d(lib.zeros(2, 3, 5, 5), lib.zeros(3, 2, 3, 3), padding=-1),
     "negative padding is not supported"),
    (lambda lib: F(lib).conv_transpose1d(lib.zeros(2, 3, 5, 5), lib.zeros(3, 2, 3)),
     r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv_transpose1d, but got input of size: \[2, 3, 5, 5\]"),
    (lambda lib: F(lib).conv3d(lib.zeros(1, 2, 3, 3, 3), lib.zeros(1, 3, 2, 2, 2)),
     r"expected input\[1, 2, 3, 3, 3\] to have 3 channels, but got 2 channels instead"),
])
def test_errors_use_torch_words(call, match):
    check_raises(call, RuntimeError, match)


async def test_layers_match_torch_and_take_output_size():
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2, dtype=ag.float64)
    assert tuple(layer.weight.shape) == (4, 3, 3, 3) and tuple(layer.bias.shape) == (6,)
    assert repr(layer) == ("ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2)")
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 4, 5, 5)))
    assert tuple(layer(x, output_size=(10, 10)).shape) == (2, 6, 10, 10)
    assert tuple(layer(x).shape) == (2, 6, 9, 9)
    with pytest.raises(ValueError, match=r"requested an output size of \[12, 12\], but valid sizes range from "
                                         r"\[9, 9\] to \[10, 10\] \(for an input of \[5, 5\]\)"):
        layer(x, output_size=(12, 12))
    conv = nn.Conv3d(2, 3, (2, 3, 1), padding=1, dtype=ag.float64)
    assert tuple(conv.weight.shape) == (3, 2, 2, 3, 1)
    y = conv(ag.zeros(1, 2, 3, 3, 3, dtype=ag.float64))
    assert tuple(y.shape) == (1, 3, 4, 3, 5)
    if has_torch():
        import torch

        t = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2).double()
        with torch.no_grad():
            t.weight.copy_(torch.tensor(layer.weight.detach().numpy()))
            t.bias.copy_(torch.tensor(layer.bias.detach().numpy()))
        expected = t(torch.tensor(x.numpy()), output_size=(10, 10)).detach().numpy()
        np.testing.assert_allclose(layer(x, output_size=(10, 10)).detach().numpy(), expected, rtol=1e-12,
                                   atol=1e-12)
