"""Linear algebra: decompositions (eigh, eig, cholesky, svd), triangular solves, pinv and the
functions composed of recorded ops (logdet, matrix_power, multi_dot, kron, cross, block_diag,
trapezoid). Values and gradients, first and second order, against finite differences (float64)
and torch, on ``cpu`` and ``sim:0`` (conftest's op modules). Decompositions' vectors are defined
up to sign, and LAPACK builds may pick other signs: the compared functions are sign-invariant."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag


def _sym(x):
    return (x + x.transpose(-2, -1)) / 2


def _spd(lib, x):
    n = x.shape[-1]
    return lib.matmul(x, x.transpose(-2, -1)) + lib.eye(n, dtype=x.dtype, device=x.device) * n


# --------------------------------------------------------------------------- eigh, eigvalsh
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
async def test_eigh(shape):
    def fn(lib, x):
        L, V = lib.linalg.eigh(_sym(x))
        return V * V * L.unsqueeze(-2)  # sign-invariant in V

    out, _ = await check_op(fn, shape)
    assert out.shape == shape
    await check_gradgrad(fn, shape)


async def test_eigh_reads_one_triangle():
    """Not symmetric: eigh reads the UPLO triangle, and its gradient is torch's (symmetric)."""
    for uplo in ("L", "U"):
        await check_op(lambda lib, x, uplo=uplo: lib.linalg.eigh(x, UPLO=uplo)[0], (4, 4), fd=False)


async def test_eigvalsh():
    await check_op(lambda lib, x: lib.linalg.eigvalsh(_sym(x)), (2, 3, 3), name="LinalgEighBackward0")
    await check_gradgrad(lambda lib, x: lib.linalg.eigvalsh(_sym(x)), (4, 4))


async def test_symeig_matches_eigh():
    x = ag.randn(4, 4, dtype=ag.float64, requires_grad=True)
    for upper in (True, False):
        w, v = ag.symeig(x, eigenvectors=True, upper=upper)
        L, V = ag.linalg.eigh(x, UPLO="U" if upper else "L")
        np.testing.assert_allclose(w.detach().numpy(), L.detach().numpy())
        np.testing.assert_allclose(np.abs(v.detach().numpy()), np.abs(V.detach().numpy()))


# --------------------------------------------------------------------------- legacy eig
def _similar_to_symmetric(n):
    A = _sym(ag.randn(n, n, dtype=ag.float64))
    U = ag.rand(n, n, dtype=ag.float64) + ag.eye(n, dtype=ag.float64)
    return ag.matmul(ag.linalg.inv(U), ag.matmul(A, U))


async def test_eig_real_eigenvalues():
    B = _similar_to_symmetric(4).requires_grad_()
    e, v = ag.eig(B, eigenvectors=True)
    assert e.shape == (4, 2) and v.shape == (4, 4) and e.grad_fn is v.grad_fn
    np.testing.assert_allclose(e.detach().numpy()[:, 1], 0.0, atol=1e-12)
    # A v = λ v, unit columns
    Bn, en, vn = B.detach().numpy(), e.detach().numpy()[:, 0], v.detach().numpy()
    np.testing.assert_allclose(Bn @ vn, vn * en, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(vn, axis=0), 1.0)
    assert await ag.gradcheck(lambda B: ag.eig(B, True), [B])
    assert await ag.gradgradcheck(lambda B: ag.eig(B, True), [B])


@pytest.mark.skipif(not has_torch(), reason="torch not installed")
def test_eig_values_match_torch_linalg_eig():
    import torch

    a = np.random.default_rng(3).standard_normal((5, 5))
    e, v = ag.eig(ag.tensor(a), eigenvectors=True)
    w = torch.linalg.eigvals(torch.tensor(a)).numpy()
    ours = e.numpy()[:, 0] + 1j * e.numpy()[:, 1]
    np.testing.assert_allclose(np.sort_complex(ours), np.sort_complex(w), atol=1e-10)
    # the packing: a complex pair's (re v, im v) columns satisfy A (re + i im) = λ (re + i im)
    vn = v.numpy()
    for k in range(5):
        lam = ours[k]
        if lam.imag > 0:
            vec = vn[:, k] + 1j * vn[:, k + 1]
            np.testing.assert_allclose(a @ vec, lam * vec, atol=1e-10)


