"""Convolution, pooling, embedding, padding and resizing against finite differences and PyTorch,
on ``cpu`` and on ``sim:0`` (array_api_strict), first and second order."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag
from asyncgrad import nn

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)


def F(lib):
    """The library's functional module: torch's, or asyncgrad's whole ``nn.functional``."""
    return lib.F if lib.name == "torch" else ag.nn.functional


# --------------------------------------------------------------------------- convolution
CONV2D = {
    "plain": ((2, 3, 6, 5), (4, 3, 3, 2), {}),
    "stride_padding": ((2, 2, 7, 6), (3, 2, 3, 3), dict(stride=2, padding=1)),
    "dilation_asymmetric": ((1, 2, 7, 8), (2, 2, 2, 3), dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1))),
    "groups": ((2, 4, 5, 5), (6, 2, 3, 3), dict(groups=2, padding=1)),
    "depthwise": ((1, 3, 5, 6), (3, 1, 3, 3), dict(groups=3, stride=2)),
    "same_even_kernel": ((1, 2, 5, 5), (2, 2, 2, 4), dict(padding="same", dilation=(2, 1))),
    "valid": ((1, 2, 4, 5), (3, 2, 2, 2), dict(padding="valid")),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", CONV2D)
@pytest.mark.parametrize("bias", [True, False])
async def test_conv2d(case, bias):
    x_shape, w_shape, kw = CONV2D[case]
    inputs = (x_shape, w_shape) + (((w_shape[0],),) if bias else ())
    out, grads = await check_op(lambda lib, *t: F(lib).conv2d(*t, **kw), *inputs, name="ConvolutionBackward0")
    assert len(grads) == len(inputs)


async def test_conv2d_first_layer_weight_only():
    """The input needs no gradient (images): only the weight's and the bias's are computed."""
    await check_op(lambda lib, x, w, b: F(lib).conv2d(x, w, b, stride=2), (2, 1, 6, 6), (3, 1, 3, 3), (3,),
                   requires_grad=(False, True, True), name="ConvolutionBackward0")


CONV1D = {
    "plain": ((2, 3, 7), (4, 3, 3), {}),
    "stride_padding_dilation": ((2, 2, 9), (3, 2, 3), dict(stride=2, padding=2, dilation=2)),
    "groups_same": ((1, 4, 6), (4, 2, 4), dict(groups=2, padding="same")),
}


@pytest.mark.parametrize("case", CONV1D)
async def test_conv1d(case):
    x_shape, w_shape, kw = CONV1D[case]
    await check_op(lambda lib, x, w, b: F(lib).conv1d(x, w, b, **kw), x_shape, w_shape, (w_shape[0],),
                   name="ConvolutionBackward0")


async def test_unbatched_conv_is_a_squeezed_batch_of_one():
    await check_op(lambda lib, x, w: F(lib).conv2d(x, w, padding=1), (2, 4, 4), (3, 2, 3, 3), name="SqueezeBackward1")
    await check_op(lambda lib, x, w: F(lib).conv1d(x, w), (2, 5), (3, 2, 2), name="SqueezeBackward1")


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1), dict(groups=2, dilation=2, padding=(1, 2))])
async def test_conv2d_second_order(kw):
    grads, _ = await check_gradgrad(lambda lib, x, w, b: F(lib).conv2d(x, w, b, **kw), (1, 2, 5, 5), (2, 1, 2, 3),
                                    (2,)) if kw.get("groups") else await check_gradgrad(
        lambda lib, x, w, b: F(lib).conv2d(x, w, b, **kw), (2, 2, 4, 4), (2, 2, 2, 2), (2,))
    assert grads[0].grad_fn.name() == "ConvolutionBackwardBackward0"


async def test_conv1d_second_order():
    await check_gradgrad(lambda lib, x, w: F(lib).conv1d(x, w, stride=2, padding=1), (2, 2, 5), (3, 2, 2))


