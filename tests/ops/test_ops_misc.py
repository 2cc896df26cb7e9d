"""ops-misc: in-place activations, threshold, glu, softmin, softsign, tanhshrink, the shrinks, rrelu,
instance_norm, logcumsumexp, nansum, dstack, atleast_Nd, put, broadcast_tensors, pdist, the unsafe_
splits and the storage/type methods: values and gradients (first and second order) against finite
differences and torch in float64 on cpu and sim:0, torch's node names and error wording."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, torch

import asyncgrad as ag

DEVICES = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

X = np.array([[-3.1, -1.2, -0.4, 0.3], [0.9, 1.7, 2.6, 4.2], [-0.05, 0.07, 6.5, -7.0]])

ACTIVATIONS = [
    ("threshold", lambda F, x: F.threshold(x, 0.5, -2.0), "ThresholdBackward0"),
    ("glu", lambda F, x: F.glu(x, 1), "GluBackward0"),
    ("glu0", lambda F, x: F.glu(x[:2], 0), "GluBackward0"),
    ("softmin", lambda F, x: F.softmin(x, 1), "SoftmaxBackward0"),
    ("softsign", lambda F, x: F.softsign(x), "DivBackward0"),
    ("tanhshrink", lambda F, x: F.tanhshrink(x), "SubBackward0"),
    ("hardshrink", lambda F, x: F.hardshrink(x, 0.6), "HardshrinkBackward0"),
    ("softshrink", lambda F, x: F.softshrink(x, 0.6), "SoftshrinkBackward0"),
    ("rrelu_eval", lambda F, x: F.rrelu(x, 0.1, 0.3), "RreluWithNoiseBackward0"),
]
# torch records the backward of these as a node of its own (HardshrinkBackwardBackward0...); ours
# is composed of where/mul, so only the values of the second derivative are compared
INPLACE = [
    ("leaky_relu_", lambda F, x: F.leaky_relu_(x * 1, 0.2), "LeakyReluBackward1"),
    ("leaky_relu_inplace", lambda F, x: F.leaky_relu(x * 1, 0.0, inplace=True), "LeakyReluBackward1"),
    ("elu_", lambda F, x: F.elu_(x * 1, 0.7), "EluBackward1"),
    ("selu_inplace", lambda F, x: F.selu(x * 1, inplace=True), "EluBackward1"),
    ("celu_inplace", lambda F, x: F.celu(x * 1, 1.5, inplace=True), "CeluBackward1"),
    ("threshold_", lambda F, x: F.threshold_(x * 1, 0.5, 0.0), "ThresholdBackward1"),
    ("relu_", lambda F, x: F.relu_(x * 1), "ReluBackward0"),
    ("hardtanh_", lambda F, x: F.hardtanh_(x * 1, -2.0, 2.5), "HardtanhBackward0"),
    ("silu_inplace", lambda F, x: F.silu(x * 1, inplace=True), "SiluBackward0"),
    ("hardswish_inplace", lambda F, x: F.hardswish(x * 1, inplace=True), "HardswishBackward0"),
    ("rrelu_eval_", lambda F, x: F.rrelu_(x * 1, 0.1, 0.3), "RreluWithNoiseBackward1"),
]


@DEVICES
@pytest.mark.parametrize("name, fn, node", ACTIVATIONS + INPLACE, ids=[a[0] for a in ACTIVATIONS + INPLACE])
async def test_activation_first_and_second_order(name, fn, node):
    await check_op(lambda lib, x: fn(lib.nn.functional, x), X, name=node)
    await check_gradgrad(lambda lib, x: fn(lib.nn.functional, x), X)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.leaky_relu_(lib.tensor(np.array([-1.0, 1.0])).requires_grad_() * 1, -2),
    lambda lib: lib.nn.functional.rrelu_(lib.tensor(np.array([-1.0, 1.0])).requires_grad_() * 1, -5.0, 1.0),
])
def test_inplace_negative_slope_refused_in_backward(call):
    """torch's test_leaky_relu_inplace_with_neg_slope: the forward runs, the backward refuses."""
    check_raises(lambda lib: call(lib).backward(lib.ones(2)), RuntimeError, "call out-of-place version")


