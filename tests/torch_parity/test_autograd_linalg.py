"""Ports of PyTorch's own linear-algebra autograd tests (TestAutograd in torch's ~2020
``test/test_autograd.py``, in the population of the first port of torch's autograd tests), beside
test_TestAutograd_removed_since_2020.py: test_slogdet_sign, test_cholesky, test_cholesky_solve,
test_symeig, test_cholesky_inverse, test_triangular_solve, test_pinverse, test_chain_matmul, test_block_diag.
(test_eig_no_eigenvectors, test_eig_complex_eigenvalues, test_symeig_no_eigenvectors and
test_svd_no_singularvectors are in test_ops_linalg.py.) torch's removed ``symeig`` and ``eig`` are
asyncgrad's ``ag.symeig`` and ``ag.eig`` (legacy semantics)."""

from itertools import product

import numpy as np
from torch_port import (  # noqa: F401  (double_default: an autouse fixture)
    assert_equal,
    double_default,
    random_symmetric_matrix,
    random_symmetric_pd_matrix,
)

import asyncgrad as ag


async def test_slogdet_sign():
    a = ag.randn(3, 3, requires_grad=True)
    s, logdet = a.slogdet()
    # torch 2.13 hangs the sign on logabsdet's node, with a zero gradient (torch's slogdet_backward)
    assert s.requires_grad and s.grad_fn is logdet.grad_fn
    assert (await ag.grad(s, [a], allow_unused=True)) == (None,)  # torch's: the sign reaches no input

    def sign_mul_logdet(mat):
        s, logdet = mat.slogdet()
        return s * logdet

    u, s, v = a.detach().svd()
    s = s.abs().clamp(0.0001)
    for sign in (-1, 1):
        s[-1] = sign
        mat = ag.linalg.multi_dot([u, s.diag(), v.t()]).requires_grad_()
        assert await ag.gradcheck(sign_mul_logdet, [mat])
        assert await ag.gradgradcheck(sign_mul_logdet, [mat])


async def test_cholesky():
    def func(root, upper):
        x = ag.matmul(root, root.transpose(-1, -2)) + 1e-05
        return ag.cholesky(x, upper)

    for upper, dims in product([True, False], [(3, 3), (4, 3, 2, 2)]):
        root = ag.rand(*dims, requires_grad=True)
        assert await ag.gradcheck(lambda r, upper=upper: func(r, upper), [root])
        assert await ag.gradgradcheck(lambda r, upper=upper: func(r, upper), [root])
        root = random_symmetric_pd_matrix(dims[-1], *dims[:-2]).requires_grad_()
        await root.cholesky().sum().backward()
        assert_equal(root.grad, root.grad.transpose(-1, -2))  # the gradient is symmetric


async def test_cholesky_solve():
    for (a_size, b_size), upper in product([((3, 3), (3, 4)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4)),
                                            ((2, 3, 3), (2, 3, 2))], [True, False]):
        root = ag.rand(*a_size).requires_grad_()
        b = ag.rand(*b_size).requires_grad_()

        def func(root, b, upper=upper):
            A = root.triu() if upper else root.tril()
            return ag.cholesky_solve(b, A, upper)

        assert await ag.gradcheck(func, [root, b])
        assert await ag.gradgradcheck(func, [root, b])


async def test_symeig():
    def func(root, upper):
        x = 0.5 * (root + root.transpose(-2, -1))
        return ag.symeig(x, eigenvectors=True, upper=upper)

    for upper, dims in product([True, False], [(3, 3), (5, 3, 3), (4, 3, 2, 2)]):
        root = ag.rand(*dims, requires_grad=True)
        assert await ag.gradcheck(lambda r, upper=upper: func(r, upper), [root])
        assert await ag.gradgradcheck(lambda r, upper=upper: func(r, upper), [root])
        root = random_symmetric_matrix(dims[-1], *dims[:-2]).requires_grad_()
        w, v = root.symeig(eigenvectors=True)
        await (w.sum() + v.sum()).backward()
        assert_equal(root.grad, root.grad.transpose(-1, -2))  # the gradient is symmetric


async def test_cholesky_inverse():
    for upper, dims in product([True, False], [(3, 3), (5, 5)]):
        A = random_symmetric_pd_matrix(dims[0])
        L = ag.cholesky(A, upper).requires_grad_()
        # torch's gradient is that of the whole factor: finite differences see only its triangle,
        # so the check goes through it, as torch's own (gradcheck_wrapper_triangular_input)
        def func(L, upper=upper):
            return ag.cholesky_inverse(L.triu() if upper else L.tril(), upper)

        assert await ag.gradcheck(func, [L])
        assert await ag.gradgradcheck(func, [L])
    # the inverse of A from its factor
    A = random_symmetric_pd_matrix(4)
    assert_equal(ag.cholesky_inverse(ag.cholesky(A)), ag.linalg.inv(A), atol=1e-8, rtol=1e-8)


async def test_triangular_solve():
    for A_dims, B_dims in [((3, 3), (3, 4)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4)), ((2, 3, 3), (2, 3, 2))]:
        A = ag.rand(*A_dims).requires_grad_()
        b = ag.rand(*B_dims).requires_grad_()
        for upper, transpose, unitriangular in product((True, False), repeat=3):
            def func(A, b, upper=upper, transpose=transpose, unitriangular=unitriangular):
                return ag.triangular_solve(b, A, upper, transpose, unitriangular)

            assert await ag.gradcheck(func, [A, b])
            assert await ag.gradgradcheck(func, [A, b])


async def test_pinverse():
    # pinverse is differentiable where the rank is constant: orthonormal U, V and large singular values
    m, n = 5, 10
    U = ag.linalg.qr(ag.randn(n, m))[0].t()  # m x n
    V = ag.linalg.qr(ag.randn(n, m))[0].t()  # m x n

    def func(x):
        S = ag.cat([x, ag.zeros(n - m)], 0)
        M = U.mm(ag.diag(S)).mm(V.t())
        return M.pinverse()

    for shift in (1, 10):
        assert await ag.gradcheck(func, [(ag.rand(m) + shift).requires_grad_()])
        assert await ag.gradgradcheck(func, [(ag.rand(m) + shift).requires_grad_()])


async def test_chain_matmul():
    def gen_matrices(shapes):
        return [ag.randn(p, q).requires_grad_() for p, q in zip(shapes[:-1], shapes[1:])]

    for shapes in ([5, 10, 15, 5], [3, 5, 2, 6], [6, 2, 4, 8, 10]):
        assert await ag.gradcheck(ag.chain_matmul, gen_matrices(shapes))
        assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices(shapes))


async def test_block_diag():
    inputs = [ag.randn(()).requires_grad_(), ag.randn(3).requires_grad_(), ag.randn(2, 2).requires_grad_(),
              ag.randn(1, 4).requires_grad_()]
    out = ag.block_diag(*inputs)
    assert out.shape == (1 + 1 + 2 + 1, 1 + 3 + 2 + 4)
    np.testing.assert_array_equal(out.detach().numpy()[2:4, 4:6], inputs[2].detach().numpy())
    assert await ag.gradcheck(ag.block_diag, inputs)
    assert await ag.gradgradcheck(ag.block_diag, inputs)
