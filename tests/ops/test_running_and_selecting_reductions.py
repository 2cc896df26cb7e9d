"""cummax, cummin, aminmax, mode and nanmedian: values, indices (torch's choice among ties) and
gradients against torch and finite differences, on cpu and sim:0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

TIES = np.array([[3.0, 1.0, 1.0, 3.0, 2.0], [2.0, 2.0, 5.0, 5.0, 0.5], [1.0, 4.0, 4.0, 1.0, 4.0]])

CASES = {
    "cummax": (lambda lib, x: lib.cummax(x, 1)[0], [(3, 5)], "CummaxBackward0"),
    "cummax dim=-2": (lambda lib, x: x.cummax(-2).values, [(4, 2, 3)], "CummaxBackward0"),
    "cummin": (lambda lib, x: lib.cummin(x, 0).values, [(5, 2)], "CumminBackward0"),
    "cummin 0-d": (lambda lib, x: lib.cummin(x, 0)[0], [()], "CumminBackward0"),
    "aminmax min": (lambda lib, x: lib.aminmax(x).min, [(3, 4)], "AminmaxBackward0"),
    "aminmax dim": (lambda lib, x: _both(lib.aminmax(x, dim=1, keepdim=True)), [(3, 4)], "AddBackward0"),
    "aminmax ties": (lambda lib, x: _both(lib.aminmax(x, dim=-1)), [TIES], "AddBackward0"),
    "mode": (lambda lib, x: lib.mode(x.round()).values, [(3, 6)], "ModeBackward0"),
    "mode ties": (lambda lib, x: lib.mode(x, 0, keepdim=True)[0], [TIES.T.copy()], "ModeBackward0"),
    "nanmedian": (lambda lib, x: lib.nanmedian(x), [(3, 5)], "NanmedianBackward0"),
    "nanmedian dim": (lambda lib, x: lib.nanmedian(x, 1)[0], [(3, 4)], "NanmedianBackward1"),
}


def _both(result):
    return result[0] + result[1] * 2


@pytest.mark.parametrize("case", list(CASES))
async def test_values_and_gradients(case):
    fn, inputs, name = CASES[case]
    # ties, NaNs and rounding make finite differences meaningless: torch carries the check there
    smooth = not isinstance(inputs[0], np.ndarray) and "mode" not in case
    await check_op(fn, *inputs, name=name, fd=smooth)


@pytest.mark.parametrize("case", ["cummax", "aminmax dim", "nanmedian dim"])
async def test_second_order(case):
    fn, inputs, _ = CASES[case]
    await check_gradgrad(fn, *inputs)


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.cummax(x, 1), lambda lib, x: lib.cummin(x, 1), lambda lib, x: lib.mode(x),
    lambda lib, x: lib.mode(x, 0), lambda lib, x: lib.nanmedian(x, 1), lambda lib, x: lib.aminmax(x, dim=0),
])
def test_indices_and_values_match_torch(torch, fn):
    ours, theirs = fn(AG, ag_tensor(TIES)), fn(torch, torch.tensor(TIES))
    for a, t in zip(ours, theirs):
        assert_close(a, t, 0, 0, "values and indices")


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.cummax(x, 1), lambda lib, x: lib.cummin(x, 1), lambda lib, x: lib.nanmedian(x, 1),
    lambda lib, x: lib.aminmax(x, dim=1),
])
def test_nans_as_torch_takes_them(torch, fn):
    x = np.array([[math.nan, 1.0, math.nan, 0.0, 2.0], [1.0, math.nan, 3.0, 2.0, 0.5]])
    a, t = ag_tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = fn(AG, a), fn(torch, t)
    for o, r in zip(ours, theirs):
        assert_close(o, r, 0, 0, "values and indices")
    v = np.arange(1.0, 1.0 + ours[0].numel()).reshape(tuple(ours[0].shape))
    (g,) = ag.grad_sync(ours[0], [a], ag_tensor(v))
    (tg,) = torch.autograd.grad(theirs[0], [t], torch.tensor(v))
    assert_close(g, tg, 0, 0, "gradient")


def test_running_extremes_keep_a_nan(torch):
    x = np.array([1.0, math.nan, 3.0, 0.0])
    for name in ("cummax", "cummin"):
        ours, theirs = getattr(ag, name)(ag_tensor(x), 0), getattr(torch, name)(torch.tensor(x), 0)
        assert_close(ours.values, theirs.values, 0, 0, name)
        assert ours.indices.tolist() == theirs.indices.tolist()


def test_empty_and_errors():
    assert ag.cummax(ag.zeros(0, 3), 0).values.shape == (0, 3)
    assert math.isnan(ag.nanmedian(ag.zeros(0)).item())
    check_raises(lambda lib: lib.mode(lib.zeros(2, 0), 1), IndexError,
                 r"mode\(\): Expected reduction dim 1 to have non-zero size.")
    check_raises(lambda lib: lib.aminmax(lib.zeros(0)), RuntimeError, "aminmax\\(\\): cannot compute aminmax over")
