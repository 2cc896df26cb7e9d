"""GraphTask: the state of one backward call, completed through an asyncio.Future.

Note [Loop-only bookkeeping]: every field here is read and written only by code running on
the event loop thread (device workers, node tasks, ``Engine.execute``). Kernels that run in
an executor return their outputs to the loop before any of it is touched, so no field
needs a lock. Its life (the future, ``has_error``, its node tasks and reentrant children) is
its scope's (Note [One owner per graph task] in scope.py); the fields here are what a node's
evaluation reads and counts.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any, Callable

from asyncgrad.graph.node import current_graph_task  # noqa: F401  (the engine's, defined below it)
from asyncgrad.graph.recorder import current_recorder  # noqa: F401  (the profilers', defined below it)

if TYPE_CHECKING:
    from asyncgrad.graph.node import Node


current_exec_group: contextvars.ContextVar[Any] = contextvars.ContextVar("asyncgrad_graph_exec_group",
                                                                         default=None)
"""The ``GraphExecGroup`` (asyncgrad/checkpoint.py) open in this context, or None: a backward started
here belongs to it (``GraphTask.exec_group``)."""


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
        "final_callbacks", "anomaly", "check_nan", "profile", "threads", "root", "nodes_in_graph",
        "dependency_shards", "scope", "exec_group", "stream_events", "leaf_streams", "__weakref__",
    )

    def __init__(self, future: asyncio.Future, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 anomaly: bool, check_nan: bool, profile: Any = None, threads: bool = True,
                 root: Node | None = None, exec_group: Any = None) -> None:
        self.outstanding_tasks = 0
        self.has_error = False
        """Set once, by its scope, when it ended early (Note [First error wins] in scope.py)."""
        self.dependencies: dict[Node, int] = {}
        self.dependency_shards: list[dict[Node, int]] | None = None
        """``dependencies.shards`` once they are sharded (Note [Shards picked inline] in engine.py)."""
        self.not_ready: dict[Node, list] = {}
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured_vars: list[Any] = []
        self.future: asyncio.Future | None = future
        """Resolved by its scope; None once the call is over (Note [A failed backward frees its graph])."""
        self.reentrant_depth = reentrant_depth
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.final_callbacks: list[Callable[[], None]] = []
        self.anomaly = anomaly
        self.check_nan = check_nan
        self.profile: Any = profile
        self.threads = threads
        """False under ``set_multithreading_enabled(False)``: no node of it runs in a kernel thread."""
        self.root: Node | None = root
        """The node the walk starts from."""
        self.nodes_in_graph: set[Node] | None = None
        """Every node reachable from ``root``, walked on first use only (``will_execute``)."""
        self.exec_group = exec_group
        """The ``GraphExecGroup`` open where the backward started (a reentrant one inherits its parent's):
        checkpointed regions recompute once per group rather than once per backward."""
        self.scope: Any = None
        """Its ``GraphTaskScope`` while the call runs (Note [One owner per graph task] in scope.py)."""
        self.stream_events: dict[Node, list] | None = None
        """Consumer node -> the events its stream waits for before it runs; None until a gradient crosses
        streams or devices (Note [Streaming backwards] in stream_sync.py, which alone reads and writes it)."""
        self.leaf_streams: set | None = None
        """The streams of its leaves, synced with the caller's streams as it finishes (stream_sync.py)."""

    def shard_dependencies(self, shards: Any) -> None:
        """The counts moved into ``shards`` (a ``ShardedMap``: Note [Sharded counts] in counts.py)."""
        self.dependencies = shards
        self.dependency_shards = shards.shards

    def expect(self, exec_info: Any, captures: int | None = None) -> None:
        """What ``grad()``/``inputs=`` run (``init_to_execute``), and how many gradients it captures
        (None: as many as before, the map only sharded)."""
        self.exec_info = exec_info
        if captures is not None:
            self.captured_vars = [None] * captures

    def close(self) -> None:
        """Let go of the graph and of the outcome (Note [A failed backward frees its graph] in
        scope.py): only the scope calls this, as the call ends."""
        self.future = self.root = self.nodes_in_graph = self.exec_info = self.scope = None
        self.dependencies = {}
        self.dependency_shards = None
        self.not_ready = {}
        self.final_callbacks = []
        self.captured_vars = []
        self.stream_events = self.leaf_streams = None

    def will_execute(self, node: Node | None) -> bool:
        """Whether this graph task runs (or ran) ``node``: torch's ``_will_engine_execute_node``, for
        multi-grad hooks (Note [Multi-grad hooks] in graph/node.py). With ``grad()``/``inputs=``,
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
