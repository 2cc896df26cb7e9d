"""The LU family: ``linalg.lu_factor(_ex)``, ``linalg.lu``, ``linalg.lu_solve``, ``lu_unpack`` and the
legacy ``torch.lu``/``torch.lu_solve``.

The factorisation is the backend's (``lu_factor``: Note [LU as LAPACK's getrf gives it] in
devices/lu.py), so every device computes it. Each op is one node with torch's name and formula
(derivatives.yaml: ``lu_factor_ex_backward``, ``linalg_lu_backward``, ``lu_unpack_backward``,
``linalg_lu_solve_LU``), written once against ``F``, so second order comes from the same formulas.
A triangular solve in a formula is ``F.solve`` with the triangle (the factors are full rank where
the formulas are defined).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import OpNode, plain, record, same_device
from asyncgrad.ops.linalg import LinAlgError, _const, _decomposition_work, _MultiOutput, _record_outputs, _right_solve
from asyncgrad.tensor import Tensor, scalar_type_name

__all__ = ["lu", "lu_factor", "lu_factor_ex", "lu_legacy", "lu_solve", "lu_solve_legacy", "lu_unpack"]


class LUFactorExResult(NamedTuple):
    """torch's ``linalg_lu_factor_ex`` return type."""

    LU: Tensor
    pivots: Tensor
    info: Tensor


class LUFactorResult(NamedTuple):
    """torch's ``linalg_lu_factor`` return type."""

    LU: Tensor
    pivots: Tensor


class LUResult(NamedTuple):
    """torch's ``linalg_lu`` and ``lu_unpack`` return type: ``A = P L U``."""

    P: Tensor
    L: Tensor
    U: Tensor


# --------------------------------------------------------------------------- the formulas
def _tril(F: Any, X: Any, diagonal: int) -> Any:
    r, c = tuple(X.shape)[-2:]
    return X * _const(F, X, r, c, lambda i, j: j - i <= diagonal)


def _triu(F: Any, X: Any) -> Any:
    r, c = tuple(X.shape)[-2:]
    return X * _const(F, X, r, c, lambda i, j: j >= i)


def _columns(F: Any, X: Any, start: int, stop: int) -> Any:
    return F.index(X, (Ellipsis, slice(None), slice(start, stop)))


def _rows(F: Any, X: Any, start: int, stop: int) -> Any:
    return F.index(X, (Ellipsis, slice(start, stop), slice(None)))


def _unpacked(F: Any, LU: Any) -> tuple[Any, Any]:
    """L (m, k), unit lower, and U (k, n), upper, of a packed LU (m, n)."""
    m, n = tuple(LU.shape)[-2:]
    k = min(m, n)
    L = _tril(F, _columns(F, LU, 0, k), -1) + _const(F, LU, m, k, lambda i, j: i == j)
    return L, _triu(F, _rows(F, LU, 0, k))


def _left_unit_lower_h(F: Any, L: Any, X: Any) -> Any:
    """``L⁻ᴴ X`` (torch's solve_triangular(Lᴴ, X, upper, left, unitriangular))."""
    return F.solve(F.mT(L), X)


