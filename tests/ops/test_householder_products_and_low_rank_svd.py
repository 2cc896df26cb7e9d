"""ormqr (C times the Q of geqrf's reflectors, from either side, transposed or not) and the randomized
low-rank SVDs (svd_lowrank, pca_lowrank): values and gradients against torch and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_op, check_raises

import asyncgrad as ag


def _reflectors(m: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """geqrf's (reflectors, tau) of a random (m, n) matrix: numpy's raw QR, which is LAPACK's geqrf."""
    h, tau = np.linalg.qr(np.random.default_rng(seed).uniform(-1, 1, (m, n)), mode="raw")
    return np.ascontiguousarray(h.T), tau


@pytest.mark.parametrize("m, n", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
async def test_ormqr_values_and_gradients(m, n, left, transpose):
    reflectors, tau = _reflectors(m, n)
    other = np.random.default_rng(1).uniform(-1, 1, (m, 2) if left else (2, m))
    await check_op(lambda lib, a, t, c: lib.ormqr(a, t, c, left, transpose), reflectors, tau, other,
                   torch_name=False)


def test_ormqr_is_the_product_with_q(torch):
    reflectors, tau = _reflectors(5, 3)
    q = np.linalg.qr(np.random.default_rng(0).uniform(-1, 1, (5, 3)), mode="complete")[0]
    c = np.random.default_rng(2).uniform(-1, 1, (5, 4))
    got = ag.ormqr(ag_tensor(reflectors), ag_tensor(tau), ag_tensor(c))
    assert_close(got, q @ c, 1e-12, 1e-12, "Q C")
    assert_close(ag_tensor(reflectors).ormqr(ag_tensor(tau), ag_tensor(c.T), left=False, transpose=True),
                 c.T @ q.T, 1e-12, 1e-12, "C Qᵀ")
    check_raises(lambda lib: lib.ormqr(lib.ones(5, 3), lib.ones(3), lib.ones(4, 2)), RuntimeError,
                 r"torch.ormqr: Expected other.shape\[-2\] to be equal to input.shape\[-2\] = 5", torch_same=False)


def test_svd_lowrank_of_a_low_rank_matrix():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 7, 2)) @ rng.standard_normal((2, 2, 5))  # rank 2
    for A in (a, np.swapaxes(a, -1, -2).copy()):
        U, S, V = ag.svd_lowrank(ag_tensor(A), q=3)
        assert U.shape == A.shape[:-1] + (3,) and S.shape == A.shape[:-2] + (3,) and V.shape[-2:] == (A.shape[-1], 3)
        approx = (U[..., :2] * S[..., None, :2]) @ V[..., :2].mT
        assert_close(approx, A, 1e-9, 1e-9, "U diag(S) Vᵀ")
        assert_close(S[..., :2], np.linalg.svd(A, compute_uv=False)[..., :2], 1e-9, 0, "singular values")


async def test_low_rank_singular_values_gradient():
    """With q = min(m, n) the randomized basis spans the whole range: S is exact, and so is its gradient."""
    await check_op(lambda lib, a: lib.svd_lowrank(a, q=3)[1], (5, 3), name=None)
    await check_op(lambda lib, a: lib.pca_lowrank(a, q=3)[1], (5, 3), name=None)  # centred: still rank 3
    await check_op(lambda lib, a: lib.pca_lowrank(a, q=2, center=False)[1], (2, 4), name=None)


def test_pca_lowrank_refusals_are_torchs():
    check_raises(lambda lib: lib.pca_lowrank(lib.ones(3, 4), q=4), ValueError,
                 r"q\(=4\) must be non-negative integer and not greater than min\(m, n\)=3")
    check_raises(lambda lib: lib.pca_lowrank(lib.ones(3, 4), niter=-1), ValueError,
                 r"niter\(=-1\) must be non-negative integer")
