"""What a finished backward leaves behind: nothing that holds its graph (Note [A server's context
is emptied as it ends] in engine/worker.py). Checked with the cyclic collector off, so that only
reference counting frees things, as it does between two collections of a real program."""

from __future__ import annotations

import gc
import weakref

import pytest

import asyncgrad as ag


@pytest.fixture
def no_collector():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def test_a_finished_backward_frees_its_graph_and_leaf_by_reference_counting(no_collector):
    x = ag.randn(3, requires_grad=True)
    y = (x * 2).sum()
    await y.backward()
    node, leaf, grad = weakref.ref(y.grad_fn), weakref.ref(x), weakref.ref(x.grad)
    del x, y
    assert node() is None and leaf() is None and grad() is None


async def test_a_kept_graph_goes_with_its_last_tensor(no_collector):
    x = ag.randn(4, requires_grad=True)
    y = (x * x).tanh().sum()
    await y.backward(retain_graph=True)
    await y.backward()
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None
    assert x.grad is not None


async def test_grad_and_a_reentrant_backward_leave_nothing_behind(no_collector):
    class Reentrant(ag.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        async def backward(ctx, g):
            inner = ag.randn(2, requires_grad=True)
            with ag.enable_grad():
                loss = (inner * 3).sum()
            await loss.backward()
            return g * 2

    x = ag.randn(2, requires_grad=True)
    y = Reentrant.apply(x).sum()
    (gx,) = await ag.grad(y, x)
    node, leaf = weakref.ref(y.grad_fn), weakref.ref(x)
    del x, y, gx
    assert node() is None and leaf() is None
