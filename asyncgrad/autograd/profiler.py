"""``ag.autograd.profiler``: torch.autograd.profiler's shape over asyncgrad's forward ops and backward nodes.

Design: docs/design/autograd-profiler.md.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import threading
import time
import warnings
import weakref
from collections import defaultdict
from typing import Any, Callable

from asyncgrad.graph.recorder import PROFILING, current_recorder, open_ranges
from asyncgrad.graph.switches import restore

# Note [When a forward op started]: an op reaches the profiler when it returns (``record`` is called
# with its result), and no op pays for a clock read on entry. Its interval ends there and starts
# as long before as the thread's CPU time (``time.thread_time``) grew since the previous event the
# profile saw on that thread (an op, a range's entry or exit, the profile's start), but never before
# that event: Python run between two ops counts in the second, time spent waiting (an awaited sleep,
# the loop idle) counts in none. Intervals on one thread thus nest or are disjoint, as
# ``EventList._populate_cpu_children`` requires; times are microseconds from the profile's start.
#
# Memory (``profile_memory=True``): an op that allocates its result (not a view) counts the result's
# bytes, and so does every range open in its context; a result freed while the profile runs counts
# its bytes negatively in the ranges open where it was freed. Only results made during the profile
# are followed; torch's ``[memory]`` events for frees outside any range are not made.

# Note [Profiler arguments that record nothing]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``profile`` takes all of torch's keywords so that torch code runs unchanged, but these change
# nothing: ``with_flops`` (no op counts its FLOPs: every event's ``flops`` stays 0 and the table
# has no FLOPs column; ``EventList`` keeps the flag only to pass it on, as torch's does),
# ``with_stack`` and ``with_modules`` (no Python stack or module hierarchy is attached to an
# event), ``use_kineto``, ``experimental_config``, ``acc_events`` and ``custom_trace_id_callback``
# (there is one recorder, no Kineto), and ``use_cpu`` (host events are always recorded; torch
# refuses ``use_cpu=False`` without Kineto). ``use_cuda``/``use_device`` other than ``cpu`` warn
# and are dropped: device kernels are timed only as the host sees them.


__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval", "format_time", "profile",
           "record_function"]

_clock = time.perf_counter
_cpu_clock = time.thread_time_ns


def format_time(time_us: float) -> str:
    """Microseconds as torch prints them: ``12.345us``, ``1.234ms``, ``1.234s``."""
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def format_memory(nbytes: int) -> str:
    """Bytes as torch prints them: ``400 B``, ``1.50 KB``, ``2.00 MB``, ``1.00 GB``."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


class Interval:
    """An event's [start, end] in microseconds."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start}, end={self.end})"


class _Averages:
    """The per-call means of an event or an aggregate (torch's FormattedTimesMixin)."""

    count: int
    cpu_time_total: float
    device_time_total: float

    @property
    def cpu_time(self) -> float:
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    @property
    def cuda_time(self) -> float:
        return self.device_time

    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total  # type: ignore[attr-defined]

    @property
    def cpu_time_str(self) -> str:
        return format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self) -> str:
        return format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self) -> str:
        return format_time(self.self_cpu_time_total)  # type: ignore[attr-defined]


class FunctionEvent(_Averages):
    """One profiled op, range or backward node run (torch's signature: times in microseconds)."""

    def __init__(self, id: int, name: str, thread: int, start_us: float | None = None, end_us: float | None = None,
                 overload_name: str | None = None, fwd_thread: int | None = None,
                 input_shapes: list | None = None, stack: list | None = None, scope: int = 0,
                 use_device: str | None = None, cpu_memory_usage: int = 0, device_memory_usage: int = 0,
                 is_async: bool = False, is_remote: bool = False, sequence_nr: int = -1, node_id: int = -1,
                 device_type: str = "cpu", device_index: int = 0, is_legacy: bool = False,
                 flops: int | None = None, trace_name: str | None = None, *, cpu_start: float | None = None,
                 cpu_end: float | None = None) -> None:
        if start_us is None or end_us is None:  # torch 1.7's names for them (its tests use both)
            if cpu_start is None or cpu_end is None:
                raise TypeError("FunctionEvent needs start_us and end_us")
            start_us, end_us = cpu_start, cpu_end
        self.id = id
        self.node_id = node_id
        self.name = name
        self.overload_name = overload_name
        self.trace_name = trace_name if trace_name is not None else name
        self.time_range = Interval(start_us, end_us)
        self.thread = thread
        self.fwd_thread = fwd_thread
        self.kernels: list = []
        self.count = 1
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.scope = scope
        self.use_device = use_device
        self.cpu_memory_usage = cpu_memory_usage
        self.device_memory_usage = device_memory_usage
        self.is_async = is_async
        self.is_remote = is_remote
        self.sequence_nr = sequence_nr
        self.device_type = device_type
        self.device_index = device_index
        self.is_legacy = is_legacy
        self.flops = flops

    def append_cpu_child(self, child: FunctionEvent) -> None:
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent: FunctionEvent) -> None:
        self.cpu_parent = parent

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_interval(self) -> Interval:
        """``time_range`` by its torch 1.7 name."""
        return self.time_range

    @property
    def cpu_time_total(self) -> float:
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(child.cpu_time_total for child in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(child.cpu_memory_usage for child in self.cpu_children)

    device_time_total = 0.0
    self_device_time_total = 0.0
    self_device_memory_usage = 0

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time={format_time(self.cpu_time_total)} start_us={self.time_range.start} "
                f"end_us={self.time_range.end} cpu_children={[c.id for c in self.cpu_children]} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage} "
                f"sequence_nr={self.sequence_nr}>")


