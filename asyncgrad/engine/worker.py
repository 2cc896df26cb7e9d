"""The device worker: one coroutine per device in use, serving that device's ready queue.

Note [Per-node cost]: a small node runs inline in the worker's loop iteration: no Task, no
future, no thread hop, no context manager. The worker switches grad mode and the current
graph task only when the graph task changes, and yields to the event loop every couple of
milliseconds so other coroutines stay responsive.

Note [Inter-op parallelism]: a node whose estimated ``work`` reaches the device's inline
threshold runs in the device's executor; the worker keeps up to ``device.num_workers``
such kernels in flight and goes on dispatching in priority order meanwhile. Outputs come
back to the loop before they are routed, so bookkeeping stays loop-only. AccumulateGrad
always runs inline, so on one loop accumulation into a shared leaf is never concurrent
(backwards on other threads or loops meet at the leaf's lock: Note [One writer per leaf]).
Kernels run in the engine's own daemon threads (Note [Kernel threads never hold the process]).

Note [Awaiting nodes]: a node whose ``apply`` is a coroutine (``is_async``) becomes a
task of its own, so a suspended backward never holds its worker.
"""

from __future__ import annotations

import asyncio
import functools
import time
from heapq import heappop
from typing import TYPE_CHECKING

import greenback

from asyncgrad.autograd.grad_mode import grad_enabled
from asyncgrad.engine.calls import call_function, call_function_async
from asyncgrad.engine.graph_task import GraphTask, current_graph_task, current_recorder
from asyncgrad.engine.kernels import run_kernel, submit
from asyncgrad.engine.ready_queue import SHUTDOWN, ReadyQueue

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node
    from asyncgrad.devices import Device
    from asyncgrad.engine.engine import Engine

_ON_LOOP, _IN_EXECUTOR, _IN_PORTAL = range(3)
_LANES = ("task", "executor", "task")

YIELD_AFTER_S = 0.002
"""Note [Yielding]: the engine gives the loop back after holding it this long. The worker reads
the clock after every inline node (about 60 ns against about 3 µs per node, measured), so a
run of expensive inline nodes cannot hold the loop for more than one node past this."""


