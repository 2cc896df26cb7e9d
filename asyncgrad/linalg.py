"""``ag.linalg``: torch.linalg's names for the linear-algebra ops (ops/linalg.py computes them)."""

from asyncgrad.ops.linalg import (
    LinAlgError,
    det,
    inv,
    matrix_norm,
    slogdet,
    solve,
    svdvals,
    vector_norm,
)
from asyncgrad.ops.linalg import linalg_norm as norm

__all__ = ["LinAlgError", "det", "inv", "matrix_norm", "norm", "slogdet", "solve", "svdvals", "vector_norm"]