def lu_backward(F: Any, gL: Any, gU: Any, P: Any, L: Any, U: Any) -> Any:
    """torch's ``linalg_lu_backward``: A = P L U with L (m, k) and U (k, n); ``P`` None without pivoting.

    Square: ``gA = P L⁻ᴴ (tril(Lᴴ gL, -1) + triu(gU Uᴴ)) U⁻ᴴ``. Wide (m < n, U = [U1 | U2]):
    ``gA = P L⁻ᴴ [(tril(Lᴴ gL - triu(gU) Uᴴ, -1)) U1⁻ᴴ + triu(gU1) | gU2]``. Tall (m > n,
    L = [L1; L2]): ``gA = P [L1⁻ᴴ triu(gU Uᴴ - Lᴴ tril(gL, -1)) + tril(gL1, -1); gL2] U⁻ᴴ``."""
    if gL is None and gU is None:
        return None
    m, n = tuple(L.shape)[-2], tuple(U.shape)[-1]
    k = min(m, n)
    if m == n:
        gA = None if gL is None else _tril(F, F.mT(L) @ gL, -1)
        if gU is not None:
            term = _triu(F, gU @ F.mT(U))
            gA = term if gA is None else gA + term
        gA = _left_unit_lower_h(F, L, _right_solve(F, F.mT(U), gA))
    elif m < n:
        U1 = _columns(F, U, 0, k)
        gA = None if gL is None else F.mT(L) @ gL
        if gU is not None:
            term = _triu(F, gU) @ F.mT(U)
            gA = -term if gA is None else gA - term
        gA = _right_solve(F, F.mT(U1), _tril(F, gA, -1))
        if gU is not None:
            gA = F.cat([gA + _triu(F, _columns(F, gU, 0, k)), _columns(F, gU, k, n)], -1)
        gA = _left_unit_lower_h(F, L, gA)
        if gU is None:
            gA = F.cat([gA, F.zeros_like(_columns(F, U, k, n))], -1)
    else:
        L1 = _rows(F, L, 0, k)
        gA = None if gU is None else gU @ F.mT(U)
        if gL is not None:
            term = F.mT(L) @ _tril(F, gL, -1)
            gA = -term if gA is None else gA - term
        gA = _left_unit_lower_h(F, L1, _triu(F, gA))
        if gL is not None:
            gA = F.cat([gA + _tril(F, _rows(F, gL, 0, k), -1), _rows(F, gL, k, m)], -2)
        gA = _right_solve(F, F.mT(U), gA)
        if gL is None:
            gA = F.cat([gA, F.zeros_like(_rows(F, L, k, m))], -2)
    return gA if P is None else F.constant(P, gA) @ gA


# --------------------------------------------------------------------------- factorisations
def _check_input(A: Tensor, fn: str) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"torch.{fn}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} "
                           "instead")
    if A.dtype.kind != "f":
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{scalar_type_name(A.dtype)}")


def _factor(A: Tensor, pivot: bool, fn: str) -> tuple[Any, Any, Any, Any]:
    """(LU, pivots, info, P) arrays of ``A``."""
    _check_input(A, "lu_factor")
    if not pivot:
        raise RuntimeError(f"{fn}: LU without pivoting is not implemented on the CPU")
    backend = A.device.backend
    LU, pivots, info = backend.lu_factor(A.data)
    return LU, pivots, info, backend.lu_permutation(pivots, A.shape[-2], A.dtype)


def _raise_singular(info: Any, A: Tensor, fn: str) -> None:
    """torch's error of ``check_errors``: the first matrix of the batch whose U has a zero on its diagonal."""
    infos = A.device.backend.to_host(info).reshape(-1).tolist()
    bad = [b for b, i in enumerate(infos) if i > 0]
    if bad:
        batch = f"(Batch element {bad[0]}): " if A.ndim > 2 else ""
        i = infos[bad[0]]  # torch names U[info, info], info being getrf's 1-based step
        raise LinAlgError(f"{fn}: {batch}U[{i},{i}] is zero and using it on lu_solve would result in a division by "
                          "zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) "
                          "or linalg.lu_factor_ex(A, pivot)")


class LinalgLuFactorExBackward0(OpNode):
    """torch's ``lu_factor_ex_backward``: ``linalg_lu_backward`` of the gradient's L part (its first k
    columns) and U part (its first k rows), with P, L, U unpacked from LU."""

    __slots__ = ("P",)
    saves_result = True

    def backward(self, F, g):
        (LU,) = F.unpack(self)
        m, n = tuple(LU.shape)[-2:]
        k = min(m, n)
        L, U = _unpacked(F, LU)
        return (lu_backward(F, _columns(F, g, 0, k), _rows(F, g, 0, k), self.P, L, U),)


def _lu_factor_ex(A: Tensor, pivot: bool, check_errors: bool, fn: str) -> LUFactorExResult:
    LU, pivots, info, P = _factor(A, pivot, fn)
    if check_errors:
        _raise_singular(info, A, fn)
    dev = A.device
    out = record(LinalgLuFactorExBackward0, (A,), LU, dev, P, work=_decomposition_work(A))
    return LUFactorExResult(out, plain(pivots, dev), plain(info, dev))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:
    """torch's ``linalg.lu_factor_ex``: (LU, pivots, info) as LAPACK's getrf; ``info`` > 0 names a zero
    pivot (raised with ``check_errors``)."""
    tensor_arg(A, "linalg_lu_factor_ex", "A", 1)
    return _lu_factor_ex(A, bool(pivot), bool(check_errors), "torch.linalg.lu_factor_ex")