def test_linalg_eig_refused_complex():
    with pytest.raises(NotImplementedError, match="complex"):
        ag.linalg.eig(ag.eye(2))
    with pytest.raises(NotImplementedError, match="complex"):
        ag.linalg.eigvals(ag.eye(2))


# the population's refusals (TestAutograd.test_eig_no_eigenvectors, ...): ports
async def test_eig_no_eigenvectors():
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.eig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match="cannot compute backward"):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


async def test_eig_complex_eigenvalues():
    A = ag.tensor([[0., -1.], [1., 0.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.eig(A, eigenvectors=True)
    with pytest.raises(RuntimeError, match="does not support complex eigenvalues"):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


async def test_symeig_no_eigenvectors():
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.symeig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match="cannot compute backward"):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


async def test_svd_no_singularvectors():
    """torch 2's svd(compute_uv=False): U and V are zeros that need no gradient."""
    A = ag.randn(2, 2, dtype=ag.float32, requires_grad=True)
    u, s, v = ag.svd(A, compute_uv=False)
    assert not u.requires_grad and not v.requires_grad and s.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        await ag.backward([u, s, v], [ag.ones_like(u), ag.ones_like(s), ag.ones_like(v)])


# --------------------------------------------------------------------------- cholesky
@pytest.mark.parametrize("upper", [False, True])
async def test_linalg_cholesky(upper):
    fn = lambda lib, x: lib.linalg.cholesky(_spd(lib, x), upper=upper)  # noqa: E731
    await check_op(fn, (2, 3, 3), name="LinalgCholeskyExBackward0")
    await check_gradgrad(fn, (3, 3))


async def test_cholesky_legacy_gradient_symmetric():
    A = ag.tensor(_spd(np, np.random.default_rng(1).standard_normal((4, 4))), requires_grad=True)
    await ag.cholesky(A).sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), A.grad.numpy().T)
    await check_op(lambda lib, x: lib.cholesky(_spd(lib, x), True), (3, 3))


def test_cholesky_errors():
    check_raises(lambda lib: lib.linalg.cholesky(-lib.eye(3, dtype=lib.float64)), RuntimeError,
                 r"linalg.cholesky: The factorization could not be completed because the input is not "
                 r"positive-definite \(the leading minor of order 1 is not positive-definite\).")
    check_raises(lambda lib: lib.linalg.cholesky(lib.tensor(np.array([[[1., 0], [0, 1]], [[1, 2], [2, 1]]]))),
                 RuntimeError, r"linalg.cholesky: \(Batch element 1\): The factorization could not be completed "
                 r"because the input is not positive-definite \(the leading minor of order 2")
    check_raises(lambda lib: lib.linalg.cholesky(lib.ones(2, 3)), RuntimeError,
                 "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 matrices")
    assert issubclass(ag.linalg.LinAlgError, RuntimeError)


# --------------------------------------------------------------------------- triangular solves
@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, True, True), (False, False, False),
                                             (True, False, True)])
async def test_solve_triangular(upper, left, unit):
    def fn(lib, A, B):
        shifted = A + 3 * lib.eye(3, dtype=A.dtype, device=A.device)
        return lib.linalg.solve_triangular(shifted, B, upper=upper, left=left, unitriangular=unit)

    await check_op(fn, (2, 3, 3), (2, 3, 3))
    await check_gradgrad(fn, (3, 3), (3, 3))


@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, True, False), (True, True, True)])
async def test_triangular_solve_legacy(upper, transpose, unit):
    def fn(lib, b, A):
        X, C = lib.triangular_solve(b, A + 3 * lib.eye(3, dtype=A.dtype, device=A.device), upper, transpose, unit)
        return X.sum() + (C * C).sum()

    await check_op(fn, (3, 2), (3, 3))
    await check_gradgrad(fn, (3, 2), (3, 3))


