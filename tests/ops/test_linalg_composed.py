"""torch.linalg's compositions (diagonal, vecdot, vander, tensorinv, tensorsolve, cond, lstsq,
householder_product, cholesky_ex, inv_ex, solve_ex) against finite differences and PyTorch on
``cpu`` and ``sim:0``: batches, broadcasting, each driver's outputs, info tensors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TORCH_NEEDED
from helpers import DEVICE, check_gradgrad, check_op, check_raises

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

RNG = np.random.default_rng(5)
SPD = (lambda a: a @ a.swapaxes(-1, -2) + 3 * np.eye(3))(RNG.standard_normal((2, 3, 3)))
WELL = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)


async def test_diagonal_and_vecdot():
    await check_op(lambda lib, a: lib.linalg.diagonal(a, offset=1), (2, 3, 4))
    await check_op(lambda lib, a: lib.linalg.diagonal(a, dim1=0, dim2=2), (3, 2, 4))
    await check_op(lambda lib, x, y: lib.linalg.vecdot(x, y), (2, 1, 4), (3, 4))
    await check_op(lambda lib, x, y: lib.linalg.vecdot(x, y, dim=0), (4, 2), (4, 2))


@pytest.mark.parametrize("shape, N", [((4,), None), ((2, 3), 5), ((), 2)])
async def test_vander(shape, N):
    await check_op(lambda lib, x: lib.linalg.vander(x, N=N), shape)
    check_raises(lambda lib: lib.linalg.vander(lib.ones(3), N=1), RuntimeError, "N must be greater than 1.")


async def test_tensorinv_and_tensorsolve():
    a = (RNG.standard_normal((6, 6)) + 4 * np.eye(6)).reshape(2, 3, 6)
    await check_op(lambda lib, x: lib.linalg.tensorinv(x, ind=2), a)
    b = (RNG.standard_normal((6, 6)) + 4 * np.eye(6)).reshape(2, 3, 2, 3)
    await check_op(lambda lib, x, y: lib.linalg.tensorsolve(x, y), b, (2, 3))
    await check_op(lambda lib, x, y: lib.linalg.tensorsolve(x, y, dims=(0,)), b.transpose(2, 0, 1, 3), (2, 3))


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, float("inf"), float("-inf")])
async def test_cond(p):
    # torch's own backward of the norm-ratio forms trips on its in-place inverse: finite differences
    # carry those, torch the singular-value forms
    await check_op(lambda lib, a: lib.linalg.cond(a, p), WELL, torch_check=p in (None, 2, -2))


@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [((5, 3), (5, 2)), ((2, 3, 3), (2, 3, 1)), ((2, 4), (2, 2))])
async def test_lstsq_drivers(driver, shape):
    a_shape, b_shape = shape
    await check_op(lambda lib, a, b: lib.linalg.lstsq(a, b, driver=driver).solution, a_shape, b_shape)
    result = ag.linalg.lstsq(ag.tensor(RNG.standard_normal(a_shape), device=DEVICE[0]),
                             ag.tensor(RNG.standard_normal(b_shape), device=DEVICE[0]), driver=driver)
    torch = pytest.importorskip("torch", reason=TORCH_NEEDED)  # the result's shapes and dtypes against torch's
    expected = torch.linalg.lstsq(torch.randn(a_shape, dtype=torch.float64), torch.randn(b_shape, dtype=torch.float64),
                                  driver=driver)
    for ours, theirs in zip(result, expected):
        assert tuple(ours.shape) == tuple(theirs.shape) and str(ours.dtype).split(".")[-1] == str(theirs.dtype)[6:]
    if a_shape[-2] > a_shape[-1] and driver != "gelsy":
        await check_op(lambda lib, a, b: lib.linalg.lstsq(a, b, driver=driver).residuals, a_shape, b_shape)


async def test_householder_product():
    await check_op(lambda lib, a, tau: lib.linalg.householder_product(a, tau), (4, 3), (2,))
    await check_op(lambda lib, a, tau: lib.linalg.householder_product(a, tau), (2, 3, 3), (2, 3))
    await check_gradgrad(lambda lib, a, tau: lib.linalg.householder_product(a, tau), (3, 2), (2,))
    out = ag.linalg.householder_product(ag.zeros(4, 2, device=DEVICE[0], requires_grad=True),
                                        ag.zeros(0, device=DEVICE[0]))
    assert out.requires_grad and out.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]


async def test_ex_forms_and_their_info():
    await check_op(lambda lib, a: lib.linalg.cholesky_ex(a).L, SPD, fd=False)  # torch symmetrises the gradient
    await check_op(lambda lib, a: lib.linalg.inv_ex(a).inverse, WELL)
    await check_op(lambda lib, a, b: lib.linalg.solve_ex(a, b, left=False).result, WELL, (2, 4, 3))
    singular = ag.tensor(np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 1.0]]]), device=DEVICE[0])
    assert ag.linalg.inv_ex(singular).info.tolist() == [2, 0]
    assert ag.linalg.cholesky_ex(-singular).info.tolist() == [1, 1]
    assert ag.linalg.cholesky_ex(singular[1:]).info.dtype == ag.int32
    with pytest.raises(ag.linalg.LinAlgError):
        ag.linalg.inv_ex(singular, check_errors=True)