def test_elu_inplace_negative_alpha_refused():
    check_raises(lambda lib: lib.nn.functional.elu_(lib.tensor(np.array([-1.0, 1.0])).requires_grad_() * 1, -1.0)
                 .sum().backward(), RuntimeError, "In-place elu backward calculation is triggered with a negative")


async def test_leaky_relu_inplace_zero_slope():
    a = ag.tensor([-2.0, 0.0, 2.0], requires_grad=True)
    b = ag.nn.functional.leaky_relu_(a.clone(), 0.0)
    await b.backward(ag.ones(3))
    assert a.grad.tolist() == [0.0, 0.0, 1.0]


def test_activation_errors():
    check_raises(lambda lib: lib.nn.functional.glu(lib.ones(3)), RuntimeError,
                 "Halving dimension must be even, but dimension 0 is size 3")
    check_raises(lambda lib: lib.nn.functional.glu(lib.tensor(1.0)), RuntimeError,
                 "glu does not support scalars because halving size must be even")
    check_raises(lambda lib: lib.nn.functional.softshrink(lib.ones(2), -1.0), RuntimeError,
                 r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float, but found -1")
    check_raises(lambda lib: lib.nn.functional.leaky_relu_(lib.ones(2, requires_grad=True)), RuntimeError,
                 "a leaf Variable that requires grad is being used in an in-place operation.")


def test_rrelu_training_draws_slopes_in_range_and_repeats_with_the_generator():
    x = -ag.ones(200, dtype=ag.float64, requires_grad=True)
    gen = ag.Generator().manual_seed(3)
    out = ag.nn.functional.rrelu(x, 0.1, 0.3, training=True, generator=gen)
    slopes = (out / x).detach().numpy()
    assert ((slopes >= 0.1) & (slopes <= 0.3)).all() and slopes.std() > 0.01
    again = ag.nn.functional.rrelu(x, 0.1, 0.3, training=True, generator=ag.Generator().manual_seed(3))
    assert np.array_equal(again.detach().numpy(), out.detach().numpy())
    grad, = ag.grad_sync(out.sum(), [x])
    assert np.allclose(grad.numpy(), slopes)
    assert out.grad_fn.name() == "RreluWithNoiseBackward0"


def test_activation_modules(torch):
    for ours, theirs in [(ag.nn.Threshold(0.1, 20.0), torch.nn.Threshold(0.1, 20.0)), (ag.nn.GLU(), torch.nn.GLU()),
                         (ag.nn.Softmin(1), torch.nn.Softmin(1)), (ag.nn.Softsign(), torch.nn.Softsign()),
                         (ag.nn.Tanhshrink(), torch.nn.Tanhshrink()), (ag.nn.Hardshrink(), torch.nn.Hardshrink()),
                         (ag.nn.Softshrink(0.3), torch.nn.Softshrink(0.3)), (ag.nn.RReLU(), torch.nn.RReLU())]:
        assert repr(ours) == repr(theirs)
        ours.eval(), theirs.eval()
        assert np.allclose(ours(ag.tensor(X)).detach().numpy(), theirs(torch.tensor(X)).detach().numpy())


# --------------------------------------------------------------------------- instance_norm
@DEVICES
@pytest.mark.parametrize("affine", [False, True])
async def test_instance_norm(affine):
    x = np.random.default_rng(1).standard_normal((2, 3, 5))
    w, b = np.array([0.5, 1.5, -1.0]), np.array([0.1, -0.2, 0.3])
    if affine:
        def fn(lib, x, w, b):
            return lib.nn.functional.instance_norm(x, weight=w, bias=b)
        await check_op(fn, x, w, b, name="ViewBackward0")
        await check_gradgrad(fn, x, w, b)
    else:
        await check_op(lambda lib, x: lib.nn.functional.instance_norm(x), x, name="ViewBackward0")
        await check_gradgrad(lambda lib, x: lib.nn.functional.instance_norm(x), x)


@pytest.mark.parametrize("cls, shape", [("InstanceNorm1d", (2, 3, 6)), ("InstanceNorm1d", (3, 6)),
                                        ("InstanceNorm2d", (2, 3, 4, 4)), ("InstanceNorm3d", (2, 3, 2, 3, 2))])
def test_instance_norm_modules_match_torch(torch, cls, shape):
    x = np.random.default_rng(0).standard_normal(shape)
    ours = getattr(ag.nn, cls)(3, affine=True, track_running_stats=True, dtype=ag.float64)
    theirs = getattr(torch.nn, cls)(3, affine=True, track_running_stats=True, dtype=torch.float64)
    assert repr(ours) == repr(theirs)
    for _ in range(2):
        assert np.allclose(ours(ag.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy())
    assert np.allclose(ours.running_mean.numpy(), theirs.running_mean.numpy())
    assert np.allclose(ours.running_var.numpy(), theirs.running_var.numpy())
    ours.eval(), theirs.eval()
    assert np.allclose(ours(ag.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy())
    check_raises(lambda lib: getattr(lib.nn, cls)(3)(lib.ones(*(2,) * (len(shape) + 3))), ValueError,
                 r"expected \dD or \dD input \(got \d+D input\)")


# --------------------------------------------------------------------------- logcumsumexp, nansum
@DEVICES
@pytest.mark.parametrize("dim", [0, 1, -1])
async def test_logcumsumexp(dim):
    await check_op(lambda lib, x: lib.logcumsumexp(x, dim), X, name="LogcumsumexpBackward0")
    await check_gradgrad(lambda lib, x: lib.logcumsumexp(x, dim), X)


@DEVICES
async def test_logcumsumexp_large_value():
    x = np.random.default_rng(0).uniform(0, 1, (3, 4))
    x[0] = 10000.0
    x[1, 2] = -10000.0
    # finite differences cannot resolve a step beside 1e4: torch (and finiteness) carry the check
    for dim in (0, 1):
        out, grads = await check_op(lambda lib, x, dim=dim: x.logcumsumexp(dim), x, fd=False)
        assert np.isfinite(out.detach().cpu().numpy()).all() and np.isfinite(grads[0].cpu().numpy()).all()


@DEVICES
@pytest.mark.parametrize("args", [(), (0,), ((0, 2),), ((0, -1), True)])
async def test_nansum(args):
    x = np.random.default_rng(0).standard_normal((2, 3, 2))
    await check_op(lambda lib, x: lib.nansum(x * 1, *args), x, name="NansumBackward0")
    await check_gradgrad(lambda lib, x: lib.nansum(x * x, *args), x)
    # NaNs count as 0 and get no gradient (check_op's own inputs cannot hold NaN: NaN != NaN)
    x[x < 0.2] = np.nan
    a = ag.tensor(x, requires_grad=True)
    out = a.nansum(*args)
    grad, = await ag.grad(out, [a], ag.ones_like(out))
    if torch is not None:
        t = torch.tensor(x, requires_grad=True)
        tout = t.nansum(*args)
        tout.backward(torch.ones_like(tout))
        assert np.allclose(out.detach().numpy(), tout.detach().numpy())
        assert np.array_equal(grad.numpy(), t.grad.numpy())
    assert np.array_equal(grad.numpy(), np.where(np.isnan(x), 0.0, 1.0))


@pytest.mark.parametrize("in_dtype, out_dtype", [("float32", "float64"), ("float64", "float32")])
async def test_nansum_dtype(in_dtype, out_dtype):
    a = ag.tensor([1.0, float("nan"), 2.0], dtype=getattr(ag, in_dtype), requires_grad=True)
    b = ag.nansum(a, dtype=getattr(ag, out_dtype))
    assert b.dtype == getattr(ag, out_dtype)
    await b.backward()
    assert a.grad.dtype == a.dtype and a.grad.tolist() == [1.0, 0.0, 1.0]
    assert ag.nansum(ag.tensor([1, 2])).dtype == ag.int64


# --------------------------------------------------------------------------- dstack, atleast, broadcast_tensors
@DEVICES
async def test_dstack_and_atleast():
    await check_op(lambda lib, a, b: lib.dstack([a, b]), (3,), (3,), name="CatBackward0")
    await check_op(lambda lib, a, b: lib.dstack([a, b]), (2, 3), (2, 3, 2), name="CatBackward0")
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in [(), (3,), (2, 3), (2, 1, 3)]:
            out, _ = await check_op(lambda lib, x, fn=fn: getattr(lib, fn)(x) * 1, np.ones(shape) * 0.5)
            assert out.shape == getattr(np, fn)(np.ones(shape)).shape
    a, b = ag.ones(2), ag.ones(())
    assert [t.shape for t in ag.atleast_3d(a, b)] == [(1, 2, 1), (1, 1, 1)]
    assert [t.shape for t in ag.atleast_2d([a, b])] == [(1, 2), (1, 1)]
    check_raises(lambda lib: lib.dstack([]), RuntimeError, "dstack expects a non-empty TensorList")


@DEVICES
async def test_broadcast_tensors():
    def fn(lib, a, b, c):
        x, y, z = lib.broadcast_tensors(a, b, c)
        return x * y + z
    await check_op(fn, (3,), (1, 2, 1), (5, 1, 1))
    await check_gradgrad(fn, (3,), (1, 2, 1), (5, 1, 1))
    check_raises(lambda lib: lib.broadcast_tensors(lib.ones(3), lib.ones(2)), RuntimeError,
                 r"The size of tensor a \(3\) must match the size of tensor b \(2\) at non-singleton dimension 0")


# --------------------------------------------------------------------------- put
@DEVICES
@pytest.mark.parametrize("accumulate, index", [(False, [1, 2, 3, -1, -2, -3]), (True, [1, 2, 3, 1, 2, 3])])
async def test_put(accumulate, index):
    def fn(lib, root, values):
        x = root.clone()
        x.put_(lib.tensor(np.array(index)), values, accumulate=accumulate)
        return x
    out, _ = await check_op(fn, (4, 5), (6,), name="PutBackward0")
    await check_gradgrad(fn, (4, 5), (6,))
    await check_op(lambda lib, r, v: r.put(lib.tensor(np.array(index)), v, accumulate), (4, 5), (6,),
                   name="PutBackward0")


def test_put_errors():
    check_raises(lambda lib: lib.ones(2, 3).put(lib.tensor([6]), lib.tensor([1.0])), IndexError,
                 "out of range: tried to access index 6 on a tensor of 6 elements.")
    check_raises(lambda lib: lib.ones(2, 3).put(lib.tensor([0, 1]), lib.tensor([1.0])), IndexError,
                 r"put_\(\): Expected source and index to have the same number of elements, but got source.numel\(\) "
                 r"= 1, index.numel\(\) = 2")
    check_raises(lambda lib: lib.ones(2, 3).put(lib.tensor([0.0]), lib.tensor([1.0])), RuntimeError,
                 r"put_\(\): Expected a long tensor for index, but got Float")


# --------------------------------------------------------------------------- pdist
@DEVICES
@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, float("inf")])
async def test_pdist(p):
    x = np.random.default_rng(4).standard_normal((5, 3))
    await check_op(lambda lib, x: lib.pdist(x, p), x, name="PdistBackward0")
    if p != float("inf"):
        # torch has no derivative of _pdist_backward: finite differences alone check the second order
        await check_gradgrad(lambda lib, x: lib.pdist(x, p), x, torch_check=False)


async def test_pdist_large_and_errors():
    x = ag.randn(1000, 1).requires_grad_()
    out = ag.pdist(x, p=2)
    assert out.shape == (499500,)
    await out.sum().backward()
    assert x.grad.shape == (1000, 1)
    check_raises(lambda lib: lib.pdist(lib.ones(3)), RuntimeError, "pdist only supports 2D tensors, got: 1D")
    check_raises(lambda lib: lib.pdist(lib.ones(3, 2), p=-1), RuntimeError,
                 "pdist only supports non-negative p values")


# --------------------------------------------------------------------------- unsafe splits
@pytest.mark.parametrize("method, args, node", [("unsafe_split", (1,), "UnsafeSplitBackward0"),
                                                ("unsafe_split_with_sizes", ((1, 2),), "UnsafeSplitWithSizesBackward0"),
                                                ("unsafe_chunk", (2,), "UnsafeSplitBackward0")])
async def test_unsafe_split(method, args, node):
    a = ag.randn(3, 3, dtype=ag.float64, requires_grad=True)
    b = a + a
    pieces = getattr(b, method)(*args)
    assert pieces[0].grad_fn.name() == node and pieces[0]._base is None
    assert pieces[0].data_ptr() == b.data_ptr()  # the memory is still shared
    pieces[0].mul_(2)  # allowed: not a view for autograd
    await (pieces[0].sum() + pieces[-1].sum()).backward()
    expected = np.zeros((3, 3))
    expected[:pieces[0].shape[0]] = 4.0
    expected[-pieces[-1].shape[0]:] += 2.0
    assert np.allclose(a.grad.numpy(), expected)


# --------------------------------------------------------------------------- storage and type methods
async def test_set_shares_memory_and_bumps_the_version():
    b, c = ag.zeros(3), ag.ones(5)
    version = b._version
    assert b.set_(c) is b
    assert b._version == version + 1 and c._version == 0 and b.shape == (5,)
    b[0] = 7.0
    assert c[0].item() == 7.0
    asd = ag.nn.Parameter(ag.ones(16))
    for n in (15, 14):
        with ag.no_grad():
            asd.set_(asd[1:])
            asd.grad = None
        m = ag.cat((asd, asd))
        await m.sum().backward()
        assert asd.grad.shape == (n,) and asd.grad.tolist() == [2.0] * n
    check_raises(lambda lib: lib.ones(4, requires_grad=True).set_(lib.zeros(2)), RuntimeError,
                 "a leaf Variable that requires grad is being used in an in-place operation.")
    check_raises(lambda lib: lib.ones(2).set_(lib.zeros(2, dtype=lib.long)), RuntimeError,
                 "Could not set tensor of type long int to a tensor of type float")


def test_resize():
    t = ag.arange(6.0)
    t.resize_(2, 2)
    assert t.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    t.resize_(3, 3)
    assert t.shape == (3, 3) and t.flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    t.resize_as_(ag.ones(2))
    assert t.tolist() == [0.0, 1.0]
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        assert ag.ones(2, 3).resize(3, 2).size() == (3, 2)
    check_raises(lambda lib: lib.ones(4, requires_grad=True).resize_(3), RuntimeError,
                 "cannot resize variables that require grad")
    check_raises(lambda lib: lib.ones(4, requires_grad=True).resize_as_(lib.ones(2)), RuntimeError,
                 "cannot resize variables that require grad")


async def test_type_and_type_as():
    x = ag.randn(2, 3)
    assert x.type() == "asyncgrad.FloatTensor" and x.double().type() == "asyncgrad.DoubleTensor"
    assert x.type("asyncgrad.DoubleTensor").dtype == ag.float64
    assert x.type("torch.LongTensor").dtype == ag.int64  # torch's spelling is read too
    assert x.type(ag.float32) is x
    y = ag.ones(2, dtype=ag.int32)
    assert x.type_as(y).dtype == ag.int32
    f = ag.ones(2, requires_grad=True)
    d = f.type(ag.float64)
    await d.sum().backward()
    assert f.grad.dtype == ag.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_raises(lambda lib: lib.ones(2).type("torch.Foo"), ValueError, "invalid type: 'torch.Foo'",
                     torch_same=True)
    check_raises(lambda lib: lib.ones(2).type(5), TypeError, "dtype must be a type, str, or dtype object")
    assert x.element_size() == 4 and x.itemsize == 4 and x.nbytes == 24
    assert ag.ones(3, dtype=ag.float64).nbytes == 24


# --------------------------------------------------------------------------- index_fill, index_copy, masked_scatter
@DEVICES
async def test_index_fill_copy_masked_scatter_index_put():
    idx = np.array([0, 2])
    await check_op(lambda lib, x: x.index_fill(1, lib.tensor(idx), 1.5), (3, 4), name="IndexFillBackward0")
    await check_op(lambda lib, x, v: x.index_fill(1, lib.tensor(idx), v), (3, 4), np.array(0.7),
                   name="IndexFillBackward1")
    await check_gradgrad(lambda lib, x, v: x.index_fill(1, lib.tensor(idx), v) * x, (3, 4), np.array(0.7))
    wrapped = np.array([-1, 1, -4])  # index_fill wraps negative indices from -size, as torch
    await check_op(lambda lib, x: x.index_fill(1, lib.tensor(wrapped), 1.5), (3, 4), name="IndexFillBackward0")
    await check_op(lambda lib, x, s: x.index_copy(1, lib.tensor(idx), s), (3, 4), (3, 2), name="IndexCopyBackward0")
    await check_gradgrad(lambda lib, x, s: x.index_copy(1, lib.tensor(idx), s) ** 2, (3, 4), (3, 2))
    mask = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
    await check_op(lambda lib, x, s: x.masked_scatter(lib.tensor(mask), s), (3, 4), (9,),
                   name="MaskedScatterBackward0")
    await check_gradgrad(lambda lib, x, s: x.masked_scatter(lib.tensor(mask), s) ** 2, (3, 4), (9,))
    await check_op(lambda lib, x, v: x.index_put((lib.tensor(np.array([0, 2, 0])),), v), (3, 4), (3, 4),
                   name="IndexPutBackward0", fd=False)
    await check_op(lambda lib, x, v: x.index_put((lib.tensor(np.array([0, 2, 0])),), v, accumulate=True),
                   (3, 4), (3, 4), torch_name=False)
    await check_op(lambda lib, x, v: x.index_put((lib.tensor(np.array([1, 0])), lib.tensor(np.array([3, 3]))), v,
                                                 accumulate=True), (3, 4), (2,), torch_name=False)


def test_index_ops_errors():
    check_raises(lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([5]), 1.0), IndexError,
                 "index 5 is out of bounds for dimension 1 with size 4")
    check_raises(lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([-5]), 1.0), IndexError,
                 "index -5 is out of bounds for dimension 1 with size 4")
    check_raises(lambda lib: lib.zeros(3, 4).index_copy(1, lib.tensor([-1]), lib.ones(3, 1)), IndexError,
                 r"index_copy_\(\): index -1 is out of bounds for dimension 1 with size 4")
    check_raises(lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([0.0]), 1.0), IndexError,
                 r"index_fill_\(\): Expected dtype int64 for index.")
    check_raises(lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([0]), lib.ones(2)), RuntimeError,
                 "index_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension")
    check_raises(lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0]), lib.ones(2, 4)), IndexError,
                 r"index_copy_\(\): Number of indices \(1\) should be equal to source.size\(dim\) \(2\)")
    check_raises(lambda lib: lib.zeros(3, 4).masked_scatter(lib.ones(3, 4) > 0, lib.ones(5)), RuntimeError,
                 "Number of elements of source < number of ones in mask")
    check_raises(lambda lib: lib.zeros(3, 4).masked_scatter(lib.ones(3, 4), lib.ones(12)), RuntimeError,
                 "masked_scatter_ only supports boolean masks, but got mask with dtype Float")


