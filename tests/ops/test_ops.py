"""Every differentiable op of API.md: values and gradients against finite differences and torch.

Each test goes through ``helpers.check_op`` (first order) or ``helpers.check_gradgrad``
(second order); a test function written against ``lib`` runs unchanged on asyncgrad and
torch. Inputs are small so that finite differences stay cheap.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag

# --------------------------------------------------------------------------- binary elementwise
BROADCAST_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1, 3), (4, 1)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((2, 3), (2, 1)),
]

BINARY = {
    "add": (lambda x, y: x + y, "AddBackward0"),
    "sub": (lambda x, y: x - y, "SubBackward0"),
    "mul": (lambda x, y: x * y, "MulBackward0"),
    "div": (lambda x, y: x / y, "DivBackward0"),
    "pow": (lambda x, y: x ** y, "PowBackward1"),
    "add_fn": (lambda lib, x, y: lib.add(x, y), "AddBackward0"),
    "mul_fn": (lambda lib, x, y: lib.mul(x, y), "MulBackward0"),
    "maximum": (lambda lib, x, y: lib.maximum(x, y), "MaximumBackward0"),
    "minimum": (lambda lib, x, y: lib.minimum(x, y), "MinimumBackward0"),
}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
async def test_binary_broadcasting(op, shapes):
    fn, name = BINARY[op]
    # positive inputs keep div and pow smooth; distinct values keep maximum/minimum away from ties
    out, grads = await check_op(fn, *shapes, name=name, low=0.5, high=2.0)
    assert out.shape == np.broadcast_shapes(*shapes)
    assert [g.shape for g in grads] == [tuple(s) for s in shapes]


@pytest.mark.parametrize("rg", [(True, False), (False, True)], ids=["left", "right"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
async def test_binary_one_side_requires_grad(op, rg):
    fn, name = BINARY[op]
    out, grads = await check_op(fn, (2, 3), (3,), requires_grad=rg, name=name, low=0.5, high=2.0)
    assert len(grads) == 1
    assert out.grad_fn.next_functions[0 if rg[0] else 1][0].name() == "AccumulateGrad"
    assert out.grad_fn.next_functions[1 if rg[0] else 0][0] is None


SCALAR_OPS = {
    "x+2": (lambda x: x + 2, "AddBackward0"),
    "2+x": (lambda x: 2 + x, "AddBackward0"),
    "x-2.5": (lambda x: x - 2.5, "SubBackward0"),
    "2.5-x": (lambda x: 2.5 - x, "RsubBackward1"),
    "x*3": (lambda x: x * 3, "MulBackward0"),
    "3*x": (lambda x: 3 * x, "MulBackward0"),
    "x/2": (lambda x: x / 2, "DivBackward0"),
    "2/x": (lambda x: 2 / x, None),  # torch records reciprocal * 2 (MulBackward0); asyncgrad a DivBackward0
    "x**2": (lambda x: x ** 2, "PowBackward0"),
    "x**3": (lambda x: x ** 3, "PowBackward0"),
    "x**0.5": (lambda x: x ** 0.5, "PowBackward0"),
    "x**-1.5": (lambda x: x ** -1.5, "PowBackward0"),
    "x**0": (lambda x: x ** 0, "PowBackward0"),
    "x.pow(2)": (lambda x: x.pow(2), "PowBackward0"),
    "2**x": (lambda x: 2 ** x, "PowBackward2"),
    "1.5**x": (lambda x: 1.5 ** x, "PowBackward2"),
    "-x": (lambda x: -x, "NegBackward0"),
}


@pytest.mark.parametrize("op", list(SCALAR_OPS))
async def test_scalar_operand(op):
    fn, name = SCALAR_OPS[op]
    await check_op(fn, (2, 3), name=name, low=0.5, high=2.0)


async def test_pow_negative_base_integer_exponent():
    await check_op(lambda x: x ** 3, (2, 3), name="PowBackward0")
    await check_op(lambda x, y: x ** y, np.array([-1.5, -0.5, 2.0]), np.array([2.0, 3.0, 2.0]),
                   requires_grad=(True, False), name="PowBackward1")


async def test_pow_tensor_exponent_at_zero_base():
    """torch: d(a**b)/da is 0 where b == 0, d/db is 0 where a == 0 (and b >= 0)."""
    x = ag_tensor([0.0, 0.0, 2.0], dtype=ag.float64, requires_grad=True)
    y = ag_tensor([0.0, 2.0, 0.0], dtype=ag.float64, requires_grad=True)
    out = x ** y
    assert out.tolist() == [1.0, 0.0, 1.0]
    gx, gy = await ag.grad(out.sum(), (x, y))
    assert gx.tolist() == [0.0, 0.0, 0.0]
    assert gy.tolist() == [0.0, 0.0, np.log(2.0)]


# --------------------------------------------------------------------------- unary
UNARY = {
    "neg": (lambda x: x.neg(), "NegBackward0", {}),
    "abs": (lambda x: x.abs(), "AbsBackward0", {}),
    "abs()": (lambda x: abs(x), "AbsBackward0", {}),
    "exp": (lambda x: x.exp(), "ExpBackward0", {}),
    "log": (lambda x: x.log(), "LogBackward0", {"low": 0.5, "high": 3.0}),
    "log1p": (lambda x: x.log1p(), "Log1PBackward0", {"low": -0.5, "high": 3.0}),
    "lib.log1p": (lambda lib, x: lib.log1p(x), "Log1PBackward0", {"low": -0.5, "high": 3.0}),
    "sqrt": (lambda x: x.sqrt(), "SqrtBackward0", {"low": 0.5, "high": 3.0}),
    "sin": (lambda x: x.sin(), "SinBackward0", {}),
    "cos": (lambda x: x.cos(), "CosBackward0", {}),
    "tanh": (lambda x: x.tanh(), "TanhBackward0", {}),
    "sigmoid": (lambda x: x.sigmoid(), "SigmoidBackward0", {}),
    "relu": (lambda x: x.relu(), "ReluBackward0", {}),
    "lib.exp": (lambda lib, x: lib.exp(x), "ExpBackward0", {}),
    "lib.log": (lambda lib, x: lib.log(x), "LogBackward0", {"low": 0.5, "high": 3.0}),
    "lib.sqrt": (lambda lib, x: lib.sqrt(x), "SqrtBackward0", {"low": 0.5, "high": 3.0}),
    "lib.sin": (lambda lib, x: lib.sin(x), "SinBackward0", {}),
    "lib.cos": (lambda lib, x: lib.cos(x), "CosBackward0", {}),
    "lib.tanh": (lambda lib, x: lib.tanh(x), "TanhBackward0", {}),
    "lib.sigmoid": (lambda lib, x: lib.sigmoid(x), "SigmoidBackward0", {}),
    "lib.relu": (lambda lib, x: lib.relu(x), "ReluBackward0", {}),
    "lib.abs": (lambda lib, x: lib.abs(x), "AbsBackward0", {}),
    "lib.neg": (lambda lib, x: lib.neg(x), "NegBackward0", {}),
    "F.relu": (lambda lib, x: lib.F.relu(x), "ReluBackward0", {}),
}


@pytest.mark.parametrize("op", list(UNARY))
async def test_unary(op):
    fn, name, kw = UNARY[op]
    # (2, 3) standard normal values under seed 0 stay > 0.1 away from 0: relu/abs are smooth there
    await check_op(fn, (2, 3), name=name, **kw)


async def test_unary_scalar_tensor():
    await check_op(lambda x: x.exp() * x.sin(), (), name="MulBackward0")


async def test_relu_and_abs_at_zero():
    """At the kink torch's gradient is 0 for both (finite differences would say 0.5 and 0)."""
    for fn, name in ((lambda x: x.relu(), "ReluBackward0"), (lambda x: x.abs(), "AbsBackward0")):
        _, (g,) = await check_op(fn, np.array([-1.0, 0.0, 2.0]), name=name, fd=False)
        v = np.random.default_rng(1000).standard_normal(3)
        expected = v * np.array([0.0, 0.0, 1.0]) if name == "ReluBackward0" else v * np.array([-1.0, 0.0, 1.0])
        assert_close(g, expected, 0, 1e-15, name)


