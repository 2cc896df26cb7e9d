"""A profiler of backward passes: one event per node run, with where, in which thread and how it ran.
(torch's profiler of forward ops and ranges, ``profile`` and ``record_function``, is
``ag.autograd.profiler``'s, re-exported here.)

Design: docs/design/profiler-plumbing.md.
"""

from __future__ import annotations

import itertools
import json
import threading
import weakref
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from asyncgrad.autograd.profiler import EventList, FunctionEvent, FunctionEventAvg, profile, record_function

# Note [Recording is per task]: entering a trace sets the context variable
# ``engine.graph_task.current_recorder`` (as ``no_grad`` sets grad mode). ``Engine.execute`` reads it
# once when a graph task starts and keeps it as ``GraphTask.profile``; the device worker sets it back
# to its current graph task's whenever it switches graph task, and node tasks and kernel threads
# inherit the worker's context. So a trace records exactly the backward passes started in its
# context, reentrant children started from their nodes included, and nothing that another asyncio
# task runs at the same time. When no trace is active the engine pays one ``ContextVar.get`` per
# graph task, one ``set`` per graph-task switch in a worker, and one ``is not None`` test per node.
# Traces nest: a backward started inside both records into both.

# Note [Lanes and tracks]: each event carries the thread its node ran in (``thread_id``,
# ``thread``). Inline nodes (plain-def backwards included) and ``async def`` node tasks run on the
# event loop thread; large kernels run in the executor's threads and time themselves there (``trace.timed``), so their
# ``start``/``end`` are the kernel's own, without the wait for a thread or for the loop. A lane is
# a (device, thread) pair. Inside a lane, a node that waits (an ``async def`` backward, a
# reentrant ``backward_sync`` from plain code) spans the nodes that run meanwhile, and two such can
# overlap partly; ``_tracks`` splits a lane into tracks in which events nest or are disjoint, as
# Chrome's trace format requires of one thread id, and the timeline draws every track as its own
# row, so bars never paint over each other.


__all__ = ["Event", "EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function", "trace"]


@dataclass(frozen=True)
class Event:
    """One node run. ``graph_task`` numbers the graph tasks of one trace from 0 in start order;
    ``depth`` is their reentrant depth; ``worker`` is ``"<device> worker"``, with ``" task"`` or
    ``" executor"`` added for nodes that ran as tasks of their own or in a kernel thread;
    ``thread``/``thread_id`` name the thread the node ran in (times are ``time.perf_counter``)."""

    name: str
    sequence_nr: int
    device: str
    worker: str
    graph_task: int
    depth: int
    start: float
    end: float
    inline: bool
    thread: str = ""
    thread_id: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


