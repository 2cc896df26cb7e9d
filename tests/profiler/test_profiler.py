"""asyncgrad.profiler: recording per task, one lane per (device, thread), the Chrome trace's
validity (metadata, nesting per thread id), the table's device column and wall time, the timeline."""

import asyncio
import json
import threading

import numpy as np
import pytest
from helpers import Boom

import asyncgrad as ag
from asyncgrad.engine.graph_task import current_recorder


class Sleepy(ag.Function):
    """An ``async def`` backward that waits: its node task spans whatever runs meanwhile."""

    started: asyncio.Event | None = None

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        if Sleepy.started is not None:
            Sleepy.started.set()
        await asyncio.sleep(ctx.seconds)
        return g, None


class Nested(ag.Function):
    """Its backward runs a reentrant backward of a fresh graph holding the same function."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x * 2

    @staticmethod
    async def backward(ctx, g):
        if ctx.depth > 0:
            inner = ag.ones(1, requires_grad=True)
            with ag.enable_grad():
                loss = Nested.apply(inner, ctx.depth - 1).tanh().sum()
            await loss.backward()
        return g * 2, None


class NestedPlain(ag.Function):
    """The same through ``backward_sync`` from a plain backward (a greenback portal)."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.depth > 0:
            inner = ag.ones(1, requires_grad=True)
            with ag.enable_grad():
                loss = NestedPlain.apply(inner, ctx.depth - 1).exp().sum()
            loss.backward_sync()
        return g * 2, None


def _x_events(trace_json):
    return [e for e in trace_json["traceEvents"] if e["ph"] == "X"]


def _assert_valid_chrome_trace(trace_json, n_events):
    """Metadata names every process and thread used; every X event is complete; on each
    (pid, tid) two events are disjoint or one contains the other (what Perfetto requires)."""
    events = trace_json["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    process_names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    xs = _x_events(trace_json)
    assert len(xs) == n_events
    assert {e["ph"] for e in events} == {"M", "X"}
    for e in xs:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= e.keys()
        assert e["dur"] >= 0
        assert e["pid"] in process_names and (e["pid"], e["tid"]) in thread_names
        assert {"device", "graph_task", "depth", "sequence_nr", "inline"} <= e["args"].keys()
        assert process_names[e["pid"]].endswith(e["args"]["device"])
    by_thread = {}
    for e in xs:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3)))
    for spans in by_thread.values():
        for i, (s1, e1) in enumerate(spans):
            for s2, e2 in spans[i + 1:]:
                disjoint = e1 <= s2 or e2 <= s1
                nested = (s1 <= s2 and e2 <= e1) or (s2 <= s1 and e1 <= e2)
                assert disjoint or nested, f"partial overlap on one thread id: {(s1, e1)} and {(s2, e2)}"
    return process_names, thread_names


async def _overlapping_kernels():
    """Independent large matmul branches with two kernel threads: kernels in flight together.

    Whether two kernels really overlap is the OS scheduler's choice (on a loaded 2-core CI runner
    one thread can be kept off the CPU for a whole backward), so a trace is taken again, up to
    five times, until two kernels overlap by at least 50 us (visible in the trace's whole-us times).
    """
    ag.set_inline_threshold("cpu", 10_000)
    ag.set_num_workers("cpu", 2)
    w = ag.randn(300, 300, dtype=ag.float64, requires_grad=True)
    for _ in range(5):
        w.grad = None
        branches = [(w @ w).tanh().sum() for _ in range(4)]
        with ag.profiler.trace() as prof:
            await ag.backward(branches)
        if _overlaps([e for e in prof.events if not e.inline], at_least=50e-6):
            break
    return w, prof


def _overlaps(events, at_least=0.0):
    return [(a, b) for i, a in enumerate(events) for b in events[i + 1:]
            if min(a.end, b.end) - max(a.start, b.start) > at_least]