# --------------------------------------------------------------------------- searchsorted, bucketize
@DEVICES
def test_searchsorted_and_bucketize(torch):
    b = np.array([1.0, 2.0, 3.0, 3.0, 5.0])
    v = np.array([[0.5, 3.0], [3.0, 6.0]])
    b2 = np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]])
    v2 = np.array([[2.5], [2.5]])
    for right in (False, True):
        for ours, theirs in [
            (ag.searchsorted(ag.tensor(b), ag.tensor(v), right=right),
             torch.searchsorted(torch.tensor(b), torch.tensor(v), right=right)),
            (ag.searchsorted(ag.tensor(b2), ag.tensor(v2), side="right" if right else "left", out_int32=True),
             torch.searchsorted(torch.tensor(b2), torch.tensor(v2), side="right" if right else "left", out_int32=True)),
            (ag.bucketize(ag.tensor(v), ag.tensor(b), right=right),
             torch.bucketize(torch.tensor(v), torch.tensor(b), right=right)),
            (ag.searchsorted(ag.tensor([3.0, 2.0, 1.0]), ag.tensor([1.5]), sorter=ag.tensor([2, 1, 0])),
             torch.searchsorted(torch.tensor([3.0, 2.0, 1.0]), torch.tensor([1.5]), sorter=torch.tensor([2, 1, 0]))),
        ]:
            assert ours.tolist() == theirs.tolist()
            assert repr(ours.dtype) == repr(theirs.dtype).replace("torch.", "asyncgrad.")
    assert ag.searchsorted(ag.tensor(b), 2.5).item() == 2
    check_raises(lambda lib: lib.searchsorted(lib.tensor([1.0]), lib.tensor([1.0]), side="left", right=True),
                 RuntimeError, "side and right can't be set to opposites")
    check_raises(lambda lib: lib.bucketize(lib.tensor([2.0]), lib.tensor([[1.0, 2.0]])), RuntimeError,
                 r"boundaries tensor must be 1 dimension, but got dim\(2\)")


