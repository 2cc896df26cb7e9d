"""The number ops' own ``apply`` (Note [Number ops apply their formula] in ops/elementwise.py):
the same gradients as their ``backward`` formula, first and second order, and torch's refusal of a
second pass through a freed graph."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.ops.elementwise import AddNumberBackward, MulNumberBackward, SubNumberBackward

START = np.array([0.3, -1.2, 2.5])


def f(lib_tensor):
    return ((lib_tensor * 1.5 + 0.25) * lib_tensor - 0.5) * -2.0


async def test_first_and_second_order_match_torch(torch):
    x = ag.tensor(START, requires_grad=True)
    y = f(x)
    assert {type(y.grad_fn), type(y.grad_fn.next_functions[0][0])} == {MulNumberBackward, SubNumberBackward}
    (g,) = await ag.grad(y.sum(), x, create_graph=True)
    (gg,) = await ag.grad((g * g).sum(), x)
    xt = torch.tensor(START, requires_grad=True)
    (gt,) = torch.autograd.grad(f(xt).sum(), xt, create_graph=True)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-13)


async def test_gradient_matches_finite_differences():
    x = ag.tensor(START, requires_grad=True)
    await f(x).sum().backward()
    eps = 1e-6
    fd = [(f(START + eps * e).sum() - f(START - eps * e).sum()) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-7)


async def test_add_number_apply_passes_the_gradient_through():
    x = ag.tensor(START, requires_grad=True)
    y = x + 3.0
    assert type(y.grad_fn) is AddNumberBackward
    await y.backward(ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64))
    assert x.grad.tolist() == [1.0, 2.0, 3.0]


async def test_mul_number_refuses_a_second_backward_as_torch(torch):
    x = ag.tensor(START, requires_grad=True)
    y = (x * 2.0).sum()
    await y.backward()
    with pytest.raises(RuntimeError) as got:
        await y.backward()
    xt = torch.tensor(START, requires_grad=True)
    yt = (xt * 2.0).sum()
    yt.backward()
    with pytest.raises(RuntimeError) as expected:
        yt.backward()
    assert str(got.value) == str(expected.value)