# --------------------------------------------------------------------------- the basics
async def test_events_table_timeline_and_chrome_trace(tmp_path):
    x = ag.randn(8, requires_grad=True)
    with ag.profiler.trace() as prof:
        await ((x * 2).tanh().to("sim:0") * 3).sum().backward()
    names = [e.name for e in prof.events]
    assert names[0] == "SumBackward0" and names[-1] == "AccumulateGrad"
    assert {e.device for e in prof.events} == {"cpu", "sim:0"}
    assert all(e.end >= e.start and e.depth == 0 and e.graph_task == 0 for e in prof.events)
    assert {e.thread_id for e in prof.events} == {threading.get_ident()}, "small nodes run inline on the loop"
    assert all(e.inline and e.thread == threading.current_thread().name for e in prof.events)
    assert "TanhBackward0" in prof.table()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    loaded = json.loads(path.read_text())
    process_names, _ = _assert_valid_chrome_trace(loaded, len(prof.events))
    assert sorted(process_names.values()) == ["asyncgrad cpu", "asyncgrad sim:0"]
    assert [e["name"] for e in _x_events(loaded) if e["args"]["device"] == "sim:0"] == [
        e.name for e in prof.events if e.device == "sim:0"]
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    fig = prof.timeline()
    assert len(fig.axes) == 1
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        f"sim:0 loop ({threading.current_thread().name})", f"cpu loop ({threading.current_thread().name})"
    ], "devices in order of first use: this backward starts on sim:0"


async def test_off_records_nothing():
    x = ag.randn(4, requires_grad=True)
    with ag.profiler.trace() as prof:
        pass
    await (x * 2).sum().backward()
    assert prof.events == []
    assert current_recorder.get() is None


def test_event_keeps_its_positional_fields():
    """shared/API.md's fields come first, in order; thread and thread_id were added after them."""
    e = ag.profiler.Event("MulBackward0", 3, "cpu", "cpu worker", 0, 0, 1.0, 1.5, True)
    assert (e.name, e.sequence_nr, e.device, e.worker, e.graph_task, e.depth, e.start, e.end, e.inline) == (
        "MulBackward0", 3, "cpu", "cpu worker", 0, 0, 1.0, 1.5, True)
    assert e.duration == 0.5 and e.thread == "" and e.thread_id == 0


async def test_a_trace_cannot_be_entered_twice_at_once():
    with ag.profiler.trace() as prof:
        with pytest.raises(RuntimeError, match="already active"):
            prof.__enter__()
    assert current_recorder.get() is None


# --------------------------------------------------------------------------- recording per task
async def test_a_trace_records_only_the_backwards_started_in_its_task():
    """Task A traces its backward; task B's, run while A's is in flight, is not A's to record."""
    Sleepy.started = asyncio.Event()
    x = ag.ones(3, requires_grad=True)
    y = ag.ones(3, requires_grad=True)

    async def traced():
        with ag.profiler.trace() as prof:
            await (Sleepy.apply(x, 0.05).tanh()).sum().backward()
        return prof

    async def untraced():
        await Sleepy.started.wait()
        await y.exp().sum().backward()

    try:
        prof, _ = await asyncio.gather(traced(), untraced())
    finally:
        Sleepy.started = None
    assert {e.name for e in prof.events} == {"SumBackward0", "TanhBackward0", "SleepyBackward", "AccumulateGrad"}
    assert {e.graph_task for e in prof.events} == {0}
    np.testing.assert_allclose(y.grad.numpy(), np.exp(1.0) * np.ones(3))


async def test_a_worker_started_by_another_task_does_not_leak_its_trace():
    """The device worker is a task created by whichever backward came first, so it inherits that
    caller's context: it must switch the recorder with the graph task, or an untraced task's
    reentrant child (started from a node task the worker spawns) would land in the trace."""
    Sleepy.started = asyncio.Event()
    x = ag.ones(3, requires_grad=True)
    y = ag.ones(1, requires_grad=True)

    async def traced_first():
        with ag.profiler.trace() as prof:
            await Sleepy.apply(x, 0.05).sum().backward()
        return prof

    async def untraced_reentrant():
        await Sleepy.started.wait()
        await Nested.apply(y, 1).sum().backward()

    try:
        prof, _ = await asyncio.gather(traced_first(), untraced_reentrant())
    finally:
        Sleepy.started = None
    assert "NestedBackward" not in {e.name for e in prof.events}
    assert "TanhBackward0" not in {e.name for e in prof.events}
    assert "SleepyBackward" in {e.name for e in prof.events}
    assert y.grad.item() == 2.0