# --------------------------------------------------------------------------- ctc_loss
CTC_X = np.random.default_rng(0).standard_normal((9, 3, 5))
CTC_TARGETS = np.array([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 1, 2]])


@DEVICES
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
async def test_ctc_loss(reduction, zero_infinity):
    """Through log_softmax (torch's use, where its formula is the exact gradient): against torch and
    finite differences; lengths vary, one target is empty, one repeats a label."""
    def fn(lib, x):
        lp = lib.log_softmax(x, 2)
        return lib.nn.functional.ctc_loss(lp, lib.tensor(CTC_TARGETS), [9, 7, 8], [4, 0, 3], reduction=reduction,
                                          zero_infinity=zero_infinity)
    await check_op(fn, CTC_X, torch_name=False)


@DEVICES
async def test_ctc_loss_node_targets_1d_and_unbatched():
    await check_op(lambda lib, lp: lib.nn.functional.ctc_loss(lp, lib.tensor(np.array([1, 2, 2, 3, 1])),
                                                              [9, 6], [3, 2], reduction="none"),
                   np.log(np.full((9, 2, 5), 0.2)) + CTC_X[:, :2] * 0.1, name="CtcLossBackward0", fd=False)
    await check_op(lambda lib, lp: lib.nn.functional.ctc_loss(lp, lib.tensor(np.array([1, 2])), [9], [2],
                                                              reduction="sum"),
                   CTC_X[:, 0] * 0.1 - 1.6, fd=False)


