"""Node-keyed maps and sets for huge graphs that never grow in one long step.

Note [Sharded counts]: a dict grows by rebuilding its whole table in one C call, so the
dependency count of a huge graph, built a slice at a time (Note [Slices] in engine.py), would
still hold the loop for its last resize alone, far past ``YIELD_AFTER_S``. Past ``SHARD_AT``
entries, ``compute_dependencies`` moves the counts into ``SHARDS`` dicts chosen by
``sequence_nr``, so that each dict holds about one ``SHARDS``-th of the graph, and the shards'
resizes fall at different times (``python -m benchmarks.stalls --only chain``). Small graphs keep a
plain dict, so the common path pays nothing; on a sharded one the engine's ``route`` picks the shard itself (Note
[Shards picked inline] in engine.py). ``init_to_execute`` shards its ``exec_info`` and its visited
set the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asyncgrad.graph.node import Node

SHARDS = 64
SPREAD = SHARDS * (SHARDS + 1) // 2
SHARD_OF = tuple(i for i in range(SHARDS) for _ in range(i + 1))
"""``SHARD_OF[node.sequence_nr % SPREAD]``: shard ``i`` takes ``i + 1`` parts in ``SPREAD`` of the
nodes. Equal shards would fill in step and all resize within the same few dozen insertions,
which costs as much as one big resize; unequal ones resize at different times."""
SHARD_AT = 1 << 14
"""Entries past which ``compute_dependencies`` shards its counts. Sharding costs every lookup a
Python-level call, so W1's 10,000-node chain (``python -m benchmarks --only W1``) keeps a plain
dict. Not higher: the move into shards copies every entry in one step, which must not hold the loop
much past ``YIELD_AFTER_S`` (``python -m benchmarks.stalls --only chain``)."""


class ShardedMap:
    """The mapping protocol the engine uses (``[]``, ``in``, ``del``, ``get``, ``pop``, ``setdefault``;
    ``len`` for ``GraphTask``'s repr), over ``SHARDS`` dicts; ``shards`` is open for the preparation's
    own loop."""

    __slots__ = ("shards",)

    def __init__(self, items: dict[Node, Any]) -> None:
        self.shards: list[dict[Node, Any]] = [{} for _ in range(SHARDS)]
        shards = self.shards
        for fn, value in items.items():
            shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn] = value

    def __getitem__(self, fn: Node) -> Any:
        return self.shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn]

    def __setitem__(self, fn: Node, value: Any) -> None:
        self.shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn] = value

    def __delitem__(self, fn: Node) -> None:
        self.pop(fn)

    def pop(self, fn: Node, *default: Any) -> Any:
        i = SHARD_OF[fn.sequence_nr % SPREAD]
        shard = self.shards[i]
        value = shard.pop(fn, *default)
        if not shard:
            # Freeing a dict walks its whole table (emptied, not shrunk): one shard at a time,
            # as each runs out, rather than all of them in one step with the graph task.
            self.shards[i] = {}
        return value

    def __contains__(self, fn: Node) -> bool:
        return fn in self.shards[SHARD_OF[fn.sequence_nr % SPREAD]]

    def get(self, fn: Node, default: Any = None) -> Any:
        return self.shards[SHARD_OF[fn.sequence_nr % SPREAD]].get(fn, default)

    def setdefault(self, fn: Node, default: Any) -> Any:
        return self.shards[SHARD_OF[fn.sequence_nr % SPREAD]].setdefault(fn, default)

    def __len__(self) -> int:
        return sum(map(len, self.shards))


class ShardedSet:
    """A set of nodes over ``SHARDS`` sets (``in``, ``add``): ``init_to_execute``'s visited set."""

    __slots__ = ("shards",)

    def __init__(self, nodes: set[Node]) -> None:
        self.shards: list[set[Node]] = [set() for _ in range(SHARDS)]
        shards = self.shards
        for fn in nodes:
            shards[SHARD_OF[fn.sequence_nr % SPREAD]].add(fn)

    def __contains__(self, fn: Node) -> bool:
        return fn in self.shards[SHARD_OF[fn.sequence_nr % SPREAD]]

    def add(self, fn: Node) -> None:
        self.shards[SHARD_OF[fn.sequence_nr % SPREAD]].add(fn)

    def drop_shard(self) -> bool:
        """Free one shard (a few percent of the set); False once none is left."""
        for i, shard in enumerate(self.shards):
            if shard:
                self.shards[i] = set()
                return True
        return False