def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:
    """torch's ``linalg.lu_factor``: (LU, pivots); a singular matrix is refused, as torch refuses it."""
    tensor_arg(A, "linalg_lu_factor", "A", 1)
    LU, pivots, _ = _lu_factor_ex(A, bool(pivot), True, "torch.linalg.lu_factor")
    return LUFactorResult(LU, pivots)


def lu_legacy(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple[Tensor, ...]:
    """torch's ``lu`` (and ``Tensor.lu``): ``linalg.lu_factor``'s (LU, pivots), with ``get_infos`` the
    infos too (and then no refusal of a singular matrix)."""
    tensor_arg(A, "lu", "A", 1)
    LU, pivots, info = _lu_factor_ex(A, bool(pivot), not get_infos, "torch.linalg.lu_factor_ex")
    return (LU, pivots, info) if get_infos else (LU, pivots)


class LinalgLuBackward0(_MultiOutput):
    """A = P L U: torch's ``linalg_lu_backward`` (``lu_backward``); P is a constant output."""

    __slots__ = ("P",)

    def backward(self, F, grads):
        gL, gU = (tuple(grads) + (None, None))[:2]
        L, U = F.unpack(self)
        return (lu_backward(F, gL, gU, self.P, L, U),)


def lu(A: Tensor, *, pivot: bool = True) -> LUResult:
    """torch's ``linalg.lu``: (P, L, U) with ``A = P L U``, L (m, k) unit lower, U (k, n) upper."""
    tensor_arg(A, "linalg_lu", "A", 1)
    LU, _, _, P = _factor(A, bool(pivot), "linalg.lu")
    L, U = _unpacked_arrays(A.device.backend, LU)
    L, U = _record_outputs(LinalgLuBackward0, A, (L, U), (0, 1), P, work=_decomposition_work(A))
    return LUResult(plain(P, A.device), L, U)


def _unpacked_arrays(backend: Any, LU: Any) -> tuple[Any, Any]:
    m, n = LU.shape[-2:]
    k = min(m, n)
    xp = backend.xp
    rows = xp.reshape(backend.arange(m, np.dtype(np.int64)), (m, 1))
    cols = xp.reshape(backend.arange(n, np.dtype(np.int64)), (1, n))
    zero = xp.zeros_like(LU)
    L = xp.where(rows > cols, LU, xp.where(rows == cols, xp.ones_like(LU), zero))[..., :, :k]
    U = xp.where(rows <= cols, LU, zero)[..., :k, :]
    return L, U


class LuUnpackBackward0(_MultiOutput):
    """torch's ``lu_unpack_backward``: L's gradient below the diagonal and U's on and above it, laid
    where LU (m, n) holds them: L (m, k) in its first k columns, U (k, n) in its first k rows."""

    __slots__ = ("m", "n")

    def backward(self, F, grads):
        gL, gU = (tuple(grads) + (None, None))[:2]
        m, n = self.m, self.n
        k = min(m, n)
        gA = None
        if gL is not None:  # tril(gL, -1) placed in the first k columns: times the (k, n) identity
            gA = _tril(F, gL, -1) @ _const(F, gL, k, n, lambda i, j: i == j)
        if gU is not None:  # triu(gU) placed in the first k rows: the (m, k) identity times it
            upper = _const(F, gU, m, k, lambda i, j: i == j) @ _triu(F, gU)
            gA = upper if gA is None else gA + upper
        return (gA,)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True) -> LUResult:
    """torch's ``lu_unpack``: (P, L, U) from ``linalg.lu_factor``'s (LU, pivots); a part not unpacked
    is an empty tensor."""
    tensor_arg(LU_data, "lu_unpack", "LU_data", 1)
    tensor_arg(LU_pivots, "lu_unpack", "LU_pivots", 2)
    if LU_data.ndim < 2:
        raise RuntimeError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    if LU_pivots.dtype != np.dtype(np.int32):
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. "
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    dev = LU_data.device
    backend = dev.backend
    empty = backend.zeros((0,), LU_data.dtype)
    m = LU_data.shape[-2]
    P = backend.lu_permutation(LU_pivots.data, m, LU_data.dtype) if unpack_pivots else empty
    if not unpack_data:
        return LUResult(plain(P, dev), plain(empty, dev), plain(backend.zeros((0,), LU_data.dtype), dev))
    L, U = _unpacked_arrays(backend, LU_data.data)
    L, U = _record_outputs(LuUnpackBackward0, LU_data, (L, U), (), m, LU_data.shape[-1], work=int(LU_data.data.size))
    return LUResult(plain(P, dev), L, U)


