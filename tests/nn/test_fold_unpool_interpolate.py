"""unfold/fold, max_unpool1d/2d/3d and interpolate's modes (nearest, nearest-exact, linear,
bilinear, bicubic, trilinear, area) against finite differences and PyTorch on ``cpu`` and
``sim:0``, with the layers and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICE, check_gradgrad, check_op, check_raises

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


UNFOLD = {
    "plain": ((2, 3, 4, 5), dict(kernel_size=2)),
    "all_forms": ((1, 2, 6, 5), dict(kernel_size=(3, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1))),
    "unbatched": ((2, 4, 4), dict(kernel_size=3, padding=1)),
}


@pytest.mark.parametrize("case", UNFOLD)
async def test_unfold_and_fold(case):
    shape, kw = UNFOLD[case]
    out, _ = await check_op(lambda lib, x: F(lib).unfold(x, **kw), shape)
    size = shape[-2:]
    await check_op(lambda lib, x: F(lib).fold(x, size, **kw), tuple(out.shape))


async def test_fold_second_order_and_layers():
    await check_gradgrad(lambda lib, x: F(lib).unfold(x, 2, stride=2), (1, 2, 4, 4))
    x = ag.tensor(np.random.default_rng(0).standard_normal((1, 2, 5, 5)), device=DEVICE[0])
    cols = nn.Unfold(3, padding=1)(x)
    assert tuple(cols.shape) == (1, 18, 25)
    assert tuple(nn.Fold((5, 5), 3, padding=1)(cols).shape) == (1, 2, 5, 5)
    check_raises(lambda lib: F(lib).unfold(lib.zeros(1, 2, 4, 4), 5), RuntimeError,
                 r"calculated shape of the array of sliding blocks as \(0, 0\), but its components must be at least")


@pytest.mark.parametrize("d, shape, kw", [(1, (2, 3, 8), dict(kernel_size=2)),
                                          (2, (1, 2, 6, 5), dict(kernel_size=2, stride=(2, 1), padding=(1, 0))),
                                          (3, (1, 1, 4, 4, 4), dict(kernel_size=2))])
async def test_max_unpool(d, shape, kw):
    x = ag.tensor(np.random.default_rng(1).permutation(int(np.prod(shape))).reshape(shape) * 1.0, device=DEVICE[0])
    pooled, indices = getattr(ag.nn.functional, f"max_pool{d}d")(x, return_indices=True, **kw)
    idx = indices.cpu().numpy()
    # overlapping windows repeat an index: the unpooling keeps one write, and its gradient (torch's: the
    # gradient read at each index) is no derivative there, so finite differences check distinct ones
    distinct = len(np.unique(idx)) == idx.size
    await check_op(lambda lib, v: getattr(F(lib), f"max_unpool{d}d")(v, lib.tensor(idx), **kw), tuple(pooled.shape),
                   fd=distinct)
    layer = getattr(nn, f"MaxUnpool{d}d")(**kw)
    restored = layer(pooled, indices, output_size=x.shape)
    assert tuple(restored.shape) == tuple(x.shape)


def test_max_unpool_errors():
    check_raises(lambda lib: F(lib).max_unpool2d(lib.zeros(1, 1, 2, 2), lib.tensor(np.zeros((1, 1, 2, 2), np.int64)), 2,
                                                 output_size=(9, 9)),
                 ValueError, r'invalid output_size "\(9, 9\)" \(dim 0 must be between 2 and 6\)')


MODES = {
    "nearest_1d": ((1, 2, 5), dict(size=8, mode="nearest")),
    "nearest_3d": ((1, 1, 2, 3, 2), dict(scale_factor=2, mode="nearest")),
    "nearest_exact": ((1, 2, 5, 4), dict(size=(7, 3), mode="nearest-exact")),
    "linear": ((2, 2, 5), dict(size=9, mode="linear")),
    "linear_corners": ((1, 2, 5), dict(scale_factor=1.7, mode="linear", align_corners=True)),
    "bicubic": ((1, 2, 4, 5), dict(size=(7, 3), mode="bicubic")),
    "bicubic_corners": ((1, 1, 4, 4), dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    "trilinear": ((1, 1, 3, 4, 2), dict(size=(5, 3, 4), mode="trilinear")),
    "area": ((1, 2, 7, 5), dict(size=(3, 4), mode="area")),
    "area_3d": ((1, 1, 4, 5, 3), dict(scale_factor=0.5, mode="area")),
}


@pytest.mark.parametrize("case", MODES)
async def test_interpolate_modes(case):
    shape, kw = MODES[case]
    await check_op(lambda lib, x: F(lib).interpolate(x, **kw), shape)


async def test_interpolate_second_order_and_upsample_layers():
    await check_gradgrad(lambda lib, x: F(lib).interpolate(x, size=(3, 5), mode="bicubic"), (1, 1, 3, 3))
    x = ag.tensor(np.random.default_rng(2).standard_normal((1, 2, 3, 3)), device=DEVICE[0])
    assert tuple(nn.Upsample(scale_factor=2, mode="bilinear")(x).shape) == (1, 2, 6, 6)
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert tuple(nn.UpsamplingNearest2d(size=(4, 5))(x).shape) == (1, 2, 4, 5)
    assert tuple(nn.UpsamplingBilinear2d(scale_factor=2)(x).shape) == (1, 2, 6, 6)
    check_raises(lambda lib: F(lib).interpolate(lib.zeros(1, 1, 4), size=5, mode="bilinear"), NotImplementedError,
                 "Got 3D input, but bilinear mode needs 4D input")
