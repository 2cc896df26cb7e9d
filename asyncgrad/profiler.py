"""A profiler of backward passes: one event per node run, with where and how it ran.

``with ag.profiler.trace() as prof:`` is a plain context manager around awaited work; graph
tasks started inside it record into it. Engines look at it once per graph task, so when no
trace is active the per-node path pays nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from asyncgrad.engine import engine as _engine


@dataclass(frozen=True)
class Event:
    name: str
    sequence_nr: int
    device: str
    worker: str
    graph_task: int
    depth: int
    start: float
    end: float
    inline: bool

    @property
    def duration(self) -> float:
        return self.end - self.start


class trace:
    """Collects an :class:`Event` per node run by backward passes started inside the block."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._graph_ids: dict[int, int] = {}

    def __enter__(self) -> trace:
        _engine.recorders.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _engine.recorders.remove(self)

    def record(self, node: Any, device: Any, worker: str, graph_task: Any, start: float, end: float,
               inline: bool) -> None:
        graph_id = self._graph_ids.setdefault(id(graph_task), len(self._graph_ids))
        self.events.append(Event(node.name(), node.sequence_nr, str(device), worker, graph_id,
                                 graph_task.reentrant_depth, start, end, inline))

    def table(self) -> str:
        """Per node name: calls, total and mean time, and how many ran inline."""
        rows: dict[str, list] = defaultdict(lambda: [0, 0.0, 0])
        for e in self.events:
            row = rows[e.name]
            row[0] += 1
            row[1] += e.duration
            row[2] += e.inline
        lines = [f"{'node':<28}{'calls':>8}{'total ms':>12}{'mean us':>12}{'inline':>8}", "-" * 68]
        for name, (calls, total, inline) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{name:<28}{calls:>8}{total * 1e3:>12.3f}{total / calls * 1e6:>12.1f}{inline:>8}")
        return "\n".join(lines)

    def timeline(self):
        """A matplotlib figure: one lane per worker, one bar per node run."""
        import matplotlib.pyplot as plt

        lanes = sorted({e.worker for e in self.events})
        fig, ax = plt.subplots(figsize=(10, 1 + 0.5 * len(lanes)))
        origin = min((e.start for e in self.events), default=0.0)
        for lane, worker in enumerate(lanes):
            bars = [((e.start - origin) * 1e3, max(e.duration * 1e3, 1e-3)) for e in self.events if e.worker == worker]
            ax.broken_barh(bars, (lane - 0.4, 0.8))
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_xlabel("ms since the first node")
        fig.tight_layout()
        return fig

    def export_chrome_trace(self, path: str) -> None:
        """chrome://tracing / Perfetto: one complete ("X") event per node run."""
        lanes = {w: i for i, w in enumerate(sorted({e.worker for e in self.events}))}
        events = [
            {"name": e.name, "ph": "X", "ts": e.start * 1e6, "dur": e.duration * 1e6, "pid": 0, "tid": lanes[e.worker],
             "args": {k: v for k, v in asdict(e).items() if k not in ("name", "start", "end")}}
            for e in self.events
        ]
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