CLAMPS = {
    "min_max": lambda x: x.clamp(-0.5, 0.5),
    "min": lambda x: x.clamp(min=-0.3),
    "max": lambda x: x.clamp(max=0.2),
    "min_kw_max_kw": lambda x: x.clamp(min=-1.0, max=0.0),
    "lib": lambda lib, x: lib.clamp(x, -0.5, 0.5),
}


@pytest.mark.parametrize("case", list(CLAMPS))
async def test_clamp(case):
    # seed 0 normal values are not within 1e-6 of any bound above
    await check_op(CLAMPS[case], (3, 4), name="ClampBackward1")


async def test_clamp_boundary_is_inclusive():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    _, (g,) = await check_op(lambda x: x.clamp(-0.5, 0.5), x, name="ClampBackward1", fd=False)
    v = np.random.default_rng(1000).standard_normal(5)
    assert_close(g, v * np.array([0.0, 1.0, 1.0, 1.0, 0.0]), 0, 1e-15, "clamp mask")


async def test_maximum_minimum_ties_split_gradient():
    x = np.array([1.0, 2.0, 3.0, -1.0])
    y = np.array([1.0, 0.0, 5.0, -1.0])
    # central differences agree with the even split at a tie, and so does torch
    _, (gx, gy) = await check_op(lambda lib, a, b: lib.maximum(a, b), x, y, name="MaximumBackward0")
    v = np.random.default_rng(1000).standard_normal(4)
    assert_close(gx, v * [0.5, 1.0, 0.0, 0.5], 0, 1e-15, "maximum x")
    assert_close(gy, v * [0.5, 0.0, 1.0, 0.5], 0, 1e-15, "maximum y")
    _, (gx, gy) = await check_op(lambda lib, a, b: lib.minimum(a, b), x, y, name="MinimumBackward0")
    assert_close(gx, v * [0.5, 0.0, 1.0, 0.5], 0, 1e-15, "minimum x")
    assert_close(gy, v * [0.5, 1.0, 0.0, 0.5], 0, 1e-15, "minimum y")


async def test_maximum_with_scalar():
    await check_op(lambda lib, x: lib.maximum(x, lib.tensor(np.array(0.25))), (2, 3), name="MaximumBackward0")


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((3,), (2, 3)), ((2, 1), (1, 3))], ids=str)
async def test_hypot(shapes):
    await check_op(lambda lib, x, y: lib.hypot(x, y), *shapes, name="HypotBackward0")
    await check_op(lambda x, y: x.hypot(y), *shapes, requires_grad=[False, True], name="HypotBackward0")
    await check_gradgrad(lambda lib, x, y: lib.hypot(x, y), *shapes)


def test_hypot_takes_floating_tensors_only():
    check_raises(lambda lib: lib.hypot(lib.tensor([3, 4]), lib.tensor([1, 2])), NotImplementedError,
                 "\"hypot_cpu\" not implemented for 'Long'", torch_same=True)
    check_raises(lambda lib: lib.hypot(lib.tensor([3.0]), 2.0), TypeError,
                 r"hypot\(\): argument 'other' \(position 2\) must be Tensor, not float")


