"""The device worker: one coroutine per device in use, serving that device's ready queue.

Note [Per-node cost]: a small node runs inline in the worker's loop iteration: no Task, no
future, no thread hop, no context manager. The worker switches grad mode and the current
graph task only when the graph task changes, and yields to the event loop every couple of
milliseconds so other coroutines stay responsive. Every queued entry is a node (Note [Priority]
in ready_queue.py), so nothing is tested for a special entry. Where a node runs costs the common
case two comparisons: ``placement`` (a class attribute, Note [Placement] in autograd/graph.py) is
BY_COST and ``work`` is below the threshold read when the graph task changed; an ON_LOOP node two
``is``. Against the single ``work >= threshold`` that sentinel costs allowed (and the test for a
special entry), that is 214 more instructions per node, 0.7% of W1's backward (Note [Measuring
the hot path]): Python 3.11 does not specialize the load of a class attribute through an
instance (``LOAD_ATTR_ADAPTIVE``, where ``node.work`` is a ``LOAD_ATTR_SLOT``); 3.12 does.
A non-cpu worker runs each node through ``stream_sync.evaluator`` (Note [Streaming backwards] in
stream_sync.py), chosen when the worker starts: the cpu worker's loop is the same as without streams.

Note [Measuring the hot path]: per-node costs quoted in the engine's notes are instruction counts
from cachegrind (``valgrind --tool=cachegrind``): W1 (a chain of 3000 tiny ops on a (4,) leaf,
three backwards), forward alone subtracted, the worker's clock-driven yields switched off (they
depend on time, and under valgrind time runs 50x slower), the mean of three runs with different
heap layouts (which alone move the count by 0.3%). On this 2-core machine shared with other
work, wall-clock timings of one variant against another differed by more than the effects
measured; the count does not, and W1's backward runs about 4,600 instructions per µs here
(29,800 per node at 6.4 µs per node), which converts one into the other.

Note [Evaluation inlined]: on the cpu worker, a node of a graph task that captures nothing (every
``backward``; ``grad`` runs ``evaluate_function``, which captures) is run and routed by ``_serve``
itself, ``Engine.evaluate_function``'s last line: the call cost 409 instructions per node, 1.4%
of W1's backward.

Note [task_done inlined]: after an inline node, ``_serve`` counts it done with
``Engine.task_done``'s two lines instead of calling it: the call costs 382 instructions per node,
1.3% of W1's backward, about 0.08 µs per node (Note [Measuring the hot path]). It leaves out
``task_done``'s ``has_error`` test, which cannot fail there: an inline node that returned did not
end its graph task (nothing else runs on the loop meanwhile, and it cannot start a reentrant
backward: Note [Placement]).

Note [Chains skip the heap]: most backward graphs are mostly chains: a node that ran inline
makes one consumer ready. ``route`` hands such a consumer back to the server that called it
(``chain``) instead of pushing it, when it goes to this server's queue and that queue is empty:
popped next anyway, it would have cost a heap entry, a push, a pop and the entry's checks. The
order is torch's still: with anything else queued here, or a second consumer made ready by the
same route, every one goes through the heap. The handed-back node belongs to the current graph
task, so none of the graph-task switch's work is due; a node that must not run inline goes onto
the heap, where popping decides where it runs (Note [Inter-op parallelism]), and one handed back
as the worker yields goes onto the heap first, since whatever runs meanwhile may queue a node
that comes before it. W1's backward: 25,470 -> 24,158 instructions per node (-5.2%).

Note [Chains routed in the worker]: the cpu worker runs a node of a plain graph task (no
``exec_info``, no anomaly NaN check: ``fast``, read with the graph task's other fields at the
graph-task switch) without calling ``call_function`` or ``route`` when it can. A node without
hooks, not called on undefined gradients, whose first gradient is defined, is applied and
released as ``call_function``'s first branch does (Note [One way to run a node] in calls.py). A
node with one live edge (one edge, or two with the second None: ``t * 2.0``, ``t + 1.0``) whose
consumer has one input on this device, one dependency left and no buffer begun (``not_ready``
empty), with nothing queued here, hands that consumer on itself: the gradient checked against
its meta, the count dropped (an emptied shard let go: Note [Shards picked inline] in engine.py),
``chained`` set, as ``route`` would have (Note [Chains skip the heap]); anything else goes
through ``route``. A chained consumer inherits its producer's ``outstanding_tasks`` count
(``route`` too no longer counts it): the producer is not counted done and its consumer not
counted queued, two writes and a test fewer. W1's backward (Note [Measuring the hot path],
cachegrind, the whole backward per node): N=6,000 23,427 -> 18,347 instructions per node (-21.7%)
together with Note [Reading the clock], of which ``route`` left out about 3,700, ``call_function``
left out 791 (19,138 with it) and the clock budget 606 (18,953 without it); N=30,000 (sharded
counts) 24,867 -> 19,730 (-20.7%).

Note [Inter-op parallelism]: a BY_COST node whose estimated ``work`` reaches the device's inline
threshold runs in the device's executor; the worker keeps up to ``device.num_workers``
such kernels in flight and goes on dispatching in priority order meanwhile. Outputs come
back to the loop before they are routed, so bookkeeping stays loop-only. AccumulateGrad is
ON_LOOP, so on one loop accumulation into a shared leaf is never concurrent
(backwards on other threads or loops meet at the leaf's lock: Note [One writer per leaf]).
Kernels run in the engine's own daemon threads (Note [Kernel threads never hold the process]).

Note [Nothing to overlap]: a thread pays off when something runs beside the kernel: another
large kernel, or the loop's own work. A BY_COST node above the threshold that has nothing to
overlap (no kernel of this device in flight, no other node queued here that would take a
thread: a chain, as W3's and W8's backwards are) runs inline instead, when its ``work`` is below
``ALONE_INLINE_FACTOR`` times the threshold, so that it holds the loop about as long as the
worker's time slice (Note [Yielding]) at most: the hand-off to a kernel thread and back cost
140-160 µs per node on the 2-core machine, against kernels of 0.1-1.2 ms (W3: backward 1.69 ->
1.44 ms, W8: 3.0 -> 2.5 ms, in-process minima). Larger nodes still go to a thread, so the loop
stays responsive (W7).

Note [Awaiting nodes]: an OWN_TASK node (its ``apply`` is a coroutine: an ``async def`` custom
backward) becomes a task of its own, so a suspended backward never holds its worker; that task
is a greenback portal, so plain code it calls (its hooks, a function it recomputes) may run a
reentrant ``backward_sync`` too. A PORTAL node (a plain-def custom backward, which may block on a
reentrant ``backward_sync``) runs in a kernel thread when its ``work`` reaches the threshold and
a thread is free, else inline like any small node: the worker is a portal (Note [Servers]).

Note [Servers]: every task that serves a device's queue (a *server*) is a greenback portal
once user code may run in it (Note [Servers become portals on demand]), so any plain code the
engine calls on the loop (tensor hooks, node hooks, AccumulateGrad's hooks,
a plain-def backward) may call ``backward_sync``/``grad_sync``: the bridge (``reenter``) runs the
nested call as a task of its own (its ``GraphTask.runner``, so a parent's abort and wind-down
reach it as they reach any child) and ``greenback.await_``s it, which suspends the server in the
middle of its node. So that the queue, where the child's nodes go, is still served meanwhile, the
bridge first starts a *helper* server (``_help``) for the same device, the way torch's blocked
thread serves its own queue (Note [Reentrant backwards] in engine.py). The helper serves until
the nested call's graph task has ended, and no longer: it looks at that whenever it switches to
another graph task's node and after each of its own awaits, so it never runs a node of the
parent graph task once the child is done; the suspended server resumes, finishes its node and
serves on. A helper whose own node reenters starts a helper in turn, so reentry nests to any
depth, each level a task with a stack of its own; nothing grows the Python stack with depth. The
common path pays nothing for this: the portal costs each server one greenlet switch per task
step (servers step when they yield, every couple of milliseconds, not per node), and the
helper's test sits on the graph-task switch, not on the per-node path.

Note [Servers become portals on demand]: a portal costs every server it serves: a greenlet, a
16 KiB frame-stack chunk mapped and unmapped (a page fault) and two greenlet switches per task step,
about 70 µs per backward on the 2-core machine, as much as the rest of the engine's fixed cost (a
two-node backward: 200 -> 127 µs; torch 46 µs), since a server runs only while a backward does
(Note [Idle workers]). It is needed only where plain user code runs on the loop: a hook, a
plain-def custom backward, a ``saved_tensors_hooks`` unpack. So a server starts without one until
any of those was ever used in the process (``portal_needed`` in autograd/graph.py, set by every
hook registration, every plain-def custom node recorded and every ``queue_callback``;
``hooks_in_use`` for saved-tensor hooks; neither goes back to False), and a server that started
without one makes itself one (``greenback.ensure_portal``, one loop iteration) at its next
graph-task switch after the flags changed. That switch comes before any node of a graph task that
was recorded after the change, and after every await of the server (each one forgets ``current``):
user code that flips the flag runs either in this server, which is then already a portal, or
elsewhere while it awaits. Helpers are portals from the start (their server is suspended in a
reentrant call). MLP training step (``benchmarks.train_loop``), backward phase, in-process min of
300 steps: 1620 -> 1535 µs.

Note [Reentrant priority]: torch's reentrant thread serves until its child graph task completes,
so no node of the parent graph task runs before a reentrant backward called by one of its nodes
has returned (test_reentrant_priority: ``[R, R, ..., MyFunction]``). A plain-def backward runs
inline in its server and a helper stops as soon as the child has ended, so asyncgrad keeps that
order. An ``async def`` backward runs as a task of its own and does not hold its server, so the
order is kept another way: while a reentrant call awaited by one of graph task P's node tasks
runs, ``P.holds`` counts it (``Engine.execute``), and a server that switches to a node of a held
P sets it aside in ``P.deferred`` instead of running it; ``release`` pushes those back when the
last such child has ended. The test sits on the graph-task switch, so the per-node path pays
nothing; a server that spawned an OWN_TASK node forgets its current graph task, so the next node
passes the test. And since the spawned task only starts at the next loop iteration, a server
that spawns one with more nodes queued first steps aside once, so that a backward that begins
by starting a reentrant call has registered it (and pushed its root, deeper, so first) before
the server takes the parent's next node. A node run in a kernel thread still does not hold its
parent: the parent's other ready nodes may run beside its nested ``backward_sync``, as they would
beside any long kernel (torch too runs the parent's nodes of other devices meanwhile).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import greenback

from asyncgrad.autograd.grad_mode import grad_enabled
from asyncgrad.autograd.graph import Placement, hooks_in_use, portal_needed
from asyncgrad.devices.streams import forward_stream
from asyncgrad.engine import stream_sync
from asyncgrad.engine.calls import call_function, call_function_async, validate_grad
from asyncgrad.engine.counts import SHARD_OF, SPREAD
from asyncgrad.engine.graph_task import GraphTask, current_graph_task, current_recorder
from asyncgrad.engine.kernels import run_kernel, submit
from asyncgrad.engine.ready_queue import ReadyQueue

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node
    from asyncgrad.devices import Device
    from asyncgrad.engine.engine import Engine

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

YIELD_AFTER_S = 0.002
"""Note [Yielding]: the engine gives the loop back after holding it this long. The worker reads
the clock once the inline nodes run since its last reading add up to ``CLOCK_BUDGET`` (Note
[Reading the clock]), so a run of expensive inline nodes cannot hold the loop for more than about
``CLOCK_BUDGET`` element-operations past this."""

CLOCK_BUDGET = 100_000
"""Note [Reading the clock]: the worker reads the clock (for Note [Yielding]) once the estimated
work of the inline nodes run since the last reading passes this many element-operations, each
node counted as its ``work`` plus ``NODE_CLOCK_COST`` for its fixed cost, rather than after every
node. With the sum, W1's backward runs 606 instructions per node fewer (18,953 -> 18,347; Note
[Measuring the hot path]). The loop is held at most about ``CLOCK_BUDGET`` element-operations
longer than before: 25-100 µs on the 2-core machine (the inline threshold's 2e5 element-operations
cost 50-200 µs there), against the 2 ms slice; W1's tiny nodes read the clock every 25th node
(about 85 µs of them). A node that alone passes the budget (a large kernel run inline, Note
[Nothing to overlap]) reads it right after, as before. ``benchmarks.stalls --only huge``: worst
pause 2.6-3.3 ms (CPU time) against 3.4 before. A profiled graph task times every node (a budget
of -1)."""

NODE_CLOCK_COST = 4_000
"""A node's fixed cost in element-operations for Note [Reading the clock]: W1's 3-4 µs per node."""


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


ALONE_INLINE_FACTOR = 10
"""Note [Nothing to overlap]: a node below this many times the inline threshold runs inline when
nothing could run beside it."""

_ALONE_SCAN = 8
"""``alone`` looks at most this many queued nodes: a longer queue is taken to hold one that overlaps."""


def alone(heap: list, threshold: int) -> bool:
    """Whether no node queued in ``heap`` would take a kernel thread or a task of its own
    (Note [Nothing to overlap])."""
    if len(heap) > _ALONE_SCAN:
        return False
    for entry in heap:
        node = entry[4]
        placement = node.placement
        if placement is not ON_LOOP and (placement is not BY_COST or node.work >= threshold):
            return False
    return True


def _forget_context() -> None:
    """Note [A server's context is emptied as it ends]: a task keeps its context after it ends, and
    a server's holds the server task itself (``_serving``) and the last graph task it ran
    (``current_graph_task``, with its root, so the whole graph and its leaves): a reference cycle
    (task, context, task) that kept the last backward's graph alive until the cyclic collector
    ran. An MLP step that makes fresh parameters each step (W3's benchmark without its
    ``gc.collect``) paid for the memory not given back: backward 3.2 ms against 2.2 ms once
    freed. Emptied, the finished task holds nothing, and the graph goes with its last reference.
    A server that waits for work (its engine still has a live graph task, or a helper's reentry
    has not ended) empties its context and drops its locals the same way before it waits."""
    _serving.set(None)
    current_graph_task.set(None)
    current_recorder.set(None)


def release(graph_task: GraphTask) -> None:
    """One reentrant child awaited by a node task of ``graph_task`` has ended: once none is left,
    its nodes set aside meanwhile go back to their queues (Note [Reentrant priority])."""
    graph_task.holds -= 1
    if not graph_task.holds and graph_task.deferred:
        deferred, graph_task.deferred = graph_task.deferred, []
        for worker, entry in deferred:
            heappush(worker.queue.heap, entry)
            worker.queue.wake()


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
        if self.parent is not None:
            for child in self.parent.children:
                if child.runner is runner:
                    return child.future.done()
        return False


def reenter(coro: Any) -> Any:
    """Run the engine coroutine ``coro`` to its end from plain code on the loop, in a greenback portal.

    In a server (Note [Servers]): as a task of its own, started in the caller's current context,
    while a helper serves this server's queue; elsewhere (a node's own task), awaited in place.
    """
    here = _serving.get()
    loop = asyncio.get_running_loop()
    if here is None or here[1] is not asyncio.current_task():
        return greenback.await_(coro)
    worker = here[0]
    runner = loop.create_task(coro)
    worker.start_helper(Reentry(current_graph_task.get(), runner))
    runner.add_done_callback(worker.wake)
    return greenback.await_(runner)


class DeviceWorker:
    __slots__ = ("engine", "device", "queue", "task", "helpers", "in_flight", "blocked", "_slot")

    def __init__(self, engine: Engine, device: Device) -> None:
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

    async def _serve(self, reentry: Reentry | None, portal: bool) -> None:
        engine = self.engine
        queue = self.queue
        heap = queue.heap
        device = self.device
        # Note [Streaming backwards] in stream_sync.py: chosen once per worker, so cpu pays nothing per node
        evaluate = None if device.is_cpu else stream_sync.evaluator(engine, device)
        route = engine.route
        current: GraphTask | None = None
        profile = None
        threshold = device.inline_threshold
        by_cost, on_loop = BY_COST, ON_LOOP
        clock = time.perf_counter
        last_yield = clock()
        chained: tuple | None = None
        graph_task: Any = None  # the current one whenever ``chained`` is set
        # the current graph task's fields read by the chain path (Note [Chains routed in the worker])
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
                    heappush(heap, (-graph_task.reentrant_depth, -node.sequence_nr, next(queue.counter), graph_task,
                                    node, inputs))  # where it runs is decided as it is popped
                    continue
            else:
                if not heap:
                    if reentry is None:
                        if not engine.live and not self.in_flight:
                            return
                    elif reentry.ended():
                        return
                    # Note [A server's context is emptied as it ends]: an idle server holds no graph task either;
                    # and current is None after every await: a helper looks at its reentry again
                    entry = node = inputs = graph_task = current = profile = None
                    current_graph_task.set(None)
                    current_recorder.set(None)
                    await queue.wait()
                    last_yield = clock()
                    continue
                entry = heappop(heap)
                node = entry[4]
                graph_task = entry[3]
                inputs = entry[5]
                if graph_task.has_error:
                    continue  # its queued nodes were dropped when it ended; a late one is dropped here
                if graph_task is not current:
                    if reentry is not None and reentry.ended():  # Note [Reentrant priority]
                        heappush(heap, entry)
                        return
                    if graph_task.holds:  # Note [Reentrant priority]
                        graph_task.deferred.append((self, entry))
                        continue
                    if not portal and (portal_needed[0] or hooks_in_use[0]):  # Note [Servers become portals on demand]
                        heappush(heap, entry)
                        await greenback.ensure_portal()
                        portal = True
                        current = None
                        last_yield = clock()
                        continue
                    current = graph_task
                    profile = graph_task.profile
                    threshold = device.inline_threshold if graph_task.threads else NEVER
                    budget = CLOCK_BUDGET if profile is None else -1  # profiled: every node is timed
                    fast = evaluate is None and graph_task.exec_info is None and not graph_task.check_nan
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
                            last_yield = clock()
                        continue
                    if node.work >= threshold and not (  # Note [Nothing to overlap]
                            placement is by_cost and not self.in_flight and node.work < threshold * ALONE_INLINE_FACTOR
                            and alone(heap, threshold)):
                        if self.in_flight >= device.num_workers and not self.blocked:
                            heappush(heap, entry)  # back in its place; taken again once a thread is free
                            await self._free_slot()
                            current = None
                            last_yield = clock()
                            continue
                        if self.in_flight < device.num_workers:
                            self._spawn(graph_task, node, inputs, _IN_EXECUTOR)
                            continue
                        # Every executor thread waits on a reentrant backward: run it here instead.
                    # a PORTAL node below the threshold runs here too: this server is a portal
            start = clock() if profile is not None else 0.0
            try:
                if fast:  # Note [Evaluation inlined]
                    # Note [Chains routed in the worker]: call_function's first branch, then route's for one edge
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
                engine.fail(graph_task, exc, node)
            else:  # Note [task_done inlined]
                if chained is None:  # a chained consumer inherits this node's outstanding count
                    graph_task.outstanding_tasks -= 1
                    if not graph_task.outstanding_tasks:
                        engine.finish(graph_task)
            spent += node.work + NODE_CLOCK_COST  # Note [Reading the clock]
            if spent > budget:
                spent = 0
                now = clock()
                if profile is not None:
                    profile.record(node, device, self.name, graph_task, start, now, True)
                if now - last_yield > YIELD_AFTER_S:
                    if chained is not None:  # queued while the loop runs others: where a new node may come first
                        heappush(heap, (-graph_task.reentrant_depth, -chained[0].sequence_nr, next(queue.counter),
                                        graph_task, *chained))
                        chained = None
                    await give_way()
                    current = None
                    last_yield = clock()

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
        """Run ``node`` as a task of its own, settled by its done-callback (Note [Who settles a node task])."""
        if where == _IN_EXECUTOR:
            self.in_flight += 1
        task = asyncio.get_running_loop().create_task(self._run_elsewhere(graph_task, node, inputs, where))
        if where == _AS_TASK:
            greenback.bestow_portal(task)  # Note [Awaiting nodes]
        graph_task.node_tasks.add(task)
        task.add_done_callback(functools.partial(self._settle, graph_task, node, where, time.perf_counter()))

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
                # Abandoned on cancel: the thread finishes into the void (Note [Cancellation]).
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
        except asyncio.CancelledError:
            raise  # _settle tells this graph task's own abort from a foreign cancellation
        except BaseException as exc:
            engine.fail(graph_task, exc, node)

    def _settle(self, graph_task: GraphTask, node: Node, where: int, start: float, task: asyncio.Task) -> None:
        graph_task.node_tasks.discard(task)
        if where == _IN_EXECUTOR:
            self.in_flight -= 1
            self._release_slot()
            if not self.in_flight and not self.engine.live:
                self.queue.wake()  # Note [Idle workers]
        if graph_task.profile is not None and where != _IN_EXECUTOR:  # a kernel recorded itself in its thread
            graph_task.profile.record(node, self.device, f"{self.name} {_LANES[where]}", graph_task, start,
                                      time.perf_counter(), False)
        if graph_task.has_error:
            return
        if task.cancelled():
            self.engine.fail(graph_task, asyncio.CancelledError(), node)
        else:
            self.engine.task_done(graph_task)
