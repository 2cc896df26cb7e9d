"""What ``backward()`` and ``grad()`` return: an awaitable that cannot be silently forgotten."""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import sys
import warnings
from typing import Any, Callable, Coroutine, Generator, Generic, TypeVar

import sniffio

from asyncgrad.graph.node import current_graph_task

# Note [Await or not]: ``t.backward()``, ``ag.backward()`` and ``ag.grad()`` return an
# ``EngineCall``. Awaited, it is the engine's coroutine and nothing more (``await`` drives the
# inner coroutine directly: no task, no future, no wrapper frame per suspension). Not awaited,
# it still never lets a backward be skipped silently:
#
# * No event loop running in this thread (a plain script, a kernel thread), or plain code that a
#   backward runs on the loop (a plain-def backward or a hook, inline in its server, a greenback
#   portal): the call runs to completion at once, as ``backward_sync`` does, and returns an
#   already finished ``EngineCall``; errors are raised by the call itself.
# * Inside a running asyncio loop, an ``EngineCall`` that nobody awaits or hands to a task within
#   two loop iterations is started as a background task (``_promote``). Until then it is
#   *fresh*; from then on it is *in the background* until it finishes. While a fresh, running
#   or failed un-awaited call exists on this loop, the next use of what it should have produced
#   raises a ``RuntimeError`` that says to ``await`` it: ``.grad`` of any tensor, ``Optimizer.step()``
#   and ``zero_grad()``; the next ``backward()``/``grad()`` call raises for one in the background
#   (not for a fresh one: ``asyncio.gather(a.backward(), b.backward())`` creates both before
#   either starts). A fresh call reported that way is closed (it never runs); a failed one is
#   reported once, its exception chained as the cause, and logged through the loop's exception
#   handler the moment it fails so that it is never lost. One whose loop stopped before it
#   finished is reported at the next use anywhere, through the loop's exception handler when
#   the loop's shutdown cancels it (``asyncio.run`` does), and as a ``RuntimeWarning`` at exit
#   if nothing used it since (the loop closed before it ran: no callback is left to say so).
#   Code inside a backward (hooks, nodes) is exempt. Indexing, unpacking or ``len()`` of a call
#   (``ag.grad(...)[0]``) raises a ``TypeError`` that says to await, and closes a fresh call.
#
# The checks cost one truth test of the module-level set ``pending`` (empty unless something is
# pending), so ``.grad`` stays a cheap read.
#
# Two loop iterations, because ``asyncio.gather``/``ensure_future``/``wait_for``/anyio task
# groups wrap the object in a task whose first step is scheduled after our first check: the
# check looks a second time, after that step has started it.

# Note [One sweep per loop iteration]: a call does not schedule its own check. A loop has at
# most one ``_sweep`` queued; a call created while none is queued queues one. The sweep gathers
# the calls of its loop still fresh and queues their second look (``_promote_fresh``), which
# promotes those still fresh. A call created while a sweep is queued is seen by that sweep, which
# runs after it was created, and a task that ``gather`` made for it in the same step was queued
# before the sweep queued the second look, so the second look always comes after that task's
# first step. An awaited call leaves ``pending`` in ``__await__``, before any sweep, so a loop
# that awaits backward after backward without yielding queues one sweep in all, not one callback
# per call; a backward that yields pays one sweep (``python -m benchmarks.await_overhead``
# compares whole backward calls across source trees).


_get_running_loop = asyncio._get_running_loop
_getframe = sys._getframe

FRESH, STARTED, BACKGROUND, FINISHED, FAILED, CANCELLED, CLOSED, HANDED = range(8)
_STATES = ("not started yet: await it (left alone, it starts in the background)", "running (awaited)",
           "running in the background (not awaited)", "finished", "failed", "cancelled", "closed without running",
           "handed to asyncio as a future")

pending: set[EngineCall] = set()
"""Un-awaited calls that a next use must report: fresh, in the background, failed, or left
behind by a loop that stopped. Empty in correct code, so every check is one truth test."""

_fresh_on: dict[asyncio.AbstractEventLoop, int] = {}
"""How many calls of ``pending`` are fresh calls of each loop (a loop leaves when its count is 0):
a new ``backward()``/``grad()`` call, which leaves its loop's fresh calls alone, looks no further
when they are all of ``pending`` (Note [Fresh calls are counted])."""

