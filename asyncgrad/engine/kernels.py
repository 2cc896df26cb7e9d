"""Kernel threads: where large kernels run, and the way back to the loop from them.

Kernels run in anyio's worker threads (they stop with the loop's main task, so nothing
outlives a loop). A kernel thread is marked while it runs, so that a plain-def backward
calling ``backward_sync`` there reaches its engine's loop instead of starting another.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
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

    Note [Kernel threads]: the coroutine goes to the engine's loop, in this thread's context
    (the kernel's node task's, so the child graph task finds its parent and is aborted with it);
    the thread waits for it, and tells its worker it is waiting so the worker stops counting on
    this thread (no deadlock with one thread). If the loop closes meanwhile the wait ends with a
    RuntimeError instead of blocking the thread, and with it interpreter exit, forever.
    Returns ``NotImplemented`` when this is not a kernel thread of a live loop.
    """
    worker = getattr(_kernel_thread, "worker", None)
    loop = getattr(_kernel_thread, "loop", None)
    if worker is None or loop.is_closed():
        coro.close()
        return NotImplemented
    loop.call_soon_threadsafe(worker.add_blocked, 1)
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        while True:
            try:
                return future.result(timeout=_POLL_S)
            except concurrent.futures.TimeoutError:
                if loop.is_closed():
                    future.cancel()
                    raise RuntimeError("the event loop running this backward was closed") from None
    finally:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to tell
            loop.call_soon_threadsafe(worker.add_blocked, -1)


_POLL_S = 0.1
"""How soon a kernel thread waiting on a reentrant backward notices that its loop closed."""
