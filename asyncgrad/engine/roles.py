"""What the engine's parts ask of the parts above them, as Protocols, so that type annotations
need no import upwards (no circle through ``TYPE_CHECKING`` imports either)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from asyncgrad.devices import Device
    from asyncgrad.engine.budget import LoopBudget
    from asyncgrad.engine.graph_task import GraphTask
    from asyncgrad.graph.node import Node


class EngineRole(Protocol):
    """``Engine`` (engine.py) as its workers, scopes and stream helpers use it."""

    live: set[GraphTask]
    workers: dict[Device, Any]
    budget: LoopBudget

    def route(self, graph_task: GraphTask, node: Node, outputs: Any, chain: Any = None) -> tuple | None: ...

    def evaluate_function(self, graph_task: GraphTask, node: Node, inputs: list) -> None: ...

    def capture(self, graph_task: GraphTask, node: Node, inputs: list) -> list | None: ...


class WorkerRole(Protocol):
    """``DeviceWorker`` (worker.py) as a kernel thread uses it."""

    engine: EngineRole

    def add_blocked(self, delta: int) -> None: ...