# Note [Fresh calls are counted]: ``asyncio.gather(*(loss.backward() for loss in losses))`` makes
# every call fresh before any starts, and each call's own ``check`` would walk all the fresh calls
# made before it: quadratic in one step of the caller's task, which holds the loop. Every call
# enters and leaves the fresh state through ``_fresh_enter``/``_fresh_leave``, so ``_fresh_on``
# is exact and ``check(fresh=False)`` returns at once when nothing but this loop's fresh calls is
# pending, as the walk would have found.


_T = TypeVar("_T")


class _Call:
    """What an ``EngineCall`` and a ``HandedCall`` share: one object, whose class changes when asyncio
    is handed it as a future (Note [Handed to asyncio as a future])."""

    __slots__ = ("kind", "_coro", "_loop", "_state", "_task", "_value", "_driver", "_where", "_offset", "_budget",
                 "_callbacks")

    def __repr__(self) -> str:
        state = self._state
        text = _STATES[state]
        if state == STARTED and self._coro.cr_frame is None:
            text = "done (awaited)"
        elif state == FAILED and self._task is not None:
            text = f"failed: {self._task.exception()!r}"
        elif state == HANDED and self._task is not None:
            text += f" ({self._task._state.lower()})"
        return f"<asyncgrad {self.kind}: {text}>"

    # ------------------------------------------------------------------ ag.grad(...)[0] without await
    def __getitem__(self, index: Any) -> Any:
        raise TypeError(self._not_a_tuple())

    def __iter__(self) -> Any:
        raise TypeError(self._not_a_tuple())

    def __len__(self) -> int:
        raise TypeError(self._not_a_tuple())

    def _not_a_tuple(self) -> str:
        """The TypeError's text; a fresh call is closed by it: it has been reported, and nothing
        could read its result, while left alone it would run in the background and free its graph."""
        closed = ""
        if self._state == FRESH:
            self._discard()
            closed = "; this call was closed without running"
        return (f"'{self.kind}()' returns an awaitable, not its result: write 'await ag.{self.kind}(...)' "
                f"(in code that cannot await, such as a plain script or a plain-def backward, use "
                f"ag.{self.kind}_sync(...)){closed}")

    # ------------------------------------------------------------------ un-awaited
    def _promote(self) -> None:
        """Nobody awaited it or gave it to a task: run it in the background (Note [Await or not])."""
        self._fresh_leave()
        self._state = BACKGROUND
        self._task = self._loop.create_task(self._coro, name=f"asyncgrad {self.kind}() not awaited")
        self._task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task) -> None:
        callbacks = self._callbacks
        if callbacks is None:  # nobody has it: an un-awaited call in the background
            self._settle(task)
            return
        # a HandedCall: its consumers read the task's outcome through it, and so retrieve its error
        # (or asyncio logs it as never retrieved, as for the task ``ensure_future`` used to make)
        self._callbacks = []
        loop = task.get_loop()
        for fn, context in callbacks:
            loop.call_soon(fn, self, context=context)

    def _settle(self, task: asyncio.Task) -> None:
        if task.cancelled():
            self._state = CANCELLED  # its loop shut down under it: said now, and again at the next use
            if self in pending:
                task.get_loop().call_exception_handler({
                    "message": f"{self.kind}() called without 'await'{self._at()} was cancelled before it finished "
                               f"(its event loop is shutting down), so its gradients are missing",
                    "task": task,
                })
            return
        exc = task.exception()
        if exc is None:
            self._state = FINISHED
            self._value = task.result()
            pending.discard(self)
            return
        self._state = FAILED
        if self in pending:  # nobody awaits it: say so now, and again at the next use
            task.get_loop().call_exception_handler({
                "message": f"{self.kind}() called without 'await'{self._at()} failed in the background; "
                           f"the next use of .grad, optimizer.step() or {self.kind}() will raise it",
                "exception": exc,
                "task": task,
            })

    def _fresh_leave(self) -> None:
        """It leaves the fresh state (Note [Fresh calls are counted]); only a fresh call calls this."""
        loop = self._loop
        left = _fresh_on[loop] - 1
        if left:
            _fresh_on[loop] = left
        else:
            del _fresh_on[loop]

    def _at(self) -> str:
        return " at {}:{}".format(*self._place()) if self._where else ""

    def _place(self) -> tuple[str, int]:
        """The file and line of the call."""
        code, offset = self._where, self._offset
        line = next((line for start, end, line in code.co_lines() if start <= offset < end), None)
        return code.co_filename, line if line is not None else code.co_firstlineno

    def _discard(self) -> None:
        """Forget a fresh call without running it (its missing ``await`` has been reported)."""
        self._fresh_leave()
        self._state = CLOSED
        pending.discard(self)
        self._coro.close()


