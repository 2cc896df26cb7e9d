"""Normalisation: F.batch_norm / layer_norm / group_norm against finite differences and torch (first
and second order, cpu and sim:0), the layers with torch's weights and running statistics, and
Module buffers (register_buffer, named_buffers, state_dict)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises

import asyncgrad as ag

DEVICES = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
RNG = np.random.default_rng(7)
X3 = RNG.standard_normal((4, 3, 5)) * 2 + 1
W3 = RNG.standard_normal(3)
B3 = RNG.standard_normal(3)


# --------------------------------------------------------------------------- functional, first and second order
@DEVICES
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 5), (2, 3, 2, 3)])
async def test_batch_norm_training(shape):
    x = RNG.standard_normal(shape) * 3 - 1

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=1e-3)

    await check_op(fn, x, W3, B3, name="NativeBatchNormBackward0")
    await check_gradgrad(fn, x, W3, B3)


@DEVICES
async def test_batch_norm_eval_uses_running_statistics():
    mean = RNG.standard_normal(3)
    var = RNG.uniform(0.5, 2.0, 3)

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x, lib.tensor(mean), lib.tensor(var), w, b, training=False)

    await check_op(fn, X3, W3, B3, name="NativeBatchNormBackward0")
    await check_gradgrad(fn, X3, W3, B3)


@DEVICES
async def test_batch_norm_without_affine():
    await check_op(lambda lib, x: lib.nn.functional.batch_norm(x, None, None, training=True), X3,
                   name="NativeBatchNormBackward0")
    await check_gradgrad(lambda lib, x: lib.nn.functional.batch_norm(x, None, None, training=True), X3)


@DEVICES
@pytest.mark.parametrize("normalized", [(5,), (3, 5)])
async def test_layer_norm(normalized):
    w = RNG.standard_normal(normalized)
    b = RNG.standard_normal(normalized)

    def fn(lib, x, w, b):
        return lib.nn.functional.layer_norm(x, normalized, w, b, eps=1e-4)

    await check_op(fn, X3, w, b, name="NativeLayerNormBackward0")
    await check_gradgrad(fn, X3, w, b)
    await check_op(lambda lib, x: lib.nn.functional.layer_norm(x, normalized), X3, name="NativeLayerNormBackward0")


@DEVICES
@pytest.mark.parametrize("shape, groups", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((3, 4), 4)])
async def test_group_norm(shape, groups):
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal(shape[1])
    b = RNG.standard_normal(shape[1])

    def fn(lib, x, w, b):
        return lib.nn.functional.group_norm(x, groups, w, b)

    await check_op(fn, x, w, b, name="NativeGroupNormBackward0")
    await check_gradgrad(fn, x, w, b)


# --------------------------------------------------------------------------- layers against torch
def _load_from(torch, module, reference, perturb=True):
    """torch's state (its parameters moved off their init values) into ``module``."""
    with torch.no_grad():
        if perturb:
            for p in reference.parameters():
                p.add_(torch.randn_like(p) * 0.5)
    module.load_state_dict({k: ag.tensor(v.detach().numpy().copy()) for k, v in reference.state_dict().items()})


