"""max_pool3d, avg_pool3d and the adaptive poolings (average 1-D/3-D, max 1-D/2-D/3-D) against
finite differences and PyTorch on ``cpu`` and ``sim:0``: strides, padding, dilation, ceil_mode,
divisors, unbatched inputs, uneven adaptive windows, returned indices, second order, layers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICE, check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


def distinct(shape, seed=0):
    """Values without ties (max pooling's gradient is then unambiguous, finite differences exact)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) / n + 0.1


POOL3D = {
    "plain": ((2, 2, 4, 4, 4), dict(kernel_size=2)),
    "stride_padding": ((1, 2, 5, 4, 6), dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1))),
    "ceil_mode": ((1, 1, 5, 5, 5), dict(kernel_size=2, stride=2, ceil_mode=True)),
    "unbatched": ((2, 4, 3, 5), dict(kernel_size=(2, 1, 2), stride=1)),
}


@pytest.mark.parametrize("case", POOL3D)
async def test_max_pool3d(case):
    shape, kw = POOL3D[case]
    await check_op(lambda lib, x: F(lib).max_pool3d(x, **kw), distinct(shape), name="MaxPool3DWithIndicesBackward0")
    await check_op(lambda lib, x: F(lib).max_pool3d(x, dilation=2, **kw) if case == "plain" else
                   F(lib).max_pool3d(x, **kw), distinct(shape))


async def test_max_pool3d_indices_and_second_order():
    x = distinct((1, 2, 4, 5, 4))
    out, idx = ag.nn.functional.max_pool3d(ag.tensor(x, device=DEVICE[0]), 2, stride=(2, 1, 2), padding=1,
                                            return_indices=True)
    if has_torch():
        import torch

        t_out, t_idx = torch.nn.functional.max_pool3d(torch.tensor(x), 2, stride=(2, 1, 2), padding=1,
                                                      return_indices=True)
        np.testing.assert_array_equal(idx.cpu().numpy(), t_idx.numpy())
        np.testing.assert_array_equal(out.cpu().numpy(), t_out.numpy())
    await check_gradgrad(lambda lib, t: F(lib).max_pool3d(t, 2, stride=1), distinct((1, 1, 3, 3, 3)))


@pytest.mark.parametrize("case", POOL3D)
@pytest.mark.parametrize("count_include_pad", [True, False])
async def test_avg_pool3d(case, count_include_pad):
    shape, kw = POOL3D[case]
    await check_op(lambda lib, x: F(lib).avg_pool3d(x, count_include_pad=count_include_pad, **kw), shape,
                   name="AvgPool3DBackward0")


async def test_avg_pool3d_divisor_and_second_order():
    await check_op(lambda lib, x: F(lib).avg_pool3d(x, 3, stride=2, padding=1, divisor_override=5), (1, 2, 5, 5, 4))
    await check_gradgrad(lambda lib, x: F(lib).avg_pool3d(x, 2, stride=1, padding=1), (1, 1, 3, 2, 3))


@pytest.mark.parametrize("shape, size", [((2, 3, 7), 3), ((3, 5), 5), ((1, 2, 9), 4)])
async def test_adaptive_1d(shape, size):
    await check_op(lambda lib, x: F(lib).adaptive_avg_pool1d(x, size), shape)
    await check_op(lambda lib, x: F(lib).adaptive_max_pool1d(x, size), distinct(shape))


@pytest.mark.parametrize("shape, size", [((1, 2, 5, 7), (3, 4)), ((2, 4, 6), (None, 4)), ((1, 1, 3, 3), 5)])
async def test_adaptive_max_2d(shape, size):
    await check_op(lambda lib, x: F(lib).adaptive_max_pool2d(x, size), distinct(shape))
    out, idx = ag.nn.functional.adaptive_max_pool2d(ag.tensor(distinct(shape), device=DEVICE[0]), size, True)
    if has_torch():
        import torch

        np.testing.assert_array_equal(idx.cpu().numpy(), torch.nn.functional.adaptive_max_pool2d(
            torch.tensor(distinct(shape)), size, True)[1].numpy())


@pytest.mark.parametrize("shape, size", [((1, 2, 5, 4, 7), (2, 3, 4)), ((2, 3, 3, 4), 2),
                                         ((1, 1, 2, 3, 2), (3, None, 1))])
async def test_adaptive_3d(shape, size):
    await check_op(lambda lib, x: F(lib).adaptive_avg_pool3d(x, size), shape, name="AdaptiveAvgPool3DBackward0")
    await check_op(lambda lib, x: F(lib).adaptive_max_pool3d(x, size), distinct(shape))


async def test_adaptive_second_order():
    await check_gradgrad(lambda lib, x: F(lib).adaptive_avg_pool3d(x, (2, 1, 3)), (1, 1, 3, 2, 4))
    await check_gradgrad(lambda lib, x: F(lib).adaptive_max_pool2d(x, 2), distinct((1, 1, 3, 5)))


@pytest.mark.parametrize("call, match", [
    (lambda lib: F(lib).max_pool3d(lib.zeros(2, 4, 4), 2),
     r"non-empty 4D or 5D \(batch mode\) tensor expected for input"),
    (lambda lib: F(lib).max_pool3d(lib.zeros(1, 1, 4, 4, 4), 3, padding=2),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"),
    (lambda lib: F(lib).avg_pool3d(lib.zeros(1, 1, 4, 4, 4), 5),
     r"input image \(T: 4 H: 4 W: 4\) smaller than kernel size \(kT: 5 kH: 5 kW: 5\)"),
    (lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(2, 2), 2), r"Expected 4D or 5D tensor, but got: \[2, 2\]"),
])
def test_errors_use_torch_words(call, match):
    check_raises(call, RuntimeError, match)


def test_layers():
    x = ag.tensor(distinct((1, 2, 4, 4, 4)))
    assert tuple(nn.MaxPool3d(2)(x).shape) == (1, 2, 2, 2, 2)
    assert tuple(nn.AvgPool3d(3, stride=1, padding=1)(x).shape) == (1, 2, 4, 4, 4)
    assert tuple(nn.AdaptiveAvgPool3d((1, 2, 3))(x).shape) == (1, 2, 1, 2, 3)
    assert tuple(nn.AdaptiveMaxPool3d(3)(x).shape) == (1, 2, 3, 3, 3)
    out, idx = nn.AdaptiveMaxPool2d(3, return_indices=True)(x[0, 0])
    assert tuple(out.shape) == (4, 3, 3) and idx.dtype == ag.int64
    assert tuple(nn.AdaptiveAvgPool1d(2)(x[0, 0, 0]).shape) == (4, 2)
    assert tuple(nn.AdaptiveMaxPool1d(3)(x[0, 0]).shape) == (4, 4, 3)
    assert repr(nn.AdaptiveMaxPool3d(3)) == "AdaptiveMaxPool3d(output_size=3)"
