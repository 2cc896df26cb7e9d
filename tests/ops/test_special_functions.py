"""torch.special's erfcx, i0e, i1, i1e, ndtr, ndtri, log_ndtr, entr and xlog1py against finite
differences and PyTorch on ``cpu`` and ``sim:0``: values over their whole range (tails, signs,
infinities, NaN), first and second order, broadcast and number operands, integer promotion."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICE, check_gradgrad, check_op, has_torch

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

WIDE = np.concatenate([np.linspace(-40, 40, 161), [-1e-300, 0.0, 1e-8, 29.99, 30.0, 30.01, 200.0, 700.0, -700.0]])
SPECIAL = ["erfcx", "i0e", "i1", "i1e", "ndtr", "log_ndtr"]


@pytest.mark.parametrize("name", SPECIAL + ["entr", "ndtri"])
def test_values_match_torch_over_the_range(name):
    if not has_torch():
        pytest.skip("compares with torch")
    import torch

    x = WIDE if name not in ("entr", "ndtri") else np.concatenate([WIDE, np.linspace(0, 1, 101), [1e-300]])
    x = np.concatenate([x, [np.inf, -np.inf, np.nan]])
    ours = getattr(ag.special, name)(ag.tensor(x, device=DEVICE[0])).cpu().numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-13, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", SPECIAL)
async def test_gradients(name):
    x = np.array([[-1.5, -0.7, 0.3], [1.2, 4.0, 12.0]])
    await check_op(lambda lib, t: getattr(lib.special, name)(t), x, fd_rtol=1e-5)


@pytest.mark.parametrize("name", ["erfcx", "i0e", "i1", "i1e", "log_ndtr"])
async def test_second_order(name):
    await check_gradgrad(lambda lib, t: getattr(lib.special, name)(t), np.array([-2.5, -0.4, 0.6, 3.0]))


async def test_ndtri_and_entr():
    p = np.array([0.01, 0.2, 0.5, 0.9, 0.999])
    await check_op(lambda lib, t: lib.special.ndtri(t), p, name="SpecialNdtriBackward0")
    await check_gradgrad(lambda lib, t: lib.special.ndtri(t), p)
    await check_op(lambda lib, t: lib.special.entr(t), p, name="SpecialEntrBackward0")
    await check_op(lambda lib, t: lib.special.ndtr(t), (2, 3))


@pytest.mark.parametrize("name", ["i1", "i1e"])
async def test_i1_and_i1e_at_zero_take_the_limit(name):
    await check_op(lambda lib, t: getattr(lib.special, name)(t), np.array([0.0, 0.5]), fd=False)


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 1), (3,)), ((), (4,))])
async def test_xlog1py_broadcast(shapes):
    await check_op(lambda lib, x, y: lib.special.xlog1py(x, y), *shapes, low=-0.5, high=2.0,
                   name="SpecialXlog1PyBackward0", torch_name=False)


async def test_xlog1py_zero_and_numbers():
    x = np.array([0.0, 0.0, 1.5, -2.0])
    y = np.array([-1.5, 0.5, 2.0, 3.0])
    await check_op(lambda lib, a, b: lib.special.xlog1py(a, b), x, y, fd=False, torch_name=False)
    await check_op(lambda lib, b: lib.special.xlog1py(2.0, b), np.array([0.5, 3.0]))
    await check_op(lambda lib, a: lib.special.xlog1py(a, 0.25), np.array([0.0, 3.0]))


def test_integers_compute_in_the_default_float_dtype():
    x = ag.tensor([0, 1, 2], device=DEVICE[0])
    for name in SPECIAL + ["entr", "ndtri"]:
        assert getattr(ag.special, name)(x).dtype == ag.get_default_dtype()


def test_xlog1py_keeps_nan():
    x = ag.tensor([0.0, 0.0], device=DEVICE[0])
    y = ag.tensor([np.nan, 1.0], device=DEVICE[0])
    out = ag.special.xlog1py(x, y).cpu().numpy()
    assert np.isnan(out[0]) and out[1] == 0.0
