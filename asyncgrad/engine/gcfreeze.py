"""Keeping the collector's full passes short while backwards run (Note [Frozen while busy])."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from typing import Any


# Note [Frozen while busy]: a full (generation 2) collection walks every object the
# collector tracks, and a recorded graph is several tracked objects per node (the node, its
# edges, saved tensors), so with many graphs alive a collection that fires during a backward
# holds the loop for tens of milliseconds. While any backward of the process runs (a graph
# task's scope calls ``enter`` as it opens and ``exit`` as it closes), everything that was alive
# when the first one started sits in the collector's permanent generation (``gc.freeze``, O(1)),
# so collections during backwards walk only what was allocated since
# (``python -m benchmarks.stalls --only gc``); when the last one ends, ``gc.unfreeze`` (O(1)) hands it all back to the
# oldest generation. Frozen objects are still freed by reference counting as usual; only
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
class FrozenWhileBusy:
    """Keeps the collector's full passes short while backwards run (Note [Frozen while busy] above)."""

    enabled = True
    _lock = threading.Lock()
    _loops: dict[int, list] = {}
    """``id(loop)``: ``[weak reference to the loop, graph tasks of it that entered and did not exit]``."""
    _frozen = False

    @classmethod
    def enter(cls, graph_task: Any) -> None:
        loop = graph_task.future.get_loop()
        with cls._lock:
            loops = cls._loops
            entry = loops.get(id(loop))
            if entry is None or entry[0]() is not loop:
                for key, (ref, _) in list(loops.items()):
                    other = ref()
                    if other is None or other.is_closed():
                        del loops[key]
                entry = loops[id(loop)] = [weakref.ref(loop), 0]
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

    @classmethod
    def exit(cls, graph_task: Any) -> None:
        key = id(graph_task.future.get_loop())
        with cls._lock:
            entry = cls._loops.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del cls._loops[key]
                if not cls._loops and cls._frozen:
                    gc.unfreeze()
                    cls._frozen = False

    @classmethod
    def _after_fork(cls) -> None:
        """A forked child runs none of its parent's backwards."""
        cls._lock = threading.Lock()
        cls._loops = {}
        if cls._frozen:
            gc.unfreeze()
            cls._frozen = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=FrozenWhileBusy._after_fork)