# --------------------------------------------------------------------------- where
async def test_where_broadcasting():
    cond = np.array([[True, False, True], [False, False, True]])
    await check_op(lambda lib, a, b: lib.where(lib.tensor(cond), a, b), (2, 3), (3,), name="WhereBackward0")
    await check_op(lambda lib, a, b: lib.where(lib.tensor(cond[0]), a, b), (2, 1), (2, 3), name="WhereBackward0")


async def test_where_condition_from_comparison_and_scalar_operand():
    await check_op(lambda lib, x: lib.where(x > 0, x, 0.0), (3, 4), name="WhereBackward0")
    await check_op(lambda lib, x: lib.where(x > 0, 1.0, x * 2), (3, 4), name="WhereBackward0")


async def test_where_needs_bool_condition():
    x = ag_tensor(np.ones(3))
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        ag.where(ag_tensor([1, 0, 1]), x, x)


# --------------------------------------------------------------------------- reductions
SUMS = {
    "sum()": (lambda x: x.sum(), "SumBackward0"),
    "sum(0)": (lambda x: x.sum(0), "SumBackward1"),
    "sum(-1)": (lambda x: x.sum(-1), "SumBackward1"),
    "sum(1,keepdim)": (lambda x: x.sum(1, keepdim=True), "SumBackward1"),
    "sum((0,2))": (lambda x: x.sum((0, 2)), "SumBackward1"),
    "sum(dim=(0,-1),keepdim)": (lambda x: x.sum(dim=(0, -1), keepdim=True), "SumBackward1"),
    "lib.sum": (lambda lib, x: lib.sum(x, 1), "SumBackward1"),
    "mean()": (lambda x: x.mean(), "MeanBackward0"),
    "mean(0)": (lambda x: x.mean(0), "MeanBackward1"),
    "mean(-1,keepdim)": (lambda x: x.mean(-1, keepdim=True), "MeanBackward1"),
    "mean((1,2))": (lambda x: x.mean((1, 2)), "MeanBackward1"),
    "lib.mean": (lambda lib, x: lib.mean(x, 0), "MeanBackward1"),
}


@pytest.mark.parametrize("case", list(SUMS))
async def test_sum_mean(case):
    fn, name = SUMS[case]
    out, _ = await check_op(fn, (2, 3, 4), name=name)


async def test_sum_int_tensor_gives_int64():
    assert ag.tensor([1, 2, 3], dtype=ag.int32).sum().dtype == ag.int64
    assert ag.tensor([True, True, False]).sum().item() == 2


async def test_max_min_all_elements():
    await check_op(lambda x: x.max(), (3, 4), name="MaxBackward1")
    await check_op(lambda x: x.min(), (3, 4), name="MinBackward1")
    await check_op(lambda lib, x: lib.max(x), (3, 4), name="MaxBackward1")


async def test_max_min_all_elements_with_ties():
    """Ties share the gradient evenly (torch's rule); two-way ties also match finite differences."""
    x = np.array([[1.0, 3.0], [3.0, -2.0]])
    _, (g,) = await check_op(lambda x: x.max(), x, name="MaxBackward1")
    assert_close(g, [[0.0, 0.5], [0.5, 0.0]], 0, 1e-15, "max ties")
    _, (g,) = await check_op(lambda x: x.min(), np.array([-1.0, 0.0, -1.0]), name="MinBackward1")
    assert_close(g, [0.5, 0.0, 0.5], 0, 1e-15, "min ties")
    # a three-way tie: finite differences would give 1/2 each, torch gives 1/3
    _, (g,) = await check_op(lambda x: x.max(), np.array([2.0, 2.0, 1.0, 2.0]), name="MaxBackward1", fd=False)
    assert_close(g, [1 / 3, 1 / 3, 0.0, 1 / 3], 0, 1e-15, "three-way tie")


@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, False), (-1, True), (2, False)])
@pytest.mark.parametrize("which", ["max", "min"])
async def test_max_min_dim(which, dim, keepdim):
    name = "MaxBackward0" if which == "max" else "MinBackward0"
    out, _ = await check_op(lambda x: getattr(x, which)(dim, keepdim=keepdim).values, (2, 3, 4), name=name)
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    result = getattr(ag.tensor(x, requires_grad=True), which)(dim, keepdim)
    values, indices = result
    assert result.values is values and result.indices is indices
    reduce = np.max if which == "max" else np.min
    arg = np.argmax if which == "max" else np.argmin
    np.testing.assert_array_equal(values.detach().numpy(), reduce(x, axis=dim, keepdims=keepdim))
    np.testing.assert_array_equal(indices.numpy(), arg(x, axis=dim, keepdims=keepdim))
    assert indices.dtype == ag.int64 and not indices.requires_grad
    if has_torch():
        import torch

        tv, ti = getattr(torch.tensor(x), which)(dim, keepdim)
        np.testing.assert_array_equal(indices.numpy(), ti.numpy())


async def test_max_min_dim_of_0d_tensor():
    for which in ("max", "min"):
        out, (g,) = await check_op(lambda x, w=which: getattr(x, w)(0).values * 3, np.array(1.5))
        assert out.item() == 4.5 and g.item() == 3.0
        values, indices = getattr(ag.tensor(2.0), which)(-1, keepdim=True)
        assert values.shape == () and indices.item() == 0 and indices.dtype == ag.int64


async def test_max_dim_with_ties_sends_gradient_to_the_returned_index():
    x = ag.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    values, indices = x.max(1)
    assert indices.tolist() == [1, 0]  # the first occurrence, as torch on CPU
    (g,) = await ag.grad(values.sum(), x)
    assert g.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    await check_op(lambda x: x.max(1).values, x.detach().numpy(), name="MaxBackward0", fd=False)
    await check_op(lambda x: x.min(0).values, x.detach().numpy(), name="MinBackward0", fd=False)


