"""The cpu worker's own chain path and its clock budget (Note [One evaluate path] and
Note [Reading the clock] in engine/worker.py).

The worker applies a one-edge node and hands its consumer on itself, without ``call_function`` or
``route``; these tests check the gradients against torch and central finite differences, the
cases that must leave that path for ``route`` (a consumer with a buffer begun, a gradient of
another shape or dtype), that a chained gradient is still stolen by AccumulateGrad, that the
outstanding count a chained consumer inherits ends the graph task exactly once, and that the
worker yields by its work budget.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ticks_during

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine import worker as worker_module
from asyncgrad.variable import accumulate as accumulate_module

torch = pytest.importorskip("torch")


def w1(mod, x, n):
    """W1's chain (``* 1.0001``, ``+ 0.0001``, ``tanh`` in turn) with ``mod``'s ops."""
    y = x
    for i in range(n):
        y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else mod.tanh(y))
    return y


def w1_numpy(x, n):
    y = np.array(x, dtype=np.float64)
    for i in range(n):
        y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else np.tanh(y))
    return y


async def test_w1_chain_matches_torch_and_finite_differences():
    start = np.array([0.3, -1.2, 0.05, 2.0])
    x = ag.tensor(start, requires_grad=True)
    await w1(ag, x, 300).sum().backward()
    tx = torch.tensor(start, requires_grad=True)
    w1(torch, tx, 300).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    eps = 1e-6
    fd = [(w1_numpy(start + eps * e, 300).sum() - w1_numpy(start - eps * e, 300).sum()) / (2 * eps)
          for e in np.eye(4)]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6)


async def test_a_consumer_with_a_buffer_begun_goes_through_route():
    """``y`` has two consumers: the first branch to reach it begins its buffer, the second finds one
    dependency left but must add into that buffer, not hand on its own gradient alone."""
    start = np.array([0.2, -0.4, 0.9])
    x = ag.tensor(start, requires_grad=True)
    y = x.tanh()
    await ((y * 2.0).tanh() + (y + 1.0).exp()).sum().backward()
    tx = torch.tensor(start, requires_grad=True)
    ty = tx.tanh()
    ((ty * 2.0).tanh() + (ty + 1.0).exp()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


class Broadcasting(ag.Function):
    """A backward whose gradient has a leading 1 (summed away, as torch does) and the wrong dtype."""

    @staticmethod
    def forward(ctx, x):
        return x * 3.0

    @staticmethod
    def backward(ctx, g):
        return (g * 3.0).reshape(1, -1).to(ag.float32)


class TorchBroadcasting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3.0

    @staticmethod
    def backward(ctx, g):
        return (g * 3.0).reshape(1, -1).to(torch.float32)


async def test_a_gradient_of_another_shape_and_dtype_is_validated_on_the_chain():
    start = np.array([0.5, -0.25, 1.5])
    x = ag.tensor(start, requires_grad=True)
    await Broadcasting.apply(x.tanh()).tanh().sum().backward()
    tx = torch.tensor(start, requires_grad=True)
    TorchBroadcasting.apply(tx.tanh()).tanh().sum().backward()
    assert x.grad.dtype == ag.float64 and x.grad.shape == (3,)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


async def test_a_chained_gradient_is_stolen_by_accumulate_grad(monkeypatch):
    """The worker drops its own references to the gradient it hands on: the leaf's AccumulateGrad
    finds it owned by its buffer alone and keeps it without a copy."""
    seen = []
    real = accumulate_module.owned_by

    def spy(container, position):
        seen.append(real(container, position))
        return seen[-1]

    monkeypatch.setattr(accumulate_module, "owned_by", spy)
    x = ag.tensor(np.ones(5), requires_grad=True)
    await ((x * 2.0) + 1.0).tanh().sum().backward()
    assert seen == [True]


async def test_each_backward_ends_once_with_chains_and_branches():
    """A chained consumer inherits its producer's outstanding count: backwards of chains, of
    branches (heap pushes), and a keep_graph second pass all end, with the gradients summed."""
    start = np.array([0.1, 0.7])
    x = ag.tensor(start, requires_grad=True)
    y = w1(ag, x, 30)
    loss = (y.tanh() * y.exp()).sum()
    await loss.backward(retain_graph=True)
    await loss.backward()
    tx = torch.tensor(start, requires_grad=True)
    ty = w1(torch, tx, 30)
    tloss = (ty.tanh() * ty.exp()).sum()
    tloss.backward(retain_graph=True)
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        await loss.backward()


async def test_a_failing_hook_mid_chain_ends_the_backward():
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = (x * 2.0).tanh()

    def boom(g):
        raise ValueError("boom")

    y.register_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        await (y + 1.0).sum().backward()
    assert x.grad is None


async def test_tiny_nodes_read_the_clock_by_their_budget(monkeypatch):
    """With a slice of nothing, the worker yields only when it reads the clock: after every
    ``CLOCK_BUDGET / NODE_CLOCK_COST`` tiny nodes, not after each one."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    per_read = worker_module.CLOCK_BUDGET // worker_module.NODE_CLOCK_COST + 1
    x = ag.tensor(np.ones(2), requires_grad=True)
    nodes = 50 * per_read
    ticks = await ticks_during(w1(ag, x, nodes).sum().backward())
    # about nodes / per_read readings (a node's own work moves it by one or two), each yielding for
    # the budget's two free iterations and the turn; reading after every node would give 3 * nodes ticks
    assert nodes // per_read <= ticks <= nodes // (per_read - 4) * 3


async def test_a_node_past_the_budget_reads_the_clock_right_after(monkeypatch):
    """A node whose own work passes ``CLOCK_BUDGET`` (still below the inline threshold) is followed
    by a clock reading, so the loop is held no longer than before the budget for large nodes."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    size = worker_module.CLOCK_BUDGET // 4 + 1  # tanh's work is 4 per element
    assert 4 * size < ag.device("cpu").inline_threshold
    x = ag.tensor(np.full(size, 0.5), requires_grad=True)
    y = x
    for _ in range(20):
        y = y.tanh()
    ticks = await ticks_during(y.sum().backward())
    assert ticks >= 20 * 3 // 2, "the worker yielded after each large tanh"


async def test_a_profiled_backward_times_every_node():
    x = ag.tensor(np.ones(3), requires_grad=True)
    with ag.profiler.trace() as prof:
        await w1(ag, x, 60).sum().backward()
    names = [e.name for e in prof.events]
    assert len(names) == 62 and names[0] == "SumBackward0" and names[-1] == "AccumulateGrad"
    assert names.count("TanhBackward0") == 20
