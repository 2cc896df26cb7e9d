"""torch.linalg's functions that torch itself composes from other ops: ``diagonal``, ``vecdot``,
``vander``, ``tensorinv``, ``tensorsolve``, ``cond``, ``lstsq``, ``householder_product`` and the
``_ex`` forms (``cholesky_ex``, ``inv_ex``, ``solve_ex``) with their ``info`` tensors.

Their gradients are those of the ops they are made of (torch's own compositions, or, for
``lstsq`` and ``householder_product``, the same maps written with differentiable ops), so every
order follows from those ops' formulas.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops import linalg
from asyncgrad.ops._node import plain
from asyncgrad.ops.elementwise import where
from asyncgrad.ops.reduction import cumprod
from asyncgrad.ops.shape import cat
from asyncgrad.ops.views import diagonal as _diagonal
from asyncgrad.ops.views import movedim
from asyncgrad.random import numpy_generator
from asyncgrad.tensor import Tensor, scalar_type_name

__all__ = ["cholesky_ex", "cond", "diagonal", "householder_product", "inv_ex", "lstsq", "ormqr", "pca_lowrank",
           "solve_ex", "svd_lowrank", "tensorinv", "tensorsolve", "vander", "vecdot"]


class CholeskyExResult(NamedTuple):
    L: Tensor
    info: Tensor


class InvExResult(NamedTuple):
    inverse: Tensor
    info: Tensor


class SolveExResult(NamedTuple):
    result: Tensor
    info: Tensor


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


def _info(A: Tensor, probe: Any = None) -> Tensor:
    """LAPACK's ``info`` per matrix of the batch, int32: 0, or what ``probe`` (the backend's
    ``not_positive_definite`` or ``singular_pivot``) finds wrong with that matrix."""
    batch = A.shape[:-2]
    values = [0] * math.prod(batch)
    if probe is not None:
        xp = A.device.xp
        flat = xp.reshape(A.data, (-1,) + A.shape[-2:])
        for i in range(len(values)):
            found = probe(flat[i, ...])
            values[i] = 0 if found is None else found[1]
    info = A.device.asarray(values, dtype=np.dtype(np.int32))
    return plain(A.device.xp.reshape(info, batch), A.device)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch.linalg.diagonal: ``A.diagonal(offset, dim1, dim2)`` over the last two dims by default."""
    tensor_arg(A, "linalg_diagonal", "A", 1)
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """torch.linalg.vecdot: ``sum(conj(x) * y, dim)`` (real tensors: the plain product), broadcast."""
    tensor_arg(x, "linalg_vecdot", "x", 1)
    tensor_arg(y, "linalg_vecdot", "y", 2)
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{scalar_type_name(x.dtype)} and y of type {scalar_type_name(y.dtype)} instead")
    return (x * y).sum(dim)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """torch.linalg.vander: ``(..., n)`` to ``(..., n, N)`` with columns ``x^0 .. x^(N-1)``, as torch
    computes it: ones, then the cumulative product of ``x`` repeated."""
    tensor_arg(x, "linalg_vander", "x", 1)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    ones = where(plain(x.device.backend.zeros((), np.dtype(np.bool_)), x.device), x, 1.0).unsqueeze(-1)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1)
    return cat([ones, cumprod(powers, -1)], -1)


def _square_checks(A: Tensor, fn: str) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:
    """torch.linalg.cholesky_ex: the factor and ``info`` (0, or the order of the leading minor that
    is not positive-definite; then the factor holds NaN, unless ``check_errors`` raises)."""
    tensor_arg(A, "linalg_cholesky_ex", "A", 1)
    try:
        L = linalg.cholesky(A, upper=upper)
    except linalg.LinAlgError:
        if check_errors:
            raise
        nan = plain(A.device.backend.full(A.shape, math.nan, A.dtype), A.device)
        return CholeskyExResult(nan, _info(A, A.device.backend.not_positive_definite))
    return CholeskyExResult(L, _info(A))


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """torch.linalg.inv_ex: the inverse and ``info`` (0, or the zero pivot of a singular matrix)."""
    tensor_arg(A, "linalg_inv_ex", "A", 1)
    try:
        return InvExResult(linalg.inv(A), _info(A))
    except linalg.LinAlgError:
        if check_errors:
            raise
        nan = plain(A.device.backend.full(A.shape, math.nan, A.dtype), A.device)
        return InvExResult(nan, _info(A, A.device.backend.singular_pivot))


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> SolveExResult:
    """torch.linalg.solve_ex: the solution and ``info`` (as ``inv_ex``'s)."""
    tensor_arg(A, "linalg_solve_ex", "A", 1)
    try:
        return SolveExResult(linalg.solve(A, B, left=left), _info(A))
    except linalg.LinAlgError:
        if check_errors:
            raise
        shape = linalg.solve(A.detach() * 0 + _eye_like(A), B.detach(), left=left).shape
        nan = plain(A.device.backend.full(shape, math.nan, A.dtype), A.device)
        return SolveExResult(nan, _info(A, A.device.backend.singular_pivot))


