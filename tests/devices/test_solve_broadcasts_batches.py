"""``ArrayBackend.solve`` broadcasts the batch dims itself: numpy's ``linalg.solve`` broadcasts them,
CuPy's refuses ``a`` of batch (3,) with ``b`` of batch (2, 1, 3) ("a must have (..., M, M) shape and b
must have (..., M, K)"), which failed cholesky_solve's broadcast cases on cuda:0. A namespace as strict
as CuPy's shows it here without a GPU."""

from __future__ import annotations

import types

import numpy as np
import pytest

from asyncgrad.devices.backend import ArrayBackend


def _equal_batches_only(a, b):
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError("a must have (..., M, M) shape and b must have (..., M, K) for multidimensional b")
    return np.linalg.solve(a, b)


class _StrictSolve(ArrayBackend):
    xp = types.SimpleNamespace(broadcast_to=np.broadcast_to, linalg=types.SimpleNamespace(solve=_equal_batches_only))


@pytest.mark.parametrize("a_batch, b_batch", [((3,), (2, 1, 3)), ((), (4,)), ((2, 1), (3,)), ((0,), ())])
def test_solve_broadcasts_batch_dims_for_a_strict_namespace(a_batch, b_batch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_batch + (3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(b_batch + (3, 2))
    np.testing.assert_allclose(_StrictSolve().solve(a, b), np.linalg.solve(a, b), rtol=1e-12)