class EngineCall(_Call, Coroutine[Any, Any, _T]):
    """The result of ``backward()``/``grad()``: await it (Note [Await or not]); typed by what the
    await gives (``EngineCall[None]`` for backward, a tuple of tensors for grad)."""

    __slots__ = ()

    def __init__(self, kind: str, coro: Any, loop: asyncio.AbstractEventLoop | None, depth: int = 0,
                 budget: Any = None) -> None:
        self.kind = kind
        self._coro = coro
        self._loop = loop
        self._task: asyncio.Task | None = None
        self._value: Any = None
        self._driver: Any = None
        self._budget = budget
        """The loop's time budget, asked before the engine's coroutine starts (Note [A call waits its turn
        before it starts])."""
        self._callbacks: list | None = None
        if loop is None:
            self._state = FINISHED
            self._where = None
        else:
            frame = _getframe(depth + 1)  # the caller's line, for the messages: no frame kept alive
            self._where = frame.f_code  # with the offset, its line is looked up only for a message
            self._offset = frame.f_lasti
            self._state = FRESH
            pending.add(self)
            _fresh_on[loop] = _fresh_on.get(loop, 0) + 1  # Note [Fresh calls are counted]
            if loop not in _sweeps:  # Note [One sweep per loop iteration]
                _sweeps.add(loop)
                loop.call_soon(_sweep, loop)

    @classmethod
    def finished(cls, kind: str, value: Any) -> EngineCall:
        """A call that already ran to completion (no event loop was running)."""
        call = cls(kind, None, None)
        call._value = value
        return call

    # ------------------------------------------------------------------ awaiting it
    def __await__(self) -> Generator[Any, None, _T]:
        state = self._state
        if state == FRESH:
            self._state = STARTED
            pending.discard(self)
            self._fresh_leave()
            budget = self._budget
            if budget is not None and budget.due():
                return _after_turn(budget, self._coro)
            return self._coro.__await__()
        if state == FINISHED and self._task is None:
            return _finished(self._value)
        if self._task is not None:  # adopted from the background: its result or error goes to this awaiter
            pending.discard(self)
            return self._task.__await__()
        if state == CLOSED:
            raise RuntimeError(f"this {self.kind}() was never awaited and was closed without running; "
                               f"call {self.kind}() again and await it")
        return self._coro.__await__()  # awaited twice: the coroutine says so

    def send(self, value: Any) -> Any:
        """A task driving this object (``asyncio.ensure_future``, ``gather``, ``create_task``)."""
        if self._driver is None:
            self._driver = self.__await__()
        return self._driver.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if self._driver is None:
            self._driver = self.__await__()
        if val is None and tb is None:
            return self._driver.throw(typ)
        return self._driver.throw(typ, val, tb)

    def close(self) -> None:
        if self._state == FRESH:
            self._discard()
        elif self._driver is not None:
            self._driver.close()

    @property
    def _asyncio_future_blocking(self) -> bool | None:
        """What ``asyncio.isfuture`` reads: ``gather``, ``ensure_future``, ``wait_for`` and ``shield`` take a
        call made on a running loop as a future (Note [Handed to asyncio as a future])."""
        if self._loop is None or self._state in (STARTED, CLOSED):
            return None  # finished at once without a loop, being awaited, or closed: a coroutine as before
        self._hand_over()
        return False

    def _hand_over(self) -> None:
        state = self._state
        self.__class__ = HandedCall  # type: ignore[assignment]
        self._callbacks = []
        pending.discard(self)
        self._state = HANDED
        if state == FRESH:
            self._fresh_leave()
            self._budget.start_soon(self._begin)
        # else it runs in the background already, or ran there: its task is this future's


