"""Non-reentrant checkpoint hands a saved tensor that needs no grad back as the very object that
was saved, as torch (test_checkpointing_without_reentrant_saved_object_identity); one that
requires grad is recomputed and keeps its gradient correct."""

from __future__ import annotations

import numpy as np

import asyncgrad as ag
from asyncgrad.checkpoint import checkpoint


async def test_saved_object_identity():
    seen = [None]

    class Test(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x

        @staticmethod
        def backward(ctx, g):
            (seen[0],) = ctx.saved_tensors
            return g, None

    a = ag.tensor(1.0, requires_grad=True)
    b = ag.tensor(1.0, requires_grad=False)
    await Test.apply(a, b).backward()
    assert seen[0] is b
    seen[0] = None
    await (await checkpoint(Test.apply, a, b, use_reentrant=False)).backward()
    assert seen[0] is b


async def test_gradients_through_inputs_of_both_kinds():
    x = ag.tensor([0.5, -1.0, 2.0], dtype=ag.float64, requires_grad=True)
    w = ag.tensor([1.5, 2.0, -0.5], dtype=ag.float64)

    def fn(a, b):
        return (a.exp() * b).sin().sum()

    await (await checkpoint(fn, x, w, use_reentrant=False)).backward()
    xs = x.detach().numpy()
    expected = np.cos((np.exp(xs) * w.numpy()).sum() * 0 + np.exp(xs) * w.numpy()) * np.exp(xs) * w.numpy()
    np.testing.assert_allclose(x.grad.numpy(), expected)
