"""The LU family: linalg.lu_factor(_ex), linalg.lu, linalg.lu_solve, lu_unpack, torch.lu and
torch.lu_solve; factors, pivots and infos as LAPACK's (torch's), gradients against torch and finite
differences for square, wide and tall matrices, batches and empty batches, on cpu and sim:0 (an op
module)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

SHAPES = [(4, 4), (3, 5), (5, 3), (2, 4, 4), (2, 3, 2, 4), (0, 3, 3), (1, 1), (4, 0)]


@pytest.mark.parametrize("shape", SHAPES)
def test_factors_and_pivots_are_lapacks(torch, shape):
    a = np.random.default_rng(len(shape) + shape[-1]).uniform(-9, 9, shape)
    LU, pivots, info = ag.linalg.lu_factor_ex(ag_tensor(a))
    tLU, tpivots, tinfo = torch.linalg.lu_factor_ex(torch.tensor(a))
    assert_close(LU, tLU, 1e-10, 1e-12, "LU")
    assert pivots.dtype == ag.int32 and info.dtype == ag.int32
    assert np.array_equal(pivots.cpu().numpy(), tpivots.numpy()) and np.array_equal(info.cpu().numpy(), tinfo.numpy())
    for got, expected in zip(ag.linalg.lu(ag_tensor(a)), torch.linalg.lu(torch.tensor(a))):
        assert_close(got, expected, 1e-10, 1e-12, "P, L, U")
    for got, expected in zip(ag.lu_unpack(LU, pivots), torch.lu_unpack(tLU, tpivots)):
        assert_close(got, expected, 1e-10, 1e-12, "lu_unpack")


def test_a_zero_pivot_is_reported_or_refused(torch):
    a = np.zeros((2, 3, 3))
    a[:, 0, 0] = 1.0
    a[0] += np.eye(3)
    LU, _, info = ag.linalg.lu_factor_ex(ag_tensor(a))
    assert info.cpu().numpy().tolist() == torch.linalg.lu_factor_ex(torch.tensor(a)).info.tolist() == [0, 2]
    assert_close(LU, torch.linalg.lu_factor_ex(torch.tensor(a)).LU, 0, 0, "LU with a zero pivot")
    check_raises(lambda lib: lib.linalg.lu_factor(lib.tensor(a)), RuntimeError,
                           r"torch.linalg.lu_factor: \(Batch element 1\): U\[2,2\] is zero and using it on lu_solve")
    with pytest.raises(ag.linalg.LinAlgError):  # torch's linalg error class, a RuntimeError
        ag.linalg.lu_factor(ag_tensor(a))
    check_raises(lambda lib: lib.linalg.lu_factor_ex(lib.tensor(a), check_errors=True), RuntimeError,
                 r"\(Batch element 1\): U\[2,2\] is zero", torch_same=False)
    assert ag.lu(ag_tensor(a), get_infos=True)[2].cpu().numpy().tolist() == [0, 2]


def test_refusals_are_torchs():
    check_raises(lambda lib: lib.linalg.lu_factor(lib.ones(3)), RuntimeError,
                 r"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: \[3\] instead")
    check_raises(lambda lib: lib.linalg.lu_factor(lib.ones(3, 3), pivot=False), RuntimeError,
                 "linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    check_raises(lambda lib: lib.linalg.lu_solve(*lib.linalg.lu_factor(lib.eye(3)), lib.ones(2, 1)), RuntimeError,
                 r"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B \(3x3 and 2x1\)")


def _lu_outputs(lib, A):
    P, L, U = lib.linalg.lu(A)
    return lib.cat([L.reshape(-1), U.reshape(-1)])


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
async def test_gradients_of_the_factors(shape):
    await check_op(_lu_outputs, shape, name="CatBackward0", torch_name=False)
    await check_op(lambda lib, A: lib.linalg.lu_factor_ex(A).LU, shape, name="LinalgLuFactorExBackward0")
    await check_op(lambda lib, A: lib.linalg.lu_factor(A)[0], shape, name="LinalgLuFactorExBackward0")
    await check_op(lambda lib, A: lib.lu_unpack(*lib.linalg.lu_factor(A))[1], shape, name="LuUnpackBackward0")
    await check_op(lambda lib, A: lib.lu_unpack(*lib.linalg.lu_factor(A))[2], shape, name="LuUnpackBackward0")


async def test_only_one_factor_has_a_gradient():
    await check_op(lambda lib, A: lib.linalg.lu(A)[1], (3, 5), name="LinalgLuBackward0")
    await check_op(lambda lib, A: lib.linalg.lu(A)[2], (5, 3), name="LinalgLuBackward0")
    P = ag.linalg.lu(ag_tensor(np.eye(3), requires_grad=True)).P
    assert not P.requires_grad


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
async def test_lu_solve_gradients(left, adjoint):
    def fn(lib, A, B):
        LU, pivots = lib.linalg.lu_factor(A)
        return lib.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)

    await check_op(fn, (3, 3), (3, 2) if left else (2, 3), name="LinalgLuSolveBackward0")
    await check_op(fn, (2, 4, 4), (4, 1) if left else (1, 4), name="LinalgLuSolveBackward0")  # broadcast B


async def test_second_order():
    await check_gradgrad(lambda lib, A, B: lib.linalg.lu_solve(*lib.linalg.lu_factor(A), B, adjoint=True),
                         (3, 3), (3, 2), fd_rtol=1e-4)
    await check_gradgrad(_lu_outputs, (3, 3), fd_rtol=1e-4)
    await check_gradgrad(lambda lib, A: lib.linalg.lu_factor(A).LU, (4, 2), fd_rtol=1e-4)


async def test_legacy_names_and_methods():
    await check_op(lambda lib, B, A: lib.lu_solve(B, *lib.lu(A)), (3, 2), (3, 3), name="LinalgLuSolveBackward0")
    await check_op(lambda B, A: B.lu_solve(*A.lu()), (3, 2), (3, 3), name="LinalgLuSolveBackward0")
    await check_op(lambda A: A.lu(get_infos=True)[0], (3, 4), name="LinalgLuFactorExBackward0")


def test_empty_solves():
    LU, pivots = ag.linalg.lu_factor(ag_tensor(np.zeros((2, 0, 0))))
    assert ag.linalg.lu_solve(LU, pivots, ag_tensor(np.zeros((2, 0, 4)))).shape == (2, 0, 4)
    LU, pivots = ag.linalg.lu_factor(ag_tensor(np.eye(3)))
    assert ag.linalg.lu_solve(LU, pivots, ag_tensor(np.zeros((3, 0)))).shape == (3, 0)
