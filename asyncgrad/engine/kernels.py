"""Kernel threads: where large kernels run, and the way back to the loop from them.

Note [Kernel threads never hold the process]: large kernels run in the engine's own pool of
*daemon* threads, shared by every loop of the process. A thread that has nothing to do for
``IDLE_EXIT_S`` ends, so a finished program keeps none. Being daemons, they never block
interpreter exit, whatever state their loop was left in: a loop closed while one of them
still runs a kernel, or waits in ``backward_sync`` on a reentrant backward, with the task that
started it never finished. (anyio's worker threads, used before, are joined at exit and stop
only when their loop's root task ends: a loop closed with that task pending hung the
interpreter for good.) A kernel whose caller was cancelled finishes into the void: its
result reaches a cancelled future, or a closed loop, and is dropped.

A kernel thread is marked while it runs, so that a plain-def backward calling
``backward_sync`` there reaches its engine's loop instead of starting another.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from asyncgrad.engine.roles import WorkerRole

IDLE_EXIT_S = 1.0
"""How long a kernel thread waits for work before it ends."""

_lock = threading.Lock()
_idle: list[queue.SimpleQueue] = []
"""The job queues of the kernel threads waiting for work, the most recently idle last (guarded by
``_lock``). Reusing the most recent one keeps as few threads busy as kernels run at once."""


def _forget_threads() -> None:
    """In a forked child the parent's kernel threads do not exist: start from none."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads)

_kernel_thread = threading.local()
"""In a thread running an engine kernel: the worker it runs for and that worker's loop."""


def submit(loop: asyncio.AbstractEventLoop, fn: Callable, *args: Any) -> asyncio.Future:
    """Run ``fn(*args)`` in a kernel thread, in a copy of the caller's context; a future of ``loop``
    for its result. Cancelling the future abandons the kernel (it runs to its end unobserved)."""
    future = loop.create_future()
    job = (loop, future, contextvars.copy_context(), fn, args)
    with _lock:
        jobs = _idle.pop() if _idle else None
    if jobs is None:
        jobs = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(jobs,), name="asyncgrad kernel", daemon=True).start()
    jobs.put(job)
    return future


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        try:
            loop, future, context, fn, args = jobs.get(timeout=IDLE_EXIT_S)
        except queue.Empty:
            with _lock:
                if jobs in _idle:  # else submit took it off the list: a job is on its way
                    _idle.remove(jobs)
                    return
            continue
        outcome = [future, None, None]  # [future, result, error]
        del future
        if not outcome[0].cancelled():
            try:
                outcome[1] = context.run(fn, *args)
            except BaseException as exc:  # delivered to the awaiting node task as it was raised
                outcome[2] = exc
        # Note [A failed backward frees its graph] in scope.py: nothing of the job stays in this thread
        # once the loop has it; the loop empties ``outcome`` as it takes it
        del context, fn, args
        with _lock:  # idle before the loop hears of the result, so its next kernel can come here
            _idle.append(jobs)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for it
            loop.call_soon_threadsafe(_deliver, outcome)
        del loop, outcome


def _deliver(outcome: list) -> None:
    future, result, error = outcome
    outcome.clear()
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def run_kernel(worker: WorkerRole, loop: asyncio.AbstractEventLoop, fn: Callable, *args: Any) -> Any:
    """Run a kernel in a kernel thread, marked so a reentrant ``*_sync`` call finds its way back."""
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
    RuntimeError, so the thread goes back to its pool instead of waiting forever.
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
                if loop.is_closed():  # nothing can run the coroutine or take its cancellation any more
                    raise RuntimeError("the event loop running this backward was closed") from None
    finally:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to tell
            loop.call_soon_threadsafe(worker.add_blocked, -1)


_POLL_S = 0.1
"""How soon a kernel thread waiting on a reentrant backward notices that its loop closed."""