async def _step(torch, module, reference, x):
    """One forward and backward in both; outputs and gradients (input, parameters) must agree."""
    xa = ag.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, expected = module(xa), reference(xt)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = RNG.standard_normal(out.shape)
    params = list(module.parameters())
    grads = await ag.grad(out, [xa] + params, grad_outputs=ag.tensor(v))
    expected_grads = torch.autograd.grad(expected, [xt] + list(reference.parameters()), grad_outputs=torch.tensor(v))
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12)
    for (name, value), (tname, tvalue) in zip(module.state_dict().items(), reference.state_dict().items()):
        assert name == tname
        np.testing.assert_allclose(value.numpy(), tvalue.numpy(), rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("cls, shape, kwargs", [
    ("BatchNorm1d", (6, 3), {}),
    ("BatchNorm1d", (4, 3, 5), {"momentum": None}),
    ("BatchNorm2d", (2, 3, 2, 3), {"momentum": 0.3, "eps": 1e-3}),
    ("BatchNorm2d", (2, 3, 2, 3), {"affine": False}),
    ("BatchNorm1d", (6, 3), {"bias": False}),
    ("BatchNorm1d", (6, 3), {"track_running_stats": False}),
    ("BatchNorm3d", (2, 3, 2, 2, 2), {}),
])
async def test_batch_norm_layers_train_then_eval_as_torch(torch, cls, shape, kwargs):
    ag.set_default_dtype(ag.float64)
    module = getattr(ag.nn, cls)(3, **kwargs)
    reference = getattr(torch.nn, cls)(3, **kwargs)
    assert repr(module) == repr(reference)
    assert list(module.state_dict()) == list(reference.state_dict())
    assert [n for n, _ in module.named_buffers()] == [n for n, _ in reference.named_buffers()]
    _load_from(torch, module, reference)
    for _ in range(3):
        await _step(torch, module, reference, RNG.standard_normal(shape) * 2 + 0.5)
    if module.track_running_stats:
        assert int(module.num_batches_tracked.item()) == 3
        assert module.num_batches_tracked.dtype == ag.int64
    module.eval()
    reference.eval()
    await _step(torch, module, reference, RNG.standard_normal(shape))


async def test_layer_norm_and_group_norm_layers_as_torch(torch):
    ag.set_default_dtype(ag.float64)
    for args, kwargs in (((5,), {}), (((3, 5),), {"eps": 1e-3}), ((5,), {"bias": False}),
                         ((5,), {"elementwise_affine": False})):
        module, reference = ag.nn.LayerNorm(*args, **kwargs), torch.nn.LayerNorm(*args, **kwargs)
        assert repr(module) == repr(reference)
        _load_from(torch, module, reference)
        await _step(torch, module, reference, X3)
    for kwargs in ({}, {"affine": False}, {"bias": False}):
        module, reference = ag.nn.GroupNorm(3, 6, **kwargs), torch.nn.GroupNorm(3, 6, **kwargs)
        assert repr(module) == repr(reference)
        _load_from(torch, module, reference)
        await _step(torch, module, reference, RNG.standard_normal((2, 6, 4)))


def test_running_statistics_move_in_place():
    layer = ag.nn.BatchNorm1d(2)
    mean = layer.running_mean
    before = mean._version
    layer(ag.randn(8, 2))
    assert layer.running_mean is mean and mean._version > before
    layer.reset_running_stats()
    np.testing.assert_array_equal(layer.running_mean.numpy(), [0, 0])
    np.testing.assert_array_equal(layer.running_var.numpy(), [1, 1])
    assert layer.num_batches_tracked.item() == 0


async def test_eval_batch_norm_gradient_ignores_a_later_update():
    """The eval node keeps its own copy of the statistics: training afterwards does not move the gradient."""
    layer = ag.nn.BatchNorm1d(2)
    layer.eval()
    x = ag.randn(4, 2, requires_grad=True)
    out = layer(x)
    layer.train()
    layer(ag.randn(4, 2) * 5 + 3)
    (g,) = await ag.grad(out.sum(), [x])
    np.testing.assert_allclose(g.numpy(), np.full((4, 2), 1 / np.sqrt(1 + 1e-5)), rtol=1e-6)


# --------------------------------------------------------------------------- errors as torch
def test_normalisation_errors_as_torch():
    check_raises(lambda lib: lib.nn.BatchNorm1d(3)(lib.ones(1, 3)), ValueError,
                 r"Expected more than 1 value per channel when training, got input size \w+\.Size\(\[1, 3\]\)")
    check_raises(lambda lib: lib.nn.BatchNorm1d(3)(lib.ones(2, 3, 2, 2)), ValueError,
                 r"expected 2D or 3D input \(got 4D input\)")
    check_raises(lambda lib: lib.nn.BatchNorm2d(3)(lib.ones(2, 3, 2)), ValueError,
                 r"expected 4D input \(got 3D input\)")
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), lib.zeros(4), lib.ones(4)), RuntimeError,
                 "running_mean should contain 3 elements not 4")
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), None, None), RuntimeError,
                 "running_mean must be defined in evaluation mode")
    check_raises(lambda lib: lib.nn.functional.layer_norm(lib.ones(4, 3), (5,)), RuntimeError,
                 r"Given normalized_shape=\[5\], expected input with shape \[\*, 5\], but got input of size\[4, 3\]")
    check_raises(lambda lib: lib.nn.functional.group_norm(lib.ones(2, 6, 4), 4), RuntimeError,
                 r"Expected number of channels in input to be divisible by num_groups, but got input of shape "
                 r"\[2, 6, 4\] and num_groups=4")
    check_raises(lambda lib: lib.nn.GroupNorm(4, 6), ValueError, r"num_channels \(6\) must be divisible by "
                 r"num_groups \(4\)")


