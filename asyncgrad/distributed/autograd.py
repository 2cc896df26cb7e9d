"""Distributed autograd contexts, as torch's ``torch.distributed.autograd``.

Note [Distributed autograd contexts]: a remote call made inside ``with dist.autograd.context()
as ctx_id:`` records the context in its ``RemoteCallBackward`` node, so its backward, whenever
it runs, accumulates the workers' parameter gradients into the context's store on each worker
instead of the parameters' ``.grad``. Concurrent trainers that share stages thus keep their
gradients apart: ``await dist.autograd.get_gradients(ctx_id)`` reads them, and
``await opt.step(ctx_id)`` (``DistributedOptimizer``) steps with them, as torch's
``DistributedOptimizer.step(context_id)``. Leaving the context frees its stores on the workers.
Unlike torch, the local part of the graph is asyncgrad's ordinary one: local leaves still
accumulate into ``.grad``, and ``await loss.backward()`` (not ``dist_autograd.backward``) runs it.
"""

from __future__ import annotations

import contextvars
import itertools
from typing import Any, Protocol

from asyncgrad.graph.switches import restore
from asyncgrad.tensor import Tensor

__all__ = ["context", "get_gradients"]


class RemoteModuleLike(Protocol):
    """What a context asks of remote.py's ``RemoteModule``: remote.py imports this module, so this
    one names it by protocol, not by import (Note [The graph record is the lowest layer])."""

    async def gradients(self, ctx_id: int | None = None) -> dict[str, Tensor | None]: ...


class ClusterLike(Protocol):
    """What a context asks of remote.py's ``Cluster``."""

    def _modules(self) -> list[Any]: ...

    def _release_context(self, ctx_id: int) -> None: ...


current_context: contextvars.ContextVar[int | None] = contextvars.ContextVar("asyncgrad_dist_context", default=None)
_ids = itertools.count(1)
_clusters: dict[int, list[ClusterLike]] = {}
"""Per live context, the clusters whose workers hold (or may hold) a store for it."""


class _Context:
    """``with dist.autograd.context() as ctx_id`` (also usable with ``async with``)."""

    def __init__(self) -> None:
        self.ctx_id = next(_ids)
        self.token: contextvars.Token | None = None

    def __enter__(self) -> int:
        self.token = current_context.set(self.ctx_id)
        _clusters[self.ctx_id] = []
        return self.ctx_id

    def __exit__(self, *exc: Any) -> None:
        if self.token is not None:
            restore(current_context, self.token)  # Note [A switch restored where its scope ends]
            self.token = None
        for cluster in _clusters.pop(self.ctx_id, []):
            cluster._release_context(self.ctx_id)

    async def __aenter__(self) -> int:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)


def context() -> _Context:
    """A fresh distributed autograd context; its id is what ``with ... as ctx_id`` gives."""
    return _Context()


def note_cluster(ctx_id: int, cluster: ClusterLike) -> None:
    """Record that the distributed autograd context ``ctx_id`` sent work to ``cluster``, so that leaving
    the context frees what that cluster's workers hold for it."""
    clusters = _clusters.get(ctx_id)
    if clusters is not None and cluster not in clusters:
        clusters.append(cluster)


def _check(ctx_id: int) -> None:
    if ctx_id not in _clusters:
        raise RuntimeError(f"Could not find autograd context with id: {ctx_id}")


async def get_gradients(ctx_id: int) -> dict[RemoteModuleLike, dict[str, Tensor]]:
    """The gradients the backwards of context ``ctx_id`` accumulated, per remote module and
    parameter name (local copies; a parameter that got none is left out)."""
    _check(ctx_id)
    found: dict[RemoteModuleLike, dict[str, Tensor]] = {}
    for cluster in _clusters[ctx_id]:
        for module in cluster._modules():
            grads = {k: v for k, v in (await module.gradients(ctx_id)).items() if v is not None}
            if grads:
                found[module] = grads
    return found