@pytest.mark.parametrize("dim", [0, 1, -1])
async def test_softmax_log_softmax(dim):
    await check_op(lambda x: x.softmax(dim), (3, 4), name="SoftmaxBackward0")
    await check_op(lambda x: x.log_softmax(dim), (3, 4), name="LogSoftmaxBackward0")
    await check_op(lambda lib, x: lib.softmax(x, dim), (2, 3, 2), name="SoftmaxBackward0")
    await check_op(lambda lib, x: lib.log_softmax(x, dim), (2, 3, 2), name="LogSoftmaxBackward0")


async def test_softmax_large_inputs_are_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1001.0]])
    out, _ = await check_op(lambda x: x.softmax(1), x, name="SoftmaxBackward0")
    assert np.isfinite(out.detach().cpu().numpy()).all()
    out, _ = await check_op(lambda x: x.log_softmax(1), x, name="LogSoftmaxBackward0")
    assert np.isfinite(out.detach().cpu().numpy()).all()


# --------------------------------------------------------------------------- shapes
SHAPES = {
    "reshape": (lambda x: x.reshape(4, 6), (2, 3, 4), "ViewBackward0"),
    "reshape(-1)": (lambda x: x.reshape(-1), (2, 3, 4), "ViewBackward0"),
    "reshape(tuple)": (lambda x: x.reshape((3, -1, 2)), (2, 3, 4), "ViewBackward0"),
    "lib.reshape": (lambda lib, x: lib.reshape(x, (6, 4)), (2, 3, 4), "ViewBackward0"),
    "view": (lambda x: x.view(6, 4), (2, 3, 4), "ViewBackward0"),
    "view(-1)": (lambda x: x.view(-1, 2), (2, 3, 4), "ViewBackward0"),
    "transpose": (lambda x: x.transpose(0, 2), (2, 3, 4), "TransposeBackward0"),
    "transpose(-1,-2)": (lambda x: x.transpose(-1, -2), (2, 3, 4), "TransposeBackward0"),
    "lib.transpose": (lambda lib, x: lib.transpose(x, 0, 1), (2, 3, 4), "TransposeBackward0"),
    "T": (lambda x: x.T, (3, 4), "PermuteBackward0"),
    "mT": (lambda x: x.mT, (2, 3, 4), "TransposeBackward0"),
    "t()": (lambda x: x.t(), (3, 4), "TBackward0"),
    "permute": (lambda x: x.permute(2, 0, 1), (2, 3, 4), "PermuteBackward0"),
    "permute(tuple)": (lambda x: x.permute((1, -1, 0)), (2, 3, 4), "PermuteBackward0"),
    "lib.permute": (lambda lib, x: lib.permute(x, (2, 1, 0)), (2, 3, 4), "PermuteBackward0"),
    "unsqueeze(0)": (lambda x: x.unsqueeze(0), (3, 4), "UnsqueezeBackward0"),
    "unsqueeze(-1)": (lambda x: x.unsqueeze(-1), (3, 4), "UnsqueezeBackward0"),
    "unsqueeze(1)": (lambda x: x.unsqueeze(1), (3, 4), "UnsqueezeBackward0"),
    "lib.unsqueeze": (lambda lib, x: lib.unsqueeze(x, 2), (3, 4), "UnsqueezeBackward0"),
    "squeeze()": (lambda x: x.squeeze(), (1, 3, 1, 4), "SqueezeBackward0"),
    "squeeze(2)": (lambda x: x.squeeze(2), (1, 3, 1, 4), "SqueezeBackward1"),
    "squeeze(-4)": (lambda x: x.squeeze(-4), (1, 3, 1, 4), "SqueezeBackward1"),
    "squeeze(1) no-op": (lambda x: x.squeeze(1), (1, 3, 1, 4), "SqueezeBackward1"),
    "lib.squeeze": (lambda lib, x: lib.squeeze(x, 0), (1, 3, 1, 4), "SqueezeBackward1"),
    "expand": (lambda x: x.expand(2, 3, 4), (3, 1), "ExpandBackward0"),
    "expand(-1)": (lambda x: x.expand(-1, 5), (3, 1), "ExpandBackward0"),
    "expand(tuple)": (lambda x: x.expand((2, 3, 4)), (1, 4), "ExpandBackward0"),
    "expand_as": (lambda x: x.expand_as(x.sum(1, keepdim=True).expand(3, 4).unsqueeze(0)), (3, 1),
                  "ExpandBackward0"),
    "flatten": (lambda x: x.flatten(), (2, 3, 4), "ViewBackward0"),
    "flatten(1)": (lambda x: x.flatten(1), (2, 3, 4), "ViewBackward0"),
    "flatten(0,1)": (lambda x: x.flatten(0, 1), (2, 3, 4), "ViewBackward0"),
    "lib.flatten": (lambda lib, x: lib.flatten(x, -2), (2, 3, 4), "ViewBackward0"),
    "clone": (lambda x: x.clone(), (2, 3), "CloneBackward0"),
    "lib.clone": (lambda lib, x: lib.clone(x), (2, 3), "CloneBackward0"),
}


@pytest.mark.parametrize("case", list(SHAPES))
async def test_shape_ops(case):
    fn, shape, name = SHAPES[case]
    await check_op(fn, shape, name=name)


async def test_reshape_that_copies():
    """CloneBackward0 + UnsafeViewBackward0, as torch records them."""
    await check_op(lambda x: x.transpose(0, 1).reshape(-1), (3, 4), name="UnsafeViewBackward0")


