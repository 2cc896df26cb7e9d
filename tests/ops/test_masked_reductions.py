"""``ag.masked`` (torch.masked's reductions and normalisations) against finite differences and
PyTorch on ``cpu`` and ``sim:0``: full and broadcast masks, no mask, dims forms, keepdim, fully
masked-out slices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check_gradgrad, check_op

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

RNG = np.random.default_rng(7)
FULL = RNG.uniform(size=(3, 4)) > 0.4
FULL[:2] = True  # two kept elements in every column: var and std stay finite
ROW = np.array([True, False, True, True])
MASKS = {"full": FULL, "broadcast": ROW, "none": None}

REDUCTIONS = ["sum", "prod", "amax", "amin", "mean", "norm", "var", "std", "logsumexp"]


def _call(lib, name, x, mask, **kw):
    m = None if mask is None else lib.tensor(mask)
    return getattr(lib.masked, name)(x, mask=m, **kw)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dim, keepdim", [(1, False), ((0, 1), True), (None, False), (-2, True)])
async def test_reductions(name, mask, dim, keepdim):
    m = MASKS[mask]
    # amax/amin have ties-free kinks only, but the broadcast mask drops a whole column: mean, var and
    # std are NaN there (logsumexp -inf), where finite differences cannot say anything (torch's NaNs are compared)
    fd = name not in ("amax", "amin") and not (mask == "broadcast" and name in ("mean", "var", "std", "logsumexp"))
    await check_op(lambda lib, x: _call(lib, name, x, m, dim=dim, keepdim=keepdim), (3, 4), fd=fd)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("mask", MASKS)
async def test_scans_and_normalisations(name, mask):
    m = MASKS[mask]
    if name in ("log_softmax",) and m is not None:  # -inf outputs where masked out: compare values only
        kept = np.broadcast_to(m, (3, 4)).copy()
        await check_op(lambda lib, x: lib.where(lib.tensor(kept), _call(lib, name, x, m, dim=1), 0.0), (3, 4))
        return
    await check_op(lambda lib, x: _call(lib, name, x, m, dim=1), (3, 4))


@pytest.mark.parametrize("mask", MASKS)
async def test_median_normalize_logaddexp(mask):
    m = MASKS[mask]
    await check_op(lambda lib, x: _call(lib, "median", x, m, dim=1), (3, 4))
    await check_op(lambda lib, x: _call(lib, "normalize", x, m, ord=2.0, dim=1), (3, 4))
    await check_op(lambda lib, x: _call(lib, "normalize", x, m, ord=math.inf, dim=0), (3, 4), fd=False)
    await check_op(lambda lib, a, b: lib.masked.logaddexp(
        a, b, input_mask=None if m is None else lib.tensor(m), other_mask=lib.tensor(FULL)), (3, 4), (3, 4),
        fd=False)  # -inf where both masks drop an element: torch's values and gradients carry the check


async def test_var_corrections_and_second_order():
    await check_op(lambda lib, x: lib.masked.var(x, 1, unbiased=False, mask=lib.tensor(FULL)), (3, 4))
    await check_op(lambda lib, x: lib.masked.std(x, 0, correction=2, keepdim=True, mask=lib.tensor(ROW)), (3, 4),
                   fd=False)  # NaN in the column the mask drops: torch carries the check
    await check_gradgrad(lambda lib, x: lib.masked.var(x, 1, mask=lib.tensor(FULL)), (3, 4))
    await check_gradgrad(lambda lib, x: lib.masked.softmax(x, 0, mask=lib.tensor(FULL)), (3, 4))
