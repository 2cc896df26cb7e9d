"""A node -> count map for huge graphs that never grows in one long step.

Note [Sharded counts]: a dict grows by rebuilding its whole table in one C call, so the
dependency count of a 10^6-node graph, built a slice at a time (Note [Slices]), still held the
loop for its last resize alone: about 22 ms at 700k entries, 27 ms measured in a 10^6-node
backward on a loaded 2-core machine. Past ``SHARD_AT`` entries, ``compute_dependencies`` moves
the counts into ``SHARDS`` dicts chosen by ``sequence_nr``, so that no single dict holds more
than 3% of the graph (its resize at 10^6 nodes copies about 20k entries, under a millisecond),
and the shards' resizes fall at different times. Small graphs keep a plain dict, so the
common path pays nothing; a sharded one costs the engine's ``route`` a Python-level call per
lookup, only on graphs that big.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node

SHARDS = 64
SPREAD = SHARDS * (SHARDS + 1) // 2
SHARD_OF = tuple(i for i in range(SHARDS) for _ in range(i + 1))
"""``SHARD_OF[node.sequence_nr % SPREAD]``: shard ``i`` takes ``i + 1`` parts in ``SPREAD`` of the
nodes. Equal shards would fill in step and all resize within the same few dozen insertions,
which costs as much as one big resize (18 ms measured); unequal ones resize at different times."""
SHARD_AT = 1 << 13
"""Entries past which ``compute_dependencies`` shards its counts (the dict's resize there: ~0.2 ms)."""


class ShardedCounts:
    """The mapping protocol ``route`` and the tests use (``[]``, ``in``, ``del``, ``len``, ``get``),
    over ``SHARDS`` dicts; ``shards`` is open for the preparation's own loop."""

    __slots__ = ("shards",)

    def __init__(self, counts: dict[Node, int]) -> None:
        self.shards: list[dict[Node, int]] = [{} for _ in range(SHARDS)]
        shards = self.shards
        for fn, count in counts.items():
            shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn] = count

    def __getitem__(self, fn: Node) -> int:
        return self.shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn]

    def __setitem__(self, fn: Node, count: int) -> None:
        self.shards[SHARD_OF[fn.sequence_nr % SPREAD]][fn] = count

    def __delitem__(self, fn: Node) -> None:
        i = SHARD_OF[fn.sequence_nr % SPREAD]
        shard = self.shards[i]
        del shard[fn]
        if not shard:
            # Freeing a dict walks its whole table (emptied, not shrunk): one shard at a time,
            # as each runs out, rather than all of them with the graph task (4.4 ms measured).
            self.shards[i] = {}

    def __contains__(self, fn: Node) -> bool:
        return fn in self.shards[SHARD_OF[fn.sequence_nr % SPREAD]]

    def get(self, fn: Node, default: int | None = None) -> int | None:
        return self.shards[SHARD_OF[fn.sequence_nr % SPREAD]].get(fn, default)

    def __len__(self) -> int:
        return sum(map(len, self.shards))

    def __iter__(self) -> Iterator[Node]:
        for shard in self.shards:
            yield from shard