@pytest.mark.parametrize("upper", [False, True])
async def test_cholesky_solve_and_inverse(upper):
    def factor(lib, A):
        T = A.triu() if upper else A.tril()
        return T + 2 * lib.eye(3, dtype=A.dtype, device=A.device)

    await check_op(lambda lib, B, A: lib.cholesky_solve(B, factor(lib, A), upper), (3, 2), (3, 3))
    await check_gradgrad(lambda lib, B, A: lib.cholesky_solve(B, factor(lib, A), upper), (3, 2), (3, 3))
    await check_op(lambda lib, A: lib.cholesky_inverse(factor(lib, A), upper), (3, 3))
    await check_gradgrad(lambda lib, A: lib.cholesky_inverse(factor(lib, A), upper), (3, 3))


def test_triangular_errors():
    check_raises(lambda lib: lib.linalg.solve_triangular(lib.ones(3, 3), lib.ones(2, 2), upper=True), RuntimeError,
                 r"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B \(3x3 and 2x2\)")


# --------------------------------------------------------------------------- svd, pinv
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 3, 4)])
async def test_svd(shape):
    def fn(lib, x):
        U, S, Vh = lib.linalg.svd(x, full_matrices=False)
        return lib.cat([(U * U).reshape(-1), S.reshape(-1), (Vh * Vh).reshape(-1)])

    await check_op(fn, shape)
    await check_gradgrad(fn, shape)


async def test_svd_full_matrices_and_legacy():
    """full_matrices: the vectors past min(m, n) get no gradient (torch ignores them); legacy svd
    returns V, reduced by default."""
    def fn(lib, x):
        U, S, Vh = lib.linalg.svd(x, full_matrices=True)
        return (U[:, :2] * U[:, :2]).sum(0) + S + (Vh * Vh).sum(1)

    await check_op(fn, (4, 2))
    A = ag.randn(4, 2, dtype=ag.float64)
    U, S, V = ag.svd(A)
    assert U.shape == (4, 2) and V.shape == (2, 2)
    np.testing.assert_allclose((U * S.unsqueeze(0)).matmul(V.t()).numpy(), A.numpy(), atol=1e-12)
    assert ag.svd(A, some=False).U.shape == (4, 4)


async def test_svdvals():
    await check_op(lambda lib, x: lib.linalg.svdvals(x), (3, 5), name="LinalgSvdBackward0")
    await check_gradgrad(lambda lib, x: lib.linalg.svdvals(x), (4, 3))


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 2)])
async def test_pinv(shape):
    await check_op(lambda lib, x: lib.linalg.pinv(x), shape, name="LinalgPinvBackward0")
    await check_gradgrad(lambda lib, x: lib.linalg.pinv(x), shape)
    await check_op(lambda lib, x: lib.pinverse(x), shape)


def test_pinv_error():
    check_raises(lambda lib: lib.linalg.pinv(lib.ones(3)), RuntimeError,
                 r"linalg.pinv\(Float\{\[3\]\}\): expected a tensor with 2 or more dimensions")


# --------------------------------------------------------------------------- composed of recorded ops
async def test_logdet():
    await check_op(lambda lib, x: lib.logdet(_spd(lib, x)), (2, 3, 3))
    await check_gradgrad(lambda lib, x: lib.logdet(_spd(lib, x)), (3, 3))
    assert np.isnan(ag.logdet(-ag.eye(3)).item())


@pytest.mark.parametrize("n", [0, 1, 3, -2])
async def test_matrix_power(n):
    fn = lambda lib, x: lib.linalg.matrix_power(x + 3 * lib.eye(3, dtype=x.dtype, device=x.device), n)  # noqa: E731
    if n == 0:  # identities copied into a clone, as torch's: CopyBackwards, a zero gradient
        out, (g,) = await check_op(fn, (2, 3, 3), name="CopyBackwards", torch_name=False)  # torch::autograd::
        assert np.array_equal(out.detach().cpu().numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)))
        assert not np.any(g.cpu().numpy())
        return
    await check_op(fn, (2, 3, 3))
    await check_gradgrad(fn, (3, 3))


