"""select/slice/diagonal/as_strided_scatter, unfold, take, rot90, diag_embed, fill and frexp: values,
node names and gradients against torch and finite differences, on cpu and sim:0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

TAKE = np.array([[0, 5], [-1, 3], [5, 5]])

CASES = {
    "select_scatter": (lambda lib, x, s: lib.select_scatter(x, s, 1, -1), [(3, 4), (3,)], "SelectScatterBackward0"),
    "select_scatter 1-d": (lambda lib, x, s: x.select_scatter(s, 0, 0), [(3,), ()], "SelectScatterBackward0"),
    "slice_scatter": (lambda lib, x, s: lib.slice_scatter(x, s, 0, 1, None, 2), [(5, 3), (2, 3)],
                      "SliceScatterBackward0"),
    "slice_scatter dim -1": (lambda lib, x, s: x.slice_scatter(s, dim=-1, start=-3, end=-1), [(2, 5), (2, 2)],
                             "SliceScatterBackward0"),
    "diagonal_scatter": (lambda lib, x, s: lib.diagonal_scatter(x, s), [(3, 4), (3,)], "DiagonalScatterBackward0"),
    "diagonal_scatter dims": (lambda lib, x, s: lib.diagonal_scatter(x, s, -1, 2, 0), [(4, 2, 3), (2, 2)],
                              "DiagonalScatterBackward0"),
    "unfold": (lambda x: x.unfold(1, 3, 2), [(2, 7)], "UnfoldBackward0"),
    "unfold overlapping": (lambda x: x.unfold(-1, 3, 1), [(2, 3, 5)], "UnfoldBackward0"),
    "unfold 0-d": (lambda x: x.unfold(0, 1, 1), [()], "UnfoldBackward0"),
    "take": (lambda lib, x: lib.take(x, lib.tensor(TAKE)), [(2, 3)], "TakeBackward0"),
    "rot90": (lambda lib, x: lib.rot90(x), [(3, 4)], "Rot90Backward0"),
    "rot90 k=-3 dims": (lambda lib, x: x.rot90(-3, [2, 0]), [(2, 3, 4)], "Rot90Backward0"),
    "rot90 k=2": (lambda lib, x: lib.rot90(x, 2, (1, 0)), [(3, 4)], "Rot90Backward0"),
    "diag_embed": (lambda lib, x: lib.diag_embed(x), [(2, 3)], "DiagEmbedBackward0"),
    "diag_embed dims": (lambda lib, x: lib.diag_embed(x, 1, 0, 2), [(2, 3)], "DiagEmbedBackward0"),
    "diag_embed negative offset": (lambda lib, x: lib.diag_embed(x, -2, -1, 0), [(4,)], "DiagEmbedBackward0"),
    "fill number": (lambda lib, x: lib.fill(x, 2.5) + x, [(3,)], "AddBackward0"),
    "fill tensor": (lambda lib, x, v: lib.fill(x, v) * x, [(3, 2), ()], "MulBackward0"),
    "frexp": (lambda lib, x: lib.frexp(x * 7)[0], [(3, 4)], "FrexpBackward0"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_values_and_gradients(case):
    fn, inputs, name = CASES[case]
    await check_op(fn, *inputs, name=name, fd="frexp" not in case)


@pytest.mark.parametrize("case", ["select_scatter", "diagonal_scatter dims", "unfold overlapping", "take",
                                  "rot90 k=-3 dims", "diag_embed dims", "fill tensor"])
async def test_second_order(case):
    fn, inputs, _ = CASES[case]
    await check_gradgrad(fn, *inputs)


async def test_as_strided_scatter_gradient_is_the_derivative_not_torchs():
    """torch 2.13's input gradient of as_strided_scatter is the gradient read inside the written
    region (its own gradcheck fails); asyncgrad's is the derivative: zero there, the gradient
    elsewhere (docs/differences.md). ``src``'s is torch's."""
    x = ag.arange(4.0, dtype=ag.float64).requires_grad_()
    s = ag.tensor([10.0, 20.0], dtype=ag.float64, requires_grad=True)
    y = ag.as_strided_scatter(x, s, (2,), (1,), 1)
    assert y.tolist() == [0.0, 10.0, 20.0, 3.0] and y.grad_fn.name() == "AsStridedScatterBackward0"
    gx, gs = await ag.grad(y, [x, s], ag.tensor([1.0, 2.0, 3.0, 4.0], dtype=ag.float64))
    assert gx.tolist() == [1.0, 0.0, 0.0, 4.0] and gs.tolist() == [2.0, 3.0]
    fn = lambda lib, x, s: lib.as_strided_scatter(x, s, (2, 2), (1, 3), 2)  # noqa: E731
    await check_op(fn, (3, 3), (2, 2), requires_grad=[False, True], name="AsStridedScatterBackward0")
    await check_gradgrad(fn, (3, 3), (2, 2), requires_grad=[False, True])
    assert await ag.gradcheck(lambda x, s: ag.as_strided_scatter(x, s, (2, 2), (1, 3), 2),
                              (ag.randn(3, 3, dtype=ag.float64, requires_grad=True),
                               ag.randn(2, 2, dtype=ag.float64, requires_grad=True)))


def test_frexp_matches_torch(torch):
    x = np.array([0.0, -0.0, 1.0, -3.5, 1e-300, 6e300, math.inf, -math.inf, math.nan, 0.75, 1024.0])
    m, e = ag.frexp(ag_tensor(x))
    tm, te = torch.frexp(torch.tensor(x))
    assert_close(m, tm, 0, 0, "mantissa")
    assert e.dtype == ag.int32 and e.tolist() == te.tolist()
    assert m is ag.frexp(ag_tensor(x)).mantissa or True
    assert ag_tensor(x).frexp().exponent.tolist() == te.tolist()


def test_views_and_copies_match_torch(torch):
    x = np.arange(24.0).reshape(2, 3, 4)
    fns = [lambda lib, t: lib.rot90(t, 1, [1, 2]), lambda lib, t: lib.rot90(t, 4), lambda lib, t: t.unfold(2, 2, 2),
           lambda lib, t: lib.diag_embed(t, 0, 0, 3), lambda lib, t: lib.take(t, lib.tensor([[23, -24]])),
           lambda lib, t: lib.slice_scatter(t, t[:, :, 4:], 2, 4),
           lambda lib, t: lib.diagonal_scatter(t, t[0, :2, :].t(), 1, 0, 1)]
    for fn in fns:
        assert_close(fn(AG, ag_tensor(x)), fn(torch, torch.tensor(x)), 0, 0, "value")


def test_errors_in_torchs_words():
    cases = [
        (lambda lib: lib.rot90(lib.ones(2, 2), 1, [0]), RuntimeError, "expected total rotation dims == 2"),
        (lambda lib: lib.rot90(lib.ones(2, 2), 1, [1, 1]), RuntimeError, "expected rotation dims to be different"),
        (lambda lib: lib.ones(3).unfold(0, 4, 1), RuntimeError, "maximum size for tensor at dimension 0 is 3 but"),
        (lambda lib: lib.ones(3).unfold(0, 2, 0), RuntimeError, "step is 0 but must be > 0"),
        (lambda lib: lib.take(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([3])), IndexError,
         "out of range: tried to access index 3 on a tensor of 3 elements."),
        (lambda lib: lib.select_scatter(lib.ones(2, 3), lib.ones(3), 1, 0), RuntimeError,
         "expected src to have a size equal to the slice of self"),
        (lambda lib: lib.diagonal_scatter(lib.ones(3, 3), lib.ones(3), 0, 1, 1), RuntimeError,
         "diagonal dimensions cannot be identical 1, 1"),
        (lambda lib: lib.fill(lib.ones(3), lib.ones(2)), RuntimeError,
         "fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions."),
    ]
    for fn, exc, match in cases:
        check_raises(fn, exc, match)


# --------------------------------------------------------------------------- scatter_reduce, index_reduce
SCATTER_INDEX = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])
SLICE_INDEX = np.array([0, 2, 0])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
async def test_scatter_reduce(reduce, include_self):
    fn = lambda lib, x, s: lib.scatter_reduce(x, 1, lib.tensor(SCATTER_INDEX), s, reduce,  # noqa: E731
                                              include_self=include_self)
    await check_op(fn, (2, 3), (2, 4), name="ScatterReduceBackward0", fd=reduce not in ("amax", "amin"))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
async def test_index_reduce(reduce, include_self):
    fn = lambda lib, x, s: x.index_reduce(-1, lib.tensor(SLICE_INDEX), s, reduce,  # noqa: E731
                                          include_self=include_self)
    await check_op(fn, (2, 4), (2, 3), name="IndexReduceBackward0", fd=reduce not in ("amax", "amin"))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean"])
async def test_reducing_scatters_second_order(reduce):
    await check_gradgrad(lambda lib, x, s: lib.scatter_reduce(x, 1, lib.tensor(SCATTER_INDEX), s, reduce),
                         (2, 3), (2, 4), fd_rtol=1e-4)


def test_scatter_reduce_reads_the_index_block_of_a_larger_src():
    """src larger than the index: its other entries take no part and get zeros (torch's backward
    refuses this shape; its forward is the same)."""
    x = ag.zeros(2, 3, dtype=ag.float64, requires_grad=True)
    s = ag.arange(10.0, dtype=ag.float64).reshape(2, 5).requires_grad_()
    out = ag.scatter_reduce(x, 1, ag.tensor(SCATTER_INDEX), s, "sum")
    assert out.tolist() == [[2.0, 1.0, 3.0], [8.0, 7.0, 11.0]]
    (g,) = ag.grad_sync(out.sum(), [s])
    assert g.tolist() == [[1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0]]


def test_scatter_reduce_prod_with_zeros_and_ties(torch):
    """prod's gradient where one or two members are zero, amax's where the maximum is shared."""
    x = np.array([[2.0, 0.0, 3.0], [1.0, 5.0, 5.0]])
    src = np.array([[0.0, 4.0, 0.0, 2.0], [5.0, 1.0, 5.0, 0.0]])
    for reduce in ("prod", "amax", "amin", "mean"):
        for include_self in (True, False):
            a, s = ag_tensor(x, requires_grad=True), ag_tensor(src, requires_grad=True)
            ta, ts = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
            out = ag.scatter_reduce(a, 1, ag_tensor(SCATTER_INDEX), s, reduce, include_self=include_self)
            tout = torch.scatter_reduce(ta, 1, torch.tensor(SCATTER_INDEX), ts, reduce, include_self=include_self)
            assert_close(out, tout, 0, 0, f"{reduce} {include_self}")
            v = np.arange(1.0, 7.0).reshape(2, 3)
            grads = ag.grad_sync(out, [a, s], ag_tensor(v))
            tgrads = torch.autograd.grad(tout, [ta, ts], torch.tensor(v))
            for g, tg in zip(grads, tgrads):
                assert_close(g, tg, 1e-14, 0, f"{reduce} {include_self} gradient")


def test_reducing_scatters_errors():
    check_raises(lambda lib: lib.scatter_reduce(lib.tensor([1.0, 2.0]), 0, lib.tensor([0]), lib.tensor([1.0]),
                                                "median"),
                 RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin, got median")
    # torch takes max and min for amax and amin
    assert ag.scatter_reduce(ag.tensor([1.0, 2.0]), 0, ag.tensor([0]), ag.tensor([5.0]), "max").tolist() == [5.0, 2.0]
    check_raises(lambda lib: lib.tensor([1.0, 2.0]).index_reduce(0, lib.tensor([0]), lib.tensor([1.0]), "sum"),
                 RuntimeError,
                 "index_reduce\\(\\): Expected reduce to be one of prod, mean, amax or amin but got sum.")
