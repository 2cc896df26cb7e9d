"""The backward engine on asyncio (see ``engine.py`` for the notes that hold it together)."""

from asyncgrad.engine.engine import Engine, get_engine
from asyncgrad.engine.graph_task import GraphTask, current_graph_task
from asyncgrad.engine.kernels import run_from_kernel_thread
from asyncgrad.engine.ready_queue import NodeTask, ReadyQueue

__all__ = [
    "Engine", "GraphTask", "NodeTask", "ReadyQueue", "current_graph_task", "get_engine", "run_from_kernel_thread",
]
