"""gather/scatter, index_select/index_add, masks, sorting, scans and reductions (issues 10/11).

Every op against finite differences and torch (values, gradients, dtypes, node names), first
and second order, on ``cpu`` and on ``sim:0`` (array_api_strict: what would break on a GPU);
the cases torch singles out (ties, zeros in products, NaN) and its error wording for bad input.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import (
    AG,
    ag_tensor,
    check_gradgrad,
    check_op,
    check_raises,
    has_torch,
    run_torch,
)

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

IDX = np.array([[0, 2], [3, 0], [1, 1]], dtype=np.int64)  # a (3, 2) index into dim 1 of a (3, 4), repeats included
ROWS = np.array([2, 0, 2, 1], dtype=np.int64)  # a vector index with a repeat


def _torch():
    import torch

    return torch


def _same(a, b, what=""):
    """asyncgrad's and torch's tensors: same values (NaN where NaN), dtype and shape."""
    a_np = np.asarray(a.detach().cpu()) if isinstance(a, ag.Tensor) else np.asarray(a)
    b_np = b.detach().numpy()
    assert a_np.shape == b_np.shape, f"{what}: shape {a_np.shape} != {b_np.shape}"
    assert a_np.dtype == b_np.dtype, f"{what}: dtype {a_np.dtype} != {b_np.dtype}"
    tol = 1e-6 if a_np.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(a_np, b_np, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


async def _both(fn, *arrays, grad=False):
    """``fn(lib, *tensors)`` in asyncgrad and torch: their results (and, with ``grad``, the gradients
    of ``sum(result * w)`` for a fixed ``w``) compared with ``_same``."""
    outs = []
    for lib in ("ag", "torch"):
        if lib == "torch":
            if not has_torch():
                return
            torch = _torch()
            xs = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
            out = run_torch(fn, xs)
        else:
            xs = [ag_tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
            out = fn(AG, *xs)
        results = list(out) if isinstance(out, tuple) else [out]
        if grad:
            w = np.random.default_rng(7).standard_normal(results[0].shape)
            wt = ag_tensor(w) if lib == "ag" else _torch().tensor(w)
            diff = [x for x in xs if x.requires_grad]
            if lib == "ag":
                results += list(await ag.grad((results[0] * wt).sum(), diff))
            else:
                results += list(_torch().autograd.grad((results[0] * wt).sum(), diff))
        outs.append(results)
    if len(outs) == 2:
        assert len(outs[0]) == len(outs[1])
        for i, (a, b) in enumerate(zip(*outs)):
            _same(a, b, f"result {i}")


# --------------------------------------------------------------------------- gather / scatter
async def test_gather():
    for dim, index in ((1, IDX), (-1, IDX), (0, np.array([[2, 0, 1, 1], [0, 0, 2, 1]]))):
        f = (lambda d, i: lambda lib, x: x.gather(d, lib.tensor(i)))(dim, index)
        await check_op(f, (3, 4), name="GatherBackward0")
        await check_gradgrad(f, (3, 4))
    await check_op(lambda lib, x: lib.gather(x, 1, lib.tensor(IDX.astype(np.int32))), (3, 4), name="GatherBackward0")
    await check_op(lambda lib, x: x.gather(0, lib.tensor(np.array([1, 1, 0]))), (2,), name="GatherBackward0")


async def test_scatter_src_and_value():
    index = np.array([[0, 2], [3, 1], [1, 0]])  # no repeat within a row: the written values are determined

    def src(lib, x, s):
        return x.scatter(1, lib.tensor(index), s)

    await check_op(src, (3, 4), (3, 2), name="ScatterBackward0")
    await check_gradgrad(src, (3, 4), (3, 2))
    await check_op(src, (3, 4), (3, 2), requires_grad=[False, True], name="ScatterBackward0")
    await check_op(lambda lib, x: x.scatter(1, lib.tensor(index), 2.5), (3, 4), name="ScatterBackward1")
    await check_op(lambda lib, x: lib.scatter(x, 0, lib.tensor(np.array([[2], [0]])), value=-1.0), (3, 4),
                   name="ScatterBackward1")
    await check_gradgrad(lambda lib, x: x.scatter(1, lib.tensor(index), 2.5), (3, 4))


async def test_scatter_src_larger_than_index():
    """src's unread entries get zero gradients (torch refuses that backward: an invalid gradient's shape)."""
    index = np.array([[0, 2], [3, 1]])
    _, (gx, gs) = await check_op(lambda lib, x, s: x.scatter(1, lib.tensor(index), s), (3, 4), (3, 3),
                                 name="ScatterBackward0", torch_check=False)
    gs = gs.cpu().numpy()
    assert np.all(gs[2] == 0) and np.all(gs[:, 2] == 0)
    await check_gradgrad(lambda lib, x, s: x.scatter_add(1, lib.tensor(index), s), (3, 4), (3, 3), torch_check=False)


async def test_scatter_add():
    def f(lib, x, s):
        return x.scatter_add(1, lib.tensor(IDX), s)  # repeats add up

    await check_op(f, (3, 4), (3, 2), name="ScatterAddBackward0")
    await check_gradgrad(f, (3, 4), (3, 2))
    await check_op(lambda lib, x, s: lib.scatter_add(x, 0, lib.tensor(IDX[:, :1] % 3), s), (3, 4), (3, 1),
                   name="ScatterAddBackward0")


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter:UserWarning")
async def test_scatter_in_place_and_reduce():
    x = np.arange(12.0).reshape(3, 4)
    await _both(lambda lib, t, s: (t * 1).scatter_(1, lib.tensor(IDX[:, :1]), s), x, np.ones((3, 1)), grad=True)
    await _both(lambda lib, t, s: (t * 1).scatter_add_(1, lib.tensor(IDX), s), x, np.ones((3, 2)), grad=True)
    for reduce in ("add", "multiply"):
        await _both(lambda lib, t, reduce=reduce: t.scatter(1, lib.tensor(IDX), 3.0, reduce=reduce), x)
        await _both(lambda lib, t, s, reduce=reduce: t.scatter(1, lib.tensor(IDX), s, reduce=reduce), x,
                    np.full((3, 2), 2.0))


# --------------------------------------------------------------------------- index_select / index_add
async def test_index_select():
    for dim in (0, 1, -1):
        f = (lambda d: lambda lib, x: x.index_select(d, lib.tensor(ROWS[ROWS < 3])))(dim)
        await check_op(f, (3, 4), name="IndexSelectBackward0")
        await check_gradgrad(f, (3, 4))
    await check_op(lambda lib, x: lib.index_select(x, 1, lib.tensor(np.array(2))), (3, 4),
                   name="IndexSelectBackward0")


async def test_index_add():
    def f(lib, x, s):
        return x.index_add(0, lib.tensor(ROWS), s, alpha=-1.5)  # the repeated row adds up

    await check_op(f, (3, 4), (4, 4), name="IndexAddBackward0")
    await check_gradgrad(f, (3, 4), (4, 4))
    await check_op(lambda lib, x, s: lib.index_add(x, 1, lib.tensor(np.array([3, 3])), s), (2, 4), (2, 2),
                   name="IndexAddBackward0")
    await check_op(lambda lib, x, s: (x * 1).index_add_(1, lib.tensor(np.array([0, 3])), s), (2, 4), (2, 2))


# --------------------------------------------------------------------------- masks
async def test_masked_fill():
    mask = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])

    def scalar(lib, x):
        return x.masked_fill(lib.tensor(mask), 0.25)

    def tensor_value(lib, x, v):
        return x.masked_fill(lib.tensor(mask), v)

    await check_op(scalar, (3, 4), name="MaskedFillBackward0")
    await check_gradgrad(scalar, (3, 4))
    await check_op(tensor_value, (3, 4), np.array(2.0), name="MaskedFillBackward1")
    await check_gradgrad(tensor_value, (3, 4), np.array(2.0))
    # a mask broadcasting the input: the input's gradient sums back over the new dim
    await check_op(lambda lib, x: lib.masked_fill(x, lib.tensor(np.stack([mask, ~mask])), -1.0), (3, 4),
                   name="MaskedFillBackward0")
    await check_op(lambda lib, x: (x * 1).masked_fill_(lib.tensor(mask[0]), 3.0), (3, 4))


async def test_masked_select():
    mask = np.array([True, False, True, True])

    def f(lib, x):
        return x.masked_select(lib.tensor(mask))  # broadcast over the rows

    await check_op(f, (3, 4), name="MaskedSelectBackward0")
    await check_gradgrad(f, (3, 4))
    await check_op(lambda lib, x: lib.masked_select(x, x > 0), (3, 4), name="MaskedSelectBackward0")


async def test_nonzero():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    await _both(lambda lib, t: t.nonzero(), x)
    await _both(lambda lib, t: lib.nonzero(t, as_tuple=True), x)
    await _both(lambda lib, t: lib.nonzero(t), np.array(3.0))
    await _both(lambda lib, t: lib.nonzero(t, as_tuple=True), np.array(0.0))
    await _both(lambda lib, t: (t > 0).nonzero(), np.zeros((2, 0)))


# --------------------------------------------------------------------------- sorting
async def test_sort_and_argsort():
    for kwargs in ({}, {"descending": True}, {"dim": 0}, {"dim": 0, "descending": True}):
        f = (lambda kw: lambda x: x.sort(**kw).values)(kwargs)
        await check_op(f, (3, 5), name="SortBackward0")
        await check_gradgrad(f, (3, 5))
    ties = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [np.nan, 0.0, 5.0, np.nan, 2.0]])
    for descending in (False, True):
        await _both(lambda lib, t, d=descending: tuple(t.sort(descending=d, stable=True)), ties)
        await _both(lambda lib, t, d=descending: lib.argsort(t, dim=1, descending=d, stable=True), ties)
    await _both(lambda lib, t: tuple(lib.sort(t)), np.array([3, 1, 2], dtype=np.int32))
    await _both(lambda lib, t: tuple(t.sort()), np.array(2.0))


async def test_topk_kthvalue():
    for kwargs in ({}, {"largest": False}, {"dim": 0}):
        f = (lambda kw: lambda x: x.topk(2, **kw).values)(kwargs)
        await check_op(f, (3, 5), name="TopkBackward0")
        await check_gradgrad(f, (3, 5))
    out = ag_tensor(np.array([[1.0, 4.0, 2.0]])).topk(2)
    assert out.values.tolist() == [[4.0, 2.0]] and out.indices.tolist() == [[1, 2]]
    for dim, keepdim in ((-1, False), (0, True)):
        f = (lambda d, k: lambda x: x.kthvalue(2, d, k).values)(dim, keepdim)
        await check_op(f, (3, 5), name="KthvalueBackward0")
        await check_gradgrad(f, (3, 5))
    await _both(lambda lib, t: tuple(t.kthvalue(2)), np.array([[5.0, 1.0, 3.0], [0.0, -2.0, 7.0]]))


async def test_median():
    for dim, keepdim in ((1, False), (0, True)):
        f = (lambda d, k: lambda x: x.median(d, k).values)(dim, keepdim)
        await check_op(f, (4, 5), name="MedianBackward1")  # even and odd counts: the lower middle
        await check_gradgrad(f, (4, 5))
    await check_op(lambda x: x.median(), (3, 4), name="MedianBackward0")
    # ties share a full median's gradient evenly (torch's evenly_distribute_backward)
    ties = np.array([[1.0, 2.0, 2.0, 0.0], [3.0, 3.0, 1.0, 5.0], [0.0, 0.0, 1.0, 2.0]])
    await check_op(lambda lib, x: lib.median(x), ties, name="MedianBackward0", fd=False)
    await _both(lambda lib, t: t.median(), ties, grad=True)
    await _both(lambda lib, t: tuple(t.median(0)), np.array([[1.0, np.nan], [0.0, 2.0], [3.0, np.nan]]))
    await _both(lambda lib, t: t.median(), np.array([1.0, np.nan, 0.0]), grad=True)
    await _both(lambda lib, t: t.median(), np.zeros(0))
    await _both(lambda lib, t: tuple(lib.median(t, 0)), np.array([4, 1, 3, 2], dtype=np.int64))


async def test_unique():
    x = np.array([[3, 1, 3], [2, 1, 7]], dtype=np.int64)
    await _both(lambda lib, t: lib.unique(t), x)
    await _both(lambda lib, t: lib.unique(t, return_inverse=True, return_counts=True), x)
    await _both(lambda lib, t: t.unique(return_counts=True), np.array([0.5, -1.0, 0.5]))
    assert not ag_tensor(np.array([1.0, 1.0]), requires_grad=True).unique().requires_grad


# --------------------------------------------------------------------------- scans and products
async def test_cumsum():
    for dim in (0, 1, -1):
        f = (lambda d: lambda x: x.cumsum(d))(dim)
        await check_op(f, (3, 4), name="CumsumBackward0")
        await check_gradgrad(f, (3, 4))
    await check_op(lambda lib, x: lib.cumsum(x, 0, dtype=lib.float32), (4,), name="CumsumBackward0",
                   dtype=np.float32, fd=False, rtol=1e-6, atol=1e-6)
    await _both(lambda lib, t: t.cumsum(0), np.array([1, 2, 3], dtype=np.int32))
    await _both(lambda lib, t: t.cumsum(0), np.array([True, False, True]))
    await _both(lambda lib, t: t.cumsum(0), np.array(2.5), grad=True)


CUMPROD_CASES = [
    np.array([[0.5, -1.2, 2.0, 0.7], [1.3, 0.9, -0.4, 2.2]]),  # no zero
    np.array([[0.5, 0.0, 2.0, 0.7], [0.0, 0.9, -0.4, 2.2]]),  # one zero per row, at 1 and at 0
    np.array([[0.5, 0.0, 2.0, 0.0], [1.3, 0.9, -0.4, 0.0]]),  # two zeros; a zero last
    np.array([[0.0, 0.0, 0.0, 1.5], [1.3, 0.9, -0.4, 2.2]]),
]


@pytest.mark.parametrize("case", range(len(CUMPROD_CASES)))
async def test_cumprod_with_zeros(case):
    x = CUMPROD_CASES[case]
    for dim in (1, 0):
        f = (lambda d: lambda t: t.cumprod(d))(dim)
        await check_op(f, x, name="CumprodBackward0")
        await check_gradgrad(f, x)
    await _both(lambda lib, t: t.cumprod(0), np.array([2, 0, 3], dtype=np.int64))


@pytest.mark.parametrize("case", range(len(CUMPROD_CASES)))
async def test_prod_with_zeros(case):
    x = CUMPROD_CASES[case]
    await check_op(lambda t: t.prod(), x, name="ProdBackward0")
    await check_gradgrad(lambda t: t.prod(), x)
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        f = (lambda d, k: lambda lib, t: lib.prod(t, d, k))(dim, keepdim)
        await check_op(f, x, name="ProdBackward1")
        await check_gradgrad(f, x)


async def test_prod_dtypes():
    await _both(lambda lib, t: t.prod(), np.array([2, 3], dtype=np.int32))
    await _both(lambda lib, t: t.prod(0), np.array([True, False]))
    await _both(lambda lib, t: t.prod(0, dtype=lib.float64), np.array([2, 3], dtype=np.int32))
    await _both(lambda lib, t: t.prod(0), np.array(1.5), grad=True)


# --------------------------------------------------------------------------- var / std
SPREAD_FORMS = [
    {}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "unbiased": False}, {"dim": -1, "correction": 2},
    {"correction": 0},
]


@pytest.mark.parametrize("kwargs", SPREAD_FORMS, ids=[str(k) for k in SPREAD_FORMS])
async def test_var_std(kwargs):
    await check_op(lambda x: x.var(**kwargs), (3, 4), name="VarBackward0")
    await check_gradgrad(lambda x: x.var(**kwargs), (3, 4))
    await check_op(lambda lib, x: lib.std(x, **kwargs), (3, 4), name="StdBackward0")
    await check_gradgrad(lambda lib, x: lib.std(x, **kwargs), (3, 4))


async def test_var_mean_std_mean():
    for fn, name in (("var_mean", "VarMeanBackward0"), ("std_mean", "StdMeanBackward0")):
        x = ag_tensor(np.ones((2, 3)), requires_grad=True)
        spread, mean = getattr(ag, fn)(x, 1)
        assert spread.grad_fn is mean.grad_fn and spread.grad_fn.name() == name
        assert (spread.output_nr, mean.output_nr) == (0, 1)
        for pick in ("both", "spread", "mean"):
            def f(lib, t, fn=fn, pick=pick):
                s, m = getattr(lib, fn)(t, 1, keepdim=True, correction=0)
                return s * 2 + m if pick == "both" else s if pick == "spread" else m * 3
            await check_op(f, (3, 4))
            await check_gradgrad(f, (3, 4))
        await check_op(lambda lib, t, fn=fn: getattr(lib, fn)(t)[0], (3, 4), name=name)


async def test_std_of_constant_has_zero_gradient():
    await _both(lambda lib, t: t.std(), np.ones(3), grad=True)
    await _both(lambda lib, t: t.std(0), np.array([[1.0, 2.0], [1.0, 3.0]]), grad=True)
    await _both(lambda lib, t: lib.var(t, False), np.array([1.0, 2.0, 4.0]), grad=True)


# --------------------------------------------------------------------------- logsumexp, amax/amin, any/all
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
async def test_logsumexp():
    for dim, keepdim in ((1, False), ((0, 1), True), (0, True), ((0, 1), False)):
        f = (lambda d, k: lambda x: x.logsumexp(d, k))(dim, keepdim)
        await check_op(f, (3, 4), name="LogsumexpBackward0")
        await check_gradgrad(f, (3, 4))
    big = np.array([[1000.0, 1000.0], [-np.inf, 0.0], [-np.inf, -np.inf]])
    await _both(lambda lib, t: lib.logsumexp(t, 1), big, grad=True)
    await _both(lambda lib, t: t.logsumexp(0), np.array([1, 2, 3], dtype=np.int64))


async def test_amax_amin_ties():
    ties = np.array([[1.0, 2.0, 2.0, 0.0], [3.0, 3.0, 3.0, 5.0], [0.0, 0.0, 1.0, 0.0]])
    for fn, name in (("amax", "AmaxBackward0"), ("amin", "AminBackward0")):
        for kwargs in ({}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "keepdim": True}):
            f = (lambda op, kw: lambda lib, x: getattr(lib, op)(x, **kw))(fn, kwargs)
            await check_op(f, ties, name=name, fd=False)  # ties: no derivative, torch's even share
            await check_op(f, (3, 4), name=name)
            await check_gradgrad(f, (3, 4))
        await _both(lambda lib, t, fn=fn: getattr(t, fn)(1), np.array([[1.0, np.nan], [2.0, 2.0]]), grad=True)
        await _both(lambda lib, t, fn=fn: getattr(t, fn)(), np.array([[3, 1], [2, 5]], dtype=np.int32))


async def test_any_all():
    x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    for fn in ("any", "all"):
        for args in ((), (1,), (0, True), ((0, 1),), ((),)):
            await _both(lambda lib, t, fn=fn, args=args: getattr(t, fn)(*args), x)
            await _both(lambda lib, t, fn=fn, args=args: getattr(lib, fn)(t, *args),
                        (x != 0).astype(np.uint8))
        await _both(lambda lib, t, fn=fn: getattr(t, fn)(), np.array([np.nan, 1.0]))


async def test_elementwise_and_dim_max_min():
    await check_op(lambda lib, a, b: lib.max(a, b), (3, 4), (3, 4), name="MaximumBackward0")
    await check_op(lambda lib, a, b: lib.min(a, b), (3, 4), (4,), name="MinimumBackward0")
    await check_op(lambda x: x.max(1).values, (3, 4), name="MaxBackward0")
    await check_op(lambda x: x.min(0, True).values, (3, 4), name="MinBackward0")


# --------------------------------------------------------------------------- bad input, in torch's words
X = np.zeros((3, 4))


def _raises(fn, exc, message, torch_same=True):
    """``fn(lib)`` on the (3, 4) float tensor ``X`` raises torch's ``exc`` with ``message``, word for word."""
    return check_raises(lambda lib: fn(lib, lib.tensor(X)), exc, "^" + re.escape(message) + "$", torch_same)


