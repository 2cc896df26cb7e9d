"""torch's composite ops (ops/composites.py): values, node names and gradients against torch and
finite differences, over broadcast, 0-d, negative-dim and empty forms, on cpu and sim:0."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

INDEX = np.array([[0, 2], [1, -1], [3, 0]])


def _product(grids):
    return grids[0] * grids[1]

# case: (function, input shapes or arrays, torch's node name of the output)
CASES = {
    "broadcast_to": (lambda lib, x: lib.broadcast_to(x, (2, 3, 4)), [(3, 1)], "ExpandBackward0"),
    "sum_to_size": (lambda x: x.sum_to_size(1, 4), [(3, 4)], "SumBackward1"),
    "sum_to_size lead": (lambda x: x.sum_to_size(4), [(2, 3, 4)], "ViewBackward0"),
    "ravel": (lambda lib, x: lib.ravel(x.transpose(0, 1)), [(3, 4)], None),
    "reshape_as": (lambda lib, x, y: x.reshape_as(y) * y, [(3, 4), (2, 6)], "MulBackward0"),
    "fliplr": (lambda lib, x: lib.fliplr(x), [(3, 4, 2)], "FlipBackward0"),
    "flipud": (lambda lib, x: lib.flipud(x), [(3,)], "FlipBackward0"),
    "hsplit": (lambda lib, x: lib.hsplit(x, 2)[1], [(3, 4)], "SliceBackward0"),
    "vsplit": (lambda lib, x: lib.vsplit(x, [1, 2])[2], [(4, 3)], "SliceBackward0"),
    "dsplit": (lambda lib, x: lib.dsplit(x, 3)[0], [(2, 2, 3)], "SliceBackward0"),
    "tensor_split sections": (lambda lib, x: lib.tensor_split(x, 3, dim=-1)[0], [(2, 7)], "SliceBackward0"),
    "tensor_split indices": (lambda lib, x: lib.tensor_split(x, [1, 6], 1)[1], [(2, 5)], "SliceBackward0"),
    "column_stack": (lambda lib, x, y, z: lib.column_stack([x, y, z]), [(3,), (3, 2), (3, 1)], None),
    "meshgrid ij": (lambda lib, x, y: _product(lib.meshgrid(x, y, indexing="ij")), [(3,), (4,)], "MulBackward0"),
    "meshgrid xy": (lambda lib, x, y: _product(lib.meshgrid([x, y], indexing="xy")), [(3,), (4,)], "MulBackward0"),
    "meshgrid 0-d": (lambda lib, x, y: _product(lib.meshgrid(x, y, indexing="xy")), [(3,), ()], "MulBackward0"),
    "cartesian_prod": (lambda lib, x, y: lib.cartesian_prod(x, y), [(3,), (2,)], "StackBackward0"),
    "combinations": (lambda lib, x: lib.combinations(x, 3), [(4,)], "StackBackward0"),
    "combinations with replacement": (lambda lib, x: lib.combinations(x, with_replacement=True), [(3,)],
                                      "StackBackward0"),
    "msort": (lambda lib, x: lib.msort(x), [(4, 3)], "SortBackward0"),
    "take_along_dim": (lambda lib, x: lib.take_along_dim(x, lib.tensor(INDEX), 1), [(3, 4)], "GatherBackward0"),
    "take_along_dim flat": (lambda lib, x: lib.take_along_dim(x, lib.tensor(INDEX % 4)), [(3, 4)], "GatherBackward0"),
    "take_along_dim broadcast": (lambda lib, x: lib.take_along_dim(x, lib.tensor(INDEX[:, :1, None]), 1),
                                 [(3, 4, 2)], "GatherBackward0"),
    "repeat_interleave": (lambda lib, x: lib.repeat_interleave(x, 2, dim=0), [(3, 2)], "ViewBackward0"),
    "repeat_interleave flat": (lambda lib, x: x.repeat_interleave(3), [(2, 2)], "ViewBackward0"),
    "repeat_interleave counts": (lambda lib, x: x.repeat_interleave(lib.tensor([1, 0, 3]), dim=-1), [(2, 3)],
                                 "IndexSelectBackward0"),
    "inner": (lambda lib, x, y: lib.inner(x, y), [(2, 3, 4), (5, 4)], None),
    "inner 0-d": (lambda lib, x, y: lib.inner(x, y), [(), (5, 4)], "MulBackward0"),
    "tensordot": (lambda lib, x, y: lib.tensordot(x, y, dims=([0, 2], [1, 0])), [(2, 3, 4), (4, 2, 5)], None),
    "tensordot int": (lambda lib, x, y: lib.tensordot(x, y, 1), [(2, 3), (3, 4)], None),
    "cov": (lambda lib, x: lib.cov(x), [(3, 5)], None),
    "cov weights": (lambda lib, x: lib.cov(x, correction=0, fweights=lib.tensor(np.array([1, 2, 1, 3, 1])),
                                           aweights=lib.tensor(np.array([0.5, 1.0, 2.0, 1.0, 0.3]))), [(2, 5)],
                    None),
    "corrcoef": (lambda lib, x: lib.corrcoef(x), [(3, 6)], None),
    "nanmean": (lambda lib, x: lib.nanmean(x, dim=-1, keepdim=True), [(3, 4)], "DivBackward0"),
    "diff": (lambda lib, x: lib.diff(x, n=2, dim=0), [(5, 3)], "SubBackward0"),
    "diff prepend append": (lambda lib, x, p, a: lib.diff(x, dim=-1, prepend=p, append=a), [(2, 3), (2, 1), (2, 2)],
                            "SubBackward0"),
    "cumulative_trapezoid": (lambda lib, y: lib.cumulative_trapezoid(y, dx=0.5), [(3, 5)], "CumsumBackward0"),
    # torch divides by a C++ number there (DivBackward1), which no Python call of div records
    "cumulative_trapezoid x": (lambda lib, y, x: lib.cumulative_trapezoid(y, x, dim=0), [(4, 2), (4,)], None),
    "diagflat": (lambda lib, x: lib.diagflat(x, -1), [(2, 2)], "DiagEmbedBackward0"),
    "float_power": (lambda lib, x, y: lib.float_power(x.abs() + 0.5, y), [(3, 1), (4,)], "PowBackward1"),
    "float_power number": (lambda lib, x: lib.float_power(x, 3), [(3,)], "PowBackward0"),
    "H": (lambda x: x.H, [(3, 4)], "TransposeBackward0"),
    "mH": (lambda x: x.mH, [(2, 3, 4)], "TransposeBackward0"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_values_and_gradients(case):
    fn, inputs, name = CASES[case]
    await check_op(fn, *inputs, name=name, torch_name=name is not None)


@pytest.mark.parametrize("case", ["cov", "corrcoef", "tensordot", "cumulative_trapezoid x", "take_along_dim"])
async def test_second_order(case):
    fn, inputs, _ = CASES[case]
    await check_gradgrad(fn, *inputs, fd_rtol=1e-4)


def test_splits_match_torch(torch):
    x = np.arange(24.0).reshape(2, 3, 4)
    for fn in (lambda lib, t: lib.tensor_split(t, 3, 2), lambda lib, t: lib.tensor_split(t, lib.tensor([1, 5]), 2),
               lambda lib, t: lib.tensor_split(t, lib.tensor(2), 1), lambda lib, t: lib.hsplit(t, [0, 2]),
               lambda lib, t: lib.dsplit(t, 2), lambda lib, t: t.tensor_split([4, 1], dim=-1)):
        ours, theirs = fn(ag, ag_tensor(x)), fn(torch, torch.tensor(x))  # index tensors on cpu, as torch wants
        assert len(ours) == len(theirs)
        for a, t in zip(ours, theirs):
            assert_close(a, t, 0, 0, "split")


def test_empty_and_single_forms(torch):
    for fn in (lambda lib, t: lib.diff(t), lambda lib, t: lib.cumulative_trapezoid(t),
               lambda lib, t: lib.nanmean(t, 0), lambda lib, t: lib.ravel(t), lambda lib, t: lib.msort(t)):
        with np.errstate(invalid="ignore"):  # nanmean's 0 / 0 (torch computes the same NaN without a word)
            ours = fn(AG, ag_tensor(np.zeros((0, 3))))
        theirs = fn(torch, torch.zeros(0, 3, dtype=torch.float64))
        assert tuple(ours.shape) == tuple(theirs.shape)
    x = np.array([1.0, np.nan, 3.0])
    assert_close(ag.nanmean(ag_tensor(x)), torch.nanmean(torch.tensor(x)), 0, 0, "nanmean")
    assert ag.cartesian_prod(ag_tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert ag.combinations(ag_tensor([1.0, 2.0]), 0).shape == (0,)


def test_errors_in_torchs_words():
    cases = [
        (lambda lib: lib.fliplr(lib.tensor([1.0])), RuntimeError, "Input must be >= 2-d."),
        (lambda lib: lib.flipud(lib.tensor(1.0)), RuntimeError, "Input must be >= 1-d."),
        (lambda lib: lib.ones(2, 2, 2).H, RuntimeError, r"tensor.H is only supported on matrices \(2-D tensors\)"),
        (lambda lib: lib.ones(2).mH, RuntimeError, "tensor.mH is only supported on matrices or batches of matrices"),
        (lambda lib: lib.inner(lib.ones(3, 4), lib.ones(3)), RuntimeError,
         r"inner\(\) the last dimension must match on both input tensors but got shapes \[3, 4\] and \[3\]"),
        (lambda lib: lib.ones(3, 4).sum_to_size(2), RuntimeError, r"size \{\[2\]\} is not expandable to size"),
        (lambda lib: lib.tensor_split(lib.ones(3), 0), RuntimeError, "number of sections must be larger than 0"),
        (lambda lib: lib.hsplit(lib.ones(3, 4), 3), RuntimeError, "torch.hsplit attempted to split along dimension 1"),
        (lambda lib: lib.dsplit(lib.ones(3, 4), 2), RuntimeError, "torch.dsplit requires a tensor with at least 3"),
        (lambda lib: lib.take_along_dim(lib.ones(3, 4), lib.tensor([0]), 1), RuntimeError,
         "input and indices should have the same number of dimensions"),
        (lambda lib: lib.diff(lib.tensor(1.0)), RuntimeError, "diff expects input to be at least one-dimensional"),
        (lambda lib: lib.diff(lib.ones(3), n=-1), RuntimeError, "order must be non-negative but got -1"),
        (lambda lib: lib.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
        (lambda lib: lib.cartesian_prod(lib.ones(2, 2)), RuntimeError, r"Expect a 1D vector, but got shape \[2, 2\]"),
        (lambda lib: lib.tensordot(lib.ones(2, 2), lib.ones(2, 2), 3), RuntimeError, "tensordot expects dims < ndim"),
        (lambda lib: lib.cov(lib.ones(2, 2, 2)), RuntimeError, "cov\\(\\): expected input to have two or fewer"),
        (lambda lib: lib.repeat_interleave(lib.ones(4), lib.tensor([1, 2])), RuntimeError,
         "repeats must have the same size as input along dim"),
    ]
    for fn, exc, match in cases:
        check_raises(fn, exc, match)


# --------------------------------------------------------------------------- quantiles, gradient
QUANTILES = {
    "quantile": (lambda lib, x: lib.quantile(x, 0.3), [(4, 5)]),
    "quantile q tensor dim": (lambda lib, x, q: lib.quantile(x, q.sigmoid(), dim=1, keepdim=True), [(3, 5), (2,)]),
    "quantile lower": (lambda lib, x: x.quantile(0.7, 0, interpolation="lower"), [(5, 2)]),
    "quantile higher": (lambda lib, x: lib.quantile(x, 0.7, -1, interpolation="higher"), [(2, 5)]),
    "quantile midpoint": (lambda lib, x: lib.quantile(x, 0.45, interpolation="midpoint"), [(7,)]),
    "quantile nearest": (lambda lib, x: lib.quantile(x, 0.55, 0, True, interpolation="nearest"), [(6, 2)]),
    "nanquantile": (lambda lib, x: lib.nanquantile(x, 0.25, dim=0), [(4, 3)]),
}


@pytest.mark.parametrize("case", list(QUANTILES))
async def test_quantiles(case):
    fn, inputs = QUANTILES[case]
    await check_op(fn, *inputs, fd="lower" not in case and "higher" not in case and "nearest" not in case)


def test_quantiles_with_nans(torch):
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, np.nan, np.nan], [4.0, 0.5, 2.0, 8.0]])
    for fn in (lambda lib, t: lib.quantile(t, 0.4, dim=1), lambda lib, t: lib.nanquantile(t, 0.4, dim=1),
               lambda lib, t: lib.nanquantile(t, lib.tensor([0.0, 0.5, 1.0], dtype=t.dtype), dim=1)):
        assert_close(fn(AG, ag_tensor(x)), fn(torch, torch.tensor(x)), 1e-15, 0, "quantiles")


GRADIENTS = {
    "gradient": (lambda lib, x: lib.gradient(x)[0], [(5,)]),
    "gradient spacing": (lambda lib, x: _sum(lib.gradient(x, spacing=[2.0, 0.5])), [(4, 5)]),
    "gradient edge_order 2": (lambda lib, x: _sum(lib.gradient(x, dim=[0, -1], edge_order=2)), [(4, 3, 5)]),
    "gradient coordinates": (lambda lib, x, c: lib.gradient(x, spacing=[c.cumsum(0)], dim=1)[0], [(2, 4), (4,)]),
    "gradient coordinates edge_order 2": (
        lambda lib, x, c: lib.gradient(x, spacing=[c.exp().cumsum(0)], dim=0, edge_order=2)[0], [(5, 2), (5,)]),
}


def _sum(grads):
    return sum(g.sum() for g in grads)


@pytest.mark.parametrize("case", list(GRADIENTS))
async def test_gradient(case):
    fn, inputs = GRADIENTS[case]
    await check_op(fn, *inputs)


def test_quantile_and_gradient_errors():
    check_raises(lambda lib: lib.quantile(lib.tensor([1.0]), 1.5), RuntimeError,
                 r"quantile\(\) q must be in the range \[0, 1\] but got 1.5")
    check_raises(lambda lib: lib.quantile(lib.tensor([1, 2]), 0.5), RuntimeError,
                 r"quantile\(\) input tensor must be either float or double dtype")
    check_raises(lambda lib: lib.quantile(lib.tensor([1.0]), 0.5, interpolation="cubic"), RuntimeError,
                 r"quantile\(\) interpolation must be one of linear, lower, higher, midpoint or nearest, but got cubic")
    check_raises(lambda lib: lib.gradient(lib.tensor([1.0, 2.0]), edge_order=2), RuntimeError,
                 "torch.gradient expected each dimension size to be at least edge_order\\+1")
