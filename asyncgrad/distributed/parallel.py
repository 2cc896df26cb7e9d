"""Data parallelism: replicas of one module on several workers, the batch split between them.

Note [Data parallel gradients]: ``await dp(x)`` splits ``x`` (and every tensor argument) along
dim 0 into one shard per replica, runs the replicas' forwards at once and concatenates their
outputs into one local, differentiable tensor. The loss is then computed here over the whole
batch, so each replica's backward leaves on it exactly its shard's share of the full-batch
gradient, and the full gradient is their *sum* (torch's DDP averages instead because each of
its replicas takes the mean over its own shard). ``await dp.sync_gradients()`` is the
all-reduce: it sums the replicas' ``.grad`` and writes the sum back to every replica, so that
identical optimizer steps keep the replicas identical. The reduction goes through the caller
(no worker talks to another), and it runs after the backward, not overlapped with it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from asyncgrad.distributed._wire import pack
from asyncgrad.distributed.remote import Cluster, RemoteModule
from asyncgrad.ops.shape import cat
from asyncgrad.tensor import Tensor


class DataParallel:
    """``dp = await dist.DataParallel.create(cluster, [0, 1], Model, *args)``; ``await dp(x)``."""

    def __init__(self, replicas: Sequence[RemoteModule]) -> None:
        if not replicas:
            raise ValueError("DataParallel needs at least one replica")
        self.replicas = list(replicas)

    @classmethod
    async def create(cls, cluster: Cluster, workers: Sequence[int], module_class: type, *args: Any,
                     **kwargs: Any) -> DataParallel:
        """Build ``module_class(*args, **kwargs)`` on each of ``workers``, all with the first one's weights."""
        replicas = [await cluster.remote(w, module_class, *args, **kwargs) for w in workers]
        state = await replicas[0].state_dict()
        await asyncio.gather(*(r.load_state_dict(state) for r in replicas[1:]))
        return cls(replicas)

    async def __call__(self, *args: Any) -> Tensor:
        n = len(self.replicas)
        batch = next((a.shape[0] for a in args if isinstance(a, Tensor)), None)
        if batch is None:
            raise TypeError("DataParallel needs at least one tensor argument to split along dim 0")
        size = -(-batch // n)
        shards = [tuple(a[i * size:(i + 1) * size] if isinstance(a, Tensor) else a for a in args) for i in range(n)]
        used = [(r, s) for r, s in zip(self.replicas, shards) if _nonempty(s)]
        outputs = await asyncio.gather(*(r(*s) for r, s in used))
        return cat(list(outputs), 0)

    async def sync_gradients(self) -> None:
        """Sum the replicas' gradients and give every replica the sum (Note [Data parallel gradients])."""
        grads = await asyncio.gather(*(r.gradients() for r in self.replicas))
        total: dict[str, Tensor] = {}
        for g in grads:
            for name, value in g.items():
                if value is not None:
                    total[name] = value if name not in total else total[name] + value
        packed = pack(total)
        await asyncio.gather(*(r._call("set_grads", r.module_id, packed) for r in self.replicas))

    async def state_dict(self) -> dict[str, Tensor]:
        return await self.replicas[0].state_dict()


def _nonempty(shard: tuple) -> bool:
    return all(a.shape[0] > 0 for a in shard if isinstance(a, Tensor))