# Note [Handed to asyncio as a future]: ``asyncio.gather(*(loss.backward() for loss in losses))`` would
# wrap each call in a task, whose creation and first step hold the loop in the caller's step and the
# next iteration however the engine shares its budget. asyncio asks what it is handed whether it is a
# future (``isfuture`` reads ``_asyncio_future_blocking``) before wrapping it; a call made on a running
# loop answers yes and from then on *is* a future, a ``HandedCall``: its class changes (so that it stops
# being a coroutine to asyncio: ``asyncio.wait`` takes it as it took the task that ``ensure_future``
# used to make), it leaves the un-awaited calls (its consumer has it), and it starts on the loop's
# budget (``LoopBudget.start_soon``): at once while the budget lasts, else in the budget's line, where
# it costs one entry and no task until its turn. It then runs as a task of its own, and its consumers'
# callbacks run when that task is done, with the task's result, error or cancellation.
# ``gather``, ``ensure_future``, ``wait_for`` and ``shield`` see the same results and errors as with
# the task, cancelling it cancels its task, or closes its coroutine unstarted while it waits its turn,
# and awaiting it waits for its task (starting it at once if it still waits its turn).
# ``asyncio.create_task(loss.backward())`` still takes the call as a coroutine (it asks ``iscoroutine``).


class HandedCall(_Call, Generic[_T]):
    """A ``backward()``/``grad()`` call that asyncio took as a future (Note [Handed to asyncio as a future])."""

    __slots__ = ()
    _asyncio_future_blocking = False

    def _begin(self) -> bool:
        """Its turn on the budget: run it as a task; False when it was cancelled meanwhile."""
        if self._task is not None or self._state == CANCELLED:
            return False
        self._task = self._loop.create_task(self._coro, name=f"asyncgrad {self.kind}()")
        self._task.add_done_callback(self._background_done)
        return True

    def __await__(self) -> Generator[Any, None, _T]:
        if self._task is None:
            if self._state == CANCELLED:
                raise self._make_cancelled_error()
            self._begin()  # awaited while it waits its turn: its awaiter wants it now
        return self._task.__await__()

    # ------------------------------------------------------------------ asyncio's future protocol
    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._task.done() if self._task is not None else self._state == CANCELLED

    def cancelled(self) -> bool:
        return self._task.cancelled() if self._task is not None else self._state == CANCELLED

    def result(self) -> _T:
        if self._task is not None:
            return self._task.result()
        if self._state == CANCELLED:
            raise self._make_cancelled_error()
        raise asyncio.InvalidStateError("Result is not set.")

    def exception(self) -> BaseException | None:
        if self._task is not None:
            return self._task.exception()
        if self._state == CANCELLED:
            raise self._make_cancelled_error()
        raise asyncio.InvalidStateError("Exception is not set.")

    def add_done_callback(self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None) -> None:
        if context is None:
            context = contextvars.copy_context()
        if self.done():
            self._loop.call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks[:] = kept
        return removed

    def cancel(self, msg: Any = None) -> bool:
        if self._task is not None:
            return self._task.cancel(msg)
        if self._state == CANCELLED:
            return False
        self._state = CANCELLED  # still waiting its turn: it never runs
        self._value = msg
        self._coro.close()
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)
        return True

    @property
    def _cancel_message(self) -> Any:
        """What ``gather`` reads of a cancelled child (asyncio's own attribute, as of a task)."""
        return self._task._cancel_message if self._task is not None else self._value

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        if self._task is not None and self._task.cancelled():
            try:
                self._task.result()
            except asyncio.CancelledError as exc:
                return exc
        return asyncio.CancelledError() if self._value is None else asyncio.CancelledError(self._value)



_sweeps: set[asyncio.AbstractEventLoop] = set()
"""Loops with a ``_sweep`` queued (Note [One sweep per loop iteration])."""


def _sweep(loop: asyncio.AbstractEventLoop) -> None:
    """First look at the loop's fresh calls; the second, an iteration later, promotes those still fresh."""
    _sweeps.discard(loop)
    fresh = [call for call in pending if call._loop is loop and call._state == FRESH]
    if fresh:
        loop.call_soon(_promote_fresh, fresh)


def _promote_fresh(calls: list[EngineCall]) -> None:
    for call in calls:
        if call._state == FRESH:
            call._promote()


# Note [A call waits its turn before it starts]: a call started when the loop's budget is spent
# (``gather`` of a thousand ``backward()`` calls: their tasks' first steps run in one loop iteration,
# after the caller's step that made them; or a thousand tasks that each await a ``grad()``) parks in the
# budget's line before the engine's coroutine runs a line: a future in the line is all it costs in that
# iteration (Note [One budget per loop] in engine/budget.py). The engine's coroutine then starts in its
# turn, and a cancel while it waits closes it unstarted.


