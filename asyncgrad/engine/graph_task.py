"""GraphTask: the whole state of one backward call, completed through an asyncio.Future.

Note [Loop-only bookkeeping]: every field here is read and written only by code running on
the event loop thread (device workers, node tasks, ``Engine.execute``). Kernels that run in
an executor return their outputs to the loop before any of it is touched, so no field
needs a lock.

Note [First error wins]: ``Engine.fail`` resolves the future once; later errors of the same
graph task are dropped. A graph task ends in exactly one of three ways, and each removes it
from ``Engine.live`` at once: it finishes (``Engine.finish``), it fails (``Engine.fail``: the
first exception, ``BaseException`` included, goes to the future), or its caller goes away
(``Engine.abort``, on ``CancelledError``). Failing and aborting drop its queued nodes from every
ready queue, cancel its node tasks (suspended ``async def`` backwards, portals, executor
kernels, which are abandoned: their threads finish into the void) and abort its reentrant
children, so that once the caller has seen the exception nothing of this call writes a
``.grad`` any more (Note [Cancellation] in engine.py); ``execute`` hands the exception over only
once those node tasks and children have settled (Note [Wind-down] in engine.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from asyncgrad.autograd.graph import current_graph_task  # noqa: F401  (the engine's, defined below it)
from asyncgrad.autograd.recorder import current_recorder  # noqa: F401  (the profilers', defined below it)

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node


class ExecInfo:
    """For ``grad()``/``inputs=``: whether a node must run, and which of its inputs to capture."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None

    def should_execute(self) -> bool:
        return self.needed or self.captures is not None


class GraphTask:
    __slots__ = (
        "outstanding_tasks", "has_error", "dependencies", "not_ready", "exec_info",
        "captured_vars", "future", "reentrant_depth", "keep_graph", "create_graph",
        "final_callbacks", "anomaly", "check_nan", "node_tasks", "children", "runner", "profile", "threads",
        "holds", "deferred", "root", "nodes_in_graph", "dependency_shards", "__weakref__",
    )

    def __init__(self, future: asyncio.Future, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 anomaly: bool, check_nan: bool) -> None:
        self.outstanding_tasks = 0
        self.has_error = False
        self.dependencies: dict[Node, int] = {}
        self.dependency_shards: list[dict[Node, int]] | None = None
        """``dependencies.shards`` once they are sharded (Note [Shards picked inline] in engine.py)."""
        self.not_ready: dict[Node, list] = {}
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured_vars: list[Any] = []
        self.future = future
        self.reentrant_depth = reentrant_depth
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.final_callbacks: list[Callable[[], None]] = []
        self.anomaly = anomaly
        self.check_nan = check_nan
        self.node_tasks: set[asyncio.Task] = set()
        """Nodes running as tasks of their own; cancelled when this graph task ends early."""
        self.children: set[GraphTask] = set()
        """Reentrant graph tasks started by this one's nodes and still running."""
        self.runner: asyncio.Task | None = None
        """The task running this graph task's ``Engine.execute`` (Note [Wind-down] in engine.py)."""
        self.profile: Any = None
        self.threads = True
        """False under ``set_multithreading_enabled(False)``: no node of it runs in a kernel thread."""
        self.holds = 0
        """Reentrant children awaited by this graph task's own node tasks and still running: while
        any is, its ready nodes wait in ``deferred`` (Note [Reentrant priority] in worker.py)."""
        self.root: Node | None = None
        """The node the walk starts from (set by ``Engine.execute``)."""
        self.nodes_in_graph: set[Node] | None = None
        """Every node reachable from ``root``, walked on first use only (``will_execute``)."""
        self.deferred: list[tuple[Any, tuple]] = []
        """(worker, queue entry) of the nodes set aside while ``holds``; pushed back when it drops to 0."""

    def will_execute(self, node: Node | None) -> bool:
        """Whether this graph task runs (or ran) ``node``: torch's ``_will_engine_execute_node``, for
        multi-grad hooks (Note [Multi-grad hooks] in autograd/graph.py). With ``grad()``/``inputs=``,
        the nodes marked to run (those already run have left ``exec_info``: only the asking node's
        own hook can have run, and it counts itself); otherwise the nodes reachable from the root,
        walked once, when first asked."""
        if node is None:
            return False
        if self.exec_info is not None:
            info = self.exec_info.get(node)
            return info is not None and info.should_execute()
        if self.nodes_in_graph is None:
            seen: set[Node] = set()
            stack = [self.root]
            while stack:
                fn = stack.pop()
                if fn is None or fn in seen:
                    continue
                seen.add(fn)
                stack.extend(fn.edge_fns)
            self.nodes_in_graph = seen
        return node in self.nodes_in_graph

    def __repr__(self) -> str:
        return (f"<GraphTask depth={self.reentrant_depth} outstanding={self.outstanding_tasks} "
                f"error={self.has_error} pending={len(self.dependencies)}>")