async def test_conv_float32_matches_torch():
    out, _ = await check_op(lambda lib, x, w, b: F(lib).conv2d(x.float(), w.float(), b.float(), padding=1),
                            (2, 3, 6, 6), (4, 3, 3, 3), (4,), fd=False, dtype=np.float32, rtol=1e-5, atol=1e-5)


CONV_ERRORS = [
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 2, 3, 3)), RuntimeError,
     r"Given groups=1, weight of size \[6, 2, 3, 3\], expected input\[2, 4, 7, 7\] to have 2 channels, but got 4 "
     r"channels instead"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 2, 3, 3), groups=3), RuntimeError,
     r"Given groups=3, weight of size \[6, 2, 3, 3\], expected input\[2, 4, 7, 7\] to have 6 channels"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 2, 3, 3), groups=2, stride=2, padding="same"),
     RuntimeError, "padding='same' is not supported for strided convolutions"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 2, 3, 3), padding="full"), RuntimeError,
     "Invalid padding string: 'full'"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 4, 3, 3), padding=-1), RuntimeError,
     "negative padding is not supported"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 7, 7), lib.zeros(6, 4, 3, 3), stride=0), RuntimeError,
     "non-positive stride is not supported"),
    (lambda lib: F(lib).conv2d(lib.zeros(2, 4, 1, 1), lib.zeros(6, 4, 3, 3)), RuntimeError,
     r"Calculated padded input size per channel: \(1 x 1\). Kernel size: \(3 x 3\). Kernel size can't be greater "
     "than actual input size"),
    (lambda lib: F(lib).conv2d(lib.zeros(7, 7), lib.zeros(6, 4, 3, 3)), RuntimeError,
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: \[7, 7\]"),
    (lambda lib: F(lib).conv2d(lib.zeros(1, 4, 5, 5), lib.zeros(6, 4, 3, 3), lib.zeros(5)), RuntimeError,
     r"expected bias to be 1-dimensional with 6 elements, but got bias of size \[5\] instead"),
    (lambda lib: F(lib).conv2d(lib.zeros(1, 4, 5, 5, dtype=lib.float32), lib.zeros(6, 4, 3, 3, dtype=lib.float64)),
     RuntimeError, "expected scalar type Float but found Double"),
    (lambda lib: F(lib).conv2d(lib.zeros(1, 4, 5, 5, dtype=lib.float64), lib.zeros(6, 4, 3, 3, dtype=lib.float64),
                               lib.zeros(6, dtype=lib.float32)),
     RuntimeError, r"Input type \(double\) and bias type \(float\) should be the same"),
]


@pytest.mark.parametrize("index", range(len(CONV_ERRORS)))
def test_conv_errors_in_torchs_words(index):
    fn, exc, match = CONV_ERRORS[index]
    check_raises(fn, exc, match)


def test_large_convolutions_go_to_worker_threads_small_ones_stay_inline():
    """The node's cost counts multiply-adds (Note [Cost classes]): a LeNet-sized layer on a batch
    crosses the inline threshold, so its backward runs in a worker thread as a large matmul does."""
    threshold = ag.device("cpu").inline_threshold
    w = ag.zeros(16, 8, 5, 5, requires_grad=True)
    big = ag.nn.functional.conv2d(ag.zeros(64, 8, 28, 28), w)
    small = ag.nn.functional.conv2d(ag.zeros(1, 8, 6, 6), w)
    assert big.grad_fn.work > threshold > small.grad_fn.work > 0


# --------------------------------------------------------------------------- pooling
MAX_POOL2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAX_POOL2D)
async def test_max_pool2d(kw):
    await check_op(lambda lib, x: F(lib).max_pool2d(x, **kw), (2, 3, 7, 6), name="MaxPool2DWithIndicesBackward0")
    await check_op(lambda lib, x: F(lib).max_pool2d(x, **kw), (3, 7, 6), name="MaxPool2DWithIndicesBackward0")