async def give_way() -> None:
    """Let every coroutine that became ready while the engine held the loop run before it goes on.

    One ``sleep(0)`` is not enough: a timer that came due while the worker ran gets its
    callback queued *behind* the worker's next step, and that callback only schedules its
    task's wake-up, which runs one loop iteration later still. So the worker steps aside for
    three iterations (about 10 µs each, measured); with one, a 1 ms heartbeat was 5.7 ms late
    at the median (two engine slices), with two 3.5 ms.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await asyncio.sleep(0)


class DeviceWorker:
    __slots__ = ("engine", "device", "queue", "task", "in_flight", "blocked", "_slot")

    def __init__(self, engine: Engine, device: Device) -> None:
        self.engine = engine
        self.device = device
        self.queue = ReadyQueue()
        self.task: asyncio.Task | None = None
        self.in_flight = 0
        self.blocked = 0
        self._slot: asyncio.Future | None = None

    @property
    def name(self) -> str:
        return f"{self.device} worker"

    def ensure_running(self) -> None:
        """Start the worker task if it is not running (it exits whenever the engine is idle)."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(), name=f"asyncgrad worker {self.device}")

    async def _run(self) -> None:
        try:
            await self._serve()
        finally:
            self.task = None

    async def _serve(self) -> None:
        engine = self.engine
        queue = self.queue
        heap = queue.heap
        evaluate = engine.evaluate_function
        device = self.device
        current: GraphTask | None = None
        profile = None
        threshold = device.inline_threshold
        clock = time.perf_counter
        last_yield = clock()
        while True:
            if not heap:
                if not engine.live and not self.in_flight:
                    return
                await queue.wait()
                last_yield = clock()
                continue
            entry = heappop(heap)
            node = entry[4]
            if node is None:
                if entry[0] == SHUTDOWN and not engine.live and not heap and not self.in_flight:
                    return
                continue
            graph_task = entry[3]
            if graph_task.has_error:
                continue  # its queued nodes were dropped when it ended; a late one is dropped here
            if graph_task is not current:
                current = graph_task
                profile = graph_task.profile
                threshold = device.inline_threshold
                grad_enabled.set(graph_task.create_graph)
                current_graph_task.set(graph_task)
                current_recorder.set(profile)
            work = node.work
            if work >= threshold:
                if node.is_async:
                    self._spawn(graph_task, node, entry[5], _ON_LOOP)
                    continue
                portal = node.needs_portal
                if portal:
                    work = node.kernel_work
                if work >= threshold:
                    if self.in_flight >= device.num_workers and not self.blocked:
                        await self._free_slot()
                        last_yield = clock()
                        if graph_task.has_error:
                            continue
                    if self.in_flight < device.num_workers:
                        self._spawn(graph_task, node, entry[5], _IN_EXECUTOR)
                        continue
                    # Every executor thread waits on a reentrant backward: run it here instead.
                if portal:
                    self._spawn(graph_task, node, entry[5], _IN_PORTAL)
                    continue
            start = clock() if profile is not None else 0.0
            try:
                evaluate(graph_task, node, entry[5])
            except BaseException as exc:  # user code ran synchronously: never the worker's own cancellation
                engine.fail(graph_task, exc, node)
            else:
                graph_task.outstanding_tasks -= 1
                if not graph_task.outstanding_tasks:
                    engine.finish(graph_task)
            now = clock()
            if profile is not None:
                profile.record(node, device, self.name, graph_task, start, now, True)
            if now - last_yield > YIELD_AFTER_S:
                await give_way()
                last_yield = clock()

    def add_blocked(self, delta: int) -> None:
        """A kernel thread of this device started (+1) or stopped (-1) waiting on a reentrant backward."""
        self.blocked += delta
        self._release_slot()

    def _release_slot(self) -> None:
        if self._slot is not None and not self._slot.done():
            self._slot.set_result(None)

    async def _free_slot(self) -> None:
        while self.in_flight >= self.device.num_workers and not self.blocked:
            self._slot = asyncio.get_running_loop().create_future()
            try:
                await self._slot
            finally:
                self._slot = None

    def _spawn(self, graph_task: GraphTask, node: Node, inputs: list, where: int) -> None:
        """Run ``node`` as a task of its own, settled by its done-callback (Note [Who settles a node task])."""
        if where == _IN_EXECUTOR:
            self.in_flight += 1
        task = asyncio.get_running_loop().create_task(self._run_elsewhere(graph_task, node, inputs, where))
        graph_task.node_tasks.add(task)
        task.add_done_callback(functools.partial(self._settle, graph_task, node, where, time.perf_counter()))

    async def _run_elsewhere(self, graph_task: GraphTask, node: Node, inputs: list, where: int) -> None:
        """A large kernel in the executor, an ``async def`` backward on the loop, or a plain backward
        that may reenter the engine in a greenback portal. Its bookkeeping is ``_settle``'s."""
        engine = self.engine
        try:
            if graph_task.exec_info is not None:
                inputs = engine.capture(graph_task, node, inputs)
                if inputs is None:
                    return
            if where == _IN_EXECUTOR:
                # Abandoned on cancel: the thread finishes into the void (Note [Cancellation]).
                # A traced kernel records itself, timed in its thread (asyncgrad.profiler).
                # in_flight keeps at most num_workers of this device's kernels running.
                kernel = call_function if graph_task.profile is None else graph_task.profile.timed(self, call_function)
                loop = asyncio.get_running_loop()
                outputs = await submit(loop, run_kernel, self, loop, kernel, graph_task, node, inputs)
            elif where == _IN_PORTAL:
                outputs = await greenback.with_portal_run_sync(call_function, graph_task, node, inputs)
            else:
                outputs = await call_function_async(graph_task, node, inputs)
            if not graph_task.has_error:
                engine.route(graph_task, node, outputs)
        except asyncio.CancelledError:
            raise  # _settle tells this graph task's own abort from a foreign cancellation
        except BaseException as exc:
            engine.fail(graph_task, exc, node)

    def _settle(self, graph_task: GraphTask, node: Node, where: int, start: float, task: asyncio.Task) -> None:
        graph_task.node_tasks.discard(task)
        if where == _IN_EXECUTOR:
            self.in_flight -= 1
            self._release_slot()
        if graph_task.profile is not None and where != _IN_EXECUTOR:  # a kernel recorded itself in its thread
            graph_task.profile.record(node, self.device, f"{self.name} {_LANES[where]}", graph_task, start,
                                      time.perf_counter(), False)
        if graph_task.has_error:
            return
        if task.cancelled():
            self.engine.fail(graph_task, asyncio.CancelledError(), node)
        else:
            self.engine.task_done(graph_task)
