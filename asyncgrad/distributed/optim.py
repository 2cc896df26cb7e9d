"""``DistributedOptimizer``: one optimizer per worker over the parameters of the remote modules there."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Sequence

from asyncgrad.distributed._wire import pack
from asyncgrad.distributed.remote import RemoteModule

_ids = itertools.count()


class DistributedOptimizer:
    """``dist.DistributedOptimizer(ag.optim.SGD, [s0, s1], lr=0.1)``, as torch's
    ``torch.distributed.optim.DistributedOptimizer``: each worker builds ``optimizer_class``
    over the parameters of the given modules it holds (on first use), and ``step``/``zero_grad``
    run on all of them at once. ``step(ctx_id)`` steps with a distributed autograd context's
    gradients instead of ``.grad`` (Note [Distributed autograd contexts])."""

    def __init__(self, optimizer_class: type, remote_modules: Sequence[RemoteModule], **defaults: Any) -> None:
        modules = list(remote_modules)
        if not modules:
            raise ValueError("optimizer got an empty parameter list")
        for m in modules:
            if not isinstance(m, RemoteModule):
                raise TypeError(f"DistributedOptimizer takes RemoteModules (cluster.remote), got {type(m).__name__}")
        self.optimizer_class = optimizer_class
        self.defaults = defaults
        self.id = next(_ids)
        self._by_worker: dict[tuple[Any, int], list[RemoteModule]] = {}
        for m in modules:
            self._by_worker.setdefault((m.cluster, m.worker), []).append(m)
        self._made: dict[tuple[Any, int], int] = {}

    async def _each(self, method: str, *args: Any, with_modules: bool = False) -> None:
        async def one(key: tuple[Any, int], modules: list[RemoteModule]) -> None:
            ids = [m.module_id for m in modules]
            epoch = modules[0]._epoch
            if self._made.get(key) != epoch:
                await modules[0]._call("make_optimizer", self.id, self.optimizer_class, ids, pack(self.defaults))
                self._made[key] = epoch
            await modules[0]._call(method, self.id, *((ids,) if with_modules else ()), *args)

        await asyncio.gather(*(one(key, modules) for key, modules in self._by_worker.items()))

    async def zero_grad(self, set_to_none: bool = True) -> None:
        await self._each("zero_grad", set_to_none)

    async def step(self, ctx_id: int | None = None) -> None:
        await self._each("step", ctx_id, with_modules=True)
