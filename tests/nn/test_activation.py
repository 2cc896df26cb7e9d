"""Activations, softmax modules and dropout: values, gradients (first and second order) against
finite differences and torch, on cpu and sim:0, torch's node names, reprs and error wording."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises

import asyncgrad as ag

DEVICES = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

# values spread over every regime: negatives, the kinks, softplus's linear part (beta * x > threshold)
X = np.array([[-3.1, -1.2, -0.4, 0.3], [0.9, 1.7, 2.6, 4.2], [-0.05, 0.07, 6.5, -7.0]])

ACTIVATIONS = [
    ("gelu", lambda F, x: F.gelu(x), "GeluBackward0"),
    ("gelu_tanh", lambda F, x: F.gelu(x, approximate="tanh"), "GeluBackward0"),
    ("silu", lambda F, x: F.silu(x), "SiluBackward0"),
    ("mish", lambda F, x: F.mish(x), "MishBackward0"),
    ("elu", lambda F, x: F.elu(x, alpha=0.7), "EluBackward0"),
    ("selu", lambda F, x: F.selu(x), "EluBackward0"),
    ("celu", lambda F, x: F.celu(x, alpha=1.5), "CeluBackward0"),
    ("softplus", lambda F, x: F.softplus(x), "SoftplusBackward0"),
    ("softplus_beta", lambda F, x: F.softplus(x, beta=2.0, threshold=5.0), "SoftplusBackward0"),
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2), "LeakyReluBackward0"),
    ("hardtanh", lambda F, x: F.hardtanh(x, -2.0, 2.5), "HardtanhBackward0"),
    ("relu6", lambda F, x: F.relu6(x), "HardtanhBackward0"),
    ("hardsigmoid", lambda F, x: F.hardsigmoid(x), "HardsigmoidBackward0"),
    ("hardswish", lambda F, x: F.hardswish(x), "HardswishBackward0"),
    ("logsigmoid", lambda F, x: F.logsigmoid(x), "LogSigmoidBackward0"),
]

NO_TORCH_SECOND = {"hardsigmoid"}


@DEVICES
@pytest.mark.parametrize("name, fn, node", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
async def test_activation_first_and_second_order(name, fn, node):
    await check_op(lambda lib, x: fn(lib.nn.functional, x), X, name=node)
    # torch has no second derivative of hardsigmoid: finite differences alone check ours (0 a.e.)
    await check_gradgrad(lambda lib, x: fn(lib.nn.functional, x), X, torch_check=name not in NO_TORCH_SECOND)


@DEVICES
@pytest.mark.parametrize("w_shape", [(1,), (4,)])
@pytest.mark.parametrize("x_shape", [(3, 4), (2, 4, 3)])
async def test_prelu(x_shape, w_shape):
    x = np.random.default_rng(2).standard_normal(x_shape)
    w = np.array([0.3]) if w_shape == (1,) else np.array([0.1, -0.4, 0.7, 1.3])
    await check_op(lambda lib, x, w: lib.nn.functional.prelu(x, w), x, w, name="PreluKernelBackward0")
    await check_gradgrad(lambda lib, x, w: lib.nn.functional.prelu(x, w), x, w)


async def test_prelu_module_matches_torch(torch):
    ag.set_default_dtype(ag.float64)
    module, reference = ag.nn.PReLU(4, init=0.1), torch.nn.PReLU(4, init=0.1)
    assert repr(module) == repr(reference) and list(module.state_dict()) == ["weight"]
    xa = ag.tensor(X[:, :4].copy() if X.shape[1] >= 4 else X, requires_grad=True)
    xt = torch.tensor(xa.detach().numpy(), requires_grad=True)
    out, expected = module(xa), reference(xt)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    grads = await ag.grad(out.sum(), [xa, module.weight])
    expected_grads = torch.autograd.grad(expected.sum(), [xt, reference.weight])
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)
    check_raises(lambda lib: lib.nn.functional.prelu(lib.ones(3, 4), lib.ones(3)), RuntimeError,
                 "Mismatch of parameter numbers and input channel size. Found parameter numbers = 3 and channel "
                 "size = 4.")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
async def test_gelu_third_order_matches_torch(torch, approximate):
    """gelu's backward is an op of its own (GeluBackwardBackward0) whose formula differentiates again."""
    x = ag.tensor(X, requires_grad=True)
    t = torch.tensor(X, requires_grad=True)
    (g1,) = await ag.grad(ag.nn.functional.gelu(x, approximate=approximate).sum(), [x], create_graph=True)
    (t1,) = torch.autograd.grad(torch.nn.functional.gelu(t, approximate=approximate).sum(), [t], create_graph=True)
    assert g1.grad_fn.name() == t1.grad_fn.name() == "GeluBackwardBackward0"
    (g2,) = await ag.grad(g1.sum(), [x], create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), [t], create_graph=True)
    (g3,) = await ag.grad(g2.sum(), [x])
    (t3,) = torch.autograd.grad(t2.sum(), [t])
    np.testing.assert_allclose(g2.detach().numpy(), t2.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g3.numpy(), t3.numpy(), rtol=1e-9, atol=1e-12)


