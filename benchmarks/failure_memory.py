"""`python -m benchmarks.failure_memory`: the memory of a process whose backwards fail (issue 26).

Each iteration runs one backward in a fresh ``asyncio.run``: a 512x512 matmul branch beside a
branch that fails (a plain-def custom backward, an ``async def`` one, a tensor hook, a node's
pre-hook, a leaf's hook, a kernel in a thread, or a cancelled call, in turn) and an ``async def``
branch still sleeping when the call ends. The failure is caught and dropped, as a training loop
that skips a bad batch does. The cyclic collector stays on, as in any program: a graph held only
by reference cycles waits for a full collection, which few, large objects seldom trigger. RSS is
printed before, every ``--every`` iterations, at the end, and after one ``gc.collect()``; with
Note [A failed backward frees its graph] (engine/scope.py) it stays flat and the collection
frees nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
from typing import Any

import numpy as np

import asyncgrad as ag

KINDS = ("plain_backward", "async_backward", "tensor_hook", "pre_hook", "leaf_hook", "kernel_in_thread", "cancelled")


class Failed(Exception):
    pass


def _raise(*_: Any) -> None:
    raise Failed("bad batch")


class PlainFails(ag.Function):
    @staticmethod
    def forward(ctx: Any, x: ag.Tensor) -> ag.Tensor:
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: ag.Tensor) -> ag.Tensor:
        raise Failed("bad batch")


class AsyncFails(ag.Function):
    @staticmethod
    def forward(ctx: Any, x: ag.Tensor) -> ag.Tensor:
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    async def backward(ctx: Any, g: ag.Tensor) -> ag.Tensor:
        await asyncio.sleep(0)
        raise Failed("bad batch")


class Sleeps(ag.Function):
    """A branch still running (sleeping) when the call fails."""

    @staticmethod
    def forward(ctx: Any, x: ag.Tensor) -> ag.Tensor:
        return x * 1.0

    @staticmethod
    async def backward(ctx: Any, g: ag.Tensor) -> ag.Tensor:
        await asyncio.sleep(10)
        return g


def rss_mib() -> float:
    """The process's resident set size (Linux ``/proc``; psutil elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import psutil

        return psutil.Process().memory_info().rss / 2**20


async def one(kind: str, size: int, rng: np.random.Generator) -> None:
    w = ag.tensor(rng.standard_normal((size, size)), requires_grad=True)
    v = ag.tensor(rng.standard_normal(8), requires_grad=True)
    big = (w @ w).tanh().sum()  # the matmul branch: its saved inputs and outputs are the memory at stake
    if kind == "plain_backward":
        small = PlainFails.apply(v).sin().sum()
    elif kind == "async_backward":
        small = AsyncFails.apply(v).sin().sum()
    elif kind == "tensor_hook":
        y = v.sin()
        y.register_hook(_raise)
        small = y.sum()
    elif kind == "pre_hook":
        y = v.sin()
        y.grad_fn.register_prehook(_raise)
        small = y.sum()
    elif kind == "leaf_hook":  # a leaf of its own: ``v``'s hook would wait for the sleeping branch
        u = ag.tensor(rng.standard_normal(8), requires_grad=True)
        u.register_hook(_raise)
        small = u.sin().sum()
    elif kind == "kernel_in_thread":
        y = w @ w.T
        y.grad_fn.register_prehook(_raise)  # the matmul's backward runs in a kernel thread
        small = y.sum() + v.sum()
    else:
        small = v.sin().sum()
    loss = big + small + Sleeps.apply(v).sum()
    try:
        if kind == "cancelled":
            await asyncio.wait_for(loss.backward(), 0.001)
        else:
            await loss.backward()
    except (Failed, TimeoutError):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--size", type=int, default=512, help="the matmul branch's n (n x n float64)")
    parser.add_argument("--every", type=int, default=100, help="print RSS every this many iterations")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ag.set_num_workers("cpu", 2)
    asyncio.run(one("plain_backward", args.size, rng))  # imports, first allocations
    gc.collect()
    before = rss_mib()
    print(f"RSS before: {before:.0f} MiB")
    for i in range(1, args.iterations + 1):
        asyncio.run(one(KINDS[i % len(KINDS)], args.size, rng))
        if i % args.every == 0:
            print(f"RSS after {i:5d} failing backwards: {rss_mib():.0f} MiB")
    after = rss_mib()
    freed = gc.collect()
    print(f"RSS after: {after:.0f} MiB (+{after - before:.0f}); after gc.collect(): {rss_mib():.0f} MiB "
          f"({freed} objects collected)")


if __name__ == "__main__":
    main()
