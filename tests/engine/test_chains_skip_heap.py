"""Note [Chains skip the heap] (engine/worker.py): a consumer made ready by an inline node runs
next without the heap, and nothing about the order, the yields or where a node runs changes."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ticks_during

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine import worker as worker_module

torch = pytest.importorskip("torch")


def _order_of(build, lib):
    """Names of the nodes of ``build(lib)``'s backward, in the order they ran (pre-hooks)."""
    order = []
    x = lib.tensor([0.5, -0.25, 2.0], dtype=lib.float64, requires_grad=True)
    loss = build(lib, x)
    seen = set()
    stack = [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        fn.register_prehook(lambda grads, fn=fn: order.append(fn.name().removeprefix("torch::autograd::")))
        stack.extend(f for f, _ in fn.next_functions)
    return loss, x, order


def _branches(lib, x):
    a = x * 2.0
    b = a.tanh()            # chain a -> b -> c
    c = b + 1.0
    d = a.sin() * x         # a branch that joins later
    e = (c * d).exp()
    return (e + c.cos()).sum()


async def test_order_and_gradients_match_torch_on_chains_with_branches():
    loss, x, order = _order_of(_branches, ag)
    await loss.backward()
    tloss, tx, torder = _order_of(_branches, torch)
    tloss.backward()
    assert order == torder
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


async def test_a_chain_yields_between_nodes_and_stays_exact(monkeypatch):
    """With a time slice of nothing, the worker yields after every node: the consumer it was handed
    goes onto the heap and another coroutine runs in between."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    monkeypatch.setattr(worker_module, "CLOCK_BUDGET", 0)  # Note [Reading the clock]: after every node
    x = ag.tensor([0.1, 0.2, 0.3], dtype=ag.float64, requires_grad=True)
    y = x
    for _ in range(60):
        y = (y * 1.01).tanh()
    assert await ticks_during(y.sum().backward()) >= 100, "the loop ran other coroutines between the chain's nodes"
    tx = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
    ty = tx
    for _ in range(60):
        ty = (ty * 1.01).tanh()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


async def test_a_chained_node_too_large_to_run_inline_goes_to_a_kernel_thread():
    """A consumer handed back whose work is far above the threshold is queued and then run in a
    kernel thread, as it would be popped from the heap."""
    import threading

    threads = []

    class Big(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            threads.append(threading.current_thread().name)
            return g * 3.0

    dev = ag.device("cpu")
    before = dev.inline_threshold
    x = ag.ones(4, requires_grad=True)
    h = Big.apply(x * 2.0)  # MulBackward0 (small, inline) hands Big's node to nothing: Big runs first
    loss = (h * 1.0).sum()  # ... after this small node, which hands it back
    for node in (h.grad_fn,):
        node.work = 10 ** 9  # far above ALONE_INLINE_FACTOR x the threshold
    try:
        ag.set_inline_threshold("cpu", 1000)
        await loss.backward()
    finally:
        ag.set_inline_threshold("cpu", before)
    assert threads and threads[0] != threading.main_thread().name
    assert x.grad.tolist() == [6.0] * 4
