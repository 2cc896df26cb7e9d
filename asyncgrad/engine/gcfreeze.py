"""Keeping the collector's full passes short while backwards run (Note [Frozen while busy])."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from typing import Any

from asyncgrad.graph.node import nodes_recorded

# Note [Frozen while busy]: a full (generation 2) collection walks every object the
# collector tracks, and a recorded graph is several tracked objects per node (the node, its
# edges, saved tensors), so with many graphs alive a collection that fires during a backward
# holds the loop for tens of milliseconds. While any backward of the process runs (a graph
# task's scope calls ``enter`` as it opens and ``exit`` as it closes), everything that was alive
# when the first one started sits in the collector's permanent generation (``gc.freeze``, O(1)),
# so collections during backwards walk only what was allocated since (``python -m
# benchmarks.stalls --only many,fanin``); when the last one ends, ``gc.unfreeze`` (O(1)) hands it
# all back to the oldest generation. Frozen objects are still freed by reference counting as usual; only
# cyclic garbage older than the busy spell waits for its end to be collected.
#
# A graph task that never ends (its coroutine left on a loop that stopped and was closed) must
# not keep the process frozen, and cannot be relied on to be collected (it may be frozen
# itself). So the count is kept per event loop, and the first backward on a loop that is not
# busy yet forgets the loops that were closed or collected meanwhile; when that leaves no loop
# busy, it unfreezes what they left frozen before freezing anew. A program that freezes
# objects itself (``gc.freeze`` at start-up or after a fork) is left alone: once the engine
# finds the permanent generation not empty as it would freeze, it never freezes again
# (``gc.get_freeze_count`` walks the whole generation: asked again at every busy spell, it
# would cost milliseconds each time in such a program). ``FrozenWhileBusy.enabled = False``
# turns it off.
#
# Note [Full passes while busy]: objects made during a busy spell are not frozen by its start:
# the gradients, input buffers and queue entries of a huge backward, the graphs that reentrant or
# concurrent create_graph backwards record; each full pass would walk those that survived. So a
# callback of the collector (``gc.callbacks``, installed once) freezes again as a full pass
# *starts* while the process is busy: the young generations join the permanent one (O(1)) and the
# pass walks nothing. The passes of the two young generations, which walk at most a few thousand
# objects, run as usual, so short-lived cyclic garbage is still collected at once.
#
# The same holds while a huge graph is being recorded and no backward runs (the forward of the
# graph that a backward will walk next): once at least ``GROWING_NODES`` nodes were recorded since
# the last busy spell ended, full passes freeze instead of walking the growing graph again, and
# the process stays frozen until the next busy spell ends. A training loop's forward records far
# fewer nodes between two backwards, so its collections are left alone.
#
# What waits is cyclic garbage that outlived the young passes. So that it never waits long, a full
# pass that starts more than ``WALK_EVERY_S`` after the last pass that walked everything walks
# everything (unfrozen first), and the survivors are frozen again as it stops, if the process is
# still busy or growing then. Only the passes the allocator starts are changed (it starts one when
# the youngest generation's count passes its threshold, which an explicit ``gc.collect()`` does not
# wait for): ``gc.collect()`` walks what it always walked. The callback runs in whatever thread
# allocated, so it only tries the lock: a collection triggered under the lock (``enter``, ``exit``)
# is left alone.
#
# A container made while busy is walked whole by every pass of the generation it sits in, and the
# maps a huge graph's preparation makes (Note [Sharded counts] in counts.py) hold every node of the
# graph: a pass of the youngest generation that found them there would walk the whole graph, and
# another one in the middle generation. So ``compute_dependencies`` and ``init_to_execute`` call
# ``settle`` once they have sharded their maps: while busy, it freezes them at once.
#
# Note [Middle passes while busy]: a thousand graph tasks started at once are alive together, each a
# few dozen tracked objects (its scope, futures, task, buffers), so a pass of the middle generation,
# which walks what survived the youngest one since the last such pass, walks tens of thousands of
# them in the middle of an engine slice. While busy, such a pass freezes its generations as it starts,
# as a full pass does: it walks nothing, and the youngest generation's passes still collect the cycles
# that die young. What it would have collected (cycles that outlived one young pass while busy) waits,
# as with full passes, for the busy spell's end or the next pass that walks everything.
#
# Note [A caller's burst is frozen]: ``asyncio.gather(*(loss.backward() for loss in losses))`` makes a
# thousand calls and hands them to asyncio in one step, before any graph task starts: several thousand
# new tracked objects (each call, its coroutine, its consumer's callback and context), all alive. Every
# pass of the youngest generation in that step walks 700 of them and finds nothing to free, and the middle
# pass walks them all again. So the step that first charges a loop's budget (Note [A caller's step is on
# the budget] in budget.py) opens a *burst* on that loop (``burst``; none while the collector is off or
# this is turned off): the loop counts as busy, as it does for a graph task (``enter``: what is alive is
# frozen), and until the burst ends, a pass of either young generation freezes as it starts and walks
# nothing. The burst ends in the loop's next iteration (``burst_over``, queued by the budget as it opens
# the burst), whatever became of the calls (awaited, failed, cancelled or closed): the loop leaves the busy
# spell as a graph task's end leaves it, and once nothing is busy the frozen objects go back to the oldest
# generation (``gc.unfreeze``), where only full passes walk them. An awaited backward spans at least two
# iterations, so its burst is over when the await returns. A loop closed with its burst (or a graph task)
# still open is forgotten by the next pass that would freeze for it, and by the next busy spell's start.
# The collector's thresholds are never changed, so nothing of this can leak to the program but the
# moment at which its objects reach the oldest generation.
GROWING_NODES = 2_000
"""Nodes recorded since the last busy spell past which a recording counts as a huge graph growing
(Note [Full passes while busy])."""

WALK_EVERY_S = 60.0
"""The longest time between two full passes that walk everything while the process stays frozen
(Note [Full passes while busy])."""


class FrozenWhileBusy:
    """Keeps the collector's full passes short while backwards run (Note [Frozen while busy] above)."""

    enabled = True
    _lock = threading.Lock()
    _loops: dict[int, list] = {}
    """``id(loop)``: ``[weak reference to the loop, graph tasks and bursts of it that entered and did not exit,
    bursts of it open (0 or 1)]``."""
    _bursts = 0
    """Bursts open, of all loops (Note [A caller's burst is frozen])."""
    _frozen = False
    _recorded = 0
    """``nodes_recorded()`` when the last busy spell ended (Note [Full passes while busy])."""
    _walked = 0.0
    """``time.monotonic()`` at the last full pass that walked everything, or when the process was
    frozen while not frozen before."""
    _walking = False
    """A full pass walks everything now: its survivors are frozen again as it stops."""

    @classmethod
    def enter(cls, graph_task: Any) -> None:
        with cls._lock:
            cls._enter(graph_task.future.get_loop())

    @classmethod
    def exit(cls, graph_task: Any) -> None:
        with cls._lock:
            cls._exit(id(graph_task.future.get_loop()), 0)

    @classmethod
    def burst(cls, loop: Any) -> None:
        """The running step of ``loop`` charged its budget: young passes freeze until ``burst_over``
        (Note [A caller's burst is frozen]). Nothing opens while the collector is off."""
        if not cls.enabled or not gc.isenabled():
            return
        with cls._lock:
            entry = cls._enter(loop)
            if not entry[2]:
                entry[2] = 1
                cls._bursts += 1

    @classmethod
    def burst_over(cls, loop: Any) -> None:
        """The loop's next iteration: its burst ends (Note [A caller's burst is frozen])."""
        with cls._lock:
            cls._exit(id(loop), 1)

    @classmethod
    def _enter(cls, loop: Any) -> list:
        """One more graph task or burst of ``loop``; the lock is held."""
        loops = cls._loops
        entry = loops.get(id(loop))
        if entry is None or entry[0]() is not loop:
            cls._forget_closed()
            entry = loops[id(loop)] = [weakref.ref(loop), 0, 0]
        entry[1] += 1
        if entry[1] == 1 and len(loops) == 1:  # the process was not busy
            if cls._frozen:  # left by graph tasks of loops closed before they ended
                gc.unfreeze()
                cls._frozen = False
            if cls.enabled and gc.isenabled():
                if gc.get_freeze_count():
                    cls.enabled = False  # the program freezes objects itself
                else:
                    gc.freeze()
                    cls._frozen = True
                    cls._walked = time.monotonic()
        return entry

    @classmethod
    def _exit(cls, key: int, burst: int) -> None:
        """One graph task (``burst`` 0) or the burst (1) of the loop ``key`` is over; the lock is held."""
        entry = cls._loops.get(key)
        if entry is None or entry[2] < burst:
            return
        if burst:
            entry[2] = 0
            cls._bursts -= 1
        entry[1] -= 1
        if entry[1] <= 0:  # not while its burst is open, which counts as one
            del cls._loops[key]
            if not cls._loops:
                cls._idle()

    @classmethod
    def _idle(cls) -> None:
        """No loop is busy any more: everything frozen goes back to the oldest generation (the lock is held)."""
        cls._recorded = nodes_recorded()
        if cls._frozen:
            gc.unfreeze()
            cls._frozen = False

    @classmethod
    def _forget_closed(cls) -> None:
        """Forget the loops that were closed or collected with graph tasks or a burst still open (the
        lock is held): nothing will end them (Note [Frozen while busy])."""
        loops = cls._loops
        for key, (ref, _, bursting) in list(loops.items()):
            other = ref()
            if other is None or other.is_closed():
                del loops[key]
                cls._bursts -= bursting

    @classmethod
    def settle(cls) -> None:
        """While busy: the huge maps a graph task's preparation has just made are frozen before a pass of
        the young generations walks them (Note [Full passes while busy])."""
        with cls._lock:
            if cls._loops and cls._frozen:
                gc.freeze()

    @classmethod
    def _collecting(cls, phase: str, info: dict) -> None:
        """``gc.callbacks``: a full pass that starts while busy or while a huge graph grows walks
        nothing, except one every ``WALK_EVERY_S`` (Note [Full passes while busy])."""
        generation = info["generation"]
        if generation == 0 and not cls._bursts:
            return
        if generation < 2:  # Note [Middle passes while busy], Note [A caller's burst is frozen]
            if phase == "start" and cls._loops and cls._frozen and cls.enabled:
                if cls._lock.acquire(blocking=False):
                    try:
                        cls._forget_closed()
                        if cls._loops:
                            if cls._frozen:
                                gc.freeze()
                        else:
                            cls._idle()  # only loops closed while busy were left: this pass walks as usual
                    finally:
                        cls._lock.release()
            return
        if generation != 2 or not cls.enabled:
            return
        if not cls._lock.acquire(blocking=False):
            return
        try:
            if phase != "start":
                if cls._walking:  # the pass that walked everything is over: freeze its survivors
                    cls._walking = False
                    gc.freeze()
                    cls._frozen = True
                return
            if gc.get_count()[0] <= gc.get_threshold()[0]:
                return  # not the allocator's pass: ``gc.collect()`` walks as asked
            cls._forget_closed()
            if cls._loops:
                wanted = cls._frozen
            else:
                wanted = nodes_recorded() - cls._recorded >= GROWING_NODES
            if not wanted:
                if cls._frozen:  # no backward runs and no huge graph grows: this pass walks everything
                    gc.unfreeze()
                    cls._frozen = False
                return
            now = time.monotonic()
            if not cls._frozen:
                if gc.get_freeze_count():
                    cls.enabled = False  # the program freezes objects itself
                    return
                cls._walked = now
            elif now - cls._walked > WALK_EVERY_S:
                gc.unfreeze()  # this pass walks everything, and ``stop`` freezes again
                cls._frozen = False
                cls._walking = True
                cls._walked = now
                return
            gc.freeze()
            cls._frozen = True
        finally:
            cls._lock.release()

    @classmethod
    def _after_fork(cls) -> None:
        """A forked child runs none of its parent's backwards."""
        cls._lock = threading.Lock()
        cls._loops = {}
        cls._bursts = 0
        cls._walking = False
        if cls._frozen:
            gc.unfreeze()
            cls._frozen = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=FrozenWhileBusy._after_fork)
gc.callbacks.append(FrozenWhileBusy._collecting)
