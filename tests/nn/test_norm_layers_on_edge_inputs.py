"""torch's own OpInfo samples that the norm functions refused: ``normalize`` with p=0 (the count of
nonzero elements) and ``group_norm`` of an empty batch; values and gradients against torch."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag


def test_normalize_with_p_zero(torch):
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 5))
    x[0, 0, 0, :2] = 0.0
    a, t = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, tout = ag.nn.functional.normalize(a, p=0.0, dim=-1), torch.nn.functional.normalize(t, p=0.0, dim=-1)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=0, atol=0)
    v = np.random.default_rng(1).standard_normal(x.shape)
    (g,) = ag.grad_sync(out, [a], ag.tensor(v))
    (tg,) = torch.autograd.grad(tout, [t], torch.tensor(v))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("shape", [(0, 2), (0, 4, 3)])
def test_group_norm_of_an_empty_batch(torch, shape):
    x = ag.zeros(*shape, dtype=ag.float64, requires_grad=True)
    w, b = ag.ones(shape[1], dtype=ag.float64, requires_grad=True), ag.zeros(shape[1], dtype=ag.float64)
    out = ag.nn.functional.group_norm(x, 2 if shape[1] % 2 == 0 else 1, weight=w, bias=b)
    tout = torch.nn.functional.group_norm(torch.zeros(*shape, dtype=torch.float64), 2 if shape[1] % 2 == 0 else 1,
                                          weight=torch.ones(shape[1], dtype=torch.float64))
    assert tuple(out.shape) == tuple(tout.shape) == shape
    gx, gw = ag.grad_sync(out.sum(), [x, w])
    assert gx.shape == shape and gw.tolist() == [0.0] * shape[1]
