"""dropout's mask (``_keep`` in ops/dropout.py): each element kept with probability ``1 - p`` (a
binomial count within five standard deviations), kept elements scaled by ``1 / (1 - p)``, the
gradient the same scale, the same mask again after ``ag.manual_seed``, and odd sizes drawn whole."""

from __future__ import annotations

import math

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.ops.dropout import _keep


@pytest.mark.parametrize("p", [0.01, 0.1, 0.5, 0.9, 0.999])
def test_keep_fraction_is_one_minus_p(p):
    ag.manual_seed(3)
    n = 400_001  # odd: the last element takes half of a 64-bit word
    keep = _keep((n,), p)
    assert keep.shape == (n,) and keep.dtype == np.bool_
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(int(keep.sum()) - n * (1 - p)) < 5 * sigma


async def test_dropout_scales_kept_elements_and_gradient():
    ag.manual_seed(0)
    x = ag.tensor(np.random.default_rng(0).uniform(1.0, 2.0, (7, 33)), dtype=ag.float32, requires_grad=True)
    y = ag.nn.functional.dropout(x, p=0.25)
    (g,) = await ag.grad(y.sum(), [x])
    scale = g.numpy()
    assert set(np.unique(scale)) == {np.float32(0.0), np.float32(1 / 0.75)}
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() * scale, rtol=1e-6)
    ag.manual_seed(0)
    again = ag.nn.functional.dropout(x, p=0.25)
    np.testing.assert_array_equal(again.detach().numpy(), y.detach().numpy())


def test_extreme_probabilities():
    x = ag.ones(1000)
    assert float(ag.nn.functional.dropout(x, p=1.0).sum().item()) == 0.0
    assert ag.nn.functional.dropout(x, p=0.0) is x
    assert bool((ag.nn.functional.dropout(x, p=1e-12) == 1.0).all().item())
