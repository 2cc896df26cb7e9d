"""pixel_shuffle/unshuffle, channel_shuffle, rms_norm, local_response_norm, bilinear, the
deprecated upsample_* and the channel/alpha dropouts, against finite differences and PyTorch on
``cpu`` and ``sim:0`` (the dropouts by their structure: asyncgrad's random stream is not torch's)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    return lib.F if lib.name == "torch" else ag.nn.functional


@pytest.mark.parametrize("shape, r", [((1, 8, 2, 3), 2), ((9, 2, 2), 3), ((2, 1, 4, 2, 1), 1), ((2, 3, 0, 2, 2), 1)])
async def test_pixel_shuffle_round_trip(shape, r):
    if 0 in shape:
        out = ag.nn.functional.pixel_shuffle(ag.zeros(*shape), r)
        assert tuple(out.shape) == shape
        return
    await check_op(lambda lib, x: F(lib).pixel_shuffle(x, r), shape)
    shuffled = shape[:-3] + (shape[-3] // (r * r), shape[-2] * r, shape[-1] * r)
    await check_op(lambda lib, x: F(lib).pixel_unshuffle(x, r), shuffled)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3), 3), ((1, 4, 2, 2), 2), ((2, 6, 1, 2, 1), 6)])
async def test_channel_shuffle(shape, groups):
    await check_op(lambda lib, x: F(lib).channel_shuffle(x, groups), shape)


@pytest.mark.parametrize("call, match", [
    (lambda lib: F(lib).pixel_shuffle(lib.zeros(2, 3), 2),
     "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 dimension"),
    (lambda lib: F(lib).pixel_shuffle(lib.zeros(1, 6, 2, 2), 2),
     r"input.size\(-3\)=6 is not divisible by 4"),
    (lambda lib: F(lib).pixel_unshuffle(lib.zeros(1, 1, 3, 4), 2),
     r"pixel_unshuffle expects height to be divisible by downscale_factor, but input.size\(-2\)=3"),
])
def test_shuffle_errors(call, match):
    check_raises(call, RuntimeError, match)


@pytest.mark.parametrize("normalized, weight, eps", [((4,), True, None), ((3, 4), False, 1e-3), ([4], True, 0.5)])
async def test_rms_norm(normalized, weight, eps):
    shape = (2, 3, 4)
    w_shape = tuple(normalized)
    inputs = (shape, w_shape) if weight else (shape,)
    await check_op(lambda lib, x, *w: F(lib).rms_norm(x, normalized, *w, eps=eps), *inputs)
    await check_gradgrad(lambda lib, x, *w: F(lib).rms_norm(x, normalized, *w, eps=eps), *inputs)


@pytest.mark.parametrize("shape, size", [((2, 5, 3), 3), ((1, 4, 2, 3), 2), ((2, 3, 2, 1, 2), 5)])
async def test_local_response_norm(shape, size):
    await check_op(lambda lib, x: F(lib).local_response_norm(x, size, alpha=0.3, beta=0.6, k=1.5), shape)


async def test_local_response_norm_second_order_and_errors():
    await check_gradgrad(lambda lib, x: F(lib).local_response_norm(x, 3, alpha=0.5), (2, 4, 3))
    check_raises(lambda lib: F(lib).local_response_norm(lib.zeros(2, 3), 2), ValueError,
                 r"Expected 3D or higher dimensionality")
    check_raises(lambda lib: F(lib).rms_norm(lib.zeros(2, 3), 3), TypeError,
                 r"rms_norm\(\): argument 'normalized_shape' \(position 2\) must be tuple of ints, not int")
    check_raises(lambda lib: F(lib).rms_norm(lib.zeros(2, 3), [2]), RuntimeError,
                 r"Given normalized_shape=\[2\], expected input with shape \[\*2\], but got input of size\[2, 3\]")


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
async def test_bilinear(batch):
    await check_op(lambda lib, a, b, w, c: F(lib).bilinear(a, b, w, c), batch + (4,), batch + (3,), (5, 4, 3), (5,))
    await check_gradgrad(lambda lib, a, b, w: F(lib).bilinear(a, b, w), batch + (2,), batch + (3,), (2, 2, 3))


def test_bilinear_errors_and_layer():
    check_raises(lambda lib: F(lib).bilinear(lib.zeros(2, 3), lib.zeros(2, 4), lib.zeros(5, 3, 3)), RuntimeError,
                 "bilinear[(][)]: input2 size does not match weight size: got 4 but expected 3")
    layer = nn.Bilinear(3, 4, 2, dtype=ag.float64)
    assert tuple(layer.weight.shape) == (2, 3, 4) and tuple(layer.bias.shape) == (2,)
    assert repr(layer) == "Bilinear(in1_features=3, in2_features=4, out_features=2, bias=True)"
    assert tuple(layer(ag.zeros(5, 3, dtype=ag.float64), ag.zeros(5, 4, dtype=ag.float64)).shape) == (5, 2)


@pytest.mark.filterwarnings("ignore:.nn.functional.upsample")
async def test_deprecated_upsample_names():
    await check_op(lambda lib, x: F(lib).upsample_nearest(x, scale_factor=2), (1, 2, 3, 2))
    await check_op(lambda lib, x: F(lib).upsample_bilinear(x, size=(4, 5)), (1, 2, 3, 2))


@pytest.mark.filterwarnings("ignore:dropout2d")
@pytest.mark.parametrize("fn, shape, feature", [
    ("dropout1d", (3, 4, 5), True), ("dropout1d", (4, 5), True), ("dropout2d", (3, 4, 2, 5), True),
    ("dropout2d", (3, 4, 5), True), ("dropout3d", (2, 4, 2, 2, 3), True), ("dropout3d", (4, 2, 2, 3), True),
])
async def test_channel_dropout_zeroes_whole_channels(fn, shape, feature):
    ag.manual_seed(0)
    x = ag.tensor(np.random.default_rng(0).uniform(1.0, 2.0, shape), device="cpu", requires_grad=True)
    y = getattr(ag.nn.functional, fn)(x, p=0.5)
    (g,) = await ag.grad(y.sum(), [x])
    scale = (y / x).detach().numpy()
    lead = 2 if not (fn == "dropout1d" and len(shape) == 2 or fn == "dropout3d" and len(shape) == 4) else 1
    per_channel = scale.reshape(shape[:lead] + (-1,))
    assert np.all(per_channel == per_channel[..., :1]), "a channel was not dropped or kept whole"
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    np.testing.assert_array_equal(g.numpy(), scale)
    np.testing.assert_array_equal(getattr(ag.nn.functional, fn)(x, p=0.5, training=False).detach().numpy(),
                                  x.detach().numpy())


@pytest.mark.parametrize("fn, feature", [("alpha_dropout", False), ("feature_alpha_dropout", True)])
async def test_alpha_dropout_keeps_mean_and_variance(fn, feature):
    ag.manual_seed(1)
    x = ag.randn(20, 50, 40, dtype=ag.float64)
    y = getattr(ag.nn.functional, fn)(x, p=0.2, training=True)
    assert abs(float(y.mean().item())) < 0.05 and abs(float(y.std().item()) - 1) < 0.05
    assert getattr(ag.nn.functional, fn)(x, p=0.2) is x  # training defaults to False, as torch's
    zero = getattr(ag.nn.functional, fn)(x, p=1.0, training=True)
    assert float(zero.abs().sum().item()) == 0.0
    if feature:
        ratio = ((y - y.mean()) / 1).detach().numpy()
        assert ratio.shape == (20, 50, 40)


def test_dropout_layers_and_p_check():
    for cls, shape in ((nn.Dropout1d, (2, 3, 4)), (nn.Dropout2d, (2, 3, 4, 4)), (nn.Dropout3d, (2, 3, 4, 4, 4)),
                       (nn.AlphaDropout, (2, 3)), (nn.FeatureAlphaDropout, (2, 3, 4))):
        layer = cls(p=0.3)
        assert repr(layer) == f"{cls.__name__}(p=0.3, inplace=False)"
        layer.eval()
        x = ag.ones(*shape)
        assert layer(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        ag.nn.functional.dropout2d(ag.ones(2, 3, 4), p=1.5)
    if has_torch():
        import torch

        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
            torch.nn.functional.dropout2d(torch.ones(2, 3, 4), p=1.5)


async def test_rms_and_local_response_layers():
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    out = nn.RMSNorm([3, 4], dtype=ag.float64)(ag.tensor(x))
    lrn = nn.LocalResponseNorm(2, alpha=0.2)(ag.tensor(x))
    assert repr(nn.RMSNorm(4)) == "RMSNorm((4,), eps=None, elementwise_affine=True)"
    if has_torch():
        import torch

        np.testing.assert_allclose(out.detach().numpy(), torch.nn.RMSNorm([3, 4]).double()(torch.tensor(x))
                                   .detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(lrn.numpy(), torch.nn.LocalResponseNorm(2, alpha=0.2)(torch.tensor(x)).numpy(),
                                   rtol=1e-12)
        assert repr(torch.nn.RMSNorm(4)) == repr(nn.RMSNorm(4))
