"""``ag.linalg``: torch.linalg's names for the linear-algebra ops (ops/linalg.py computes them)."""

from asyncgrad.ops.linalg import (
    LinAlgError,
    cholesky,
    det,
    eigh,
    eigvals,
    eigvalsh,
    inv,
    matrix_exp,
    matrix_norm,
    matrix_power,
    multi_dot,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
    vector_norm,
)
from asyncgrad.ops.linalg import linalg_cross as cross
from asyncgrad.ops.linalg import linalg_eig as eig
from asyncgrad.ops.linalg import linalg_norm as norm

__all__ = ["LinAlgError", "cholesky", "cross", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matrix_exp",
           "matrix_norm", "matrix_power", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular",
           "svd", "svdvals", "vector_norm"]

# torch's compositions (ops/linalg_composed.py)
from asyncgrad.ops.linalg_composed import (  # noqa: E402
    cholesky_ex,
    cond,
    diagonal,
    householder_product,
    inv_ex,
    lstsq,
    solve_ex,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)

__all__ += ["cholesky_ex", "cond", "diagonal", "householder_product", "inv_ex", "lstsq", "solve_ex", "tensorinv",
            "tensorsolve", "vander", "vecdot"]

# the LU family (ops/lu.py)
from asyncgrad.ops.lu import lu, lu_factor, lu_factor_ex, lu_solve  # noqa: E402

__all__ += ["lu", "lu_factor", "lu_factor_ex", "lu_solve"]