async def test_multi_dot_and_chain_matmul():
    await check_op(lambda lib, a, b, c: lib.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4,))
    await check_op(lambda lib, a, b, c: lib.chain_matmul(a, b, c), (2, 3), (3, 4), (4, 5))
    check_raises(lambda lib: lib.linalg.multi_dot([lib.ones(2, 2), lib.ones(2, 2, 2), lib.ones(2, 2)]),
                 RuntimeError, "multi_dot\\(\\): tensor 1 must be 2D but got 3D")


@pytest.mark.parametrize("a,b", [((2, 3), (4, 2)), ((3,), (2, 2)), ((2, 1, 2), (3, 2))])
async def test_kron(a, b):
    await check_op(lambda lib, x, y: lib.kron(x, y), a, b)


async def test_cross():
    await check_op(lambda lib, x, y: lib.linalg.cross(x, y), (4, 3), (4, 3))
    await check_op(lambda lib, x, y: lib.cross(x, y, dim=0), (3, 2), (3, 1))
    check_raises(lambda lib: lib.linalg.cross(lib.ones(2, 3), lib.ones(3)), RuntimeError,
                 "linalg.cross: inputs must have the same number of dimensions.")
    check_raises(lambda lib: lib.linalg.cross(lib.ones(2, 2), lib.ones(2, 2)), RuntimeError,
                 "linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2")


async def test_block_diag():
    await check_op(lambda lib, a, b, c: lib.block_diag(a, b, c), (), (3,), (2, 2))
    await check_gradgrad(lambda lib, a, b: lib.block_diag(a, b), (2, 3), (1, 2))
    check_raises(lambda lib: lib.block_diag(lib.ones(2, 2, 2)), RuntimeError,
                 "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions")


async def test_trapezoid():
    await check_op(lambda lib, y: lib.trapezoid(y), (2, 5))
    await check_op(lambda lib, y: lib.trapezoid(y, dx=0.5, dim=0), (4, 3))
    await check_op(lambda lib, y, x: lib.trapz(y, x), (2, 3), (3,))
    await check_op(lambda lib, y, x: lib.trapz(y, x, dim=0), (3, 2), (3, 2))
    await check_gradgrad(lambda lib, y, x: lib.trapz(y, x), (2, 3), (2, 3))
    check_raises(lambda lib: lib.trapezoid(lib.ones(2, 3), lib.ones(2)), RuntimeError,
                 "trapezoid: There must be one `x` value for each sample point")


def test_decompositions_have_a_matmul_cost_class():
    """O(n³) kernels: their nodes' work grows like a matrix product's, so large ones leave the loop."""
    small = ag.linalg.eigh(ag.randn(4, 4, requires_grad=True))[0].grad_fn.work
    big = ag.linalg.eigh(ag.randn(64, 64, requires_grad=True))[0].grad_fn.work
    product = ag.matmul(ag.randn(64, 64, requires_grad=True), ag.randn(64, 64)).grad_fn.work
    assert big > 16 ** 2 * small / 2 and big >= product


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5, 2)])
async def test_qr(shape):
    def fn(lib, x):
        Q, R = lib.linalg.qr(x)
        return lib.cat([Q.reshape(-1), R.reshape(-1)])

    await check_op(fn, shape)
    await check_gradgrad(fn, shape)


async def test_qr_refusals():
    B = ag.randn(4, 2, dtype=ag.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        await ag.linalg.qr(B, mode="r")[1].sum().backward()


@pytest.mark.parametrize("scale", [0.3, 3.0])
async def test_matrix_exp(scale):
    fn = lambda lib, x: lib.linalg.matrix_exp(x * scale)  # noqa: E731
    await check_op(fn, (2, 3, 3), name="LinalgMatrixExpBackward0")
    await check_gradgrad(fn, (3, 3))
    await check_op(lambda lib, x: x.matrix_exp(), (2, 2))


def test_qr_legacy():
    A = ag.randn(5, 3, dtype=ag.float64)
    Q, R = A.qr()
    assert Q.shape == (5, 3) and R.shape == (3, 3)
    np.testing.assert_allclose((Q @ R).numpy(), A.numpy(), atol=1e-12)
    assert ag.qr(A, some=False).Q.shape == (5, 5)