def _eye_like(A: Tensor) -> Tensor:
    n = A.shape[-1]
    return plain(A.device.asarray(_identity(n), dtype=A.dtype), A.device)


def _identity(n: int) -> list[list[float]]:
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """torch.linalg.tensorinv: the inverse of ``A`` read as a ``prod(shape[:ind]) x prod(shape[ind:])``
    matrix, shaped ``shape[ind:] + shape[:ind]``."""
    tensor_arg(A, "linalg_tensorinv", "A", 1)
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return linalg.inv(A.reshape(math.prod(rows), math.prod(cols))).reshape(*(cols + rows))


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """torch.linalg.tensorsolve: ``X`` with ``tensordot(A, X, X.ndim) == B``; ``dims`` of ``A`` moved
    last first."""
    tensor_arg(A, "linalg_tensorsolve", "A", 1)
    tensor_arg(B, "linalg_tensorsolve", "B", 2)
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = movedim(A, tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))
    rest = A.shape[B.ndim:]
    rows = B.numel()
    if math.prod(rest) != rows:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != "
                           f"{math.prod(A.shape[:B.ndim])}")
    x = linalg.solve(A.reshape(rows, math.prod(rest)), B.reshape(rows))
    return x.reshape(*rest)


def cond(A: Tensor, p: Any = None) -> Tensor:
    """torch.linalg.cond: ``s_max / s_min`` for p None, 2 (``s_min / s_max`` for -2); for the other
    norms ``norm(A, p) * norm(inv(A), p)`` (inf for a singular matrix)."""
    tensor_arg(A, "linalg_cond", "A", 1)
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor A must have at least 2 dimensions.")
    if p is None or p in (2, -2):
        s = linalg.svdvals(A)
        first, last = s[..., 0], s[..., -1]
        return last / first if p == -2 else first / last
    _square_checks(A, "linalg.cond")
    if p not in ("fro", "nuc", math.inf, -math.inf, 1, -1):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    return linalg.matrix_norm(A, p) * linalg.matrix_norm(linalg.inv(A), p)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:
    """torch.linalg.lstsq on full-rank ``A`` ``(..., m, n)``: the least-squares (``m >= n``) or
    minimum-norm (``m < n``) solution of ``A X = B`` (``B`` ``(..., m, k)``), as ``pinv(A) B`` whose
    gradient is torch's for full rank; residuals (``m > n`` and a driver other than gelsy), rank
    and singular values as torch's CPU drivers give them."""
    tensor_arg(A, "linalg_lstsq", "A", 1)
    tensor_arg(B, "linalg_lstsq", "B", 2)
    drivers = ("gels", "gelsy", "gelsd", "gelss")
    if driver is not None and driver not in drivers:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    driver = driver or "gelsy"
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    vector = B.ndim == A.ndim - 1
    if B.ndim < 1 or (not vector and B.ndim < 2):
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if Bm.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    if m >= n:
        At = A.mT
        X = linalg.solve(At @ A, At @ Bm)
    else:
        X = A.mT @ linalg.solve(A @ A.mT, Bm)
    dev = A.device
    batch = tuple(np.broadcast_shapes(A.shape[:-2], Bm.shape[:-2]))
    if m > n and driver != "gelsy":
        resid = A @ X - Bm
        residuals = (resid * resid).sum(-2)
    else:  # none, as torch's: an empty tensor, still part of the graph
        residuals = X.reshape(-1)[:0]
    if driver == "gels":
        rank = plain(dev.backend.zeros((0,), np.dtype(np.int64)), dev)
    else:
        rank = plain(dev.backend.full(batch, min(m, n), np.dtype(np.int64)), dev)
    if driver in ("gelsd", "gelss"):
        singular_values = linalg.svdvals(A.detach())
    else:
        singular_values = plain(dev.backend.zeros((0,), A.dtype), dev)
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, singular_values)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """torch.linalg.householder_product: the first ``n`` columns of ``H_1 ... H_k``, ``H_i = I -
    tau_i v_i v_iᴴ``, ``v_i`` column ``i`` of ``A`` below the diagonal with a 1 on it."""
    tensor_arg(A, "linalg_householder_product", "input", 1)
    tensor_arg(tau, "linalg_householder_product", "tau", 2)
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    k = tau.shape[-1] if tau.ndim else 0
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"torch.linalg.householder_product: Expected tau to have one dimension less than "
                           f"input, but got tau.ndim equal to {tau.ndim} and input.ndim is equal to {A.ndim}")
    if k > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    dev = A.device
    xp = dev.xp
    rows = xp.reshape(dev.backend.arange(m, np.dtype(np.int64)), (-1, 1))
    cols = xp.reshape(dev.backend.arange(n, np.dtype(np.int64)), (1, -1))
    below = plain(rows > cols, dev)
    unit = plain(dev.backend.astype(rows == cols, A.dtype), dev)
    V = where(below, A, 0.0) + unit
    Q = plain(dev.asarray(_identity(m), dtype=A.dtype), dev).expand(*(A.shape[:-2] + (m, m)))
    if k == 0:  # the identity's first n columns, still part of the graph (its gradient is 0)
        return where(plain(dev.backend.zeros((), np.dtype(np.bool_)), dev), A, Q[..., :, :n])
    for i in range(k):
        v = V[..., :, i:i + 1]
        Q = Q - (Q @ v) @ (v.mT * tau[..., i:i + 1].unsqueeze(-1))
    return Q[..., :, :n]