@pytest.mark.parametrize("fn, threshold", [(Nested, None), (NestedPlain, None), (NestedPlain, 0)],
                         ids=["async-def", "portal", "kernel-thread"])
async def test_reentrant_children_record_with_their_depth_and_graph_task(fn, threshold):
    if threshold is not None:
        ag.set_inline_threshold("cpu", threshold)
    x = ag.ones(2, requires_grad=True)
    with ag.profiler.trace() as prof:
        await fn.apply(x, 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    node = f"{fn.__name__}Backward"
    outermost = next(e for e in prof.events if e.name == node and e.depth == 0)
    if threshold == 0:
        assert outermost.worker == "cpu worker executor" and outermost.thread_id != threading.get_ident(), \
            "its backward_sync reached the loop from a kernel thread"
    else:
        expected = "cpu worker task" if fn is Nested else "cpu worker"  # a plain backward runs inline
        assert outermost.worker == expected and outermost.thread_id == threading.get_ident()
    runs = sorted((e.depth, e.graph_task) for e in prof.events if e.name == node)
    assert runs == [(0, 0), (1, 1), (2, 2)]
    for e in prof.events:
        assert e.depth == e.graph_task, "graph tasks are numbered in start order, one per depth here"
    by_depth = {d: [e for e in prof.events if e.depth == d] for d in range(3)}
    for d in (1, 2):
        parent = next(e for e in by_depth[d - 1] if e.name == node)
        assert all(parent.start <= e.start and e.end <= parent.end for e in by_depth[d]), \
            "a reentrant child runs inside its parent node's span"


@pytest.mark.parametrize("threshold", [None, 0], ids=["inline", "kernel-threads"])
async def test_two_tasks_tracing_at_once_each_see_only_their_own_backwards(threshold):
    """Note [Recording is per task]: A and B trace concurrently (B's start while A's backward is
    suspended in an awaiting node); each trace holds its own task's node runs only, its reentrant
    child's included, whether the kernels ran inline or in kernel threads."""
    if threshold is not None:
        ag.set_inline_threshold("cpu", threshold)
    Sleepy.started = asyncio.Event()
    x = ag.ones(3, requires_grad=True)
    y = ag.ones(1, requires_grad=True)

    async def a():
        with ag.profiler.trace() as prof:
            await (Sleepy.apply(x, 0.05).tanh()).sum().backward()
        return prof

    async def b():
        await Sleepy.started.wait()
        with ag.profiler.trace() as prof:
            await Nested.apply(y, 1).exp().sum().backward()
        return prof

    try:
        prof_a, prof_b = await asyncio.gather(a(), b())
    finally:
        Sleepy.started = None
    assert {e.name for e in prof_a.events} == {"SumBackward0", "TanhBackward0", "SleepyBackward", "AccumulateGrad"}
    assert {e.name for e in prof_b.events} == {"SumBackward0", "ExpBackward0", "NestedBackward", "TanhBackward0",
                                                "AccumulateGrad"}
    assert {e.depth for e in prof_a.events} == {0} and {e.depth for e in prof_b.events} == {0, 1}
    a_span = [e for e in prof_a.events if e.name == "SleepyBackward"][0]
    assert any(a_span.start < e.start < a_span.end for e in prof_b.events), "the two backwards overlapped"
    if threshold == 0:
        assert any(e.worker == "cpu worker executor" for e in prof_a.events + prof_b.events)
    np.testing.assert_allclose(y.grad.numpy(), [2.0 * np.exp(2.0)])


async def test_a_trace_opened_inside_a_backward_records_that_child_only():
    seen = {}

    class Inner(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        async def backward(ctx, g):
            inner = ag.ones(1, requires_grad=True)
            with ag.profiler.trace() as prof:
                with ag.enable_grad():
                    loss = inner.sin().sum()
                await loss.backward()
            seen["prof"] = prof
            return g

    x = ag.ones(2, requires_grad=True)
    await Inner.apply(x).exp().sum().backward()
    events = seen["prof"].events
    assert {e.name for e in events} == {"SumBackward0", "SinBackward0", "AccumulateGrad"}
    assert {e.depth for e in events} == {1} and {e.graph_task for e in events} == {0}


async def test_nested_traces_both_record_the_inner_block():
    x = ag.ones(2, requires_grad=True)
    with ag.profiler.trace() as outer:
        await x.exp().sum().backward()
        with ag.profiler.trace() as inner:
            await x.sin().sum().backward()
        assert current_recorder.get() is outer
    assert [e.name for e in inner.events] == ["SumBackward0", "SinBackward0", "AccumulateGrad"]
    assert [e.name for e in outer.events] == ["SumBackward0", "ExpBackward0", "AccumulateGrad"] * 1 + [
        "SumBackward0", "SinBackward0", "AccumulateGrad"]
    assert [e.graph_task for e in outer.events] == [0, 0, 0, 1, 1, 1]
    assert [e.graph_task for e in inner.events] == [0, 0, 0]


def test_backward_sync_records_into_the_trace_it_is_called_in():
    x = ag.ones(3, requires_grad=True)
    x.exp().sum().backward_sync()  # the thread's first call
    with ag.profiler.trace() as prof:
        x.tanh().sum().backward_sync()
    assert [e.name for e in prof.events] == ["SumBackward0", "TanhBackward0", "AccumulateGrad"]


# --------------------------------------------------------------------------- lanes, Chrome trace, table
async def test_kernels_record_their_own_thread_and_overlap_in_different_lanes(tmp_path):
    _, prof = await _overlapping_kernels()
    kernels = [e for e in prof.events if not e.inline]
    assert {e.name for e in kernels} == {"MmBackward0", "TanhBackward0"}
    assert all(e.worker == "cpu worker executor" for e in kernels)
    loop = threading.get_ident()
    assert all(e.thread_id != loop for e in kernels) and all(e.thread_id == loop for e in prof.events if e.inline)
    overlapping = _overlaps(kernels)
    assert overlapping, "independent branches should have kernels in flight at the same time"
    assert all(a.thread_id != b.thread_id for a, b in overlapping), "one thread runs one kernel at a time"
    lanes = prof.lanes()
    assert list(lanes.values())[0] == f"cpu loop ({threading.current_thread().name})"
    assert {"cpu kernel thread 1", "cpu kernel thread 2"} <= set(lanes.values())

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    loaded = json.loads(path.read_text())
    _, thread_names = _assert_valid_chrome_trace(loaded, len(prof.events))
    xs = _x_events(loaded)
    # The trace's kernels overlap where the recorder's do (which pairs overlap is up to the
    # scheduler on a loaded machine), and never on one thread id.
    ks = [e for e in xs if e["cat"] == "executor"]
    overlapping_tids = {(a["tid"], b["tid"]) for i, a in enumerate(ks) for b in ks[i + 1:]
                        if a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]}
    assert overlapping_tids and all(a != b for a, b in overlapping_tids)
    assert {thread_names[1, tid] for pair in overlapping_tids for tid in pair} <= {
        "cpu kernel thread 1", "cpu kernel thread 2"}
    assert all(e["cat"] == ("inline" if e["args"]["inline"] else "executor") for e in xs)
    assert all(e["args"]["graph_task"] == 0 and e["args"]["depth"] == 0 for e in xs)

    table = prof.table()
    # Overlapping kernels: their summed thread time exceeds the time they cover. (Summed over every
    # node it need not exceed the wall time: on a loaded machine the gaps between nodes can be longer.)
    covered, end = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda e: e.start):
        covered += max(0.0, k.end - max(k.start, end))
        end = max(end, k.end)
    assert sum(k.duration for k in kernels) > covered > 0
    assert prof.summed_time() == pytest.approx(sum(e.duration for e in prof.events))
    assert prof.wall_time() == pytest.approx(max(e.end for e in prof.events) - min(e.start for e in prof.events))
    assert f"wall time {prof.wall_time() * 1e3:.3f} ms" in table
    assert f"summed node time {prof.summed_time() * 1e3:.3f} ms" in table
    mm_row = next(line for line in table.splitlines() if line.startswith("MmBackward0"))
    assert mm_row.split()[1:3] == ["cpu", "4"] and mm_row.split()[-1] == "0"
    mm_total = sum(e.duration for e in prof.events if e.name == "MmBackward0")
    assert float(mm_row.split()[3]) == pytest.approx(mm_total * 1e3, abs=1e-3)