class trace(profile):
    """Collects an :class:`Event` per node run by backward passes started inside the block
    (Note [Recording is per task]) in ``events``, and, as the ``profile`` it also is, torch's
    ``function_events`` (forward ops, ranges and node runs), ``key_averages`` and its keyword
    arguments (``record_shapes``, ``profile_memory``). ``table()``, ``str()`` and
    ``export_chrome_trace`` are the backward view's; a trace may be entered again once exited."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events: list[Event] = []
        self._graph_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._next_graph_id = itertools.count()
        self._lock = threading.Lock()

    def __enter__(self) -> trace:
        if self._token is not None:
            raise RuntimeError("this profiler trace is already active; use a new trace() for a nested block")
        self._start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop()

    # ------------------------------------------------------------------ recording (engine side)
    def record(self, node: Any, device: Any, worker: str, graph_task: Any, start: float, end: float,
               inline: bool, thread: threading.Thread | None = None) -> None:
        """Called by the engine for every node run of a graph task that records here, in the thread
        the node ran in unless ``thread`` says otherwise. Thread-safe (kernel threads call it)."""
        if thread is None:
            thread = threading.current_thread()
        name, sequence_nr, depth = node.name(), node.sequence_nr, graph_task.reentrant_depth
        with self._lock:
            graph_id = self._graph_ids.get(graph_task)
            if graph_id is None:
                graph_id = self._graph_ids[graph_task] = next(self._next_graph_id)
            self.events.append(Event(name, sequence_nr, str(device), worker, graph_id, depth, start, end, inline,
                                     thread.name, thread.ident or 0))
        super().record(node, device, worker, graph_task, start, end, inline, thread)  # and the outer recorder

    # ------------------------------------------------------------------ reading
    def wall_time(self) -> float:
        """Seconds from the first node's start to the last node's end."""
        if not self.events:
            return 0.0
        return max(e.end for e in self.events) - min(e.start for e in self.events)

    def summed_time(self) -> float:
        """Seconds of node time summed over every thread: above ``wall_time`` when nodes overlapped."""
        return sum(e.duration for e in self.events)

    def __str__(self) -> str:
        return self.table()

    def table(self) -> str:  # type: ignore[override]
        """Per node name and device: calls, total (summed thread) time, mean time, inline runs;
        then the summed time beside the wall time, whose ratio is the concurrency achieved."""
        rows: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0.0, 0])
        for e in self.events:
            row = rows[e.name, e.device]
            row[0] += 1
            row[1] += e.duration
            row[2] += e.inline
        width = max([28] + [len(name) + 2 for name, _ in rows])
        head = f"{'name':<{width}}{'device':<10}{'calls':>8}{'total ms':>12}{'mean us':>12}{'inline':>8}"
        lines = [head, "-" * len(head)]
        for (name, device), (calls, total, inline) in sorted(rows.items(), key=lambda kv: (-kv[1][1], kv[0])):
            lines.append(f"{name:<{width}}{device:<10}{calls:>8}{total * 1e3:>12.3f}{total / calls * 1e6:>12.1f}"
                         f"{inline:>8}")
        lines.append("-" * len(head))
        summed, wall = self.summed_time(), self.wall_time()
        lanes = len({(e.device, e.thread_id) for e in self.events})
        ratio = f"{summed / wall:.2f}x" if wall > 0 else "n/a"
        lines.append(f"summed node time {summed * 1e3:.3f} ms, wall time {wall * 1e3:.3f} ms "
                     f"(first start to last end): {ratio} concurrency over {lanes} lanes (device, thread)")
        return "\n".join(lines)

    def lanes(self) -> dict[tuple[str, int], str]:
        """(device, thread_id) -> a readable lane name, in display order: devices in order of first
        use; in each, the loop thread first, then kernel threads numbered by first use."""
        loop_threads = {e.thread_id for e in self.events if not e.worker.endswith(" executor")}
        kernel_numbers: dict[int, int] = {}
        first: dict[tuple[str, int], tuple[int, float]] = {}
        for e in sorted(self.events, key=lambda e: e.start):
            if e.thread_id not in loop_threads and e.thread_id not in kernel_numbers:
                kernel_numbers[e.thread_id] = len(kernel_numbers) + 1
            first.setdefault((e.device, e.thread_id), (len(first), e.start))
        device_order = {}
        for device, _ in sorted(first, key=lambda k: first[k][0]):
            device_order.setdefault(device, len(device_order))

        def key(lane: tuple[str, int]) -> tuple:
            device, tid = lane
            return device_order[device], tid not in loop_threads, kernel_numbers.get(tid, 0), first[lane][0]

        names = {}
        thread_names = {e.thread_id: e.thread for e in self.events}
        for device, tid in sorted(first, key=key):
            if tid in loop_threads:
                names[device, tid] = f"{device} loop ({thread_names[tid]})"
            else:
                names[device, tid] = f"{device} kernel thread {kernel_numbers[tid]}"
        return names

    def timeline(self, figsize: tuple[float, float] | None = None):
        """A matplotlib figure: one labelled lane per (device, thread), one bar per node run,
        coloured by node name (legend), hatched by reentrant depth (legend) and, when there are several
        graph tasks, labelled with theirs (``g<id>``) where the bar is wide enough; the x axis is in ms
        from the trace's first node."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        events = self.events
        graph_tasks = len({e.graph_task for e in events})
        lanes = self.lanes()
        origin = min((e.start for e in events), default=0.0)
        span_ms = max((e.end for e in events), default=origin) - origin
        span_ms = max(span_ms * 1e3, 1e-3)
        rows: list[tuple[tuple[str, int], int]] = []  # (lane, track) from the top
        placed: dict[int, int] = {}  # id(event) -> row
        for lane in lanes:
            tracks = _tracks([e for e in events if (e.device, e.thread_id) == lane], disjoint=True)
            for t, track in enumerate(tracks):
                for e in track:
                    placed[id(e)] = len(rows)
                rows.append((lane, t))
        names = _colour_order(events)
        cmap = plt.get_cmap("tab20")
        colours = {name: cmap(i % 20) for i, name in enumerate(names)}
        fig, ax = plt.subplots(figsize=figsize or (11, 1.6 + 0.45 * max(len(rows), 1)))
        groups: dict[tuple[int, str, int], list] = defaultdict(list)
        for e in events:
            groups[placed[id(e)], e.name, e.depth].append(
                ((e.start - origin) * 1e3, max(e.duration * 1e3, span_ms * 2e-4)))
        for (row, name, depth), bars in groups.items():
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours[name], edgecolor="black", linewidth=0.3,
                           hatch=_HATCHES[min(depth, len(_HATCHES) - 1)])
        for e in events if graph_tasks > 1 else ():
            width = e.duration * 1e3
            if width > span_ms * 0.04:
                ax.text((e.start - origin) * 1e3 + width / 2, placed[id(e)], f"g{e.graph_task}", ha="center",
                        va="center", fontsize=7, clip_on=True,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})  # over hatching
        labels = [lanes[lane] + (f" [{t + 1}]" if t else "") for lane, t in rows]
        ax.set_yticks(range(len(rows)), labels)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        for r in range(1, len(rows)):
            if rows[r][0][0] != rows[r - 1][0][0]:
                ax.axhline(r - 0.5, color="grey", linewidth=0.8)
        ax.set_xlim(0, span_ms * 1.02)
        ax.set_xlabel("ms since the trace's first node")
        ax.grid(axis="x", alpha=0.3)
        node_legend = ax.legend(handles=[Patch(facecolor=colours[n], edgecolor="black", label=n) for n in names],
                                title="node", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
        depths = sorted({e.depth for e in events})
        if len(depths) > 1 or (depths and depths[0]):
            ax.add_artist(node_legend)
            ax.legend(handles=[Patch(facecolor="white", edgecolor="black", hatch=_HATCHES[min(d, len(_HATCHES) - 1)],
                                     label=f"depth {d}") for d in depths],
                      title="reentrant depth", loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8)
        tasks = f"{graph_tasks} graph tasks (g<id> on bars)" if graph_tasks > 1 else "1 graph task"
        ax.set_title(f"backward timeline: {len(events)} node runs, {tasks}, "
                     f"wall {self.wall_time() * 1e3:.2f} ms, summed {self.summed_time() * 1e3:.2f} ms")
        fig.tight_layout()
        return fig

    def export_chrome_trace(self, path: str) -> None:
        """chrome://tracing / Perfetto JSON: a process per device and a thread per lane track, named
        by metadata events, and one complete ("X") event per node run, named after the node, with
        device, graph_task, depth, sequence_nr and inline in its args. Events on one thread id nest
        or are disjoint (Note [Lanes and tracks]); times are µs from the trace's first node."""
        origin = min((e.start for e in self.events), default=0.0)
        lanes = self.lanes()
        pids: dict[str, int] = {}
        out: list[dict] = []
        tid = 0
        for lane, lane_name in lanes.items():
            device = lane[0]
            if device not in pids:
                pids[device] = len(pids) + 1
                out.append({"name": "process_name", "ph": "M", "pid": pids[device], "tid": 0,
                            "args": {"name": f"asyncgrad {device}"}})
                out.append({"name": "process_sort_index", "ph": "M", "pid": pids[device], "tid": 0,
                            "args": {"sort_index": pids[device]}})
            lane_events = [e for e in self.events if (e.device, e.thread_id) == lane]
            ns = {id(e): (round((e.start - origin) * 1e9), round((e.end - origin) * 1e9)) for e in lane_events}
            for t, track in enumerate(_tracks(lane_events, key=ns)):
                tid += 1
                out.append({"name": "thread_name", "ph": "M", "pid": pids[device], "tid": tid,
                            "args": {"name": lane_name + (f" [{t + 1}]" if t else "")}})
                out.append({"name": "thread_sort_index", "ph": "M", "pid": pids[device], "tid": tid,
                            "args": {"sort_index": tid}})
                for e in track:
                    start_ns, end_ns = ns[id(e)]
                    args = {k: v for k, v in asdict(e).items() if k not in ("name", "start", "end")}
                    out.append({"name": e.name, "cat": "inline" if e.inline else e.worker.rsplit(" ", 1)[-1],
                                "ph": "X", "ts": start_ns / 1e3, "dur": (end_ns - start_ns) / 1e3,
                                "pid": pids[device], "tid": tid, "args": args})
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f)