@pytest.mark.parametrize("kw", MAX_POOL2D[:2])
async def test_max_pool2d_second_order(kw):
    grads, _ = await check_gradgrad(lambda lib, x: F(lib).max_pool2d(x, **kw), (1, 2, 5, 5))
    assert grads[0].grad_fn.name() == "MaxPool2DWithIndicesBackwardBackward0"


@pytest.mark.parametrize("kw", MAX_POOL2D)
def test_max_pool2d_indices_are_torchs(kw, torch):
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 6))
    x[0, 0, :2, :2] = 1.0  # a tie: the first position wins
    values, indices = ag.nn.functional.max_pool2d(ag.tensor(x, device=ag.device(_dev())), return_indices=True, **kw)
    t_values, t_indices = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices.cpu().numpy(), t_indices.numpy())
    np.testing.assert_array_equal(values.cpu().numpy(), t_values.numpy())


def test_max_pool_picks_nan_as_torch_does(torch):
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = np.nan
    values, indices = ag.nn.functional.max_pool2d(ag.tensor(x, device=_dev()), 2, return_indices=True)
    t_values, t_indices = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(values.cpu().numpy(), t_values.numpy())
    np.testing.assert_array_equal(indices.cpu().numpy(), t_indices.numpy())


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, return_indices=True)])
async def test_max_pool1d(kw):
    def fn(lib, x):
        out = F(lib).max_pool1d(x, **kw)
        return out[0] if isinstance(out, tuple) else out

    await check_op(fn, (2, 3, 7), name="SqueezeBackward1")
    await check_op(fn, (3, 8), name="SqueezeBackward1")


AVG_POOL2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=2, padding=(1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
]


@pytest.mark.parametrize("kw", AVG_POOL2D)
async def test_avg_pool2d(kw):
    await check_op(lambda lib, x: F(lib).avg_pool2d(x, **kw), (2, 3, 7, 6), name="AvgPool2DBackward0")


async def test_avg_pool2d_second_order_and_unbatched():
    grads, _ = await check_gradgrad(lambda lib, x: F(lib).avg_pool2d(x, 3, 2, 1), (1, 2, 5, 5))
    assert grads[0].grad_fn.name() == "AvgPool2DBackwardBackward0"
    await check_op(lambda lib, x: F(lib).avg_pool2d(x, 2), (3, 4, 5), name="AvgPool2DBackward0")


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)])
async def test_avg_pool1d(kw):
    await check_op(lambda lib, x: F(lib).avg_pool1d(x, **kw), (2, 3, 7), name="SqueezeBackward1")


@pytest.mark.parametrize("size", [(2, 3), 3, (None, 2), (5, 4)])
async def test_adaptive_avg_pool2d(size):
    await check_op(lambda lib, x: F(lib).adaptive_avg_pool2d(x, size), (2, 2, 5, 4),
                   name="AdaptiveAvgPool2DBackward0")


async def test_adaptive_avg_pool2d_second_order():
    grads, _ = await check_gradgrad(lambda lib, x: F(lib).adaptive_avg_pool2d(x, (2, 3)), (1, 2, 5, 4))
    assert grads[0].grad_fn.name() == "AdaptiveAvgPool2DBackwardBackward0"


