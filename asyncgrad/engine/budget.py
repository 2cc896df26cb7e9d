"""One time budget per event loop, shared by everything the engine runs on that loop."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Callable

from asyncgrad.engine.gcfreeze import FrozenWhileBusy

# Note [One budget per loop]: the engine gives the loop back after holding it ``YIELD_AFTER_S``,
# and that must hold for the loop, not for each thing the engine runs: a thousand backwards
# started in one step are a thousand task steps in one loop iteration, each one short, and a
# slice per graph task would let all of them run before a timer could. So each engine (one per
# loop, Note [Engine per loop, not a RunVar] in engine.py) has one ``LoopBudget``, and every place
# where the engine may go on (a graph task's start, each slice of its preparation, each clock
# reading of a device worker's server, at any nesting depth of reentrant backwards) asks it
# ``due()`` and, when told to, awaits ``give_way()``.
#
# A *spell* is a stretch of loop iterations in which the engine runs: it opens at the first ``due()``
# after the loop was free of the engine, and lasts while some ``due()`` comes in every iteration
# (``_tick``). Once the spell has lasted ``YIELD_AFTER_S``, ``due()`` says so and the budget *closes*:
# everyone who asks while it is closed parks too, in one first-in first-out line of futures, at the
# cost of one future each. The loop then runs two iterations without the engine and the budget reopens
# in the third: a timer that came due while the engine ran gets its callback queued behind the
# budget's first hop, and that callback only schedules its task's step, which runs in the second
# iteration (with one free iteration, a 1 ms heartbeat waited two spells). The budget reopens a new
# spell and wakes the line in batches: each batch's steps run in the next iteration, followed by
# ``_more``, which wakes the next batch if the spell is still open. A batch that closed the spell
# halves the next one, a batch that did not doubles it, so a line of a thousand short preparations is
# woken about as many at a time as fit in a spell, and a woken one that finds the spell closed again
# parks again at the head of the line. So however many graph tasks, servers and nested calls run on a
# loop, the loop is held about ``YIELD_AFTER_S`` plus one clock reading's work at most (``python -m
# benchmarks.stalls``).
#
# Only loop code uses it (Note [Loop-only bookkeeping] in graph_task.py).
#
# Note [A caller's step is on the budget]: the step of a caller that starts graph tasks holds the loop
# for the engine too: ``asyncio.gather(*(loss.backward() for loss in losses))`` checks a thousand calls'
# arguments and makes a thousand awaitables before any of them runs. So each call ``charge()``s the
# budget where it is made (autograd/api.py's ``_call``): the first one of a step opens the spell then,
# and the spell is marked as used, so that it lasts into the next iteration, where those graph tasks
# take their first steps. There they find it spent and park at once, rather than prepare for another
# ``YIELD_AFTER_S`` on top of the caller's step; the loop runs its timers before they start.

# Note [A cheap call]: what a ``backward()``/``grad()`` call does in its caller's step holds the loop
# before any budget can act, a thousand times over in ``gather(*(loss.backward() for loss in losses))``.
# So the call checks its arguments and makes its awaitable and nothing else (the implicit gradient is
# made later: Note [The implicit gradient is made on the budget] in engine.py), the common forms
# (``loss.backward()``, ``loss.backward(retain_graph=...)``, ``grad(loss, x, create_graph=...)``) take a
# path in the front door without the tuples of the general one (same checks, same errors, in the same
# order: tests/autograd/test_front_door_errors.py), and the engine of the running loop is found
# without a weak dictionary's lookup (``get_engine``'s last-loop cache).

YIELD_AFTER_S = 0.002
"""Note [Yielding]: the engine gives the loop back after holding it this long (Note [One budget
per loop]). The servers read the clock once the inline nodes run since their last reading add up
to ``CLOCK_BUDGET`` (Note [Reading the clock] in worker.py), so a run of expensive inline nodes
cannot hold the loop for more than about ``CLOCK_BUDGET`` element-operations past this."""


def set_loop_budget(seconds: float) -> None:
    """How long the engine may hold the event loop before it gives it back (default 0.002 s).

    Shorter: the other coroutines on the loop (a server's requests) wait less for the engine, and
    a backward takes a little longer; longer: the reverse (Note [One budget per loop]). Process-wide;
    ``ag.give_way()`` uses the same budget. ``math.inf`` never gives the loop back."""
    global YIELD_AFTER_S
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise ValueError(f"set_loop_budget(): expected a number of seconds at least 0, got {seconds!r}")
    YIELD_AFTER_S = float(seconds)


def get_loop_budget() -> float:
    """The engine's time budget on an event loop, in seconds (``set_loop_budget``)."""
    return YIELD_AFTER_S


_MAX_BATCH = 1024
"""The most parked callers one iteration wakes."""

_clock = time.perf_counter


class LoopBudget:
    """The engine's time budget on one event loop (Note [One budget per loop])."""

    __slots__ = ("start", "ticking", "seen", "closed", "line", "batch", "bursting")

    def __init__(self) -> None:
        self.start = 0.0
        """When the current spell opened."""
        self.ticking = False
        """Whether a spell is open (its ``_tick`` queued)."""
        self.seen = False
        """Whether ``due()`` was asked since the last ``_tick``."""
        self.closed = False
        """Spent: everyone parks until the loop has run without the engine."""
        self.line: deque[asyncio.Future | Callable[[], bool]] = deque()
        """The parked callers (a future each) and starts (``start_soon``), first in first out."""
        self.batch = 8
        """How many parked callers the next wake-up wakes."""
        self.bursting = False
        """Whether a step of the running loop iteration charged the budget: its burst is open, if the
        collector is on (Note [A caller's burst is frozen] in gcfreeze.py)."""

    def due(self) -> bool:
        """Whether the caller must ``await give_way()`` before it goes on."""
        if self.closed:
            return True
        if not self.ticking:  # the first engine work since the loop was free of it: a new spell
            self.ticking = True
            self.seen = False
            self.start = _clock()
            asyncio.get_running_loop().call_soon(self._tick)
            return False
        self.seen = True
        return _clock() - self.start > YIELD_AFTER_S

    def charge(self) -> None:
        """A graph task was started in the running step (Note [A caller's step is on the budget])."""
        if not self.bursting:  # the first of this loop iteration: Note [A caller's burst is frozen]
            self.bursting = True
            loop = asyncio.get_running_loop()
            FrozenWhileBusy.burst(loop)
            loop.call_soon(self._burst_over, loop)
        if not self.ticking:
            self.ticking = True
            self.start = _clock()
            asyncio.get_running_loop().call_soon(self._tick)
        self.seen = True

    def _burst_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop iteration after the charged one (Note [A caller's burst is frozen] in gcfreeze.py)."""
        self.bursting = False
        FrozenWhileBusy.burst_over(loop)

    async def give_way(self) -> None:
        """Park until the loop has run without the engine and this caller's turn has come."""
        turn = self.park(False)
        while True:
            await turn
            if not self.due():
                return
            turn = self.park(True)

    def park(self, again: bool) -> asyncio.Future:
        """A turn in the line, to await: the budget is spent (``due()`` said so). ``again``: the caller
        was woken too early in its batch, so it goes first again and the next batches are smaller."""
        turn = asyncio.get_running_loop().create_future()
        if again:
            self.line.appendleft(turn)
            if self.batch > 1:
                self.batch //= 2
        else:
            self.line.append(turn)
        self._close()
        return turn

    def start_soon(self, start: Callable[[], bool]) -> None:
        """``start()`` now while the budget lasts, else in the line: a call handed to asyncio as a future
        (Note [Handed to asyncio as a future] in graph/awaitable.py) waits its turn without a task.
        ``start`` returns False when there was nothing left to start (the call was cancelled)."""
        if not self.due():
            start()
            return
        self.line.append(start)
        self._close()

    def _close(self) -> None:
        """The budget is spent: everyone parks until the loop has run without the engine (``_hop``)."""
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self._hop, 1)

    def _tick(self) -> None:
        """The spell goes on while the engine asked ``due()`` in the iteration just run."""
        if self.seen and not self.closed:
            self.seen = False
            asyncio.get_running_loop().call_soon(self._tick)
        else:
            self.ticking = False

    def _hop(self, left: int) -> None:
        """Two iterations without the engine, then a new spell."""
        if left:
            asyncio.get_running_loop().call_soon(self._hop, left - 1)
            return
        self.closed = False
        self.ticking = False  # the first woken caller's ``due()`` opens the new spell
        self._wake()

    def _wake(self) -> None:
        line = self.line
        n = self.batch
        while line and n:
            turn = line.popleft()
            if isinstance(turn, asyncio.Future):
                if turn.done():  # a cancelled caller's turn is skipped
                    continue
                turn.set_result(None)
            elif not turn():  # ``start_soon``'s: a cancelled call is skipped
                continue
            n -= 1
        if line:
            asyncio.get_running_loop().call_soon(self._more)

    def _more(self) -> None:
        """After the woken batch's steps: wake the next batch while the spell is open."""
        if self.closed:  # the batch spent the spell; whoever closed it wakes the rest later
            return
        if self.batch < _MAX_BATCH:
            self.batch *= 2
        self._wake()
