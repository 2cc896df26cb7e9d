"""The device worker: one coroutine per device in use, serving that device's ready queue.

The Notes cited as "in worker.py" ([Per-node cost], [Measuring the hot path], [One evaluate path],
[Chains skip the heap], [Evaluation inlined], [task_done inlined], [Inter-op parallelism], [Nothing
to overlap], [Awaiting nodes], [Servers], [Servers become portals on demand], [Reentrant priority])
are in docs/design/engine-worker.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
import time
import traceback
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import greenback

from asyncgrad.devices.streams import forward_stream
from asyncgrad.engine import stream_sync
from asyncgrad.engine.calls import call_function, call_function_async, validate_grad
from asyncgrad.engine.counts import SHARD_OF, SPREAD
from asyncgrad.engine.graph_task import GraphTask, current_graph_task, current_recorder
from asyncgrad.engine.kernels import run_kernel, submit
from asyncgrad.engine.ready_queue import GRAPH_TASK, INPUTS, NODE, ReadyQueue, node_task
from asyncgrad.graph.grad_mode import grad_enabled
from asyncgrad.graph.node import Placement, hooks_in_use, portal_needed
from asyncgrad.variable.accumulate import AccumulateGrad

if TYPE_CHECKING:
    from asyncgrad.devices import Device
    from asyncgrad.engine.roles import EngineRole
    from asyncgrad.graph.node import Node

CHAIN_STEP = True
"""Whether the cpu worker takes its chain step (Note [One evaluate path]); False only in the test
that pins it to ``call_function`` and ``route``. Read at each graph-task switch."""

FALLBACK, RAN = object(), object()
"""What ``_sink_beside`` returns when it does not take the sink (route it all), and when it ran it with no
consumer to chain."""

_AS_TASK, _IN_EXECUTOR = range(2)
"""How ``_spawn`` runs a node that leaves the worker's own iteration (``_LANES``: its profiler lane)."""
_LANES = ("task", "executor")
ON_LOOP, BY_COST, OWN_TASK = Placement.ON_LOOP, Placement.BY_COST, Placement.OWN_TASK
NEVER = 1 << 128
"""The inline threshold of a graph task run with ``set_multithreading_enabled(False)``: every
BY_COST and PORTAL node runs on the loop, none in a kernel thread."""

_serving: contextvars.ContextVar[tuple[DeviceWorker, asyncio.Task] | None] = contextvars.ContextVar(
    "asyncgrad_serving", default=None)
"""In a server's context (Note [Servers]): its worker and its task. Tasks the server creates copy
its context, so ``reenter`` compares the task too."""

CLOCK_BUDGET = 100_000
"""Note [Reading the clock]: the worker reads the clock (for Note [Yielding]) once the estimated
work of the inline nodes run since the last reading passes this many element-operations, each
node counted as its ``work`` plus ``NODE_CLOCK_COST`` for its fixed cost, rather than after every
node, and asks the loop's budget then (Note [One budget per loop] in budget.py). What must hold:
the loop is held at most about ``CLOCK_BUDGET`` element-operations past ``YIELD_AFTER_S``, a small
fraction of the slice; a node that alone passes the budget (a large
kernel run inline, Note [Nothing to overlap]) reads the clock right after it. A profiled graph task
times every node (a budget of -1). What it buys: a clock read per node on W1's backward
(``python -m benchmarks --only W1``); the pauses it allows: ``python -m benchmarks.stalls --only chain``."""

NODE_CLOCK_COST = 4_000
"""A node's fixed cost in element-operations for Note [Reading the clock]: about what a tiny node's
own bookkeeping costs, so that a run of them reads the clock about as often as its time requires."""


ALONE_INLINE_FACTOR = 10
"""A node below this many times the inline threshold runs inline when nothing could run beside it
(Note [Nothing to overlap])."""

_ALONE_SCAN = 8
"""``alone`` looks at most this many queued nodes: a longer queue is taken to hold one that overlaps."""


def alone(heap: list, threshold: int) -> bool:
    """Whether no node queued in ``heap`` would take a kernel thread or a task of its own
    (Note [Nothing to overlap])."""
    if len(heap) > _ALONE_SCAN:
        return False
    for entry in heap:
        node = entry[NODE]
        placement = node.placement
        if placement is not ON_LOOP and (placement is not BY_COST or node.work >= threshold):
            return False
    return True


