"""linear over inputs of any rank (its batch dims folded into one matrix for BLAS): values and
gradients equal torch's in float64, for contiguous and transposed inputs, empty batches, 1-D inputs,
with and without a bias, on ``cpu`` and ``sim:0``."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {  # input shape, out features, bias, transpose the input's first two dims first
    "3d": ((4, 5, 6), 3, True, False),
    "4d_no_bias": ((2, 3, 4, 6), 5, False, False),
    "transposed": ((5, 4, 6), 3, True, True),
    "empty_batch": ((2, 0, 6), 3, True, False),
    "1d": ((6,), 4, True, False),
}


@pytest.mark.parametrize("case", CASES)
async def test_linear_matches_torch(case, op_device):
    torch = pytest.importorskip("torch")
    shape, out_features, with_bias, transpose = CASES[case]
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((out_features, shape[-1]))
    b = rng.standard_normal(out_features)
    g = rng.standard_normal(((shape[1], shape[0]) + shape[2:-1] if transpose else shape[:-1]) + (out_features,))
    xa, wa, ba = (ag.tensor(a, device=op_device, requires_grad=True) for a in (x, w, b))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ia, it = (xa.transpose(0, 1), xt.transpose(0, 1)) if transpose else (xa, xt)
    ya = ag.nn.functional.linear(ia, wa, ba if with_bias else None)
    yt = torch.nn.functional.linear(it, wt, bt if with_bias else None)
    np.testing.assert_allclose(ya.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    await ya.backward(ag.tensor(g, device=op_device))
    yt.backward(torch.tensor(g))
    for a, t in ((xa, xt), (wa, wt)) + (((ba, bt),) if with_bias else ()):
        np.testing.assert_allclose(a.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)

