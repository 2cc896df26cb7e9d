"""Stages and checks shared by tests/distributed/test_distributed_local.py (local backend) and
tests/distributed/test_distributed_ray.py (Ray backend): the same claims hold on both."""

from __future__ import annotations

import asyncio
import time

import numpy as np

import asyncgrad as ag
from asyncgrad import distributed as dist

F = ag.nn.functional


class Stage0(ag.nn.Module):
    def __init__(self, n_in: int = 6, n_hidden: int = 16, dtype=None) -> None:
        super().__init__()
        self.lin = ag.nn.Linear(n_in, n_hidden, dtype=dtype)

    def forward(self, x):
        return self.lin(x).tanh()


class Stage1(ag.nn.Module):
    def __init__(self, n_hidden: int = 16, n_out: int = 4, dtype=None) -> None:
        super().__init__()
        self.lin = ag.nn.Linear(n_hidden, n_out, dtype=dtype)

    def forward(self, h):
        return self.lin(h)


class Sleepy(ag.nn.Module):
    """A stage whose forward takes ``seconds`` (an async forward: the worker awaits it)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.w = ag.nn.Parameter(ag.ones(3))

    async def forward(self, x):
        await asyncio.sleep(self.seconds)
        return x * self.w


class _SlowGrad(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(60)
        return g


class SlowBackward(ag.nn.Module):
    """A stage whose backward hangs for a minute: a worker killed meanwhile must not hang its caller."""

    def __init__(self) -> None:
        super().__init__()
        self.w = ag.nn.Parameter(ag.ones(3))

    def forward(self, x):
        return _SlowGrad.apply(x * self.w)


class _Fails(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise ValueError("backward of stage failed on purpose")


class Faulty(ag.nn.Module):
    """Raises in forward when ``x.sum() < 0``, and always in backward."""

    def __init__(self) -> None:
        super().__init__()
        self.w = ag.nn.Parameter(ag.ones(3))

    def forward(self, x):
        if float(x.detach().sum()) < 0:
            raise ValueError("forward of stage failed on purpose")
        return _Fails.apply(x * self.w)


def data(seed: int, n: int = 8) -> tuple[ag.Tensor, ag.Tensor]:
    rng = np.random.default_rng(seed)
    return ag.tensor(rng.standard_normal((n, 6)).astype(np.float32)), ag.tensor(rng.integers(0, 4, n))


async def two_stages(cluster: dist.Cluster, s0_worker: int = 0, s1_worker: int = 1):
    """Remote stages with the weights of fresh local ones (returned too)."""
    local0, local1 = Stage0(), Stage1()
    s0 = await cluster.remote(s0_worker, Stage0)
    s1 = await cluster.remote(s1_worker, Stage1)
    await s0.load_state_dict(local0.state_dict())
    await s1.load_state_dict(local1.state_dict())
    return (s0, s1), (local0, local1)


def close(a: ag.Tensor, b: ag.Tensor, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(np.asarray(a.detach()), np.asarray(b.detach()), rtol=rtol, atol=atol)


async def check_training_matches_local(cluster: dist.Cluster, steps: int = 4) -> None:
    """Several SGD steps through two remote stages give the weights local training gives."""
    (s0, s1), (l0, l1) = await two_stages(cluster)
    opt = dist.DistributedOptimizer(ag.optim.SGD, [s0, s1], lr=0.1, momentum=0.9)
    local_opt = ag.optim.SGD(list(l0.parameters()) + list(l1.parameters()), lr=0.1, momentum=0.9)
    for step in range(steps):
        x, y = data(step)
        await opt.zero_grad()
        out = await s1(await s0(x))
        loss = F.cross_entropy(out, y)
        await loss.backward()
        await opt.step()
        local_opt.zero_grad()
        local_loss = F.cross_entropy(l1(l0(x)), y)
        await local_loss.backward()
        local_opt.step()
        close(loss, local_loss)
    for remote, local in ((s0, l0), (s1, l1)):
        state = await remote.state_dict()
        assert set(state) == set(local.state_dict())
        for name, value in local.state_dict().items():
            close(state[name], value)


async def check_microbatches_accumulate(cluster: dist.Cluster, n: int = 4) -> None:
    """n micro-batches' forwards and backwards in flight at once accumulate what n in turn do."""
    (s0, s1), (l0, l1) = await two_stages(cluster)
    batches = [data(10 + i) for i in range(n)]

    async def one(x, y):
        loss = F.cross_entropy(await s1(await s0(x)), y)
        await loss.backward()

    for x, y in batches:
        await one(x, y)
    one_by_one = [await s0.gradients(), await s1.gradients()]
    for m in (s0, s1):
        await m.call("zero_grad")
    await asyncio.gather(*(one(x, y) for x, y in batches))
    together = [await s0.gradients(), await s1.gradients()]
    for seq, par in zip(one_by_one, together):
        for name in seq:
            close(seq[name], par[name])
    for x, y in batches:
        await F.cross_entropy(l1(l0(x)), y).backward()
    for grads, local in zip(together, (l0, l1)):
        for name, p in local.named_parameters():
            close(grads[name], p.grad)


async def check_kill(cluster: dist.Cluster, limit_s: float = 30.0) -> None:
    """After ``kill(1)`` a step through worker 1 raises WorkerDied naming it within ``limit_s``;
    worker 0 and the local engine still work; ``restart(1)`` gives a fresh, usable worker."""
    s0 = await cluster.remote(0, Stage0)
    s1 = await cluster.remote(1, Stage1)
    x, y = data(0)
    h = await s0(x)
    await cluster.kill(1)
    started = time.monotonic()
    try:
        await asyncio.wait_for(s1(h), limit_s)
    except dist.WorkerDied as exc:
        assert exc.worker == 1 and "worker 1" in str(exc)
    else:
        raise AssertionError("a call to a killed worker returned")
    assert time.monotonic() - started < limit_s
    await F.cross_entropy(h, ag.tensor([0] * 8)).backward()  # worker 0 still answers, backward included
    assert (await s0.gradients())["lin.weight"] is not None
    w = ag.ones(3, requires_grad=True)
    await (w * 2).sum().backward()  # the local engine still works
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    await cluster.restart(1)
    try:
        await s1(h)
    except dist.WorkerError as exc:
        assert "restarted" in str(exc)
    else:
        raise AssertionError("a module of a restarted worker answered")
    fresh = await cluster.remote(1, Stage1)
    assert (await fresh(h)).shape == (8, 4)