class FunctionEventAvg(_Averages):
    """The sum of events of one key (``key_averages``): totals add up, ``cpu_time`` is the mean."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_remote = False
        self.use_device: str | None = None
        self.cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.self_device_time_total = 0.0
        self.input_shapes: list | None = None
        self.stack: list | None = None
        self.scope: int | None = None
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self.cpu_children: list | None = None
        self.cpu_parent: FunctionEvent | None = None
        self.device_type = "cpu"
        self.is_legacy = False
        self.flops: int | None = 0

    def add(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        """Adds ``other``'s totals (the first one added gives the key and its descriptive fields)."""
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise TypeError(f"can only add a FunctionEvent or a FunctionEventAvg, not {type(other).__name__}")
        if self.key is None:
            self.key = other.key
            self.node_id = other.node_id
            self.is_async = other.is_async
            self.is_remote = other.is_remote
            self.cpu_parent = other.cpu_parent
            self.cpu_children = other.cpu_children
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.scope = other.scope
            self.device_type = other.device_type
            self.is_legacy = other.is_legacy
            self.use_device = other.use_device
        elif other.key != self.key:
            raise ValueError(f"cannot add an event of key {other.key!r} to the average of {self.key!r}")
        self.cpu_time_total += other.cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        self.count += other.count
        if self.flops is None:
            self.flops = other.flops
        elif other.flops is not None:
            self.flops += other.flops
        return self

    def __iadd__(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        return self.add(other)

    def __add__(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        """A new average holding both (torch's ``__add__`` adds in place; this leaves ``self`` as it is)."""
        total = FunctionEventAvg()
        total.add(self)
        return total.add(other)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={format_time(self.self_cpu_time_total)} "
                f"cpu_time={format_time(self.cpu_time)} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of events (or of averages) that prints as torch's table; ``with_flops`` is kept and
    passed on only (Note [Profiler arguments that record nothing])."""

    def __init__(self, *args: Any, use_device: str | None = None, profile_memory: bool = False,
                 with_flops: bool = False) -> None:
        super().__init__(*args)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    def _populate_cpu_children(self) -> None:
        """Gives every synchronous cpu event its ``cpu_parent`` and its parent's ``cpu_children``:
        per thread, in start order (longest first on a tie), an event is the child of the innermost
        open event that contains it; one that only overlaps an open event closes it."""
        by_thread: dict[tuple, list[FunctionEvent]] = defaultdict(list)
        for event in self:
            if not event.is_async and event.device_type == "cpu":
                by_thread[event.thread, event.node_id].append(event)
        for events in by_thread.values():
            stack: list[FunctionEvent] = []
            for event in sorted(events, key=lambda e: (e.time_range.start, -e.time_range.end)):
                while stack:
                    parent = stack[-1]
                    if event.time_range.start >= parent.time_range.end or event.time_range.end > parent.time_range.end:
                        stack.pop()
                    else:
                        parent.append_cpu_child(event)
                        event.set_cpu_parent(parent)
                        break
                stack.append(event)

    populate_cpu_children = _populate_cpu_children
    """torch 1.7's public name for it (the population of ported tests uses both)."""

    @property
    def self_cpu_time_total(self) -> float:
        return sum(event.self_cpu_time_total for event in self)

    def key_averages(self, group_by_input_shapes: bool = False, group_by_stack_n: int = 0) -> EventList:
        """One ``FunctionEventAvg`` per name (and, asked for, per input shapes and stack), in
        first-seen order."""
        averages: dict[tuple, FunctionEventAvg] = defaultdict(FunctionEventAvg)
        for event in self:
            key: tuple = (event.key,)
            if group_by_input_shapes:
                key += (str(event.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(event.stack[:group_by_stack_n])
            averages[key].add(event)
        return EventList(averages.values(), use_device=self._use_device, profile_memory=self._profile_memory,
                         with_flops=self._with_flops)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg()
        for event in self:
            total.add(_as_total(event))
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """torch's table: one row per event (per key for ``key_averages()``), sorted by ``sort_by``
        descending (any numeric attribute: ``cpu_time_total``, ``self_cpu_time_total``, ``count``,
        ``cpu_memory_usage`` ...), at most ``row_limit`` rows, then the self cpu time total."""
        events = [e for e in self if not top_level_events_only or e.cpu_parent is None]
        if not events:
            return ""
        if sort_by is not None:
            events = sorted(events, key=lambda e: getattr(e, sort_by), reverse=True)
        rows = events[:row_limit] if row_limit > 0 else events
        names = [e.key if len(e.key) <= max_name_column_width else e.key[:max_name_column_width - 3] + "..."
                 for e in rows]
        with_shapes = any(e.input_shapes for e in events)
        name_width = max([len("Name")] + [len(n) for n in names]) + 4
        columns: list[tuple[str, int]] = [("Name", name_width)]
        columns += [(title, 12) for title in ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg")]
        if self._profile_memory:
            columns += [("CPU Mem", 12), ("Self CPU Mem", 12)]
        columns.append(("# of Calls", 12))
        if with_shapes:
            shapes = [str(e.input_shapes)[:max_shapes_column_width] for e in rows]
            columns.append(("Input Shapes", max([len("Input Shapes")] + [len(s) for s in shapes]) + 2))
        rule = "  ".join("-" * width for _, width in columns) + "  "
        self_total = sum(e.self_cpu_time_total for e in events)

        def percent(value: float) -> str:
            return f"{value * 100 / self_total:.2f}%" if self_total else "0.00%"

        lines = [rule] if header is None else ["=" * len(rule), header, rule]
        lines.append("  ".join(f"{title:>{width}}" for title, width in columns) + "  ")
        lines.append(rule)
        for i, (event, name) in enumerate(zip(rows, names)):
            cells = [name, percent(event.self_cpu_time_total), format_time(event.self_cpu_time_total),
                     percent(event.cpu_time_total), format_time(event.cpu_time_total), format_time(event.cpu_time)]
            if self._profile_memory:
                cells += [format_memory(event.cpu_memory_usage), format_memory(event.self_cpu_memory_usage)]
            cells.append(str(event.count))
            if with_shapes:
                cells.append(shapes[i])
            lines.append("  ".join(f"{cell:>{width}}" for cell, (_, width) in zip(cells, columns)) + "  ")
        lines.append(rule)
        lines.append(f"Self CPU time total: {format_time(self_total)}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """chrome://tracing / Perfetto JSON: one complete ("X") event per event, on its thread."""
        out = [{"name": e.trace_name, "ph": "X", "ts": e.time_range.start, "dur": e.time_range.elapsed_us(),
                "tid": e.thread, "pid": "CPU functions",
                "args": {"sequence_nr": e.sequence_nr, "input_shapes": e.input_shapes,
                         "cpu_memory_usage": e.cpu_memory_usage}}
               for e in self if isinstance(e, FunctionEvent)]
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f)


def _as_total(event: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
    avg = FunctionEventAvg()
    avg.add(event)
    avg.key = "Total"
    return avg


class profile:
    """torch.autograd.profiler.profile: records forward ops, ``record_function`` ranges and
    backward node runs started in its block, in its context only (module docstring).

    Several of torch's keywords are accepted and record nothing more (Note [Profiler arguments
    that record nothing])."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: str | None = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True, experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Callable | None = None) -> None:
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use ``use_device = 'cuda'`` "
                          "instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if use_device is not None and use_device != "cpu":
            warnings.warn(f"asyncgrad does not time {use_device} kernels, disabling {use_device.upper()} profiling",
                          stacklevel=2)
            use_device = None
        self.enabled = enabled
        self.use_device = use_device
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.with_stack = with_stack
        self._events: list[FunctionEvent] = []
        self._ids = itertools.count()
        self._marks: dict[int, tuple[float, int]] = {}
        self._live: dict[int, tuple[weakref.ref, int]] = {}
        self._function_events: EventList | None = None
        self._running = False
        self._outer: Any = None
        self._token: Any = None
        self._origin = 0.0

    # ------------------------------------------------------------------ the block
    def __enter__(self) -> profile | None:
        if not self.enabled:
            return None  # as torch's: a disabled profile gives nothing to read
        if self._running or self._function_events is not None:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self._stop()

    def _start(self) -> None:
        self._outer = current_recorder.get()
        self._token = current_recorder.set(self)
        if not self._events:
            self._origin = _clock()
        self._mark()  # after the origin: an event starts after the profile, as torch's do
        self._running = True
        PROFILING.append(self)

    def _stop(self) -> None:
        if not self._running:  # exited already: a second exit changes nothing
            return
        self._running = False
        PROFILING.remove(self)
        restore(current_recorder, self._token)  # Note [A switch restored where its scope ends]
        self._token = None
        self._live.clear()  # the weak references die with their callbacks uncalled
        for event in self._events:  # a trace may run again: its events' family is found anew
            event.cpu_children, event.cpu_parent = [], None
        events = EventList(sorted(self._events, key=lambda e: (e.time_range.start, -e.time_range.end)),
                           use_device=self.use_device, profile_memory=self.profile_memory,
                           with_flops=self.with_flops)
        events._populate_cpu_children()
        self._function_events = events

    async def __aenter__(self) -> profile:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    # ------------------------------------------------------------------ recording
    def _span(self, now: float) -> float:
        """The start of an event ending ``now`` on this thread (Note [When a forward op started])."""
        mark = self._marks.get(threading.get_ident())
        if mark is None:
            return now
        return max(mark[0], now - (_cpu_clock() - mark[1]) * 1e-9)

    def _mark(self) -> None:
        self._marks[threading.get_ident()] = (_clock(), _cpu_clock())

    def _us(self, t: float) -> float:
        return (t - self._origin) * 1e6

    def _new(self, name: str, start: float, end: float, **fields: Any) -> FunctionEvent:
        event = FunctionEvent(next(self._ids), name, threading.get_ident(), self._us(start), self._us(end), **fields)
        event._owner = self  # type: ignore[attr-defined]
        self._events.append(event)
        return event

    def _allocated(self, result: Any) -> int:
        """The bytes of ``result``'s data, counted in the ranges open here and followed until freed."""
        nbytes = result.numel() * result.dtype.itemsize
        self._count_in_ranges(nbytes)
        try:
            ref = weakref.ref(result._data, self._freed)
        except TypeError:  # an array type without weak references: its free is not seen
            return nbytes
        self._live[id(ref)] = (ref, nbytes)  # by id: a weak reference hashes as its (unhashable) array
        return nbytes

    def _freed(self, ref: weakref.ref) -> None:
        _, nbytes = self._live.pop(id(ref), (None, 0))
        if self._running and nbytes:
            self._count_in_ranges(-nbytes)

    def _count_in_ranges(self, nbytes: int) -> None:
        for event in open_ranges.get():
            if event._owner is self:
                event.cpu_memory_usage += nbytes

    def record_op(self, name: str, inputs: tuple, result: Any, sequence_nr: int, allocates: bool) -> None:
        """A forward op returned ``result`` (``record``, Note [Forward ops reach the profiler through record])."""
        if self._running:
            now = _clock()
            shapes = [[] if t is None else list(t.shape) for t in inputs] if self.record_shapes else None
            memory = self._allocated(result) if allocates and self.profile_memory else 0
            self._new(name, self._span(now), now, input_shapes=shapes, sequence_nr=sequence_nr,
                      cpu_memory_usage=memory)
            self._mark()
        if self._outer is not None:
            self._outer.record_op(name, inputs, result, sequence_nr, allocates)

    def record_factory(self, name: str, result: Any) -> None:
        """A factory made ``result``: its event holds an ``aten::empty`` one for the allocation."""
        if self._running:
            now = _clock()
            start = self._span(now)
            shapes = [] if self.record_shapes else None
            memory = self._allocated(result) if self.profile_memory else 0
            self._new(name, start, now, input_shapes=shapes, cpu_memory_usage=memory)
            self._new("aten::empty", start, start, input_shapes=shapes, cpu_memory_usage=memory)
            self._mark()
        if self._outer is not None:
            self._outer.record_factory(name, result)

    def open_range(self, name: str) -> list[FunctionEvent]:
        """``record_function(name)`` is entered: its event in this profile and in those around it."""
        events = [] if self._outer is None else self._outer.open_range(name)
        if self._running:
            now = _clock()
            events.append(self._new(name, now, now, input_shapes=[] if self.record_shapes else None))
            self._mark()
        return events

    def close_range(self, event: FunctionEvent) -> None:
        """The range of ``event`` (one of this profile's) is exited."""
        if self._running:
            event.time_range.end = self._us(_clock())
            self._mark()

    def record(self, node: Any, device: Any, worker: str, graph_task: Any, start: float, end: float,
               inline: bool, thread: threading.Thread | None = None) -> None:
        """A backward node ran (the engine's call, as ``asyncgrad.profiler.trace.record``)."""
        if self._running:
            ident = (thread or threading.current_thread()).ident or 0
            event = FunctionEvent(next(self._ids), node.name(), ident, self._us(start), self._us(end),
                                  sequence_nr=node.sequence_nr, input_shapes=[] if self.record_shapes else None)
            event._owner = self  # type: ignore[attr-defined]
            self._events.append(event)
        if self._outer is not None:
            self._outer.record(node, device, worker, graph_task, start, end, inline, thread)

    def timed(self, worker: Any, fn: Callable) -> Callable:
        """``fn(graph_task, node, inputs)`` for a kernel thread, recorded as timed in that thread."""
        device, name = worker.device, f"{worker.name} executor"

        def run(graph_task: Any, node: Any, inputs: Any) -> Any:
            start = _clock()
            try:
                return fn(graph_task, node, inputs)
            finally:
                self.record(node, device, name, graph_task, start, _clock(), False)

        return run

    # ------------------------------------------------------------------ reading
    @property
    def function_events(self) -> EventList:
        return self._check_finish()

    def _check_finish(self) -> EventList:
        """The finished events; before the block has ended, none (torch 2.13 reads an empty list
        there rather than raising its older "Profiler didn't finish running")."""
        return EventList() if self._function_events is None else self._function_events

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        return self._check_finish().table(sort_by=sort_by, row_limit=row_limit,
                                          max_src_column_width=max_src_column_width,
                                          max_name_column_width=max_name_column_width,
                                          max_shapes_column_width=max_shapes_column_width, header=header,
                                          top_level_events_only=top_level_events_only)

    def export_chrome_trace(self, path: str) -> None:
        self._check_finish().export_chrome_trace(path)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        return self._check_finish().key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self) -> FunctionEventAvg:
        return self._check_finish().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        return self._check_finish().self_cpu_time_total

    def __str__(self) -> str:
        return str(self._check_finish())

    def __repr__(self) -> str:
        if self._function_events is None:
            return "<unfinished ag.autograd.profiler.profile>"
        return repr(self._function_events)


class record_function:
    """A named range in the profile of this context: ``with record_function("name"):`` or
    ``@record_function("name")`` on a function (plain or ``async def``: each call is a range).
    Outside any profile, entering costs one flag test. Ranges are per context (per asyncio task);
    one may be exited out of order (torch's multithreaded use): it leaves the others open."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._events: list[FunctionEvent] = []

    def __enter__(self) -> record_function:
        if PROFILING:
            recorder = current_recorder.get()
            if recorder is not None:
                self._events = recorder.open_range(self.name)
                if self._events:
                    open_ranges.set(open_ranges.get() + tuple(self._events))
        return self

    def __exit__(self, *exc: Any) -> None:
        events, self._events = self._events, []
        if events:
            for event in events:
                event._owner.close_range(event)  # type: ignore[attr-defined]
            ids = {id(e) for e in events}
            open_ranges.set(tuple(e for e in open_ranges.get() if id(e) not in ids))

    def __call__(self, fn: Callable) -> Callable:
        name, args = self.name, self.args
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*a: Any, **k: Any) -> Any:
                with record_function(name, args):
                    return await fn(*a, **k)

            return run_async

        @functools.wraps(fn)
        def run(*a: Any, **k: Any) -> Any:
            with record_function(name, args):
                return fn(*a, **k)

        return run


def _profiler_enabled() -> bool:
    """Whether a ``profile`` records in this context (torch.autograd._profiler_enabled)."""
    recorder = current_recorder.get()
    while recorder is not None:
        if isinstance(recorder, profile) and recorder._running:
            return True
        recorder = getattr(recorder, "_outer", None)
    return False