POOL_ERRORS = [
    (lambda lib: F(lib).max_pool2d(lib.zeros(1, 2, 5, 5), 3, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"),
    (lambda lib: F(lib).max_pool2d(lib.zeros(1, 2, 5, 5), 2, stride=0), RuntimeError, "stride should not be zero"),
    (lambda lib: F(lib).max_pool2d(lib.zeros(5, 5), 2), RuntimeError,
     r"non-empty 3D or 4D \(batch mode\) tensor expected for input"),
    (lambda lib: F(lib).max_pool2d(lib.zeros(1, 4, 9, 9), 12), RuntimeError,
     r"Given input size: \(4x9x9\). Calculated output size: \(4x0x0\). Output size is too small"),
    (lambda lib: F(lib).avg_pool2d(lib.zeros(1, 4, 9, 9), 12), RuntimeError,
     r"Given input size: \(4x9x9\). Calculated output size: \(4x0x0\). Output size is too small"),
]


@pytest.mark.parametrize("index", range(len(POOL_ERRORS)))
def test_pool_errors_in_torchs_words(index):
    fn, exc, match = POOL_ERRORS[index]
    check_raises(fn, exc, match)


# --------------------------------------------------------------------------- embedding
async def test_embedding():
    idx = np.array([[1, 4, 1], [0, 2, 4]])
    out, _ = await check_op(lambda lib, w, i: F(lib).embedding(i, w), (5, 3), idx, name="EmbeddingBackward0")
    assert out.shape == (2, 3, 3)


async def test_embedding_padding_idx_gets_no_gradient():
    """Not the derivative (finite differences would see one): torch's rule, which the comparison checks."""
    idx = np.array([1, 3, 3, 0, 1])
    _, (grad,) = await check_op(lambda lib, w, i: F(lib).embedding(i, w, padding_idx=3), (4, 2), idx,
                                name="EmbeddingBackward0", fd=False)
    assert not grad.cpu().numpy()[3].any()


async def test_embedding_second_order():
    idx = np.array([1, 3, 3, 0])
    await check_gradgrad(lambda lib, w, i: F(lib).embedding(i, w) * F(lib).embedding(i, w), (4, 2), idx)


def test_embedding_max_norm_renormalises_rows_in_place(torch):
    w = np.random.default_rng(2).standard_normal((5, 3)) * 3
    idx = np.array([0, 2, 2, 4])
    ours = ag.tensor(w, device=_dev())
    theirs = torch.tensor(w)
    out = ag.nn.functional.embedding(ag.tensor(idx, device=_dev()), ours, max_norm=1.5)
    t_out = torch.nn.functional.embedding(torch.tensor(idx), theirs, max_norm=1.5)
    np.testing.assert_allclose(out.cpu().numpy(), t_out.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.cpu().numpy(), theirs.numpy(), rtol=1e-6)


def test_embedding_index_out_of_range():
    check_raises(lambda lib: F(lib).embedding(lib.tensor(np.array([1, 7])), lib.tensor(np.zeros((5, 3)))), IndexError,
                 "index out of range in self")


def test_embedding_module_zeroes_its_padding_row():
    ag.manual_seed(0)
    layer = nn.Embedding(6, 4, padding_idx=-1)
    assert layer.padding_idx == 5 and not layer.weight.detach().numpy()[5].any()
    assert repr(layer) == "Embedding(6, 4, padding_idx=5)"


# --------------------------------------------------------------------------- pad, interpolate, one_hot
PADS = [
    ((1, 2), "constant", 0.5),
    ((1, -1, 2, 0), "constant", 0.0),
    ((2, 1, 1, 2), "reflect", None),
    ((2, 1, 1, 3), "replicate", None),
    ((1, 2, 2, 1), "circular", None),
]


@pytest.mark.parametrize("index", range(len(PADS)))
async def test_pad(index):
    pad, mode, value = PADS[index]
    kw = {"value": value} if mode == "constant" else {}
    await check_op(lambda lib, x: F(lib).pad(x, pad, mode=mode, **kw), (2, 3, 4, 5), name=None)


async def test_pad_second_order():
    await check_gradgrad(lambda lib, x: F(lib).pad(x, (1, 2, 2, 1), mode="reflect") ** 2, (1, 1, 3, 4))


INTERPOLATE = [
    dict(scale_factor=2, mode="nearest"),
    dict(size=(5, 7), mode="nearest"),
    dict(size=(5, 7), mode="bilinear", align_corners=False),
    dict(size=(6, 3), mode="bilinear", align_corners=True),
    dict(scale_factor=1.5, mode="bilinear", align_corners=False),
]


@pytest.mark.parametrize("kw", INTERPOLATE)
async def test_interpolate(kw):
    await check_op(lambda lib, x: F(lib).interpolate(x, **kw), (2, 2, 4, 5))


async def test_interpolate_nearest_1d():
    await check_op(lambda lib, x: F(lib).interpolate(x, scale_factor=3), (2, 2, 4))


def test_one_hot(torch):
    idx = np.array([[0, 3], [2, 1]])
    ours = ag.nn.functional.one_hot(ag.tensor(idx, device=_dev()))
    theirs = torch.nn.functional.one_hot(torch.tensor(idx))
    assert ours.dtype == np.int64 and ours.shape == (2, 2, 4)
    np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())
    np.testing.assert_array_equal(ag.nn.functional.one_hot(ag.tensor(idx, device=_dev()), 6).cpu().numpy(),
                                  torch.nn.functional.one_hot(torch.tensor(idx), 6).numpy())
    check_raises(lambda lib: F(lib).one_hot(lib.tensor(np.array([0, 5])), 3), RuntimeError,
                 "Class values must be smaller than num_classes.")


# --------------------------------------------------------------------------- layers
def _dev():
    import helpers

    return helpers.DEVICE[0]


@pytest.mark.skipif(not has_torch(), reason="compares with PyTorch")
async def test_layers_match_torchs_modules(torch):
    """The same weights in asyncgrad's and torch's layers give the same outputs and gradients."""
    pairs = [
        (nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False),
         torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)),
        (nn.Conv2d(4, 4, (2, 3), groups=2, dilation=(1, 2), padding="same"),
         torch.nn.Conv2d(4, 4, (2, 3), groups=2, dilation=(1, 2), padding="same")),
        (nn.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
        (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
        (nn.AdaptiveAvgPool2d((1, 1)), torch.nn.AdaptiveAvgPool2d((1, 1))),
        (nn.Flatten(), torch.nn.Flatten()),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        for name, p in ours.named_parameters():
            assert tuple(dict(theirs.named_parameters())[name].shape) == p.shape
        with torch.no_grad():
            for name, p in theirs.named_parameters():
                p.copy_(torch.tensor(dict(ours.named_parameters())[name].detach().numpy()))
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 9))
    model = nn.Sequential(*[o for o, _ in pairs]).to(_dev())
    t_model = torch.nn.Sequential(*[t for _, t in pairs])
    ax, tx = ag.tensor(x, device=_dev(), requires_grad=True), torch.tensor(x, requires_grad=True)
    out, t_out = model.double()(ax), t_model.double()(tx)
    np.testing.assert_allclose(out.detach().cpu().numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    await out.sum().backward()
    t_out.sum().backward()
    np.testing.assert_allclose(ax.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, p), (t_name, tp) in zip(model.named_parameters(), t_model.named_parameters()):
        assert name == t_name
        np.testing.assert_allclose(p.grad.cpu().numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_conv_layer_init_bounds_and_checks():
    ag.manual_seed(1)
    layer = nn.Conv2d(4, 6, 3, groups=2)
    bound = 1 / math.sqrt(2 * 9)
    assert layer.weight.shape == (6, 2, 3, 3) and layer.bias.shape == (6,)
    assert np.abs(layer.weight.detach().numpy()).max() <= bound
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv1d(3, 6, 3, stride=2, padding="same")


def test_flatten_unflatten_identity():
    x = ag.arange(24.0).reshape(2, 3, 4)
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Unflatten(1, (3, 1))(x).shape == (2, 3, 1, 4)
    assert nn.Unflatten(-1, (2, -1))(x).shape == (2, 3, 2, 2)
    assert nn.Identity(54, unused="x")(x) is x
