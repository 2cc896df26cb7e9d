"""``Engine.route`` on sharded dependency counts (Note [Shards picked inline] in engine.py).

A graph past ``SHARD_AT`` nodes keeps its counts in ``ShardedMap`` shards, which ``route`` reads
and decrements itself, picking the shard inline; these tests check that the gradients it routes
are exactly those of the plain-dict path, that emptied shards are let go as ``ShardedMap.pop``
lets them go, and that two backwards sharing a sharded graph keep separate counts.
"""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine import counts as counts_module
from asyncgrad.engine.counts import SHARD_AT, ShardedMap
from asyncgrad.engine.graph_task import current_graph_task


def w1_chain(x, n):
    """W1's chain (benchmarks/workloads/w1_chain.py): ``* 1.0001``, ``+ 0.0001``, ``tanh`` in turn."""
    y = x
    for i in range(n):
        y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else y.tanh())
    return y


def w1_chain_numpy(x, n):
    """The same chain in plain float64 numpy, for finite differences."""
    y = np.array(x, dtype=np.float64)
    for i in range(n):
        y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else np.tanh(y))
    return y


class Watch(ag.Function):
    """At the end of the chain's backward (the leaf's side): the type of the graph task's dependency
    counts, their size, how many shards still hold any, and whether every empty one is a fresh dict
    (an emptied dict keeps its grown table, and its size says so)."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        graph_task = current_graph_task.get()
        counts = graph_task.dependencies
        assert graph_task.dependency_shards is (counts.shards if type(counts) is ShardedMap else None)
        shards = counts.shards if type(counts) is ShardedMap else [counts]
        empty = [shard for shard in shards if not shard]
        fresh = all(sys.getsizeof(shard) == sys.getsizeof({}) for shard in empty)
        Watch.seen.append((type(counts), len(counts), len(shards) - len(empty), fresh))
        return g


N = SHARD_AT + 3000


async def test_a_sharded_chain_routes_the_gradient_of_the_plain_dict_path(monkeypatch):
    """The same chain backward twice: sharded (past SHARD_AT), then with sharding pushed out of
    reach (plain dict): bit-for-bit the same gradient."""
    start = np.array([0.3, -1.2, 0.05, 2.0])
    Watch.seen = []
    x = ag.tensor(start, requires_grad=True)
    await w1_chain(Watch.apply(x), N).sum().backward()
    sharded = x.grad.numpy().copy()
    assert Watch.seen[0][0] is ShardedMap

    monkeypatch.setattr(counts_module, "SHARD_AT", 1 << 30)
    monkeypatch.setattr("asyncgrad.engine.engine.SHARD_AT", 1 << 30)
    x = ag.tensor(start, requires_grad=True)
    await w1_chain(Watch.apply(x), N).sum().backward()
    assert Watch.seen[1][0] is dict
    np.testing.assert_array_equal(x.grad.numpy(), sharded)


async def test_a_sharded_chain_gradient_matches_finite_differences_and_torch(torch):
    start = np.array([0.3, -1.2, 0.05, 2.0])
    x = ag.tensor(start, requires_grad=True)
    await w1_chain(x, N).sum().backward()
    got = x.grad.numpy()

    eps = 1e-6
    fd = np.array([(w1_chain_numpy(start + eps * e, N).sum() - w1_chain_numpy(start - eps * e, N).sum()) / (2 * eps)
                   for e in np.eye(4)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)

    xt = torch.tensor(start, requires_grad=True)
    w1_chain(xt, N).sum().backward()
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-12)


async def test_every_shard_is_let_go_as_it_empties():
    """Each count is deleted as its node becomes ready, and an emptied shard is replaced by a fresh
    dict (ShardedMap.pop's release): when the leaf's side runs, only the counts below it are left."""
    Watch.seen = []
    x = ag.tensor([0.5, -0.5], requires_grad=True)
    await w1_chain(Watch.apply(x), N).sum().backward()
    # x's AccumulateGrad, below Watch, is still to be routed to; all else was
    assert Watch.seen == [(ShardedMap, 1, 1, True)]
    assert x.grad is not None


async def test_two_backwards_sharing_a_sharded_graph_keep_their_own_counts(torch):
    """Concurrent backwards through one retained graph past SHARD_AT: each graph task counts in its
    own shards, so both complete and the leaf gets the gradient twice."""
    start = np.array([0.25, -0.75, 1.5])
    x = ag.tensor(start, requires_grad=True)
    loss = w1_chain(x, N).sum()
    await asyncio.gather(loss.backward(retain_graph=True), loss.backward(retain_graph=True))
    xt = torch.tensor(start, requires_grad=True)
    w1_chain(xt, N).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xt.grad.numpy(), rtol=1e-12)


async def test_grad_through_a_sharded_graph_with_two_inputs(torch):
    """``grad()`` past SHARD_AT (exec_info sharded too), gradients for a leaf and a middle tensor."""
    start = np.array([0.1, 0.2])
    x = ag.tensor(start, requires_grad=True)
    mid = w1_chain(x, N // 2)
    out = w1_chain(mid, N - N // 2).sum()
    gx, gmid = await ag.grad(out, (x, mid))
    xt = torch.tensor(start, requires_grad=True)
    midt = w1_chain(xt, N // 2)
    midt.retain_grad()
    w1_chain(midt, N - N // 2).sum().backward()
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gmid.numpy(), midt.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("n", [SHARD_AT + 10, 3 * SHARD_AT])
async def test_a_diamond_past_shard_at_counts_two_per_node(n, torch):
    """Each step feeds one node to two consumers: counts of 2 decrement through a shard to 1, are
    stored back, then reach 0 and are deleted."""
    start = np.array([0.3, -0.4])
    x = ag.tensor(start, requires_grad=True)
    xt = torch.tensor(start, requires_grad=True)
    h, ht = x, xt
    for _ in range(n // 3):
        h = h * 0.5 + h.tanh() * 0.25
        ht = ht * 0.5 + ht.tanh() * 0.25
    await h.sum().backward()
    ht.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
