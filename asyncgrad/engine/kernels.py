"""Kernel threads: where large kernels run, and the way back to the loop from them.

Kernels run in anyio's worker threads (they stop with the loop's main task, so nothing
outlives a loop). A kernel thread is marked while it runs, so that a plain-def backward
calling ``backward_sync`` there reaches its engine's loop instead of starting another.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from asyncgrad.engine.worker import DeviceWorker

_kernel_thread = threading.local()
"""In a thread running an engine kernel: the worker it runs for and that worker's loop."""


def run_kernel(worker: DeviceWorker, loop: asyncio.AbstractEventLoop, fn: Callable, *args: Any) -> Any:
    """Run a kernel in a worker thread, marked so a reentrant ``*_sync`` call finds its way back."""
    _kernel_thread.worker, _kernel_thread.loop = worker, loop
    try:
        return fn(*args)
    finally:
        _kernel_thread.worker = _kernel_thread.loop = None


def run_from_kernel_thread(coro: Any) -> Any:
    """Run an engine coroutine from a kernel thread (a plain backward calling ``backward_sync``).

    The coroutine goes to the engine's loop; the thread waits for it, and tells its worker it
    is waiting so the worker stops counting on this thread (no deadlock with one thread).
    Returns ``NotImplemented`` when this is not a kernel thread of a live loop.
    """
    worker = getattr(_kernel_thread, "worker", None)
    loop = getattr(_kernel_thread, "loop", None)
    if worker is None or loop.is_closed():
        coro.close()
        return NotImplemented
    loop.call_soon_threadsafe(worker.add_blocked, 1)
    try:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    finally:
        loop.call_soon_threadsafe(worker.add_blocked, -1)