def test_gather_scatter_errors():
    i = IDX
    _raises(lambda lib, x: x.gather(2, lib.tensor(i)), IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    _raises(lambda lib, x: x.gather(1, lib.tensor(i.astype(np.float32))), RuntimeError,
            "gather(): Expected dtype int32/int64 for index")
    _raises(lambda lib, x: x.gather(1, lib.tensor(np.array([[0, 5]]))), RuntimeError,
            "index 5 is out of bounds for dimension 1 with size 4")
    _raises(lambda lib, x: x.gather(1, lib.tensor(np.array([[0, -1]]))), RuntimeError,
            "index -1 is out of bounds for dimension 1 with size 4")
    _raises(lambda lib, x: x.gather(1, lib.tensor(np.array([0, 1]))), RuntimeError,
            "Index tensor must have the same number of dimensions as input tensor")
    _raises(lambda lib, x: x.gather(1, lib.tensor(np.zeros((4, 4), dtype=np.int64))), RuntimeError,
            "Size does not match at dimension 0 expected index [4, 4] to be no larger than self [3, 4] apart from "
            "dimension 1")
    _raises(lambda lib, x: x.gather(1, [[0]]), TypeError, "gather(): argument 'index' (position 2) must be Tensor, "
            "not list")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(np.array([[0, 5]])), 1.0), RuntimeError,
            "index 5 is out of bounds for dimension 1 with size 4")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(i.astype(np.float64)), 1.0), RuntimeError,
            "scatter(): Expected dtype int32/int64 for index")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(i), lib.tensor(np.ones((1, 1)))), RuntimeError,
            "Expected index [3, 2] to be no larger than self [3, 4] apart from dimension 1 and to be no larger "
            "size than src [1, 1]")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(np.zeros((4, 4), dtype=np.int64)), 1.0), RuntimeError,
            "Expected index [4, 4] to be no larger than self [3, 4] apart from dimension 1")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(i), lib.tensor(np.ones((3, 2), dtype=np.float32))), RuntimeError,
            "scatter(): Expected self.dtype to be equal to src.dtype")
    _raises(lambda lib, x: x.scatter_add(1, lib.tensor(i), lib.tensor(np.ones((3, 2), dtype=np.float32))),
            RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype")
    _raises(lambda lib, x: x.scatter(1, lib.tensor(i), 1.0, reduce="max"), RuntimeError,
            "reduce argument must be either add or multiply.")
    _raises(lambda lib, x: x.scatter_add(1, lib.tensor(i), 1.0), TypeError,
            "scatter_add(): argument 'src' (position 3) must be Tensor, not float")


def test_index_select_add_errors():
    _raises(lambda lib, x: x.index_select(0, lib.tensor(IDX)), IndexError,
            "index_select(): Index is supposed to be a vector")
    _raises(lambda lib, x: x.index_select(0, lib.tensor(np.array([0.0]))), RuntimeError,
            "index_select(): Expected dtype int32 or int64 for index")
    _raises(lambda lib, x: x.index_select(0, lib.tensor(np.array([0, 3]))), IndexError, "index out of range in self")
    _raises(lambda lib, x: x.index_select(0, lib.tensor(np.array([-1]))), IndexError, "index out of range in self")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([3])), lib.tensor(np.ones((1, 4)))), RuntimeError,
            "index 3 is out of bounds for dimension 0 with size 3")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([1])), lib.tensor(np.ones((2, 4)))), RuntimeError,
            "index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([1])), lib.tensor(np.ones((1, 4), np.float32))),
            RuntimeError, "index_add_(): self (Double) and source (Float) must have the same scalar type")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([1.0])), lib.tensor(np.ones((1, 4)))), RuntimeError,
            "index_add_(): Expected dtype int32/int64 for index but got: Double")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([1])), lib.tensor(np.ones((1, 3)))), RuntimeError,
            "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
            "[3, 4] source.shape = [1, 3]")
    _raises(lambda lib, x: x.index_add(0, lib.tensor(np.array([[1]])), lib.tensor(np.ones((1, 4)))), IndexError,
            "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]")


