"""GraphTaskScope: the one owner of a graph task's life, as an anyio task group owns its children.

Note [One owner per graph task]: a scope is opened by ``Engine.execute`` for its graph task and
closed in that call's ``finally``. Between the two it owns everything that runs on the graph
task's behalf and outlives a single step of a server: the node tasks (``async def`` backwards,
kernels in threads: ``spawn``), the reentrant children started from its nodes (each registered
by its own scope as it opens), the
ready nodes set aside while a child holds it (``defer``), and the graph task's ending: ``finish``,
``fail``, ``abort``, ``wind_down``, ``close``. Every write to ``GraphTask.has_error`` and
``GraphTask.future`` is made here; the rest of the engine asks the scope. The evaluation state
(``outstanding_tasks``, the dependency counts and the input buffers) is written by the evaluation
path (``Engine.route`` and the worker's chain step, Note [One evaluate path] in worker.py), and only
on the loop (Note [Loop-only bookkeeping] in graph_task.py).
"""

from __future__ import annotations

import asyncio
from heapq import heappush
from typing import TYPE_CHECKING, Any, Callable

from asyncgrad.engine.gcfreeze import FrozenWhileBusy
from asyncgrad.engine.graph_task import GraphTask, current_graph_task
from asyncgrad.graph.anomaly import report_failure

if TYPE_CHECKING:
    from asyncgrad.engine.roles import EngineRole
    from asyncgrad.graph.node import Node


