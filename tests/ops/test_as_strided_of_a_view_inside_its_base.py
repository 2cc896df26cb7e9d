"""as_strided of a leaf that is a view inside a larger base (torch's ``base[5:15].requires_grad_()``):
the storage offset and strides address the base's storage, around the view too; values and the
view's gradient (zero where the result reads outside it) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

CASES = [((2, 2), (1, 2), None), ((2, 2), (1, 2), 0), ((2, 2), (1, 2), 10), ((3,), (4,), 2), ((2, 3), (0, 3), 7)]


@pytest.mark.parametrize("size,stride,offset", CASES)
async def test_as_strided_reads_the_base_around_the_view(size, stride, offset, torch):
    base = np.arange(20.0) * 1.5 - 4
    view = ag.tensor(base)[5:15].requires_grad_()
    t_view = torch.tensor(base)[5:15].requires_grad_()
    assert view.is_leaf and view._base is not None
    kwargs = {} if offset is None else {"storage_offset": offset}
    out = ag.as_strided(view, size, stride, **kwargs)
    t_out = torch.as_strided(t_view, size, stride, **kwargs)
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    cotangent = np.random.default_rng(len(size) + (offset or 0)).standard_normal(size)
    (g,) = await ag.grad(out, [view], ag.tensor(cotangent))
    (t_g,) = torch.autograd.grad(t_out, [t_view], torch.tensor(cotangent))
    np.testing.assert_allclose(g.numpy(), t_g.numpy(), rtol=1e-14, atol=0)