def test_ctc_loss_impossible_alignment_and_module(torch):
    lp = ag.log_softmax(ag.tensor(CTC_X[:2, :1], requires_grad=True), 2)
    loss = ag.nn.functional.ctc_loss(lp, ag.tensor(CTC_TARGETS[:1]), [2], [4], reduction="none")
    assert loss.item() == float("inf")
    module = ag.nn.CTCLoss(zero_infinity=True)
    assert module(lp, ag.tensor(CTC_TARGETS[:1]), [2], [4]).item() == 0.0
    assert repr(module) == repr(torch.nn.CTCLoss(zero_infinity=True))
    check_raises(lambda lib: lib.nn.functional.ctc_loss(lib.log_softmax(lib.tensor(CTC_X), 2), lib.tensor(CTC_TARGETS),
                                                        [10, 9, 9], [1, 1, 1]), RuntimeError,
                 "Expected input_lengths to have value at most 9, but got value 10")


# --------------------------------------------------------------------------- RNN cells
@pytest.mark.parametrize("name, kwargs", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
                                          ("GRUCell", {}), ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
async def test_rnn_cells_match_torch(torch, name, kwargs, batched):
    ours = getattr(ag.nn, name)(3, 4, dtype=ag.float64, **kwargs)
    theirs = getattr(torch.nn, name)(3, 4, dtype=torch.float64, **kwargs)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((2, 3) if batched else (3,))
    h = np.random.default_rng(6).standard_normal((2, 4) if batched else (4,))
    xa, xt = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ha, ht = ag.tensor(h, requires_grad=True), torch.tensor(h, requires_grad=True)
    oa = ours(xa, (ha, ha * 0.5) if name == "LSTMCell" else ha)
    ot = theirs(xt, (ht, ht * 0.5) if name == "LSTMCell" else ht)
    oa, ot = (oa if isinstance(oa, tuple) else (oa,)), (ot if isinstance(ot, tuple) else (ot,))
    for a, t in zip(oa, ot):
        assert np.allclose(a.detach().numpy(), t.detach().numpy())
    ga = await ag.grad(sum(o.sum() for o in oa), [xa, ha, ours.weight_hh])
    gt = torch.autograd.grad(sum(o.sum() for o in ot), [xt, ht, theirs.weight_hh])
    for a, t in zip(ga, gt):
        assert np.allclose(a.numpy(), t.numpy())
    assert ours(xa)[0].shape == ((2, 4) if batched else (4,)) or name != "LSTMCell"
    check_raises(lambda lib: getattr(lib.nn, name)(3, 4)(lib.ones(1, 2, 3)), ValueError,
                 f"{name}: Expected input to be 1D or 2D, got 3D instead")
