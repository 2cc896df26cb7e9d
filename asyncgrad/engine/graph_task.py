"""GraphTask: the whole state of one backward call, completed through an asyncio.Future.

Note [Loop-only bookkeeping]: every field here is read and written only by code running on
the event loop thread (device workers, node tasks, ``Engine.execute``). Kernels that run in
an executor return their outputs to the loop before any of it is touched, so no field
needs a lock.

Note [First error wins]: ``set_error`` resolves the future once; later errors of the same
graph task are dropped, its remaining queued nodes are skipped when popped, and its
suspended ``async def`` nodes are cancelled.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node
    from asyncgrad.devices import Device

current_graph_task: contextvars.ContextVar[GraphTask | None] = contextvars.ContextVar(
    "asyncgrad_current_graph_task", default=None
)
"""The graph task whose node is running in this context (None outside any backward)."""


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
        "outstanding_tasks", "has_error", "dependencies", "not_ready", "nodes_in_graph", "exec_info",
        "captured_vars", "future", "reentrant_depth", "owner", "keep_graph", "create_graph",
        "final_callbacks", "anomaly", "check_nan", "node_tasks", "profile", "__weakref__",
    )

    def __init__(self, future: asyncio.Future, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 owner: Device, anomaly: bool, check_nan: bool) -> None:
        self.outstanding_tasks = 0
        self.has_error = False
        self.dependencies: dict[Node, int] = {}
        self.not_ready: dict[Node, list] = {}
        self.nodes_in_graph: set[Node] = set()
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured_vars: list[Any] = []
        self.future = future
        self.reentrant_depth = reentrant_depth
        self.owner = owner
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.final_callbacks: list[Callable[[], None]] = []
        self.anomaly = anomaly
        self.check_nan = check_nan
        self.node_tasks: set[asyncio.Task] = set()
        self.profile: Any = None

    def set_error(self, exc: BaseException, node: Node | None) -> None:
        if self.has_error:
            return
        self.has_error = True
        if node is not None and isinstance(exc, Exception):
            exc.add_note(f"[asyncgrad] raised while running {node.name()} in the backward pass")
            if self.anomaly and node._metadata and "traceback_" in node._metadata:
                exc.add_note(
                    f"[asyncgrad] Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                    + node._metadata["traceback_"]
                )
        if not self.future.done():
            self.future.set_exception(exc)
        self.cancel_node_tasks()

    def cancel(self) -> None:
        """The awaiting caller went away: drop everything still to do."""
        self.has_error = True
        self.cancel_node_tasks()

    def cancel_node_tasks(self) -> None:
        for task in list(self.node_tasks):
            task.cancel()

    def __repr__(self) -> str:
        return (f"<GraphTask depth={self.reentrant_depth} outstanding={self.outstanding_tasks} "
                f"error={self.has_error} nodes={len(self.nodes_in_graph)}>")
