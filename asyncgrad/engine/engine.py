"""The engine: runs a recorded graph backward, one GraphTask per call, on the event loop.

It knows nodes, edges, gradients and devices, never individual ops. ``execute`` counts
dependencies, marks what ``grad()``/``inputs=`` need, pushes the root task to its device's
queue and awaits the graph task's future; device workers (``worker.py``) pop tasks and
call ``evaluate_function`` (its two steps spelled out on the cpu worker: Note [One evaluate
path] in worker.py), which runs the node with its hooks and routes each output gradient
into the consumer's input buffer, enqueuing consumers that became ready.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from heapq import heappush
from typing import Any, Callable

from asyncgrad.devices import Device, cpu
from asyncgrad.engine.budget import LoopBudget
from asyncgrad.engine.calls import call_function, check_nan, validate_grad
from asyncgrad.engine.counts import SHARD_AT, SHARD_OF, SPREAD, ShardedMap, ShardedSet
from asyncgrad.engine.gcfreeze import FrozenWhileBusy
from asyncgrad.engine.graph_task import ExecInfo, GraphTask, current_exec_group, current_graph_task, current_recorder
from asyncgrad.engine.input_buffer import accumulate, buffer_device, new_buffer
from asyncgrad.engine.kernels import _kernel_thread
from asyncgrad.engine.ready_queue import ReadyQueue, node_task
from asyncgrad.engine.scope import GraphTaskScope
from asyncgrad.engine.worker import DeviceWorker
from asyncgrad.graph.anomaly import anomaly_enabled
from asyncgrad.graph.grad_mode import multithreading_enabled
from asyncgrad.graph.node import Edge, GraphRoot, Node, portal_needed
from asyncgrad.variable.hook_calls import run_tensor_pre

# Note [Reentrant backwards]: a node that itself runs a backward (an ``async def`` backward
# awaiting ``ag.backward``, or a plain one calling ``ag.backward_sync`` from its kernel thread)
# starts a child GraphTask with ``reentrant_depth = parent + 1``; so does any plain code the engine
# runs (a hook) calling ``backward_sync``. An ``async def`` backward runs as a task of its own, so
# the worker keeps serving the queue, where the child's deeper tasks sort first; plain code on the
# loop suspends its server in a greenback portal while a helper server serves the queue until the
# child has ended (Note [Servers], Note [Reentrant priority] in worker.py). Nothing grows the
# Python stack with depth. A child started from a node of graph task P is one of P's scope's
# ``children`` for as long as it runs (Note [One owner per graph task] in scope.py), so that P failing
# or being cancelled aborts it too, whichever way it was started (an awaited call, a greenback
# portal, or ``backward_sync`` from a kernel thread: Note [Kernel threads] in kernels.py).

# Note [Cancellation]: when the task awaiting ``execute`` is cancelled (``task.cancel()``,
# ``asyncio.wait_for``, ``anyio.fail_after``), ``execute`` aborts its graph task (its scope's
# ``abort``) before the ``CancelledError`` propagates: the graph task leaves ``live``, its queued nodes are dropped,
# its node tasks and reentrant children are cancelled (a child that a kernel thread had not yet
# started is refused when it tries: its parent ``has_error``), and kernels still running in
# threads are abandoned: they finish into the void, their results dropped when they return
# (only loop code routes and accumulates, and it checks ``has_error`` first). ``execute`` then
# waits for its node tasks and children to settle (Note [Wind-down] in scope.py). So once the
# caller sees ``CancelledError``, nothing of that call writes to any ``.grad`` any more, children included.
# What it accumulated *before* the cancel stays, as a torch backward interrupted by
# KeyboardInterrupt keeps it: each AccumulateGrad runs whole, on the loop, so a leaf that only
# this graph task reaches holds all of this call's gradient or none of it; a leaf that
# reentrant children also accumulate into (checkpointed blocks' parameters, custom backwards
# that run a backward) may hold the contributions of the children that finished before the
# cancel; hooks that ran have run. Other graph tasks are not affected
# (``python -m benchmarks.faults_stress``; the figures are in RELIABILITY.md).
#

# Note [The implicit gradient is made on the budget]: ``backward()``/``grad()`` of a scalar root with no
# gradient given check the root where they are called, as torch does, but pass ``ONES`` in
# ``grad_outputs`` instead of the array: ``execute`` makes it (``implicit_ones``, from the root edge's
# input metadata: the root's shape, dtype and device, as ``route`` checks gradients against them) once
# the graph task's start has its turn on the loop's budget, in place in the list, which is the call's
# own (made for it by the front door, read once). With ``create_graph`` the gradient is a Tensor, which
# the engine does not know: the front door's coroutine makes it from the same array, after waiting for
# its turn on the same budget (``_implicit_tensors`` in autograd/api.py). So a caller that starts many
# backwards in one step (``gather(*(loss.backward() for loss in losses))``) pays in that step for
# the checks and the awaitable only, and the arrays are made in the engine's slices (Note [One
# budget per loop] in budget.py).


class _Ones:
    """The type of ``ONES``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ONES"