def _forget_context() -> None:
    """Note [A server's context is emptied as it ends]: a task keeps its context after it ends, and
    a server's holds the server task itself (``_serving``) and the last graph task it ran
    (``current_graph_task``, with its root, so the whole graph and its leaves): a reference cycle
    (task, context, task) that would keep the last backward's graph alive until the cyclic
    collector ran. Emptied, the finished task holds nothing, and the graph goes with its last
    reference (``tests/engine/test_failed_backward_frees_graph.py`` for a failed one).
    A server that waits for work (its engine still has a live graph task, or a helper's reentry
    has not ended) empties its context and drops its locals the same way before it waits."""
    _serving.set(None)
    current_graph_task.set(None)
    current_recorder.set(None)


class Reentry:
    """A nested backward called from plain code of a suspended server (Note [Servers])."""

    __slots__ = ("parent", "runner")

    def __init__(self, parent: GraphTask | None, runner: asyncio.Task) -> None:
        self.parent = parent
        self.runner = runner

    def ended(self) -> bool:
        """Whether the nested call's graph task has ended: its future is resolved, which happens in
        the very step that runs its last node, before its runner resumes (or the call ended
        without one, its arguments refused)."""
        runner = self.runner
        if runner.done():
            return True
        scope = self.parent.scope if self.parent is not None else None
        return scope is not None and bool(scope.child_ended(runner))


def reenter(coro: Any) -> Any:
    """Run the engine coroutine ``coro`` to its end from plain code on the loop, in a greenback portal.

    In a server (Note [Servers]): as a task of its own, started in the caller's current context,
    while a helper serves this server's queue; elsewhere (a node's own task), awaited in place.
    """
    here = _serving.get()
    loop = asyncio.get_running_loop()
    if here is None or here[1] is not asyncio.current_task():
        return _await_in_portal(coro)
    worker = here[0]
    runner = loop.create_task(coro)
    worker.start_helper(Reentry(current_graph_task.get(), runner))
    runner.add_done_callback(worker.wake)
    try:
        return _await_in_portal(runner)
    finally:
        del runner  # it holds the nested call's exception (Note [A failed backward frees its graph] in scope.py)


def _await_in_portal(awaitable: Any) -> Any:
    """``greenback.await_(awaitable)``; an exception leaves without greenback's own frames in its
    traceback. greenback keeps the exception in locals of those frames (its ``await_``, and the
    portal's shim, which holds it until the server's next step and, should the server end then, for
    good): cycles through every tensor of the failed graph (Note [A failed backward frees its graph]
    in scope.py). greenback trims its frames from such tracebacks too; here none is left."""
    try:
        return greenback.await_(awaitable)
    except BaseException as exc:
        tb = exc.__traceback__  # this frame's own entry first: never greenback's
        while tb is not None:
            after = tb.tb_next
            while after is not None and after.tb_frame.f_code.co_filename.startswith(_PORTAL_FILES):
                after = after.tb_next
            tb.tb_next = after
            tb = after
        del tb, after, exc, awaitable  # a task holds its exception: not from a frame in its traceback
        raise


_GREENBACK = sys.modules[greenback.await_.__module__]
_PORTAL_FILES = tuple(
    os.path.dirname(module.__file__) + os.sep for module in (_GREENBACK, getattr(_GREENBACK, "outcome", None))
    if getattr(module, "__file__", None))
"""The packages of greenback's portal and of the outcomes it sends: their frames are what
``_await_in_portal`` takes out of a traceback."""