async def test_views_share_memory_and_version_counter():
    base = ag.tensor(np.arange(12.0))
    for view in (base.view(3, 4), base.reshape(4, 3), base.view(3, 4).T, base.unsqueeze(0), base[2:5],
                 base.view(3, 4).permute(1, 0), base.view(2, 6).transpose(0, 1), base.expand(2, 12)):
        assert np.shares_memory(view.numpy(), base.numpy())
        before = view._version
        base.add_(1.0)
        assert view._version == before + 1 == base._version
    view = base.view(3, 4)
    view.mul_(2.0)
    assert base._version == view._version
    np.testing.assert_array_equal(base.numpy(), (np.arange(12.0) + 8) * 2)


async def test_reshape_copies_when_it_must():
    x = ag.tensor(np.arange(12.0).reshape(3, 4)).T
    y = x.reshape(-1)
    assert not np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), np.arange(12.0).reshape(3, 4).T.reshape(-1))


async def test_to_dtype():
    out, (g,) = await check_op(lambda lib, x: x.to(lib.float32), (2, 3), name="ToCopyBackward0", fd=False,
                                 dtype=np.float32)
    assert out.dtype == ag.float32 and g.dtype == ag.float64
    v = np.random.default_rng(1000).standard_normal((2, 3))
    assert_close(g, v.astype(np.float32).astype(np.float64), 0, 0, "to(float32) gradient")
    x = ag.tensor([1.0, 2.0], dtype=ag.float32, requires_grad=True)
    y = x.to(ag.float64) * 3
    assert y.dtype == ag.float64
    await y.sum().backward()
    assert x.grad.dtype == ag.float32 and x.grad.tolist() == [3.0, 3.0]
    assert x.to(ag.float32) is x
    assert x.double().dtype == ag.float64 and x.float() is x


async def test_to_int_dtype_leaves_the_graph():
    x = ag.tensor([1.5, -2.5], requires_grad=True)
    y = x.to(ag.int64)
    assert y.dtype == ag.int64 and not y.requires_grad and y.grad_fn is None
    assert y.tolist() == [1, -2]


# --------------------------------------------------------------------------- joins
async def test_cat():
    await check_op(lambda lib, a, b: lib.cat([a, b]), (2, 3), (1, 3), name="CatBackward0")
    await check_op(lambda lib, a, b, c: lib.cat((a, b, c), dim=1), (2, 1), (2, 3), (2, 2), name="CatBackward0")
    await check_op(lambda lib, a, b: lib.cat([a, b], -1), (2, 2, 1), (2, 2, 3), name="CatBackward0")
    await check_op(lambda lib, a, b: lib.cat([a, b, a], 0), (2, 3), (1, 3), name="CatBackward0")


async def test_cat_stack_with_constant_input():
    out, grads = await check_op(lambda lib, a, b: lib.cat([a, b]), (2, 3), (1, 3), requires_grad=(False, True),
                                name="CatBackward0")
    assert len(grads) == 1 and out.grad_fn.next_functions[0][0] is None
    await check_op(lambda lib, a, b: lib.stack([a, b]), (2, 3), (2, 3), requires_grad=(True, False),
                   name="StackBackward0")


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
async def test_stack(dim):
    await check_op(lambda lib, a, b, c: lib.stack([a, b, c], dim), (2, 3), (2, 3), (2, 3), name="StackBackward0")


# --------------------------------------------------------------------------- indexing
GETITEM = {
    "int": (lambda x: x[1], "SelectBackward0"),
    "negative int": (lambda x: x[-1], "SelectBackward0"),
    "slice": (lambda x: x[1:3], "SliceBackward0"),
    "slice step": (lambda x: x[::2], "SliceBackward0"),
    "2d slice": (lambda x: x[:, 1:], "SliceBackward0"),
    "int and slice": (lambda x: x[1, 1:3], None),
    "ints": (lambda x: x[1, 2], None),
    "None": (lambda x: x[None], None),
    "None mid": (lambda x: x[:, None, 1], None),
    "Ellipsis": (lambda x: x[..., 1], None),
    "Ellipsis slice": (lambda x: x[..., 1:3], None),
    "list": (lambda x: x[[0, 2]], "IndexBackward0"),
    "repeated list": (lambda x: x[[0, 0, 2, 0]], "IndexBackward0"),
    "repeated tensor": (lambda lib, x: x[lib.tensor(np.array([1, 1, 1, 0]))], "IndexBackward0"),
    "repeated 2d tensor": (lambda lib, x: x[lib.tensor(np.array([[1, 1], [2, 1]]))], "IndexBackward0"),
    "repeated on dim 1": (lambda x: x[:, [3, 3, 0, 3]], "IndexBackward0"),
    "repeated pairs": (lambda x: x[[0, 0, 2], [1, 1, 3]], "IndexBackward0"),
    "negative indices": (lambda x: x[[-1, -1, 0]], "IndexBackward0"),
    "bool mask": (lambda lib, x: x[lib.tensor(np.array([True, False, True]))], "IndexBackward0"),
    "2d bool mask": (lambda lib, x: x[lib.tensor(np.arange(12).reshape(3, 4) % 3 == 0)], "IndexBackward0"),
    "mask from comparison": (lambda x: x[x > 0], "IndexBackward0"),
}


@pytest.mark.parametrize("case", list(GETITEM))
async def test_getitem(case):
    fn, name = GETITEM[case]
    await check_op(fn, (3, 4), name=name)