def ormqr(input: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """torch's ``ormqr``: ``input3`` (C) multiplied by Q = H_1 ... H_k, the product of geqrf's reflectors
    (``input``'s columns below the diagonal, a 1 on it) with coefficients ``input2`` (tau): ``Q C``
    (``left``) or ``C Q``, Qᵀ for Q if ``transpose``. Composed of the reflections, applied to C one at
    a time (``H_i X = X - tau_i v_i (v_iᵀ X)``), so every gradient is that of the composition."""
    tensor_arg(input, "ormqr", "input", 1)
    tensor_arg(input2, "ormqr", "input2", 2)
    tensor_arg(input3, "ormqr", "input3", 3)
    if input.ndim < 2:
        raise RuntimeError("torch.ormqr: input must have at least 2 dimensions.")
    if input3.ndim != input.ndim:
        raise RuntimeError(f"torch.ormqr: other.dim() must be equal to input.dim(), but got other.dim() = "
                           f"{input3.ndim} and input.dim() = {input.ndim}")
    if input2.ndim != input.ndim - 1:
        raise RuntimeError(f"torch.ormqr: Expected tau to have one dimension less than input, but got tau.ndim "
                           f"equal to {input2.ndim} and input.ndim is equal to {input.ndim}")
    m, k = input.shape[-2], input2.shape[-1]
    side = input3.shape[-2] if left else input3.shape[-1]
    if side != m:
        dim = -2 if left else -1
        raise RuntimeError(f"torch.ormqr: Expected other.shape[{dim}] to be equal to input.shape[-2] = {m}, but "
                           f"got other.shape[{dim}] = {side}")
    if k > m:
        raise RuntimeError(f"torch.ormqr: input.shape[-2] must be greater than or equal to tau.shape[-1], but got "
                           f"input.shape[-2] = {m} and tau.shape[-1] = {k}")
    dev = input.device
    xp = dev.xp
    rows = xp.reshape(dev.backend.arange(m, np.dtype(np.int64)), (-1, 1))
    cols = xp.reshape(dev.backend.arange(k, np.dtype(np.int64)), (1, -1))
    V = where(plain(rows > cols, dev), input[..., :, :k], 0.0) + plain(dev.backend.astype(rows == cols, input.dtype),
                                                                        dev)
    C = input3 * 1.0 if k == 0 else input3  # the result is a new tensor even with no reflection
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for i in order:
        v = V[..., :, i:i + 1]
        t = input2[..., i:i + 1].unsqueeze(-1)
        C = C - v @ ((v.mT @ C) * t) if left else C - ((C @ v) * t) @ v.mT
    return C


class LowRankResult(NamedTuple):
    """``svd_lowrank``'s and ``pca_lowrank``'s (U, S, V): ``A ≈ U diag(S) Vᴴ``."""

    U: Tensor
    S: Tensor
    V: Tensor


def _approximate_basis(A: Tensor, q: int, niter: int) -> Tensor:
    """torch's ``get_approximate_basis`` (Halko et al. 2009, algorithm 4.4): Q with q orthonormal
    columns spanning A's range, from a Gaussian sketch ``A R`` (R drawn from the default generator,
    as torch's ``randn``) refined by ``niter`` subspace iterations."""
    dev = A.device
    R = plain(dev.asarray(numpy_generator(None, "svd_lowrank").standard_normal((A.shape[-1], q)), dtype=A.dtype), dev)
    Q = linalg.qr(A @ R).Q
    for _ in range(niter):
        Q = linalg.qr(A.mT @ Q).Q
        Q = linalg.qr(A @ Q).Q
    return Q


def _svd_lowrank(A: Tensor, q: int, niter: int) -> LowRankResult:
    m, n = A.shape[-2:]
    if m < n:
        A = A.mT
    Q = _approximate_basis(A, q, niter)
    U, S, Vh = linalg.svd(Q.mT @ A, full_matrices=False)
    U, V = Q @ U, Vh.mT
    return LowRankResult(*((V, S, U) if m < n else (U, S, V)))


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None) -> LowRankResult:
    """torch's ``svd_lowrank`` (Halko et al. 2009, algorithm 5.1): a rank-``q`` SVD of A (of ``A - M``
    with a mean ``M``) from a randomized basis, composed of qr, svd and products as torch's is; the
    sketch is random, so results agree with torch's in shape, and with the true SVD where A has rank q."""
    tensor_arg(A, "svd_lowrank", "A", 1)
    if M is not None:
        A = A - M.broadcast_to(A.shape)
    return _svd_lowrank(A, 6 if q is None else q, 2 if niter is None else niter)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> LowRankResult:
    """torch's ``pca_lowrank``: ``svd_lowrank`` of A centred on its column means (``center``), with
    ``q = min(6, m, n)`` by default."""
    tensor_arg(A, "pca_lowrank", "A", 1)
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A, q, niter)