# --------------------------------------------------------------------------- solves
class LinalgLuSolveBackward0(OpNode):
    """X solves ``op(A) X = B`` (``left``) or ``X op(A) = B``, A = P L U, op the transpose if ``adjoint``.
    B's gradient is the solve with the other ``adjoint`` (torch's formula); LU's is torch's
    ``linalg_lu_solve_LU``, the gradient ``gA = -op(A)⁻ᵀ g Xᵀ`` (left; ``-Xᵀ g op(A)⁻ᵀ`` right)
    pulled back to L (``tril(Pᵀ gA Uᵀ, -1)``) and U (``triu(Lᵀ Pᵀ gA)``)."""

    __slots__ = ("P", "left", "adjoint", "lu_shape", "b_shape")
    saves_result = True

    def backward(self, F, g):
        LU, X = F.unpack(self)
        L, U = _unpacked(F, LU)
        P = F.constant(self.P, LU)
        A = P @ (L @ U)
        M = F.mT(A) if self.adjoint else A
        if self.left:
            gB = F.solve(F.mT(M), g)
        else:
            gB = _right_solve(F, F.mT(M), g)
        gLU = None
        if self.needs(0):
            gM = -(gB @ F.mT(X)) if self.left else -(F.mT(X) @ gB)
            gA = F.mT(gM) if self.adjoint else gM
            PgA = F.mT(P) @ gA
            gLU = F.sum_to(_tril(F, PgA @ F.mT(U), -1) + _triu(F, F.mT(L) @ PgA), self.lu_shape)
        return gLU, (F.sum_to(gB, self.b_shape) if self.needs(1) else None)


def _lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, left: bool, adjoint: bool, fn: str) -> Tensor:
    if LU.ndim < 2:
        raise RuntimeError(f"{fn}: Expected LU to have at least 2 dimensions, but it has {LU.ndim} dimensions instead")
    if LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"{fn}: Expected LU to be square, but got a matrix of shape "
                           f"({LU.shape[-2]}, {LU.shape[-1]}).")
    if B.ndim < 2:
        raise RuntimeError(f"{fn}: Expected B to have at least 2 dimensions, but it has {B.ndim} dimensions instead")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"{fn}: Expected LU and B to have the same dtype, but found LU of type "
                           f"{scalar_type_name(LU.dtype)} and B of type {scalar_type_name(B.dtype)} instead")
    same_device(LU, B)
    same_device(LU, pivots)
    dev = LU.device
    backend, xp = dev.backend, dev.xp
    P = backend.lu_permutation(pivots.data, n, LU.dtype)
    L, U = _unpacked_arrays(backend, LU.data)
    A = P @ (L @ U)
    M = xp.matrix_transpose(A) if adjoint else A
    b = B.data
    if left:
        X = backend.solve(M, b)
    else:
        X = xp.matrix_transpose(backend.solve(xp.matrix_transpose(M), xp.matrix_transpose(b)))
    return record(LinalgLuSolveBackward0, (LU, B), X, dev, P, bool(left), bool(adjoint), tuple(LU.shape),
                  tuple(B.shape), saved=(LU,), work=_decomposition_work(LU))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """torch's ``linalg.lu_solve``: X with ``A X = B`` (``left``) or ``X A = B``, A given by
    ``linalg.lu_factor``'s (LU, pivots); ``adjoint`` solves with Aᴴ."""
    tensor_arg(LU, "linalg_lu_solve", "LU", 1)
    tensor_arg(pivots, "linalg_lu_solve", "pivots", 2)
    tensor_arg(B, "linalg_lu_solve", "B", 3)
    return _lu_solve(LU, pivots, B, bool(left), bool(adjoint), "linalg.lu_solve")


def lu_solve_legacy(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch's ``lu_solve`` (and ``Tensor.lu_solve``): ``linalg.lu_solve(LU_data, LU_pivots, b)``."""
    tensor_arg(b, "lu_solve", "input", 1)
    tensor_arg(LU_data, "lu_solve", "LU_data", 2)
    tensor_arg(LU_pivots, "lu_solve", "LU_pivots", 3)
    return _lu_solve(LU_data, LU_pivots, b, True, False, "linalg.lu_solve")
