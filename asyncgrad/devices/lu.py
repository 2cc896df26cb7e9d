"""LU factorisation with partial pivoting, written once against the Array API (every backend runs it).

Note [LU as LAPACK's getrf gives it]: ``lu_factor`` returns what LAPACK's ``getrf`` (torch's
``linalg.lu_factor_ex`` on the CPU) returns for a batch of (m, n) matrices: the strictly lower part
of L (its unit diagonal implied) and U packed in one (m, n) array; the pivots, 1-based, where row j
was swapped with row ``pivots[j] - 1`` at step j; and ``info``, 0, or the 1-based step whose pivot
was exactly zero (the factorisation then goes on, as getrf's does). Each step j takes as pivot the
first entry of largest magnitude in column j at or below the diagonal (getrf's ``i*amax``, which
keeps the first of equal magnitudes, as ``argmax`` does), swaps it up, divides the column below by
it (not where it is zero: that column is zero already) and subtracts the rank-one update from the
rest. The pivots are the same as LAPACK's; the values agree to rounding (LAPACK's blocked order of
operations differs). The loop is over the min(m, n) steps, each step vectorised over the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_INDEX = np.dtype(np.int64)


def lu_factor(backend: Any, a: Any) -> tuple[Any, Any, Any]:
    """(LU, pivots, info) of a batch of matrices ``a`` (Note [LU as LAPACK's getrf gives it]);
    pivots and info are int32, as torch's."""
    xp = backend.xp
    *batch, m, n = a.shape
    steps = min(m, n)
    rows = backend.arange(m, _INDEX)
    pivots = []
    info = backend.zeros(tuple(batch), _INDEX)
    for j in range(steps):
        p = xp.argmax(xp.abs(a[..., j:, j]), axis=-1) + j
        pivots.append(p)
        a = xp.take_along_axis(a, _swap(xp, rows, j, p)[..., None], axis=-2)
        pivot = a[..., j, j]
        info = xp.where((pivot == 0) & (info == 0), j + 1, info)
        below = a[..., j + 1:, j] / xp.where(pivot == 0, 1, pivot)[..., None]
        rest = a[..., j + 1:, j + 1:] - below[..., :, None] * a[..., j, j + 1:][..., None, :]
        lower = xp.concat([a[..., j + 1:, :j], below[..., :, None], rest], axis=-1)
        a = xp.concat([a[..., :j + 1, :], lower], axis=-2)
    int32 = np.dtype(np.int32)
    if pivots:
        piv = backend.astype(xp.stack(pivots, axis=-1) + 1, int32)
    else:
        piv = backend.zeros(tuple(batch) + (0,), int32)
    return a, piv, backend.astype(info, int32)


def _swap(xp: Any, rows: Any, j: int, p: Any) -> Any:
    """Row positions ``0..m-1`` with ``j`` and ``p`` (one per matrix of the batch) exchanged."""
    p = p[..., None]
    return xp.where(rows == j, p, xp.where(rows == p, j, rows))


def permutation(backend: Any, pivots: Any, m: int) -> Any:
    """The row order ``perm`` that the pivots' swaps make (``(Pᵀ A)[i] = A[perm[i]]``), int64."""
    xp = backend.xp
    rows = backend.arange(m, _INDEX)
    perm = xp.broadcast_to(rows, tuple(pivots.shape[:-1]) + (m,))
    for j in range(pivots.shape[-1]):
        p = backend.astype(pivots[..., j], _INDEX) - 1
        swapped_in = xp.take_along_axis(perm, p[..., None], axis=-1)
        perm = xp.where(rows == j, swapped_in, xp.where(rows == p[..., None], perm[..., j:j + 1], perm))
    return perm


def permutation_matrix(backend: Any, pivots: Any, m: int, dtype: np.dtype) -> Any:
    """P of ``A = P L U``: ``P[r, i] = 1`` where ``perm[i] == r``."""
    xp = backend.xp
    perm = permutation(backend, pivots, m)
    rows = xp.reshape(backend.arange(m, _INDEX), (m, 1))
    return backend.astype(perm[..., None, :] == rows, dtype)