_HATCHES = ("", "//", "xx", "..", "\\\\", "++", "oo")
"""Hatch per reentrant depth in the timeline (deeper than the list: the last)."""


def _colour_order(events: list[Event]) -> list[str]:
    """Node names by total time, largest first: the first twenty get tab20's distinct colours."""
    total: dict[str, float] = defaultdict(float)
    for e in events:
        total[e.name] += e.duration
    return sorted(total, key=lambda n: (-total[n], n))


def _tracks(events: list[Event], disjoint: bool = False, key: dict | None = None) -> list[list[Event]]:
    """Split one lane's events into tracks, greedily in start order: in each track every two events
    are disjoint or one contains the other (with ``disjoint``: disjoint only, for drawing bars).
    ``key`` maps ``id(event)`` to the (start, end) to compare, e.g. rounded to what gets written."""
    def span(e: Event) -> tuple:
        return key[id(e)] if key is not None else (e.start, e.end)

    tracks: list[list[Event]] = []
    open_spans: list[list[tuple]] = []  # per track, a stack of the (start, end) still open
    for e in sorted(events, key=lambda e: (span(e)[0], -span(e)[1])):
        start, end = span(e)
        for track, stack in zip(tracks, open_spans):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if not stack or (not disjoint and stack[-1][1] >= end):
                track.append(e)
                stack.append((start, end))
                break
        else:
            tracks.append([e])
            open_spans.append([(start, end)])
    return tracks