ONES = _Ones()
"""An initial gradient that ``execute`` makes: ones of its root's metadata (Note [The implicit gradient
is made on the budget])."""


def implicit_ones(root: Edge) -> Any:
    """The implicit gradient of ``root``: ones of its shape and dtype on its device. A 0-d root (a
    loss, nearly every call) gets the number 1 copied in, the same array without a fill's Python
    (W3's step: ``python -m benchmarks.w3_breakdown``)."""
    fn, nr = root
    shape, dtype, device = fn._input_meta[nr]
    if not shape:
        return device.backend.from_host(1, dtype)
    return device.backend.ones(shape, dtype)


class Engine:
    """One per event loop; holds the device workers.

    It keeps no reference to its loop (only running tasks and futures do), so the engine is
    dropped with the loop; kernel threads belong to ``kernels.py``, not to the engine.
    """

    def __init__(self) -> None:
        self.workers: dict[Device, DeviceWorker] = {}
        self.live: set[GraphTask] = set()
        self.budget = LoopBudget()
        """The loop's time budget, shared by every graph task and server (Note [One budget per loop] in
        budget.py)."""

    # ------------------------------------------------------------------ devices
    def worker(self, device: Device) -> DeviceWorker:
        worker = self.workers.get(device)
        if worker is None:
            worker = self.workers[device] = DeviceWorker(self, device)
        return worker

    def push(self, graph_task: GraphTask, node: Node, inputs: list) -> None:
        graph_task.outstanding_tasks += 1
        worker = self.worker(buffer_device(node, cpu))
        worker.ensure_running()
        worker.queue.push(graph_task, node, inputs)

    # ------------------------------------------------------------------ execute
    async def execute(self, roots: list[Edge], grad_outputs: list, keep_graph: bool, create_graph: bool,
                      accumulate_grad: bool, outputs: list[Edge] | None = None) -> list:
        """Run backward from ``roots``; return the gradients captured for ``outputs``."""
        if self.budget.due():  # Note [One budget per loop]: many started in one step wait their turn here
            await self.budget.give_way()
        for i, g in enumerate(grad_outputs):  # the call's own list: Note [The implicit gradient is made on the budget]
            if g is ONES:
                grad_outputs[i] = implicit_ones(roots[i])
        parent = current_graph_task.get()
        anomaly, check_nan = anomaly_enabled.get()
        skip_root = len(roots) == 1
        graph_root: Node = roots[0][0] if skip_root else GraphRoot(tuple(roots), grad_outputs)
        graph_task = GraphTask(
            asyncio.get_running_loop().create_future(), keep_graph, create_graph,
            0 if parent is None else parent.reentrant_depth + 1, anomaly, anomaly and check_nan,
            current_recorder.get(), multithreading_enabled.get(), graph_root,
            current_exec_group.get() if parent is None else parent.exec_group,
        )
        min_topo_nr = 0
        if outputs is not None:
            live = [fn.topological_nr for fn, _ in outputs if fn is not None]
            min_topo_nr = min(live) if live else 0
        scope = GraphTaskScope(self, graph_task, parent)  # Note [One owner per graph task] in scope.py
        try:
            if parent is not None and parent.has_error:
                raise asyncio.CancelledError()  # a node of an aborted graph task is still running
            await compute_dependencies(graph_root, graph_task, min_topo_nr)
            if outputs is not None:
                await init_to_execute(graph_task, graph_root, outputs, accumulate_grad, min_topo_nr)
                if not graph_task.exec_info[graph_root].should_execute() and (
                        not skip_root or graph_root._hooks is None):
                    return graph_task.captured_vars  # Note [A root that leads to no input]
            if skip_root:
                self.push(graph_task, graph_root, new_buffer(graph_root, roots[0][1], grad_outputs[0]))
            else:
                self.push(graph_task, graph_root, [])
            return await scope.outcome()
        except BaseException:
            scope.abort()
            await scope.wind_down()
            raise
        finally:
            scope.close()
            # Note [A failed backward frees its graph] in scope.py: this frame is in the traceback
            # the caller gets, so it holds nothing of the graph
            del scope, graph_task, graph_root, parent, roots, grad_outputs, outputs

    # ------------------------------------------------------------------ running one node
    def evaluate_function(self, graph_task: GraphTask, node: Node, inputs: list) -> None:
        """Run ``node`` inline and route its outputs (the fast path of a device worker)."""
        if graph_task.exec_info is not None:
            inputs = self.capture(graph_task, node, inputs)
            if inputs is None:
                return
        self.route(graph_task, node, call_function(graph_task, node, inputs))

    def capture(self, graph_task: GraphTask, node: Node, inputs: list) -> list | None:
        """Store the gradients ``grad()`` asked for; None when the node itself need not run."""
        info = graph_task.exec_info.pop(node, None)  # its last use: a huge graph's map shrinks as it runs
        if info is None:
            return None
        if not info.needed and node._hooks is not None:
            inputs = run_tensor_pre(node._hooks, node, list(inputs), graph_task.create_graph)
        if info.captures is not None:
            captured = graph_task.captured_vars
            for input_nr, output_idx in info.captures:
                captured[output_idx] = inputs[input_nr]
        return inputs if info.needed else None

    def route(self, graph_task: GraphTask, node: Node, outputs: Any, chain: ReadyQueue | None = None) -> tuple | None:
        """Send each output gradient to its consumer's input buffer; enqueue the ready ones.

        ``chain``: the queue of the server that ran ``node`` inline. A consumer that becomes ready
        for that very queue while it is empty is returned as ``(node, inputs)`` instead of pushed,
        for the server to run next (Note [Chains skip the heap] in worker.py); returns None else.
        The returned consumer is not counted in ``outstanding_tasks``: it inherits ``node``'s count,
        which the server then does not count done (Note [One evaluate path] in worker.py).
        """
        fns = node.edge_fns  # Note [A node's edges are two parallel tuples] in graph/node.py
        if graph_task.check_nan:
            check_nan(node, outputs, graph_task.create_graph)
        if len(outputs) != len(fns):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid number of gradients - expected {len(fns)}, "
                f"but got {len(outputs)}"
            )
        nrs = node.edge_nrs
        dependencies = graph_task.dependencies
        # Note [Shards picked inline]: on a graph past ``SHARD_AT`` (Note [Sharded counts] in counts.py),
        # ``route`` picks the consumer's shard itself (``ShardedMap``'s arithmetic, from the shard list
        # ``compute_dependencies`` leaves in ``graph_task.dependency_shards``) and lets an emptied shard go
        # as ``ShardedMap.pop`` does; it must stay ``ShardedMap``'s arithmetic
        # (tests/test_engine_sharded_route.py). What it buys: Python calls per routed gradient on a huge
        # graph (W1 at N=30,000, ``python -m benchmarks --only W1``); a plain dict pays the slot read and
        # one ``is None`` per edge.
        #
        shards = graph_task.dependency_shards  # Note [Shards picked inline]
        not_ready = graph_task.not_ready
        exec_info = graph_task.exec_info
        last_device = heap = counter = queue = chained = None
        for i, grad in enumerate(outputs):
            fn = fns[i]
            if fn is None:
                continue
            input_nr = nrs[i]
            if grad is not None:
                meta = fn._input_meta[input_nr]
                # ``is not``: an accelerator's raw array carries its library's dtype object, which must not
                # be compared with numpy's here; validate_grad compares through the backend
                if grad.shape != meta[0] or grad.dtype is not meta[1]:
                    grad = validate_grad(node, i, grad, meta, graph_task.create_graph)
            if shards is None:
                counts = dependencies
            else:
                shard = SHARD_OF[fn.sequence_nr % SPREAD]
                counts = shards[shard]
            try:
                count = counts[fn] - 1
            except KeyError:
                raise RuntimeError(f"dependency not found for {fn.name()}") from None
            if count:
                counts[fn] = count
            else:
                del counts[fn]
                if not counts and shards is not None:
                    shards[shard] = {}  # as ShardedMap.pop: an emptied shard is let go at once
            buffer = not_ready.get(fn)
            if buffer is None:
                if exec_info is not None:
                    info = exec_info.get(fn)
                    if info is None or not info.should_execute():
                        continue
                # Note [One-input buffers inlined]: for a consumer with one input (most nodes), ``route``
                # builds its buffer (``[grad]``) and reads its device (``metas[0][2]``) itself; it must agree
                # with ``new_buffer`` and ``buffer_device`` (input_buffer.py), which begin with the same test and
                # serve every other caller. What it buys: two calls per routed gradient on W1's backward
                # (``python -m benchmarks --only W1``).
                buffer = [grad] if len(fn._input_meta) == 1 else new_buffer(fn, input_nr, grad)
                if count:
                    not_ready[fn] = buffer
                    continue
            else:
                accumulate(buffer, input_nr, grad)
                if count:
                    continue
                del not_ready[fn]
            metas = fn._input_meta
            device = metas[0][2] if len(metas) == 1 else buffer_device(fn, cpu)
            # Note [Routing inlined]: a ready consumer is pushed onto its worker's heap here (its entry made
            # by ``node_task``, as ``ReadyQueue.push`` makes it), and its worker looked up with
            # ``Engine.worker``'s dict read (started when its task is None, ``ensure_running``'s test).
            # ``worker``, ``ensure_running`` and ``push`` stay the one way for every other caller. What it
            # buys: three calls per routed gradient (``python -m benchmarks --only W1,W2``).
            if device is not last_device:  # Note [Routing inlined]
                last_device = device
                worker = self.workers.get(device) or self.worker(device)
                if worker.task is None:
                    worker.ensure_running()
                queue = worker.queue
                heap = queue.heap
                counter = queue.counter
            if queue is chain and chained is None and not heap:  # Note [Chains skip the heap] in worker.py
                chained = (fn, buffer)  # it inherits ``node``'s outstanding count, which the worker keeps
                continue
            graph_task.outstanding_tasks += 1
            heappush(heap, node_task(graph_task, fn, buffer, counter))
            if queue.waiters:
                queue.wake()
        if chained is not None and chain.heap:  # another consumer came after it: the heap orders them
            graph_task.outstanding_tasks += 1
            heappush(chain.heap, node_task(graph_task, chained[0], chained[1], chain.counter))
            return None
        return chained

    # ------------------------------------------------------------------ callbacks
    def queue_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the current graph task has finished all its nodes.

        Final callbacks run synchronously as the graph task ends, so an ``async def`` one,
        which would never be awaited, is refused here rather than silently skipped.
        """
        graph_task = current_graph_task.get()
        if graph_task is None:
            raise RuntimeError("Final callbacks can only be installed during backward pass.")
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        if inspect.iscoroutinefunction(inspect.unwrap(callback)):
            raise TypeError("queue_callback() takes a plain function; an async def callback would never be awaited")
        portal_needed[0] = True  # plain code run by a server: Note [Servers become portals on demand] in worker.py
        graph_task.final_callbacks.append(callback)


async def compute_dependencies(root: Node, graph_task: GraphTask, min_topo_nr: int) -> None:
    """Count, for every node reachable from ``root``, how many edges point at it (iteratively).

    Nodes below ``min_topo_nr`` cannot lead to an output of ``grad()``: they are counted
    but not expanded (torch's topological_nr pruning). A huge graph is walked in slices
    (Note [Slices]) and its counts are sharded (Note [Sharded counts] in counts.py).
    """
    dependencies = graph_task.dependencies
    shards = None
    stack = [root]
    pop = stack.pop
    push = stack.append
    budget = get_engine().budget
    steps = 0
    while stack:
        fn = pop()
        if min_topo_nr and fn.topological_nr < min_topo_nr:
            continue
        for next_fn in fn.edge_fns:
            if next_fn is not None:
                counts = dependencies if shards is None else shards[SHARD_OF[next_fn.sequence_nr % SPREAD]]
                if next_fn in counts:
                    counts[next_fn] += 1
                else:
                    counts[next_fn] = 1
                    push(next_fn)
        steps += 1
        if not steps & _SLICE_MASK:
            if shards is None and len(dependencies) > SHARD_AT:
                graph_task.shard_dependencies(ShardedMap(dependencies))
                shards = graph_task.dependency_shards
            if budget.due():
                await _next_slice(graph_task, budget)
    if shards is not None:
        FrozenWhileBusy.settle()  # Note [Full passes while busy] in gcfreeze.py


# Note [A root that leads to no input]: as torch's GraphTask::init_to_execute, the root has an
# entry in ``exec_info`` even when no path leads from it to an input of ``grad()``/``inputs=``, and
# the root node is still evaluated: ``capture`` finds it not needed and runs only its tensor
# pre-hooks (``register_hook`` and ``retain_grad`` of the root tensor) before skipping it. torch
# does this for a single root (its graph root is the root's own node); for several roots, its
# GraphRoot is skipped and the roots' own nodes are never reached. A root without hooks has
# nothing to run, so ``execute`` returns at once then.


async def init_to_execute(graph_task: GraphTask, root: Node, outputs: list[Edge], accumulate_grad: bool,
                          min_topo_nr: int) -> None:
    """Mark the nodes on a path from ``root`` to an output; register captures for ``grad()``.

    A depth-first walk marks a node once all its children are settled (post-order), so one
    pass suffices and the walk can pause between slices (Note [Slices]); on a huge graph its
    maps are sharded (Note [Sharded counts] in counts.py).
    """
    exec_info: dict[Node, ExecInfo] | ShardedMap = {root: ExecInfo()}  # Note [A root that leads to no input]
    graph_task.expect(exec_info, len(outputs))
    for output_idx, (fn, input_nr) in enumerate(outputs):
        if fn is None:
            continue
        info = exec_info.setdefault(fn, ExecInfo())
        if accumulate_grad:
            info.needed = True
        else:
            if info.captures is None:
                info.captures = []
            info.captures.append((input_nr, output_idx))
    visited: set[Node] | ShardedSet = {root}
    stack = [(root, iter(root.edge_fns))]
    budget = get_engine().budget
    steps = 0
    while stack:
        fn, children = stack[-1]
        for child in children:
            if child is not None and child not in visited:
                visited.add(child)
                if child.topological_nr >= min_topo_nr:
                    stack.append((child, iter(child.edge_fns)))
                    break
        else:
            stack.pop()
            for child in fn.edge_fns:
                info = exec_info.get(child) if child is not None else None
                if info is not None and info.should_execute():
                    exec_info.setdefault(fn, ExecInfo()).needed = True
                    break
        steps += 1
        if not steps & _SLICE_MASK:
            if type(visited) is set and len(visited) > SHARD_AT:
                visited = ShardedSet(visited)
            if type(exec_info) is dict and len(exec_info) > SHARD_AT:
                exec_info = ShardedMap(exec_info)
                graph_task.expect(exec_info)
            if budget.due():
                await _next_slice(graph_task, budget)
    if type(exec_info) is ShardedMap:
        FrozenWhileBusy.settle()  # Note [Full passes while busy] in gcfreeze.py
    if type(visited) is ShardedSet:  # freed a shard at a time, not in one long step
        while visited.drop_shard():
            if budget.due():
                await _next_slice(graph_task, budget)


_SLICE_MASK = 1023
"""Note [Slices]: preparing a huge graph is a long stretch of pure Python. Every 1024 steps the
walk asks the loop's budget (Note [One budget per loop] in budget.py) and, once it is spent, lets the
loop run other coroutines, so the engine never holds the loop much longer than ``YIELD_AFTER_S``
(``python -m benchmarks.stalls --only chain``; the figures are in RELIABILITY.md). A graph task
aborted meanwhile stops there."""


async def _next_slice(graph_task: GraphTask, budget: LoopBudget) -> None:
    await budget.give_way()
    if graph_task.has_error:
        raise asyncio.CancelledError()


_engines: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Note [Engine per loop, not a RunVar]: the engine of each event loop, keyed weakly by the loop,
so it is created by the first backward on a loop and dropped with it (DESIGN decision 4). This is
the storage behind anyio's ``RunVar`` too (a WeakKeyDictionary keyed by the running loop), but
``RunVar`` finds the loop through sniffio, which recognizes asyncio only inside a Task: in a
plain loop callback (``call_soon``, a done-callback such as ``DeviceWorker._settle``, which ends a
graph task and so runs its final callbacks, where user code may call ``get_engine()``)
``RunVar.get`` raises ``NoEventLoopError`` although a loop is running. Neither helps a
kernel thread, which has no running loop: there ``get_engine`` takes the engine its kernel runs
for from the thread's mark (``_kernel_thread``). tests/engine/test_engine_parts.py checks both cases."""


def get_engine() -> Engine:
    """The running loop's engine, created on first use and gone with the loop (Note [Engine per
    loop, not a RunVar]).

    In a kernel thread (a hook or a plain-def backward that runs there) it is the engine the
    kernel runs for, so ``get_engine().queue_callback(cb)`` works wherever user code runs
    during a backward (the callback list is only read once every node has returned).
    """
    loop = asyncio._get_running_loop()
    if loop is None:
        worker = getattr(_kernel_thread, "worker", None)
        if worker is not None:
            return worker.engine
        raise RuntimeError("no running event loop")
    last_loop, last_engine = _last
    if last_loop() is loop:
        engine = last_engine()
        if engine is not None:
            return engine
    engine = _engines.get(loop)
    if engine is None:
        engine = _engines[loop] = Engine()
    _last[:] = weakref.ref(loop), weakref.ref(engine)
    return engine


_last: list = [lambda: None, lambda: None]
"""The last loop asked for and its engine, both weakly: most calls come from the same loop as the
last (Note [A cheap call] in budget.py), and neither is kept alive by this."""
