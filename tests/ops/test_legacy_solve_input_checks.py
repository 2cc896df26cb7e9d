"""Review fix: the legacy triangular_solve and cholesky_solve check their inputs in torch's order
and words (they used linalg.solve_triangular's)."""

from __future__ import annotations

import pytest
from helpers import check_raises

import asyncgrad as ag

CASES = [  # A's shape, b's shape, A's dtype, b's dtype, the exception, torch's words
    ((3,), (3, 2), "float64", "float64", RuntimeError, "{A_rank}1 dimensions"),
    ((3, 3), (3,), "float64", "float64", RuntimeError, "{b_rank}1 dimensions"),
    ((2, 3), (3,), "float64", "float64", RuntimeError, "{b_rank}1 dimensions"),
    ((2, 3), (3, 2), "int64", "float64", RuntimeError,
     "Expected b and A to have the same dtype, but found b of type Double and A of type Long instead."),
    ((3, 3), (3, 2), "float64", "float32", RuntimeError,
     "Expected b and A to have the same dtype, but found b of type Float and A of type Double instead."),
    ((2, 3), (2, 2), "float64", "float64", RuntimeError, "A must be batches of square matrices, but they are 2 by 3"),
    ((3, 3), (2, 2), "float64", "float64", RuntimeError,
     "Incompatible matrix sizes for {fn}: each A matrix is 3 by 3 but each b matrix is 2 by 2"),
    ((3, 3), (3, 2), "int64", "int64", NotImplementedError, "\"{fn}_cpu\" not implemented for 'Long'"),
]
WORDS = {
    "cholesky_solve": ("b should have at least 2 dimensions, but has ",
                       "u should have at least 2 dimensions, but has "),
    "triangular_solve": ("torch.triangular_solve: Expected b to have at least 2 dimensions, but it has ",
                         "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has "),
}


@pytest.mark.parametrize("fn", sorted(WORDS))
@pytest.mark.parametrize("a_shape, b_shape, a_dtype, b_dtype, exc, words", CASES)
def test_legacy_solve_errors_are_torchs(fn, a_shape, b_shape, a_dtype, b_dtype, exc, words):
    b_rank, A_rank = WORDS[fn]
    message = words.format(fn=fn, b_rank=b_rank, A_rank=A_rank)

    def call(lib):
        A = lib.ones(*a_shape, dtype=getattr(lib, a_dtype))
        b = lib.ones(*b_shape, dtype=getattr(lib, b_dtype))
        return getattr(lib, fn)(b, A)

    check_raises(call, exc, message.replace("(", r"\(").replace(")", r"\)"))


def test_cdist_refuses_an_unknown_compute_mode():
    check_raises(lambda lib: lib.cdist(lib.ones(3, 2), lib.ones(3, 2), compute_mode="bad"), ValueError,
                 "bad is not a valid value for compute_mode")
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):

        assert ag.cdist(ag.ones(3, 2), ag.ones(1, 2), compute_mode=mode).tolist() == [[0.0]] * 3


def test_matrix_power_takes_an_int():
    check_raises(lambda lib: lib.linalg.matrix_power(lib.ones(2, 2), 2.0), TypeError,
                 r"linalg_matrix_power\(\): argument 'n' \(position 2\) must be int, not float")
