"""linalg.qr and qr of wide matrices (more columns than rows), which torch differentiates by
splitting A = [X | Y]: gradients of Q and R against torch and finite differences, first and second order."""

from __future__ import annotations

import pytest
from helpers import check_gradgrad, check_op


def _both(q, r):
    return q * 2.0 @ r  # uses Q and R together: both gradients reach A


CASES = {
    "reduced": (lambda lib, a: _both(*lib.linalg.qr(a)), [(2, 5)]),
    "complete batched": (lambda lib, a: _both(*lib.linalg.qr(a, mode="complete")), [(3, 3, 4)]),
    "R only": (lambda lib, a: lib.linalg.qr(a)[1], [(3, 4)]),
    "Q only": (lambda lib, a: lib.linalg.qr(a)[0], [(2, 3)]),
    "legacy qr": (lambda lib, a: _both(*a.qr()), [(2, 4)]),
}


@pytest.mark.filterwarnings("ignore:torch.qr is deprecated:UserWarning")  # the oracle's legacy qr
@pytest.mark.parametrize("case", list(CASES))
async def test_wide_qr_gradients(case):
    fn, inputs = CASES[case]
    await check_op(fn, *inputs, torch_name=False, rtol=1e-9, atol=1e-12)


async def test_wide_qr_second_order():
    await check_gradgrad(CASES["reduced"][0], (2, 4), fd_rtol=1e-4, rtol=1e-8, atol=1e-10)
