"""A device's ready queue: a heap of NodeTasks and an asyncio wake-up for its worker.

Note [Priority]: as in PyTorch, tasks of deeper reentrant backwards run first, then
later-created nodes (higher sequence_nr). Heap entries are tuples whose first three fields
are a total key (the third is a unique counter), so a tie never falls through to comparing
graph tasks or nodes. Every entry is a node to run: torch also queues shutdown and wake-up
tasks, because its worker threads sleep on a condition variable and can only be stirred by
something to pop; a worker here sleeps on a future, which ``wake`` resolves (Note [Idle
workers] in worker.py).
"""

from __future__ import annotations

import asyncio
import itertools
from heapq import heapify, heappush
from typing import TYPE_CHECKING, Iterator, TypeAlias

if TYPE_CHECKING:
    from asyncgrad.engine.graph_task import GraphTask
    from asyncgrad.graph.node import Node

NodeTask: TypeAlias = "tuple[int, int, int, GraphTask, Node, list]"
"""A queued node, ``(-reentrant_depth, -sequence_nr, count, graph_task, node, inputs)``: built by
``node_task`` only, read back through the indices below (or unpacked whole). A plain tuple, not a
NamedTuple, whose construction is a Python-level call building a second tuple: the heap compares
plain tuples in C."""

GRAPH_TASK, NODE, INPUTS = 3, 4, 5
"""Where a ``NodeTask`` keeps its graph task, its node and its input buffer."""


def node_task(graph_task: GraphTask, node: Node, inputs: list, counter: Iterator[int]) -> NodeTask:
    """The heap entry of a ready node (Note [Priority]); ``counter`` is its queue's."""
    return (-graph_task.reentrant_depth, -node.sequence_nr, next(counter), graph_task, node, inputs)


class ReadyQueue:
    __slots__ = ("heap", "counter", "waiters")

    def __init__(self) -> None:
        self.heap: list[NodeTask] = []
        """Popped by the worker with ``heapq.heappop`` directly (Note [Per-node cost] in worker.py),
        pushed by ``Engine.route`` directly (Note [Routing inlined] in engine.py), entries always made
        by ``node_task``."""
        self.counter = itertools.count()
        self.waiters: list[asyncio.Future] = []
        """One future per server waiting on this queue (Note [Servers] in worker.py: a worker's own
        server and its helpers may wait at once)."""

    def push(self, graph_task: GraphTask, node: Node, inputs: list) -> None:
        heappush(self.heap, node_task(graph_task, node, inputs, self.counter))
        if self.waiters:
            self.wake()

    def drop(self, graph_task: GraphTask) -> None:
        """Forget every queued task of ``graph_task`` (it failed or was cancelled)."""
        heap = self.heap
        kept = [entry for entry in heap if entry[GRAPH_TASK] is not graph_task]
        if len(kept) != len(heap):
            heap[:] = kept
            heapify(heap)

    async def wait(self) -> None:
        """Suspend until something is pushed or ``wake`` is called."""
        if self.heap:
            return
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self.waiters:  # cancelled: nobody woke it
                self.waiters.remove(waiter)

    def wake(self) -> None:
        """Resume every server waiting in ``wait`` (to find a task, or to see that it may exit)."""
        waiters = self.waiters
        if waiters:
            self.waiters = []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