async def test_inplace_activations_keep_gradients_right(torch):
    for name, kwargs in (("elu", {}), ("leaky_relu", {"negative_slope": 0.3}), ("silu", {}), ("hardtanh", {})):
        x = ag.tensor(X, requires_grad=True)
        t = torch.tensor(X, requires_grad=True)
        y = x * 2
        out = getattr(ag.nn.functional, name)(y, inplace=True, **kwargs)
        assert out is y and y._version == 1
        tout = getattr(torch.nn.functional, name)(t * 2, inplace=True, **kwargs)
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
        (g,) = await ag.grad((out * out).sum(), [x])
        (tg,) = torch.autograd.grad((tout * tout).sum(), [t])
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-14)
    check_raises(lambda lib: lib.nn.functional.elu(lib.ones(2, requires_grad=True), inplace=True), RuntimeError,
                 "a leaf Variable that requires grad is being used in an in-place operation.")


MODULES = [
    ("LeakyReLU", (0.2,), {}), ("LeakyReLU", (), {"inplace": True}), ("GELU", ("tanh",), {}), ("GELU", (), {}),
    ("SiLU", (), {}), ("Mish", (), {}), ("ELU", (0.5,), {}), ("CELU", (), {}), ("SELU", (), {}),
    ("Softplus", (), {"beta": 2.0, "threshold": 3.0}), ("Hardtanh", (-0.5, 0.5), {}), ("ReLU6", (), {}),
    ("Softmax", (1,), {}), ("LogSoftmax", (0,), {}), ("Tanh", (), {}), ("Sigmoid", (), {}), ("ReLU", (), {}),
    ("Dropout", (0.25,), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}), ("LogSigmoid", (), {}),
]


@pytest.mark.parametrize("cls, args, kwargs", MODULES, ids=[m[0] for m in MODULES])
def test_activation_modules_match_torch(torch, cls, args, kwargs):
    module = getattr(ag.nn, cls)(*args, **kwargs).eval()
    reference = getattr(torch.nn, cls)(*args, **kwargs).eval()
    assert repr(module) == repr(reference)
    out = module(ag.tensor(X.copy()))
    expected = reference(torch.tensor(X.copy()))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)


def test_softmax_module_without_dim_warns_and_picks_torchs_dim(torch):
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        out = ag.nn.Softmax()(ag.tensor(X))
    with pytest.warns(UserWarning):
        expected = torch.nn.Softmax()(torch.tensor(X))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12)


def test_activation_errors_as_torch():
    check_raises(lambda lib: lib.nn.functional.gelu(lib.ones(2), approximate="exact"), RuntimeError,
                 "approximate argument must be either none or tanh.")
    check_raises(lambda lib: lib.nn.functional.gelu(lib.tensor([1, 2])), NotImplementedError,
                 "\"GeluKernelImpl\" not implemented for 'Long'")
    check_raises(lambda lib: lib.nn.functional.silu(lib.tensor([1, 2])), NotImplementedError,
                 "\"silu_cpu\" not implemented for 'Long'")
    check_raises(lambda lib: lib.nn.functional.softplus(lib.tensor([1, 2])), NotImplementedError,
                 "\"softplus_cpu\" not implemented for 'Long'")


# --------------------------------------------------------------------------- dropout
def test_dropout_probability_validated_as_torch():
    for p in (1.5, -0.1):
        check_raises(lambda lib, p=p: lib.nn.functional.dropout(lib.ones(3), p), ValueError,
                     f"dropout probability has to be between 0 and 1, but got {p}")
        check_raises(lambda lib, p=p: lib.nn.Dropout(p), ValueError,
                     f"dropout probability has to be between 0 and 1, but got {p}")


@DEVICES
async def test_dropout_masks_scales_and_routes_the_gradient(op_device):
    x = ag.ones(200, 50, dtype=ag.float64, device=op_device, requires_grad=True)
    layer = ag.nn.Dropout(0.3)
    out = layer(x)
    assert out.grad_fn.name() == "MulBackward0"
    values = out.detach().cpu().numpy()
    kept = values != 0
    np.testing.assert_allclose(values[kept], 1 / 0.7)
    assert abs(kept.mean() - 0.7) < 0.02  # 10000 draws: 0.02 is about 4.4 standard deviations
    (g,) = await ag.grad(out.sum(), [x])
    np.testing.assert_array_equal(g.cpu().numpy(), values)  # d(x * m)/dx = m


def test_dropout_eval_p0_and_p1():
    x = ag.randn(4, 5)
    layer = ag.nn.Dropout(0.5).eval()
    assert layer(x) is x
    assert ag.nn.functional.dropout(x, 0.0) is x
    assert ag.nn.functional.dropout(x, 0.9, training=False) is x
    assert np.all(ag.nn.functional.dropout(x, 1.0).numpy() == 0)


def test_dropout_is_repeatable_under_manual_seed():
    x = ag.ones(10, 10)
    ag.manual_seed(3)
    a = ag.nn.functional.dropout(x, 0.5).numpy()
    ag.manual_seed(3)
    b = ag.nn.functional.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert 0 < (a == 0).sum() < 100


def test_dropout_inplace_overwrites_input():
    x = ag.ones(6, 6)
    out = ag.nn.functional.dropout(x, 0.5, inplace=True)
    assert out is x and x._version == 1
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}