def test_mask_errors():
    _raises(lambda lib, x: x.masked_fill(lib.tensor(np.array([1, 0, 1, 0])), 0.0), RuntimeError,
            "masked_fill_ only supports boolean masks, but got mask with dtype long int")
    _raises(lambda lib, x: x.masked_fill(lib.tensor(np.ones(4, bool)), lib.tensor(np.array([1.0, 2.0]))),
            RuntimeError,
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).")
    _raises(lambda lib, x: x.masked_fill(lib.tensor(np.ones(3, bool)), 0.0), RuntimeError,
            "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
    _raises(lambda lib, x: x.masked_select(lib.tensor(np.array([1, 0, 1, 0]))), RuntimeError,
            "masked_select: expected BoolTensor for mask")
    _raises(lambda lib, x: x.masked_select(lib.tensor(np.ones(3, bool))), RuntimeError,
            "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
    _raises(lambda lib, x: x.clone().masked_fill_(lib.tensor(np.ones((2, 3, 4), bool)), 0.0), RuntimeError,
            "output with shape [3, 4] doesn't match the broadcast shape [2, 3, 4]")


def test_sort_reduction_errors():
    for k in (5, -1):
        _raises(lambda lib, x, k=k: x.topk(k), RuntimeError, "selected index k out of range")
    _raises(lambda lib, x: x.topk(4, dim=0), RuntimeError, "selected index k out of range")
    _raises(lambda lib, x: x.topk(1, dim=3), IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 3)")
    _raises(lambda lib, x: x.sort(dim=2), IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    for k in (0, 5):
        _raises(lambda lib, x, k=k: x.kthvalue(k), RuntimeError,
                "kthvalue(): selected number k out of range for dimension 1")
    _raises(lambda lib, x: x.median(2), IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    _raises(lambda lib, x: x.cumsum(2), IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    _raises(lambda lib, x: x.long().std(), RuntimeError, "std and var only support floating point and complex dtypes")
    _raises(lambda lib, x: x.long().var(1), RuntimeError, "std and var only support floating point and complex dtypes")
    _raises(lambda lib, x: lib.zeros(0).amax(), RuntimeError,
            "amax(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
            "the 'dim' argument.")
    _raises(lambda lib, x: x.amax((0, 0)), RuntimeError, "dim 0 appears multiple times in the list of dims")
    check_raises(lambda lib: lib.tensor(X).var(unbiased=True, correction=1), TypeError,
                 re.escape("var() received an invalid combination of arguments - got (correction=int, unbiased=bool, "
                           "), but expected one of:"))
    check_raises(lambda lib: lib.tensor(X).prod((0, 1)), TypeError,
                 re.escape("prod() received an invalid combination of arguments - got (tuple), but expected one of:"))


async def test_index_nodes_free_their_indices_and_keep_their_own():
    """Like torch's, the index-keeping nodes release their indices after a backward (a second one is
    refused), and changing the index tensor after the forward does not move the gradient."""
    for op in (lambda x, i: x.gather(0, i), lambda x, i: x.index_select(0, i), lambda x, i: x.sort().values):
        x = ag_tensor(np.array([3.0, 1.0, 2.0]), requires_grad=True)
        index = ag_tensor(np.array([2, 0]))
        out = op(x, index)
        index[0] = 1
        (g,) = await ag.grad(out.sum(), [x])
        expected = [1.0, 0.0, 1.0] if out.shape == (2,) else [1.0, 1.0, 1.0]  # not [1, 1, 0]
        assert g.tolist() == expected
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            await ag.grad(out.sum(), [x])


def test_scatter_reduce_refuses_to_record():
    x = ag_tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="the derivative for 'scatter' with reduce='add' is not implemented"):
        x.scatter(1, ag_tensor(IDX), 1.0, reduce="add")
