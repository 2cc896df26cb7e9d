"""Where a node runs (Note [Placement] in graph/node.py): each node kind says it with
``Node.placement``; ``work`` is only the cost estimate BY_COST nodes are compared by. No inline
threshold, however large, makes an ``async def`` backward or a possibly-reentrant plain one run
inline, and none, however small, sends an AccumulateGrad or a GraphRoot off the loop."""

import asyncio
import sys
import threading

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd.graph import GraphRoot, Node, Placement
from asyncgrad.variable.accumulate import grad_accumulator


class Waits(ag.Function):
    """An ``async def`` backward that suspends: inline on the loop it could not even be awaited."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(0.001)
        return g * 3


class Reenters(ag.Function):
    """A plain backward that runs a reentrant backward through ``backward_sync``."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        inner = ag.ones(2, requires_grad=True)
        with ag.enable_grad():
            (inner * 5).sum().backward_sync()
        Reenters.seen.append(inner.grad.numpy().tolist())
        return g * 2


def _block(x):
    return (x * 2).tanh() * x


@pytest.mark.parametrize("threshold", [1 << 62, sys.maxsize, 10 ** 30], ids=["1<<62", "maxsize", "10**30"])
async def test_a_huge_inline_threshold_never_inlines_async_or_reentrant_backwards(threshold):
    ag.set_inline_threshold("cpu", threshold)
    x = ag.tensor([0.5, -1.0], dtype=ag.float64, requires_grad=True)
    # checkpoint: an async def backward running a reentrant backward
    y = await ag.checkpoint(_block, x, use_reentrant=True)
    await y.sum().backward()
    expected = ag.tensor([0.5, -1.0], dtype=ag.float64, requires_grad=True)
    await _block(expected).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected.grad.numpy())
    # an async def backward that suspends
    x.grad = None
    await Waits.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    # a plain backward that reenters the engine (a greenback portal)
    x.grad = None
    Reenters.seen = []
    await Reenters.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert Reenters.seen == [[5.0, 5.0]]


async def test_placement_of_each_node_kind():
    x = ag.ones(2, requires_grad=True)
    assert grad_accumulator(x).placement is Placement.ON_LOOP
    assert GraphRoot((), []).placement is Placement.ON_LOOP
    assert (x * 2).grad_fn.placement is Placement.BY_COST
    assert Node.placement is Placement.BY_COST
    assert Waits.apply(x).grad_fn.placement is Placement.OWN_TASK
    node = Reenters.apply(x).grad_fn
    assert node.placement is Placement.PORTAL
    assert node.work == 2, "a plain-def custom backward's work is its real size, its outputs' elements"
    assert ag.checkpoint  # checkpoint's node is an async def backward's:
    y = await ag.checkpoint(_block, x, use_reentrant=True)
    assert y.grad_fn.placement is Placement.OWN_TASK


async def test_threshold_zero_keeps_bookkeeping_nodes_on_the_loop():
    """Every BY_COST node goes to a kernel thread; AccumulateGrad and GraphRoot stay on the loop."""
    ag.set_inline_threshold("cpu", 0)
    x = ag.ones(2, requires_grad=True)
    a, b = x * 2, x * 3
    with ag.profiler.trace() as prof:
        await ag.backward([a.sum(), b.sum()])
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0])
    loop_thread = threading.get_ident()
    for e in prof.events:
        if e.name in ("AccumulateGrad", "GraphRoot"):
            assert e.inline and e.thread_id == loop_thread, e
        else:
            assert e.worker == "cpu worker executor" and e.thread_id != loop_thread, e
    assert {"AccumulateGrad", "GraphRoot", "MulBackward0", "SumBackward0"} <= {e.name for e in prof.events}


async def test_a_large_plain_backward_goes_to_a_kernel_thread_a_small_one_runs_inline():
    """A small plain backward runs inline: its server is a greenback portal (Note [Servers])."""
    ag.set_inline_threshold("cpu", 100)
    small = ag.ones(2, requires_grad=True)
    large = ag.ones(200, requires_grad=True)
    with ag.profiler.trace() as prof:
        Reenters.seen = []
        await Reenters.apply(small).sum().backward()
        await Reenters.apply(large).sum().backward()
    runs = [e.worker for e in prof.events if e.name == "ReentersBackward" and e.depth == 0]
    assert runs == ["cpu worker", "cpu worker executor"]
    np.testing.assert_allclose(large.grad.numpy(), np.full(200, 2.0))