class GraphTaskScope:
    """Opened by ``Engine.execute`` for ``graph_task`` in the task that runs it (its ``runner``);
    closed in that call's ``finally`` (Note [One owner per graph task])."""

    __slots__ = ("engine", "graph_task", "parent", "runner", "node_tasks", "children", "holds", "holding",
                 "deferred", "error")

    def __init__(self, engine: EngineRole, graph_task: GraphTask, parent: GraphTask | None) -> None:
        self.engine = engine
        self.graph_task = graph_task
        self.parent = parent
        self.runner: asyncio.Task | None = asyncio.current_task()
        """The task running this graph task's ``Engine.execute`` (Note [Wind-down])."""
        self.node_tasks: set[asyncio.Task] = set()
        """Nodes running as tasks of their own; cancelled when this graph task ends early."""
        self.children: set[GraphTask] = set()
        """Reentrant graph tasks started by this one's nodes and still running."""
        self.holds = 0
        """Reentrant children awaited by this graph task's own node tasks and still running: while
        any is, its ready nodes wait in ``deferred`` (Note [Reentrant priority] in worker.py)."""
        self.deferred: list[tuple[Any, tuple]] = []
        """(worker, queue entry) of the nodes set aside while ``holds``; pushed back when it drops to 0."""
        self.error: BaseException | None = None
        """The exception that ended the graph task, until ``outcome`` raises it (not kept in the
        future: Note [A failed backward frees its graph])."""
        graph_task.scope = self
        engine.live.add(graph_task)
        parent_scope = parent.scope if parent is not None else None
        self.holding = parent_scope is not None and self.runner in parent_scope.node_tasks
        """Whether this call holds its parent (Note [Reentrant priority] in worker.py)."""
        if parent_scope is not None:
            parent_scope.children.add(graph_task)
            if self.holding:
                parent_scope.holds += 1
        FrozenWhileBusy.enter(graph_task)

    # ------------------------------------------------------------------ what runs on its behalf
    # Note [Who settles a node task]: a node run as a task of its own (Note [Awaiting nodes] in
    # worker.py) is settled by the task's done-callback, never by code inside the task: a task cancelled
    # before its first step never runs its body, but its done-callbacks always run. The scope forgets
    # the task first (``settle``), then the worker's callback frees the executor slot, records the
    # profiler event and counts the node done (or fails the graph task when the node task was cancelled
    # by anyone but this graph task's own abort).
    def spawn(self, coro: Any, settle: Callable[[asyncio.Task], None]) -> asyncio.Task:
        """Run ``coro`` as a node task of this graph task, ``settle`` its done-callback (Note [Who
        settles a node task])."""
        task = asyncio.get_running_loop().create_task(coro)
        self.node_tasks.add(task)
        task.add_done_callback(settle)
        return task

    def settle(self, task: asyncio.Task) -> None:
        """A node task has ended: forget it (its worker's callback does the rest)."""
        self.node_tasks.discard(task)

    def defer(self, worker: Any, entry: tuple) -> None:
        """Set a ready node aside while a child holds this graph task (Note [Reentrant priority])."""
        self.deferred.append((worker, entry))

    def release(self) -> None:
        """One reentrant child awaited by a node task has ended: once none is left, the nodes set
        aside meanwhile go back to their queues (Note [Reentrant priority] in worker.py)."""
        self.holds -= 1
        if not self.holds and self.deferred:
            deferred, self.deferred = self.deferred, []
            for worker, entry in deferred:
                heappush(worker.queue.heap, entry)
                worker.queue.wake()

    def child_ended(self, runner: asyncio.Task) -> bool | None:
        """Whether the child graph task run by ``runner`` has ended (None: no such child here)."""
        for child in self.children:
            scope = child.scope
            if scope is not None and scope.runner is runner:
                return child.future is None or child.future.done()
        return None

    # ------------------------------------------------------------------ how it ends
    # Note [The future carries no gradient]: the graph task's future only says that it ended; the
    # captured gradients stay in ``captured_vars`` and ``outcome`` reads them there. asyncio keeps the
    # awaited future alive until the awaiting task's step ends (the loop's running handle holds it),
    # so a future resolved with the gradients would keep them, and through their grad_fns a
    # create_graph graph, alive past the caller's last reference for the rest of that step; torch
    # frees them at once. The error is not kept in it either (Note [A failed backward frees its graph]).
    async def outcome(self) -> list:
        """Wait for the graph task to end: the captured gradients, or its first error raised."""
        graph_task = self.graph_task
        await graph_task.future  # Note [The future carries no gradient]
        error = self.error
        if error is None:
            return graph_task.captured_vars
        self.error = None
        try:
            raise error
        finally:
            del error  # this frame is in its traceback

    def task_done(self) -> None:
        graph_task = self.graph_task
        graph_task.outstanding_tasks -= 1
        if not graph_task.outstanding_tasks and not graph_task.has_error:
            self.finish()

    def finish(self) -> None:
        """All nodes ran (or were skipped): final callbacks, then resolve the future."""
        graph_task = self.graph_task
        token = current_graph_task.set(graph_task)
        try:
            callbacks = graph_task.final_callbacks
            i = 0
            while i < len(callbacks):
                callbacks[i]()
                i += 1
        except BaseException as exc:
            self.fail(exc, None)
            return
        finally:
            current_graph_task.reset(token)
        future = graph_task.future
        if future is not None and not future.done():
            future.set_result(None)  # Note [The future carries no gradient]
        self._retire()

    # Note [First error wins]: ``fail`` resolves the future once; later errors of the same graph task are
    # dropped. A graph task ends in exactly one of three ways, and each removes it from ``Engine.live``
    # at once: it finishes (``finish``), it fails (``fail``: the first exception, ``BaseException``
    # included, goes to the future), or its caller goes away (``abort``, on ``CancelledError``). Failing
    # and aborting drop its queued nodes from every ready queue, cancel its node tasks (suspended ``async
    # def`` backwards, portals, executor kernels, which are abandoned: their threads finish into the
    # void) and abort its reentrant children, so that once the caller has seen the exception nothing of
    # this call writes a ``.grad`` any more (Note [Cancellation] in engine.py); ``execute`` hands the
    # exception over only once those node tasks and children have settled (Note [Wind-down]).
    def fail(self, exc: BaseException, node: Node | None) -> None:
        """The first error ends the graph task (Note [First error wins]); later ones are dropped.

        Only an ``Exception`` gets a note naming the node: a ``BaseException`` (KeyboardInterrupt,
        SystemExit, a foreign cancellation) reaches the caller exactly as it was raised.
        """
        graph_task = self.graph_task
        if graph_task.has_error or graph_task.future is None:
            return
        if node is not None and isinstance(exc, Exception):
            exc.add_note(f"[asyncgrad] raised while running {node.name()} in the backward pass")
            if graph_task.anomaly:
                report_failure(node, exc)  # torch warns, then raises
        if not graph_task.future.done():
            self.error = exc
            graph_task.future.set_result(None)
        self.abort()

    def abort(self) -> None:
        """End the graph task early: nothing of it runs or writes any more (Note [Cancellation] in
        engine.py)."""
        graph_task = self.graph_task
        if graph_task.has_error:
            return
        graph_task.has_error = True
        for worker in self.engine.workers.values():
            worker.queue.drop(graph_task)
        for task in list(self.node_tasks):
            task.cancel()
        for child in list(self.children):
            if child.future is not None:
                child.future.cancel()
            if child.scope is not None:
                child.scope.abort()
        graph_task.not_ready.clear()
        self.deferred.clear()
        self._retire()

    def _retire(self) -> None:
        engine = self.engine
        engine.live.discard(self.graph_task)
        if not engine.live:  # Note [Idle workers] in worker.py
            for worker in engine.workers.values():
                worker.queue.wake()

    # Note [Wind-down]: a graph task that ends early cancels its node tasks and aborts its children at
    # once, but a cancelled task only finishes, and its done-callback only frees its executor slot, an
    # iteration or two later. So ``execute`` does not hand the exception to its caller until all of
    # them have settled (``wind_down``), as a task group would: its node tasks (an executor kernel's
    # task ends at once, the thread being abandoned; an ``async def`` backward gets ``CancelledError``
    # at its ``await``) and the calls of its reentrant children (a child started from a kernel thread
    # runs in a task of its own, its scope's ``runner``). When the caller sees the exception, ``live``
    # holds none of them and no executor slot of theirs is counted. Only a kernel *thread* may still run
    # (into the void); an ``async def`` backward that swallows ``CancelledError`` delays its caller, as it
    # would in an anyio task group.
    async def wind_down(self) -> None:
        """Wait until every node task, and every reentrant child's call, has settled (Note
        [Wind-down]); a repeated cancel meanwhile changes nothing: the caller gets the exception
        that ended the call."""
        current = asyncio.current_task()
        while True:
            tasks = set(self.node_tasks)
            for child in self.children:
                if child.scope is not None and child.scope.runner is not None:
                    tasks.add(child.scope.runner)
            tasks.discard(current)  # never wait for oneself
            if not tasks:
                return
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                continue

    # Note [A failed backward frees its graph]: the exception a failed backward raises carries a
    # traceback whose frames (``execute``'s, a server's, ``call_function``'s, the node task's) hold the
    # graph task, and the graph task's future holds the exception: a reference cycle through every
    # tensor of the graph, which only the cyclic collector would free. ``close`` breaks it where it is
    # made: the graph task lets go of its future, its root, its counts, buffers and callbacks, and the
    # scope of its tasks and children; ``execute`` and the servers drop their locals before they end
    # (``reenter`` its runner task, which holds the nested call's exception). Then the graph of a
    # failed backward goes with the caller's last reference to the exception, as torch's does
    # (``tests/engine/test_failed_backward_frees_graph.py``; ``python -m benchmarks.failure_memory``).
    #
    def close(self) -> None:
        """The call is over: leave the parent and the process's busy spell, and let go of everything
        the graph task and the scope held (Note [A failed backward frees its graph])."""
        graph_task = self.graph_task
        FrozenWhileBusy.exit(graph_task)
        parent = self.parent
        if parent is not None and parent.scope is not None:
            parent.scope.children.discard(graph_task)
            if self.holding:
                parent.scope.release()
        if graph_task in self.engine.live:
            self._retire()
        graph_task.close()
        self.node_tasks = set()
        self.children = set()
        self.deferred = []
        self.runner = self.parent = self.error = None