class DeviceWorker:
    __slots__ = ("engine", "device", "queue", "task", "helpers", "in_flight", "blocked", "_slot")

    def __init__(self, engine: EngineRole, device: Device) -> None:
        self.engine = engine
        self.device = device
        self.queue = ReadyQueue()
        self.task: asyncio.Task | None = None
        """The worker's own server; ``helpers`` holds the helper servers (Note [Servers])."""
        self.helpers: set[asyncio.Task] = set()
        self.in_flight = 0
        self.blocked = 0
        self._slot: asyncio.Future | None = None

    @property
    def name(self) -> str:
        return f"{self.device} worker"

    # Note [Idle workers]: a worker task runs while its engine has a live graph task or it has a
    # kernel in flight; with nothing queued it waits on its queue's future. Whichever of the two
    # ends last wakes it (``Engine._retire`` when the last graph task ends, ``_settle`` when the last
    # kernel returns), and a worker that then finds nothing queued returns: between backwards the
    # loop holds no engine task, so a loop closed then has none pending, and ``ensure_running``
    # starts the worker again at the next push.
    def ensure_running(self) -> None:
        """Start the worker task if it is not running (Note [Idle workers]); a greenback portal from
        the start once user code may run in a backward (Note [Servers become portals on demand])."""
        if self.task is None:
            portal = portal_needed[0] or hooks_in_use[0]
            loop = asyncio.get_running_loop()
            self.task = loop.create_task(self._run(portal), name=f"asyncgrad worker {self.device}")
            if portal:
                greenback.bestow_portal(self.task)  # before its first step: no extra loop iteration

    def start_helper(self, reentry: Reentry) -> None:
        """Serve this worker's queue while a server waits for ``reentry`` (Note [Servers])."""
        task = asyncio.get_running_loop().create_task(self._help(reentry), name=f"asyncgrad helper {self.device}")
        greenback.bestow_portal(task)
        self.helpers.add(task)
        task.add_done_callback(self.helpers.discard)

    def wake(self, _: Any = None) -> None:
        self.queue.wake()

    async def _run(self, portal: bool) -> None:
        _serving.set((self, self.task))
        try:
            await self._serve(None, portal)
        finally:
            self.task = None
            _forget_context()

    async def _help(self, reentry: Reentry) -> None:
        _serving.set((self, asyncio.current_task()))
        try:
            await self._serve(reentry, True)
        finally:
            _forget_context()
            reentry = None  # its runner holds the nested call's exception (Note [A failed backward frees its graph])

    async def _serve(self, reentry: Reentry | None, portal: bool) -> None:
        engine = self.engine
        queue = self.queue
        heap = queue.heap
        device = self.device
        # Note [Streaming backwards] in stream_sync.py: chosen once per worker, so cpu pays nothing per node
        evaluate = None if device.is_cpu else stream_sync.evaluator(engine, device)
        # Note [Plain streams] in stream_sync.py: a non-cpu worker takes the chain step while ``plain``
        plain = None if device.is_cpu else stream_sync.plain
        route = engine.route if device.is_cpu else stream_sync.router(engine, device)
        current: GraphTask | None = None
        profile = None
        threshold = device.inline_threshold
        by_cost, on_loop = BY_COST, ON_LOOP
        clock = time.perf_counter
        loop_budget = engine.budget  # Note [One budget per loop] in budget.py
        chained: tuple | None = None
        graph_task: Any = None  # the current one whenever ``chained`` is set
        # the current graph task's fields read by the chain step (Note [One evaluate path])
        fast = keep_graph = create_graph = False
        dependencies: Any = None
        shards: list | None = None
        not_ready: dict = {}
        spent, budget = 0, CLOCK_BUDGET  # Note [Reading the clock]
        while True:
            if chained is not None:  # Note [Chains skip the heap]: graph_task is still current
                node, inputs = chained
                chained = None
                if graph_task.has_error:  # its own hook may have cancelled it
                    continue
                placement = node.placement
                if not (placement is by_cost and node.work < threshold or placement is on_loop):
                    heappush(heap, node_task(graph_task, node, inputs, queue.counter))  # where it runs: when popped
                    continue
            else:
                if not heap:
                    # an idle or ending server holds no graph task either (Note [A server's context is emptied
                    # as it ends], Note [A failed backward frees its graph] in scope.py: its frame may be in a
                    # traceback); and current is None after every await: a helper looks at its reentry again
                    entry = node = inputs = graph_task = current = profile = outputs = fns = fn = counts = None
                    dependencies = shards = None
                    not_ready = {}
                    if reentry is None:
                        if not engine.live and not self.in_flight:
                            return
                    elif reentry.ended():
                        reentry = None  # as in _help
                        return
                    current_graph_task.set(None)
                    current_recorder.set(None)
                    await queue.wait()
                    continue
                entry = heappop(heap)
                graph_task, node, inputs = entry[GRAPH_TASK], entry[NODE], entry[INPUTS]
                if graph_task.has_error:
                    continue  # its queued nodes were dropped when it ended; a late one is dropped here
                if graph_task is not current:
                    if reentry is not None and reentry.ended():  # Note [Reentrant priority]
                        heappush(heap, entry)
                        entry = node = inputs = graph_task = current = reentry = None  # as in _help
                        return
                    if graph_task.scope.holds:  # Note [Reentrant priority]
                        graph_task.scope.defer(self, entry)
                        continue
                    if not portal and (portal_needed[0] or hooks_in_use[0]):  # Note [Servers become portals on demand]
                        heappush(heap, entry)
                        await greenback.ensure_portal()
                        portal = True
                        current = None
                        continue
                    current = graph_task
                    profile = graph_task.profile
                    threshold = device.inline_threshold if graph_task.threads else NEVER
                    budget = CLOCK_BUDGET if profile is None else -1  # profiled: every node is timed
                    fast = (CHAIN_STEP and graph_task.exec_info is None and not graph_task.check_nan
                            and (evaluate is None or stream_sync.on_defaults(device)))
                    keep_graph, create_graph = graph_task.keep_graph, graph_task.create_graph
                    dependencies, shards = graph_task.dependencies, graph_task.dependency_shards
                    not_ready = graph_task.not_ready
                    grad_enabled.set(graph_task.create_graph)
                    current_graph_task.set(graph_task)
                    current_recorder.set(profile)
                placement = node.placement
                if not (placement is by_cost and node.work < threshold or placement is on_loop):
                    if placement is OWN_TASK:
                        self._spawn(graph_task, node, inputs, _AS_TASK)
                        current = None  # Note [Reentrant priority]: the next node looks at ``holds``
                        if heap:
                            await asyncio.sleep(0)  # the task takes its first step (and maybe reenters) first
                        continue
                    if node.work >= threshold and not (  # Note [Nothing to overlap]
                            placement is by_cost and not self.in_flight and node.work < threshold * ALONE_INLINE_FACTOR
                            and alone(heap, threshold)):
                        if self.in_flight >= device.num_workers and not self.blocked:
                            heappush(heap, entry)  # back in its place; taken again once a thread is free
                            await self._free_slot()
                            current = None
                            continue
                        if self.in_flight < device.num_workers:
                            self._spawn(graph_task, node, inputs, _IN_EXECUTOR)
                            continue
                        # Every executor thread waits on a reentrant backward: run it here instead.
                    # a PORTAL node below the threshold runs here too: this server is a portal
            start = clock() if profile is not None else 0.0
            try:
                # Note [One evaluate path]: call_function's first branch, then route's for one edge
                if fast and (plain is None or plain(graph_task)):
                    if node._hooks is None and not node.call_on_undefined and inputs and inputs[0] is not None:
                        outputs = node.apply(inputs, create_graph)
                        if not keep_graph and (node.saved or node.saves_variables):
                            node.release_variables()
                    else:
                        outputs = call_function(graph_task, node, inputs)
                    fns = node.edge_fns
                    fn = fns[0] if fns else None
                    if (fn is not None and not heap and len(outputs) == len(fns)
                            and (len(fns) == 1 or len(fns) == 2 and fns[1] is None)
                            and len(fn._input_meta) == 1 and fn._input_meta[0][2] is device):
                        counts = dependencies if shards is None else shards[SHARD_OF[fn.sequence_nr % SPREAD]]
                        if counts.get(fn) == 1 and not not_ready:  # ready now, and no buffer was begun for it
                            grad = outputs[0]
                            outputs = None  # the buffer's reference must stay the only one (see owned_by)
                            if grad is not None:
                                meta = fn._input_meta[0]
                                if grad.shape != meta[0] or grad.dtype is not meta[1]:
                                    grad = validate_grad(node, 0, grad, meta, create_graph)
                            del counts[fn]
                            if not counts and shards is not None:
                                shards[SHARD_OF[fn.sequence_nr % SPREAD]] = {}
                            chained = (fn, [grad])  # it inherits this node's outstanding count
                            grad = None
                        else:
                            chained = route(graph_task, node, outputs, queue)
                            outputs = None
                    elif not fns and not outputs:  # a sink: nothing to route (route's checks all pass)
                        outputs = None
                        if plain is not None:
                            route(graph_task, node, ())  # its stream is a leaf stream (Note [Plain streams])
                    elif (len(fns) == 2 and not heap and profile is None and len(outputs) == 2 and plain is None
                          and fns[1].__class__ is AccumulateGrad and not not_ready):
                        held = [outputs]  # handed over whole: this frame keeps no reference (see owned_by)
                        entry = inputs = outputs = None
                        chained = self._sink_beside(graph_task, node, held, dependencies, shards, create_graph)
                        if chained is not FALLBACK:
                            spent += NODE_CLOCK_COST  # the sink's own step (Note [Reading the clock])
                            if chained is RAN:
                                chained = None
                        else:
                            chained = route(graph_task, node, held.pop(), queue)
                    else:
                        chained = route(graph_task, node, outputs, queue)
                        outputs = None
                elif evaluate is not None:
                    evaluate(graph_task, node, inputs)
                elif graph_task.exec_info is None:
                    chained = route(graph_task, node, call_function(graph_task, node, inputs), queue)
                else:
                    engine.evaluate_function(graph_task, node, inputs)
            except BaseException as exc:  # user code ran synchronously: never the worker's own cancellation
                graph_task.scope.fail(exc, node)
            else:  # Note [task_done inlined]
                if chained is None:  # a chained consumer inherits this node's outstanding count
                    graph_task.outstanding_tasks -= 1
                    if not graph_task.outstanding_tasks:
                        graph_task.scope.finish()
            spent += node.work + NODE_CLOCK_COST  # Note [Reading the clock]
            if spent > budget:
                spent = 0
                if profile is not None:
                    profile.record(node, device, self.name, graph_task, start, clock(), True)
                if loop_budget.due():
                    if chained is not None:  # queued while the loop runs others: where a new node may come first
                        heappush(heap, node_task(graph_task, chained[0], chained[1], queue.counter))
                        chained = None
                    # parked, the server holds nothing of a graph: a graph task this node just finished is
                    # freed as its caller resumes (its gradients' buffers go back to their cache), and a
                    # running one's fields are read again at the next switch (``current`` is None)
                    entry = node = inputs = graph_task = current = profile = outputs = fns = fn = counts = None
                    dependencies = shards = None
                    not_ready = {}
                    await loop_budget.give_way()

    def _sink_beside(self, graph_task: GraphTask, node: Node, held: list, dependencies: Any, shards: Any,
                     create_graph: bool) -> Any:
        """Note [A leaf's sink beside the chain]: a node whose second edge is a leaf's AccumulateGrad (a
        layer's weight or bias beside its input), both consumers ready with this gradient, the heap empty
        and no buffer begun: route would queue the two, and the sink pops first (Note [Leaves run first]
        in variable/accumulate.py). The sink is run here instead, as the worker runs a popped sink
        (validated as route validates, apply, nothing to release, nothing to route), and the first
        consumer, if any, is returned to be chained (a first layer's input needs no gradient: its edge
        is None): ``RAN`` when there is none. Only a sink that runs no user code (no hooks, no
        post-accumulate hooks) and cannot fail on its own is taken, so no error is ever attributed to
        the wrong node; else ``FALLBACK``, and ``held`` still holds the outputs for route. The outputs
        come in ``held`` alone, so that the gradients' only references are their buffers' when the
        sink and the consumer take them (``owned_by``). What it buys: two queue entries per layer
        parameter (W3, ``python -m benchmarks.interleaved --only W3``)."""
        fns = node.edge_fns
        fn, sink = fns
        device = self.device
        outputs = held[0]
        if (sink._hooks is not None or sink._input_meta[0][2] is not device or outputs[1] is None
                or fn is not None and (len(fn._input_meta) != 1 or fn._input_meta[0][2] is not device)):
            return FALLBACK
        if shards is None:
            counts = sink_counts = dependencies
        else:
            counts = None if fn is None else shards[SHARD_OF[fn.sequence_nr % SPREAD]]
            sink_counts = shards[SHARD_OF[sink.sequence_nr % SPREAD]]
        if (fn is not None and counts.get(fn) != 1) or sink_counts.get(sink) != 1 or sink.call_on_undefined:
            return FALLBACK
        grad, sink_grad = held.pop()
        outputs = None
        if grad is not None and fn is not None:
            meta = fn._input_meta[0]
            if grad.shape != meta[0] or grad.dtype is not meta[1]:
                grad = validate_grad(node, 0, grad, meta, create_graph)
        meta = sink._input_meta[0]
        if sink_grad.shape != meta[0] or sink_grad.dtype is not meta[1]:
            sink_grad = validate_grad(node, 1, sink_grad, meta, create_graph)
        if fn is not None:
            del counts[fn]
            if not counts and shards is not None:
                shards[SHARD_OF[fn.sequence_nr % SPREAD]] = {}
        del sink_counts[sink]
        if not sink_counts and shards is not None:
            shards[SHARD_OF[sink.sequence_nr % SPREAD]] = {}
        sink_inputs = [sink_grad]
        sink_grad = None
        sink.apply(sink_inputs, create_graph)
        return RAN if fn is None else (fn, [grad])  # the consumer inherits the node's outstanding count

    def add_blocked(self, delta: int) -> None:
        """A kernel thread of this device started (+1) or stopped (-1) waiting on a reentrant backward."""
        self.blocked += delta
        self._release_slot()

    def _release_slot(self) -> None:
        slot = self._slot
        if slot is not None:
            self._slot = None
            if not slot.done():
                slot.set_result(None)

    async def _free_slot(self) -> None:
        """Wait until a kernel thread is free (several servers may wait on the same future)."""
        while self.in_flight >= self.device.num_workers and not self.blocked:
            if self._slot is None or self._slot.done():
                self._slot = asyncio.get_running_loop().create_future()
            await self._slot

    def _spawn(self, graph_task: GraphTask, node: Node, inputs: list, where: int) -> None:
        """Run ``node`` as a task of its own, owned by its graph task's scope and settled by its
        done-callback (Note [Who settles a node task] in scope.py)."""
        if where == _IN_EXECUTOR:
            self.in_flight += 1
        task = graph_task.scope.spawn(self._run_elsewhere(graph_task, node, inputs, where),
                                      functools.partial(self._settle, graph_task, node, where, time.perf_counter()))
        if where == _AS_TASK:
            greenback.bestow_portal(task)  # Note [Awaiting nodes]

    async def _run_elsewhere(self, graph_task: GraphTask, node: Node, inputs: list, where: int) -> None:
        """A large kernel in the executor, or an ``async def`` backward on the loop. Its bookkeeping is
        ``_settle``'s."""
        engine = self.engine
        # Note [Streaming backwards]: a non-cpu node's kernel and routing run on its forward stream
        s = None if self.device.is_cpu else forward_stream(node, self.device)
        try:
            if s is not None:
                stream_sync.before(graph_task, node, s)
            if graph_task.exec_info is not None:
                inputs = engine.capture(graph_task, node, inputs)
                if inputs is None:
                    if s is not None:
                        stream_sync.after(graph_task, node, s)
                    return
            if where == _IN_EXECUTOR:
                # Abandoned on cancel: the thread finishes into the void (Note [Cancellation] in engine.py).
                # A traced kernel records itself, timed in its thread (asyncgrad.profiler).
                # in_flight keeps at most num_workers of this device's kernels running.
                kernel = call_function if graph_task.profile is None else graph_task.profile.timed(self, call_function)
                loop = asyncio.get_running_loop()
                if s is None:
                    outputs = await submit(loop, run_kernel, self, loop, kernel, graph_task, node, inputs)
                else:  # the kernel thread makes the node's stream (and device) current for the kernel
                    outputs = await submit(loop, run_kernel, self, loop, stream_sync.on_stream, s, kernel, graph_task,
                                           node, inputs)
            else:
                outputs = await call_function_async(graph_task, node, inputs)
            if not graph_task.has_error:
                if s is None:
                    engine.route(graph_task, node, outputs)
                else:
                    stream_sync.route(engine, graph_task, node, outputs, s)
        except asyncio.CancelledError as exc:
            # _settle tells this graph task's own abort from a foreign cancellation, and nobody sees this
            # exception: its frames (the node's own included) let go of the graph, and so does this one,
            # since greenback's portal keeps it in a cycle (Note [A failed backward frees its graph] in scope.py)
            traceback.clear_frames(exc.__traceback__)
            del exc
            graph_task = node = inputs = outputs = kernel = s = None  # noqa: F841
            raise
        except BaseException as exc:
            graph_task.scope.fail(exc, node)

    def _settle(self, graph_task: GraphTask, node: Node, where: int, start: float, task: asyncio.Task) -> None:
        scope = graph_task.scope
        if scope is not None:
            scope.settle(task)
        if where == _IN_EXECUTOR:
            self.in_flight -= 1
            self._release_slot()
            if not self.in_flight and not self.engine.live:
                self.queue.wake()  # Note [Idle workers]
        if graph_task.profile is not None and where != _IN_EXECUTOR:  # a kernel recorded itself in its thread
            graph_task.profile.record(node, self.device, f"{self.name} {_LANES[where]}", graph_task, start,
                                      time.perf_counter(), False)
        if graph_task.has_error or scope is None:
            return
        if task.cancelled():
            scope.fail(asyncio.CancelledError(), node)
        else:
            scope.task_done()