async def test_table_tells_devices_apart():
    x = ag.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    with ag.profiler.trace() as prof:
        await ((x.to("sim:0") * 2).tanh().sum().to("cpu") + (x.to("sim:1") * 3).tanh().sum().to("cpu")).backward()
    rows = {tuple(line.split()[:3]) for line in prof.table().splitlines()[2:-2]}
    for device in ("sim:0", "sim:1"):
        assert ("TanhBackward0", device, "1") in rows
        assert ("MulBackward0", device, "1") in rows
    assert ("AccumulateGrad", "cpu", "1") in rows
    header = prof.table().splitlines()[0].split()
    assert header == ["name", "device", "calls", "total", "ms", "mean", "us", "inline"]


async def test_node_tasks_that_overlap_partly_get_their_own_thread_ids(tmp_path):
    """Two ``async def`` backwards in flight at once on the loop thread overlap partly (the
    first started ends first); the trace puts them on separate tracks of the loop lane."""
    x = ag.ones(3, requires_grad=True)
    with ag.profiler.trace() as prof:
        # The later branch (higher sequence_nr) starts first and sleeps less.
        await (Sleepy.apply(x * 2, 0.04).sum() + Sleepy.apply(x, 0.02).sum()).backward()
    sleepy = sorted((e for e in prof.events if e.name == "SleepyBackward"), key=lambda e: e.start)
    assert len(sleepy) == 2 and sleepy[0].thread_id == sleepy[1].thread_id
    assert sleepy[0].start < sleepy[1].start < sleepy[0].end < sleepy[1].end, "they overlap partly"
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    loaded = json.loads(path.read_text())
    _, thread_names = _assert_valid_chrome_trace(loaded, len(prof.events))
    tids = [e["tid"] for e in _x_events(loaded) if e["name"] == "SleepyBackward"]
    assert len(set(tids)) == 2
    assert sorted(thread_names.values())[1].endswith("[2]")


