"""embedding_bag, grid_sample and fractional max pooling against finite differences and PyTorch
on ``cpu`` and ``sim:0``: bag forms (2-D input, offsets, include_last_offset, empty bags,
padding_idx, per-sample weights), every grid_sample mode and padding, fractional pooling given
torch's random samples, and the layers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICE, check_gradgrad, check_op, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


IDX_2D = np.array([[1, 3, 0], [4, 4, 2]], dtype=np.int64)
IDX_1D = np.array([2, 0, 5, 5, 1, 3], dtype=np.int64)
OFFSETS = np.array([0, 2, 2, 5], dtype=np.int64)  # the second bag is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
async def test_embedding_bag_forms(mode):
    await check_op(lambda lib, w: F(lib).embedding_bag(lib.tensor(IDX_2D), w, mode=mode), (6, 3), fd=mode != "max")
    await check_op(lambda lib, w: F(lib).embedding_bag(lib.tensor(IDX_1D), w, lib.tensor(OFFSETS), mode=mode),
                   (6, 3), fd=mode != "max")
    await check_op(lambda lib, w: F(lib).embedding_bag(lib.tensor(IDX_1D), w, lib.tensor(OFFSETS), mode=mode,
                                                       include_last_offset=True, padding_idx=5), (6, 3),
                   fd=mode != "max")


async def test_embedding_bag_per_sample_weights_and_layer():
    await check_op(lambda lib, w, p: F(lib).embedding_bag(lib.tensor(IDX_1D), w, lib.tensor(OFFSETS), mode="sum",
                                                          per_sample_weights=p), (6, 3), (6,))
    # torch has no second derivative of per-sample weights: finite differences check asyncgrad's
    await check_gradgrad(lambda lib, w, p: F(lib).embedding_bag(lib.tensor(IDX_2D), w, mode="sum",
                                                                per_sample_weights=p), (6, 2), (2, 3),
                         torch_check=False)
    layer = nn.EmbeddingBag(6, 4, mode="sum", padding_idx=0)
    out = layer(ag.tensor(IDX_1D), ag.tensor(OFFSETS))
    assert tuple(out.shape) == (4, 4) and float(out[1].abs().sum().item()) == 0.0
    assert repr(layer) == "EmbeddingBag(6, 4, mode='sum', padding_idx=0)"


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode, align_corners", [("zeros", False), ("border", True), ("reflection", False),
                                                         ("reflection", True)])
async def test_grid_sample_2d(mode, padding_mode, align_corners):
    grid = np.random.default_rng(3).uniform(-1.3, 1.3, (2, 3, 4, 2))
    await check_op(lambda lib, x, g: F(lib).grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                                        align_corners=align_corners), (2, 2, 4, 5), grid,
                   fd=mode != "nearest")


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
async def test_grid_sample_3d(mode, padding_mode):
    grid = np.random.default_rng(4).uniform(-1.2, 1.2, (1, 2, 3, 2, 3))
    await check_op(lambda lib, x, g: F(lib).grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                                        align_corners=False), (1, 2, 3, 4, 3), grid,
                   fd=mode != "nearest")


async def test_grid_sample_second_order():
    grid = np.random.default_rng(5).uniform(-0.9, 0.9, (1, 2, 2, 2))
    await check_gradgrad(lambda lib, x, g: F(lib).grid_sample(x, g, align_corners=True), (1, 1, 3, 3), grid)


@pytest.mark.parametrize("d, shape, kernel, size", [(2, (2, 3, 7, 6), 2, (4, 3)), (2, (3, 9, 8), 3, (3, 5)),
                                                    (3, (1, 2, 5, 6, 7), (2, 3, 2), (3, 2, 4))])
async def test_fractional_max_pool_given_torchs_samples(d, shape, kernel, size):
    lead = shape[:2] if len(shape) == d + 2 else (1, shape[0])
    samples = np.random.default_rng(6).uniform(size=lead + (d,))
    values = np.random.default_rng(7).permutation(int(np.prod(shape))).reshape(shape) / 10.0
    await check_op(lambda lib, x: getattr(F(lib), f"fractional_max_pool{d}d")(
        x, kernel, output_size=size, _random_samples=lib.tensor(samples)), values)
    if has_torch():
        import torch

        _, theirs = getattr(torch.nn.functional, f"fractional_max_pool{d}d")(
            torch.tensor(values), kernel, output_size=size, return_indices=True, _random_samples=torch.tensor(samples))
        _, ours = getattr(ag.nn.functional, f"fractional_max_pool{d}d")(
            ag.tensor(values, device=DEVICE[0]), kernel, output_size=size, return_indices=True,
            _random_samples=ag.tensor(samples, device=DEVICE[0]))
        np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())


def test_fractional_layers_draw_their_own_samples():
    ag.manual_seed(0)
    x = ag.randn(2, 3, 9, 9)
    assert tuple(nn.FractionalMaxPool2d(2, output_ratio=0.5)(x).shape) == (2, 3, 4, 4)
    assert tuple(nn.FractionalMaxPool3d(2, output_size=3)(x.unsqueeze(2).expand(2, 3, 4, 9, 9)).shape) == (2, 3, 3, 3,
                                                                                                             3)
    with pytest.raises(ValueError, match="requires specifying either an output size, or a pooling ratio"):
        nn.FractionalMaxPool2d(2)


def test_fractional_max_pool_of_an_empty_batch():
    x = ag.zeros(0, 1, 4, 5, 4, device=DEVICE[0], requires_grad=True)
    out = ag.nn.functional.fractional_max_pool3d(x, (2, 2, 1), output_size=2)
    assert tuple(out.shape) == (0, 1, 2, 2, 2) and out.requires_grad