async def test_getitem_repeated_indices_accumulate():
    x = ag.tensor(np.arange(4.0), requires_grad=True)
    y = x[[0, 0, 0, 3, 3]]
    assert y.tolist() == [0.0, 0.0, 0.0, 3.0, 3.0]
    await y.sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 0.0, 2.0]
    x.grad = None
    await (x[ag.tensor([[1, 1], [1, 2]])] * ag.tensor([1.0, 10.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 12.0, 10.0, 0.0]


async def test_getitem_index_changed_after_forward_does_not_move_the_gradient():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for make_index in (lambda: ag.tensor([0, 0]), lambda: np.array([0, 0])):
        index = make_index()
        y = x[index]
        index[0] = 2
        await (y * ag.tensor([1.0, 10.0])).sum().backward()
        assert x.grad.tolist() == [11.0, 0.0, 0.0]
        x.grad = None
    mask = ag.tensor([True, False, True])
    y = x[mask]
    mask[1] = True
    await y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    x.grad = None
    index = np.array([0, 2])
    z = x * 1
    z[index] = ag.tensor([5.0, 6.0], requires_grad=True)
    index[1] = 1
    (g,) = await ag.grad(z.sum(), x)
    assert g.tolist() == [0.0, 1.0, 0.0]


async def test_getitem_negative_steps():
    """torch refuses negative steps; numpy semantics, checked against finite differences."""
    for fn, expected in ((lambda x: x[::-1], lambda a: a[::-1]), (lambda x: x[:, ::-2], lambda a: a[:, ::-2]),
                         (lambda x: x[2:0:-1, 1], lambda a: a[2:0:-1, 1])):
        out, _ = await check_op(fn, (3, 4), torch_check=False)
        a = np.random.default_rng(0).standard_normal((3, 4))
        np.testing.assert_array_equal(out.detach().cpu().numpy(), expected(a))


async def test_getitem_basic_is_a_view():
    x = ag.tensor(np.arange(12.0).reshape(3, 4))
    assert np.shares_memory(x[1].numpy(), x.numpy())
    assert np.shares_memory(x[:, 1:].numpy(), x.numpy())
    assert not np.shares_memory(x[[0, 1]].numpy(), x.numpy())
    assert x[1]._vc is x._vc


# --------------------------------------------------------------------------- matmul
MATMUL = {
    "1D@1D": ((4,), (4,), "DotBackward0", True),
    "2D@1D": ((3, 4), (4,), "MvBackward0", True),
    "1D@2D": ((4,), (4, 3), None, False),
    "2D@2D": ((3, 4), (4, 2), "MmBackward0", True),
    "3D@3D": ((2, 3, 4), (2, 4, 2), None, False),
    "3D@2D": ((2, 3, 4), (4, 2), None, False),
    "2D@3D": ((3, 4), (2, 4, 2), None, False),
    "1D@3D": ((4,), (2, 4, 3), None, False),
    "3D@1D": ((2, 3, 4), (4,), None, False),
    "4D@3D broadcast": ((2, 1, 3, 4), (3, 4, 2), None, False),
}


@pytest.mark.parametrize("case", list(MATMUL))
async def test_matmul(case):
    a, b, name, same_as_torch = MATMUL[case]
    out, _ = await check_op(lambda x, y: x @ y, a, b, name=name, torch_name=same_as_torch)
    expected = np.matmul(np.zeros(a), np.zeros(b)).shape
    assert out.shape == expected
    await check_op(lambda lib, x, y: lib.matmul(x, y), a, b, requires_grad=(False, True))
    await check_op(lambda x, y: x.matmul(y), a, b, requires_grad=(True, False))


async def test_matmul_asyncgrad_names():
    """Where torch records extra view nodes, asyncgrad keeps one node per product."""
    x = ag.randn(2, 3, 4, dtype=ag.float64, requires_grad=True)
    assert (x @ ag.randn(2, 4, 5, dtype=ag.float64)).grad_fn.name() == "BmmBackward0"


async def test_rmatmul_with_numpy_is_not_needed_but_tensor_tensor_works():
    a, b = ag.tensor([[1.0, 2.0]]), ag.tensor([[3.0], [4.0]])
    assert (a @ b).tolist() == [[11.0]]


# --------------------------------------------------------------------------- nn functional (asyncgrad/ops/nn.py)
LINEAR = {
    "2D bias": ((5, 4), True, "AddmmBackward0", True),
    "2D no bias": ((5, 4), False, "MmBackward0", True),
    "1D bias": ((4,), True, "AddmmBackward0", False),
    "1D no bias": ((4,), False, "MmBackward0", False),
    "3D bias": ((2, 3, 4), True, "AddmmBackward0", False),
    "3D no bias": ((2, 3, 4), False, "MmBackward0", False),
}


@pytest.mark.parametrize("case", list(LINEAR))
async def test_linear(case):
    shape, bias, name, same_as_torch = LINEAR[case]
    if bias:
        out, _ = await check_op(lambda lib, x, w, b: lib.F.linear(x, w, b), shape, (3, 4), (3,), name=name,
                                torch_name=same_as_torch)
    else:
        out, _ = await check_op(lambda lib, x, w: lib.F.linear(x, w), shape, (3, 4), name=name,
                                torch_name=same_as_torch)
    assert out.shape == shape[:-1] + (3,)
    # gradient for the weight only (an input that does not require grad), as in a first layer
    n = 3 if bias else 2
    await check_op((lambda lib, x, w, b: lib.F.linear(x, w, b)) if bias else (lambda lib, x, w: lib.F.linear(x, w)),
                   shape, (3, 4), *([(3,)] if bias else []), requires_grad=(False,) + (True,) * (n - 1), name=name,
                   torch_name=same_as_torch)


async def test_linear_with_1d_weight():
    """A single output feature: torch accepts a 1-D weight (without a bias)."""
    out, _ = await check_op(lambda lib, x, w: lib.F.linear(x, w), (2, 3), (3,))
    assert out.shape == (2,)
    await check_op(lambda lib, x, w: lib.F.linear(x, w), (3,), (3,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
async def test_mse_loss(reduction):
    await check_op(lambda lib, x, t: lib.F.mse_loss(x, t, reduction=reduction), (3, 4), (3, 4),
                   name="MseLossBackward0")
    await check_op(lambda lib, x, t: lib.F.mse_loss(x, t, reduction=reduction), (5,), (5,),
                   requires_grad=(True, False), name="MseLossBackward0")


async def test_mse_loss_broadcasting_warns_like_torch():
    with pytest.warns(UserWarning, match="Using a target size"):
        await check_op(lambda lib, x, t: lib.F.mse_loss(x, t), (3, 4), (4,), name="MseLossBackward0")


async def test_mse_loss_bad_reduction():
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        AG.F.mse_loss(ag.ones(2), ag.ones(2), reduction="avg")


TARGETS = np.array([0, 3, 1, 3, 2])
WEIGHTS = np.array([0.5, 1.0, 2.0, 0.25])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("ignore", [None, 3], ids=["all", "ignore3"])
async def test_nll_loss(reduction, weighted, ignore):
    def fn(lib, x):
        kw = {"reduction": reduction}
        if weighted:
            kw["weight"] = lib.tensor(WEIGHTS)
        if ignore is not None:
            kw["ignore_index"] = ignore
        return lib.F.nll_loss(x, lib.tensor(TARGETS), **kw)

    out, (g,) = await check_op(fn, (5, 4), name="NllLossBackward0")
    if ignore is not None:
        assert (g.cpu().numpy()[TARGETS == ignore] == 0).all()


async def test_nll_loss_default_ignore_index_and_unbatched():
    targets = np.array([1, -100, 0])
    await check_op(lambda lib, x: lib.F.nll_loss(x, lib.tensor(targets)), (3, 2), name="NllLossBackward0")
    for reduction in ("mean", "sum", "none"):
        await check_op(lambda lib, x, r=reduction: lib.F.nll_loss(x, lib.tensor(np.array(2)), reduction=r), (4,),
                       name="NllLossBackward0")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
async def test_cross_entropy_index_targets(reduction):
    await check_op(lambda lib, x: lib.F.cross_entropy(x, lib.tensor(TARGETS), reduction=reduction), (5, 4),
                   name="NllLossBackward0")
    await check_op(lambda lib, x: lib.F.cross_entropy(x, lib.tensor(TARGETS), weight=lib.tensor(WEIGHTS),
                                                      ignore_index=1, reduction=reduction), (5, 4),
                   name="NllLossBackward0")
    await check_op(lambda lib, x: lib.F.cross_entropy(x, lib.tensor(np.array(1)), reduction=reduction), (4,),
                   name="NllLossBackward0")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
async def test_cross_entropy_probability_targets(reduction):
    rng = np.random.default_rng(5)
    probs = rng.uniform(0.1, 1.0, (3, 4))
    probs /= probs.sum(1, keepdims=True)
    # the targets require grad too: torch differentiates with respect to them
    await check_op(lambda lib, x, p: lib.F.cross_entropy(x, p, reduction=reduction), (3, 4), probs)
    await check_op(lambda lib, x, p: lib.F.cross_entropy(x, p, weight=lib.tensor(WEIGHTS), reduction=reduction),
                   (3, 4), probs)
    await check_op(lambda lib, x, p: lib.F.cross_entropy(x, p, reduction=reduction), (4,), probs[0])


KDIM_TARGETS = np.array([[0, 2, 1], [2, 2, 0]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
async def test_nll_loss_cross_entropy_k_dim(reduction):
    """(N, C, d) inputs with (N, d) targets, as torch's K-dim losses."""
    await check_op(lambda lib, x: lib.F.nll_loss(x, lib.tensor(KDIM_TARGETS), reduction=reduction), (2, 3, 3))
    await check_op(lambda lib, x: lib.F.cross_entropy(x, lib.tensor(KDIM_TARGETS), weight=lib.tensor(WEIGHTS[:3]),
                                                      ignore_index=1, reduction=reduction), (2, 3, 3))
    await check_op(lambda lib, x: lib.F.cross_entropy(x, lib.tensor(KDIM_TARGETS[:, :2]), reduction=reduction),
                   (2, 3, 2))
    probs = np.random.default_rng(3).uniform(0.1, 1.0, (2, 3, 2))
    probs /= probs.sum(1, keepdims=True)
    await check_op(lambda lib, x, p: lib.F.cross_entropy(x, p, weight=lib.tensor(WEIGHTS[:3]), reduction=reduction),
                   (2, 3, 2), probs)


async def test_nll_loss_errors():
    x = ag.zeros(2, 3)
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        AG.F.nll_loss(x, ag.tensor([0, 3]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        AG.F.nll_loss(x, ag.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(3\)."):
        AG.F.nll_loss(x, ag.tensor([0, 1, 2]))


async def test_nn_functional_module_when_present():
    functional = pytest.importorskip("asyncgrad.nn.functional")
    x = ag.tensor(np.arange(6.0).reshape(2, 3))
    w = ag.tensor(np.ones((2, 3)))
    assert functional.linear(x, w).tolist() == [[3.0, 3.0], [12.0, 12.0]]
    assert functional.relu(x - 2.0).tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
    assert functional.mse_loss(x, x + 1).item() == 1.0
    assert abs(functional.cross_entropy(w, ag.tensor([0, 1])).item() - np.log(3)) < 1e-12
    assert abs(functional.nll_loss(-w, ag.tensor([0, 1])).item() - 1.0) < 1e-12


# --------------------------------------------------------------------------- second order
GRADGRAD = {
    "mul": (lambda x, y: x * y, [(2, 3), (3,)], {}),
    "mul scalar": (lambda x: x * x * 3.0, [(2, 3)], {}),
    "div": (lambda x, y: x / y, [(2, 3), (3,)], {"low": 0.5, "high": 2.0}),
    "rdiv": (lambda x: 2.0 / x, [(2, 3)], {"low": 0.5, "high": 2.0}),
    "pow scalar": (lambda x: x ** 3, [(2, 3)], {}),
    "pow fractional": (lambda x: x ** 1.5, [(2, 3)], {"low": 0.5, "high": 2.0}),
    "pow tensor": (lambda x, y: x ** y, [(2, 3), (3,)], {"low": 0.5, "high": 2.0}),
    "rpow": (lambda x: 2.0 ** x, [(2, 3)], {}),
    "exp": (lambda x: x.exp(), [(2, 3)], {}),
    "log": (lambda x: x.log(), [(2, 3)], {"low": 0.5, "high": 2.0}),
    "log1p": (lambda x: x.log1p(), [(2, 3)], {"low": -0.5, "high": 2.0}),
    "sqrt": (lambda x: x.sqrt(), [(2, 3)], {"low": 0.5, "high": 2.0}),
    "sin cos": (lambda x: x.sin() * x.cos(), [(2, 3)], {}),
    "tanh": (lambda x: x.tanh(), [(2, 3)], {}),
    "sigmoid": (lambda x: x.sigmoid(), [(2, 3)], {}),
    "relu": (lambda x: x.relu() * x, [(2, 3)], {}),
    "abs": (lambda x: x.abs() * x, [(2, 3)], {}),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) * x, [(2, 3)], {}),
    "maximum": (lambda lib, x, y: lib.maximum(x, y) * x, [(2, 3), (3,)], {}),
    "where": (lambda lib, x, y: lib.where(x > 0, x * y, y * y), [(2, 3), (3,)], {}),
    "softmax": (lambda x: x.softmax(1), [(2, 3)], {}),
    "log_softmax": (lambda x: x.log_softmax(0), [(2, 3)], {}),
    "matmul 2D": (lambda x, y: x @ y, [(2, 3), (3, 2)], {}),
    "matmul 1D": (lambda x, y: x @ y, [(3,), (3, 2)], {}),
    "matmul batched": (lambda x, y: (x @ y) * x.sum(), [(2, 2, 3), (3, 2)], {}),
    "sum": (lambda x: x.sum() * x, [(2, 3)], {}),
    "sum dim": (lambda x: (x * x).sum(1, keepdim=True) * x, [(2, 3)], {}),
    "mean": (lambda x: (x * x).mean(0) * x.mean(), [(2, 3)], {}),
    "max": (lambda x: x.max() * x, [(2, 3)], {}),
    "max dim": (lambda x: x.max(1).values * x.sum(1), [(2, 3)], {}),
    "getitem repeated": (lambda x: x[[0, 0, 2, 2, 2]] * x[[1, 0, 0, 2, 1]], [(3,)], {}),
    "getitem 2d repeated": (lambda x: x[:, [1, 1, 0]] ** 2, [(2, 3)], {}),
    "getitem mask": (lambda x: (x[x > 0] ** 2).sum() * x, [(2, 3)], {}),
    "getitem slice": (lambda x: x[1:, ::2] * x[0, 1], [(3, 4)], {}),
    "shape ops": (lambda x: x.reshape(3, 2).T.unsqueeze(0).expand(2, 2, 3).flatten() ** 2, [(2, 3)], {}),
    "cat stack": (lambda lib, x, y: lib.stack([lib.cat([x, y]) ** 2, lib.cat([y, x])]), [(2,), (3,)], {}),
    "linear": (lambda lib, x, w, b: lib.F.linear(x, w, b).tanh(), [(2, 3), (2, 3), (2,)], {}),
    "linear 3D": (lambda lib, x, w, b: lib.F.linear(x, w, b) ** 2, [(2, 1, 3), (2, 3), (2,)], {}),
    "mse_loss": (lambda lib, x, t: lib.F.mse_loss(x, t) * x.sum(), [(2, 3), (2, 3)], {}),
    "mse_loss none": (lambda lib, x, t: lib.F.mse_loss(x, t, reduction="none") ** 2, [(2, 3), (2, 3)], {}),
    "cross_entropy": (lambda lib, x: lib.F.cross_entropy(x, lib.tensor(np.array([2, 0]))), [(2, 3)], {}),
    "cross_entropy weighted": (
        lambda lib, x: lib.F.cross_entropy(x, lib.tensor(np.array([2, 0, 1])), weight=lib.tensor(WEIGHTS[:3])),
        [(3, 3)], {}),
    "cross_entropy probs": (lambda lib, x, p: lib.F.cross_entropy(x, p.softmax(1)), [(2, 3), (2, 3)], {}),
    "nll_loss none": (lambda lib, x: lib.F.nll_loss(x.log_softmax(1), lib.tensor(np.array([1, 2])),
                                                     reduction="none"), [(2, 3)], {}),
    "to dtype": (lambda lib, x: x.to(lib.float64) * x, [(2, 3)], {}),
    "cross_entropy k-dim": (lambda lib, x: lib.F.cross_entropy(x, lib.tensor(KDIM_TARGETS[:, :2])), [(2, 3, 2)], {}),
}


@pytest.mark.parametrize("case", list(GRADGRAD))
async def test_second_order(case):
    fn, shapes, kw = GRADGRAD[case]
    await check_gradgrad(fn, *shapes, **kw)


async def test_third_order_pow():
    x = ag.tensor([0.5, 2.0], dtype=ag.float64, requires_grad=True)
    y = (x ** 4).sum()
    (g1,) = await ag.grad(y, x, create_graph=True)
    (g2,) = await ag.grad(g1.sum(), x, create_graph=True)
    (g3,) = await ag.grad(g2.sum(), x)
    np.testing.assert_allclose(g1.detach().numpy(), 4 * np.array([0.5, 2.0]) ** 3)
    np.testing.assert_allclose(g2.detach().numpy(), 12 * np.array([0.5, 2.0]) ** 2)
    np.testing.assert_allclose(g3.numpy(), 24 * np.array([0.5, 2.0]))