async def test_a_kernel_that_raises_is_recorded():
    ag.set_inline_threshold("cpu", 0)
    x = ag.ones(300, 300, requires_grad=True)
    with ag.profiler.trace() as prof:
        with pytest.raises(ValueError, match="boom in backward"):
            await Boom.apply(x).sum().backward()
    assert "BoomBackward" in {e.name for e in prof.events}


# --------------------------------------------------------------------------- the timeline picture
async def test_timeline_lanes_legend_depth_and_title(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, prof = await _overlapping_kernels()
    y = ag.ones(2, requires_grad=True)
    with ag.profiler.trace() as nested:
        await Nested.apply(y, 2).sum().backward()
    for p, depths in ((prof, None), (nested, ["depth 0", "depth 1", "depth 2"])):
        fig = p.timeline()
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert set(p.lanes().values()) <= set(labels)
        legends = [c for c in ax.get_children() if isinstance(c, matplotlib.legend.Legend)]
        titles = {lg.get_title().get_text(): [t.get_text() for t in lg.get_texts()] for lg in legends}
        assert set(titles["node"]) == {e.name for e in p.events}
        assert titles.get("reentrant depth") == depths
        assert "ms" in ax.get_xlabel() and f"{len(p.events)} node runs" in ax.get_title()
        fig.savefig(tmp_path / "timeline.png")
        plt.close(fig)
    fig = prof.timeline()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[:3] == [f"cpu loop ({threading.current_thread().name})", "cpu kernel thread 1",
                          "cpu kernel thread 2"]
    assert "1 graph task," in fig.axes[0].get_title() and "g<id>" not in fig.axes[0].get_title()
    plt.close(fig)
    fig = nested.timeline()
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert texts <= {"g0", "g1", "g2"} and "g0" in texts, "the outermost node spans the whole run"
    assert "3 graph tasks (g<id> on bars)" in fig.axes[0].get_title()
    plt.close(fig)