def _after_turn(budget: Any, coro: Any) -> Generator[Any, None, Any]:
    """``coro``, awaited once ``budget`` has given this call its turn."""
    try:
        yield from budget.park(False)
        while budget.due():
            yield from budget.park(True)
    except BaseException:
        coro.close()
        raise
    return (yield from coro.__await__())


def _finished(value: Any) -> Any:
    return value
    yield  # a generator: ``await`` on a finished call returns at once


def check(what: str, fresh: bool = True) -> None:
    """Raise for an un-awaited call that ``what`` would otherwise silently ignore.

    Callers test ``pending`` first. ``fresh=False`` (a new backward/grad call) leaves fresh calls
    alone, since ``gather(a.backward(), b.backward())`` creates both before either starts.
    """
    loop = _get_running_loop()
    if loop is not None and current_graph_task.get() is not None:
        return  # inside a backward (a hook, a node): the engine's own business
    if not fresh and len(pending) == _fresh_on.get(loop, 0):
        return  # nothing but this loop's fresh calls (Note [Fresh calls are counted])
    for call in tuple(pending):
        state = call._state
        if call._loop is loop:
            if state == FRESH:
                if fresh:
                    call._discard()
                    raise RuntimeError(
                        f"{what}: {call.kind}() was called without 'await'{call._at()} and has not run "
                        f"(it never will: it is closed now). Write 'await loss.backward()' / "
                        f"'await ag.{call.kind}(...)'; inside a running event loop asyncgrad's {call.kind}() "
                        f"is a coroutine, and only a plain script with no loop runs it at once.")
                continue
            if state == BACKGROUND:
                raise RuntimeError(
                    f"{what}: {call.kind}() was called without 'await'{call._at()} and is still running in the "
                    f"background. Write 'await loss.backward()' / 'await ag.{call.kind}(...)' so that its "
                    f"gradients are complete when the next line runs.")
        elif call._loop.is_running():
            continue  # another thread's loop: its own thread reports it
        pending.discard(call)
        if state == FAILED:
            raise RuntimeError(
                f"{what}: {call.kind}() was called without 'await'{call._at()} and failed in the background "
                f"(the error is the cause, above). Write 'await loss.backward()' / 'await ag.{call.kind}(...)' so "
                f"that its errors reach the line that called it.") from call._task.exception()
        if state in (FRESH, BACKGROUND, CANCELLED):
            if state == FRESH:
                call._discard()
            raise RuntimeError(
                f"{what}: {call.kind}() was called without 'await'{call._at()} in an event loop that stopped "
                f"before it finished, so its gradients are missing. Write 'await loss.backward()' / "
                f"'await ag.{call.kind}(...)' inside the loop.")


@atexit.register
def _warn_left_behind() -> None:
    """At exit, name the un-awaited calls that never finished and were never reported (Note [Await or not]).

    Failed and cancelled ones went through their loop's exception handler already.
    """
    for call in tuple(pending):
        if call._state in (FRESH, BACKGROUND) and call._where is not None:
            warnings.warn_explicit(
                f"{call.kind}() called without 'await' never finished: its event loop stopped first "
                f"({_STATES[call._state]}), so its gradients are missing", RuntimeWarning, *call._place())


def require_asyncio(what: str) -> None:
    """Refuse at once where no asyncio loop runs in this thread but another async library does.

    Note [asyncio only]: the engine's queues, futures and kernel threads are asyncio's. Under
    trio (``trio.run``, ``anyio.run(backend="trio")``) there is no asyncio loop to run on, and a
    private one started inside a trio task inherits trio's identity through sniffio's context
    variable, so anyio's threads would yield trio's traps to asyncio ("Task got bad yield").
    Called only on slow paths: where no asyncio loop is running in this thread.
    """
    if _get_running_loop() is not None:
        return
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    if library != "asyncio":
        raise RuntimeError(
            f"{what} needs asyncio, but this code runs under {library}: asyncgrad's engine runs on an asyncio "
            f"event loop. Run your program with asyncio.run(main()) or anyio.run(main, backend='asyncio'); "
            f"{library} is not supported (trio-asyncio included).")
