"""cholesky_solve and cholesky_inverse with torch's formulas (CholeskySolveBackward0,
CholeskyInverseBackward0): values from the factor's triangle, gradients of the whole factor taken as
given, as torch's; against torch (first and second order, lower and upper, broadcast batches) and,
through the triangle as torch's own gradcheck does (gradcheck_wrapper_triangular_input), against
finite differences, on cpu and sim:0 (an op module)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op

import asyncgrad as ag


def _factor(lib, x, upper, triangle):
    """A factor with a large positive diagonal; ``triangle``: only its triangle reaches the op."""
    n = x.shape[-1]
    if triangle:
        x = x.triu() if upper else x.tril()
    return x + 3 * lib.eye(n, dtype=x.dtype, device=x.device)


SOLVE_SHAPES = [((3, 2), (3, 3)), ((2, 1, 3, 2), (3, 3, 3)), ((3, 4), (2, 3, 3)), ((0, 3, 1), (3, 3))]


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shapes", SOLVE_SHAPES)
async def test_cholesky_solve_gradients_are_torchs(upper, shapes):
    def whole(lib, b, x):
        return lib.cholesky_solve(b, _factor(lib, x, upper, False), upper)

    def triangle(lib, b, x):
        return lib.cholesky_solve(b, _factor(lib, x, upper, True), upper)

    await check_op(whole, *shapes, name="CholeskySolveBackward0", fd=False)
    await check_op(triangle, *shapes, name="CholeskySolveBackward0")
    if 0 not in shapes[0]:
        await check_gradgrad(whole, *shapes, fd=False)
        await check_gradgrad(triangle, *shapes)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (0, 2, 2)])
async def test_cholesky_inverse_gradients_are_torchs(upper, shape):
    def whole(lib, x):
        return lib.cholesky_inverse(_factor(lib, x, upper, False), upper)

    def triangle(lib, x):
        return _factor(lib, x, upper, True).cholesky_inverse(upper)

    await check_op(whole, shape, name="CholeskyInverseBackward0", fd=False)
    await check_op(triangle, shape, name="CholeskyInverseBackward0")
    if 0 not in shape:
        await check_gradgrad(whole, shape, fd=False)
        await check_gradgrad(triangle, shape)


def test_the_entries_off_the_triangle_get_torchs_gradient_but_change_nothing(torch):
    """The value reads only the triangle; torch's gradient still reaches the other entries."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((3, 2))
    L = ag_tensor(x, requires_grad=True)
    out = ag.cholesky_solve(ag_tensor(b), L)
    assert_close(out, ag.cholesky_solve(ag_tensor(b), ag_tensor(np.tril(x))), 1e-14, 0, "value from the triangle")
    (g,) = ag.grad_sync(out.sum(), [L])
    tL = torch.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.cholesky_solve(torch.tensor(b), tL).sum(), [tL])
    assert_close(g, tg, 1e-10, 1e-12, "gradient")
    assert np.abs(np.triu(g.cpu().numpy(), 1)).max() > 1e-3
    assert_close(ag.cholesky_inverse(ag_tensor(x)), torch.cholesky_inverse(torch.tensor(x)), 1e-12, 1e-14, "inverse")
