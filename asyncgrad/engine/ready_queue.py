"""A device's ready queue: a heap of NodeTasks and an asyncio wake-up for its worker.

Note [Priority]: as in PyTorch, a shutdown task sorts first, then wake-up tasks (no node),
then tasks of deeper reentrant backwards, then later-created nodes (higher sequence_nr).
Heap entries are tuples whose first three fields are a total key (the third is a unique
counter), so a tie never falls through to comparing graph tasks or nodes.
"""

from __future__ import annotations

import asyncio
import itertools
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node
    from asyncgrad.engine.graph_task import GraphTask

SHUTDOWN = -(1 << 62)
WAKEUP = -(1 << 61)


class NodeTask(NamedTuple):
    order: int
    """``-reentrant_depth`` for a node; SHUTDOWN or WAKEUP for the special tasks."""
    neg_sequence_nr: int
    count: int
    graph_task: GraphTask | None
    node: Node | None
    inputs: list | None


_tuple_new = tuple.__new__


class ReadyQueue:
    __slots__ = ("heap", "_count", "_waiter")

    def __init__(self) -> None:
        self.heap: list[NodeTask] = []
        self._count = itertools.count()
        self._waiter: asyncio.Future | None = None

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, graph_task: GraphTask, node: Node, inputs: list) -> None:
        heappush(self.heap, _tuple_new(NodeTask, (
            -graph_task.reentrant_depth, -node.sequence_nr, next(self._count), graph_task, node, inputs)))
        if self._waiter is not None:
            self._wake()

    def push_special(self, order: int) -> None:
        heappush(self.heap, _tuple_new(NodeTask, (order, 0, next(self._count), None, None, None)))
        self._wake()

    def pop(self) -> NodeTask:
        return heappop(self.heap)

    def drop(self, graph_task: GraphTask) -> None:
        """Forget every queued task of ``graph_task`` (it failed or was cancelled)."""
        heap = self.heap
        kept = [entry for entry in heap if entry[3] is not graph_task]
        if len(kept) != len(heap):
            heap[:] = kept
            heapify(heap)

    async def wait(self) -> None:
        """Suspend until something is pushed."""
        if self.heap:
            return
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