# --------------------------------------------------------------------------- buffers
def test_buffers_registered_listed_and_saved(torch):
    class Net(ag.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ag.nn.Linear(2, 2)
            self.register_buffer("steps", ag.zeros(1))
            self.register_buffer("scratch", ag.ones(2), persistent=False)
            self.register_buffer("nothing", None)
            self.bn = ag.nn.BatchNorm1d(2)

    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch", "bn.running_mean", "bn.running_var",
                                                   "bn.num_batches_tracked"]
    assert len(list(net.buffers())) == 5
    assert [n for n, _ in net.named_buffers(recurse=False)] == ["steps", "scratch"]
    # torch's order: a module's own parameters and persistent buffers, then its children's
    assert list(net.state_dict()) == ["steps", "lin.weight", "lin.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                      "bn.running_var", "bn.num_batches_tracked"]
    assert all(not b.requires_grad for b in net.buffers())
    assert "steps" not in dict(net.named_parameters())
    net.steps = ag.full((1,), 4.0)  # assigning rebinds the buffer, as in torch
    assert net.state_dict()["steps"].item() == 4.0
    state = {k: v.clone() for k, v in net.state_dict().items()}
    state["bn.running_mean"] = ag.tensor([1.0, 2.0])
    state["bn.num_batches_tracked"] = ag.tensor(7)
    other = Net()
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.bn.running_mean.numpy(), [1.0, 2.0])
    assert other.bn.num_batches_tracked.item() == 7 and other.bn.num_batches_tracked.dtype == ag.int64
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bn.running_var"'):
        del state["bn.running_var"]
        other.load_state_dict(state)


def test_register_buffer_errors_as_torch():
    check_raises(lambda lib: lib.nn.Module().register_buffer("a.b", None), KeyError,
                 r'buffer name can.{1,2}t contain "\."')  # a KeyError's str is its repr: \' inside
    check_raises(lambda lib: lib.nn.Module().register_buffer("", None), KeyError,
                 r'buffer name can.{1,2}t be empty string ""')
    check_raises(lambda lib: lib.nn.Module().register_buffer(3, None), TypeError,
                 "buffer name should be a string. Got int")
    check_raises(lambda lib: lib.nn.Module().register_buffer("training", None), KeyError,
                 "attribute 'training' already exists")
    check_raises(lambda lib: lib.nn.Module().register_buffer("x", 3.0), TypeError,
                 r"cannot assign 'float' object to buffer 'x' \(torch Tensor or None required\)")


@DEVICES
def test_batch_norm_updates_running_statistics_on_the_device(torch, op_device):
    from helpers import ag_tensor

    mean, var = ag_tensor(np.zeros(3)), ag_tensor(np.ones(3))
    t_mean, t_var = torch.zeros(3), torch.ones(3)
    for momentum in (0.1, 0.5):
        x = RNG.standard_normal((4, 3, 5))
        ag.nn.functional.batch_norm(ag_tensor(x), mean, var, training=True, momentum=momentum)
        torch.nn.functional.batch_norm(torch.tensor(x), t_mean, t_var, training=True, momentum=momentum)
    assert mean.device is ag.device(op_device) and mean._version == 2
    np.testing.assert_allclose(mean.cpu().numpy(), t_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(var.cpu().numpy(), t_var.numpy(), rtol=1e-12)


def test_batch_norm_of_a_vector_as_torch():
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(3), None, None, training=True), IndexError,
                 r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)")


async def test_to_moves_and_casts_buffers_too():
    layer = ag.nn.BatchNorm1d(3)
    layer.double()
    assert layer.running_mean.dtype == ag.float64 and layer.running_var.dtype == ag.float64
    assert layer.num_batches_tracked.dtype == ag.int64  # integers keep their dtype, as in torch
    layer.to("sim:0")
    for name, buf in layer.named_buffers():
        assert buf.device is ag.device("sim:0"), name
    x = ag.randn(4, 3, dtype=ag.float64, device="sim:0", requires_grad=True)
    out = layer(x)
    (g,) = await ag.grad(out.sum(), [x])
    assert g.device is ag.device("sim:0")
    assert layer.num_batches_tracked.item() == 1
