"""ag.autograd.profiler: ports of torch's profiler tests (TestAutograd, ~2020, as torch 1.8 wrote
them) and asyncgrad's own: recording per task, what a forward op's interval is (Note [When a
forward op started]), memory, nesting with ``ag.profiler.trace``, names against torch's."""

import asyncio
import json
import tempfile
import time
import warnings

import pytest

import asyncgrad as ag
from asyncgrad.autograd.profiler import (
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    format_time,
    profile,
    record_function,
)
from asyncgrad.graph.recorder import PROFILING, open_ranges


# --------------------------------------------------------------------------- torch's tests, ported
def test_profiler_tracing():
    """Port of TestAutograd.test_profiler_tracing (its CUDA half is conditional in torch)."""
    t1, t2 = ag.ones(1), ag.ones(1)
    with profile() as prof:
        ag.add(t1, t2)
    with tempfile.NamedTemporaryFile(mode="w+") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(f)
    assert [e["name"] for e in trace["traceEvents"]] == ["aten::add"]


def test_profiler():
    """Port of TestAutograd.test_profiler."""
    x = ag.randn(10, 10)
    with profile() as p:
        assert ag.autograd._profiler_enabled()
        x * 2 + 4
    assert not ag.autograd._profiler_enabled()
    names = ['aten::mul', 'aten::add']
    found_indices = set()
    for evt in p.function_events:
        if evt.name in names:
            found_indices.add(names.index(evt.name))
    assert len(found_indices) == len(names)


def test_profiler_unboxed_only():
    """Port of TestAutograd.test_profiler_unboxed_only."""
    x = ag.rand(3, 4)
    with profile():
        x.resize_([3, 2])


def test_profiler_aggregation_fake():
    """Port of TestAutograd.test_profiler_aggregation_fake."""
    events = EventList()
    id = [0]

    def get_id():
        id[0] = id[0] + 1
        return id[0]

    # [[thread_id, [(start, end, id), ....]], ...]
    threads = [
        [1, [(0, 1, get_id()), (1, 2, get_id())]],
        [0, [(0, 2, get_id()), (1, 2, get_id()), (1, 3, get_id())]],
    ]
    for thread, ranges in threads:
        for range in ranges:
            assert len(range) == 3
            events.append(FunctionEvent(id=range[2], node_id=0, name="", thread=thread, start_us=range[0],
                                        end_us=range[1]))
    events._populate_cpu_children()
    # Note that [1, 3] pushes out [0, 2] first. Then we record [1, 2] as a child of [1, 3]
    res = [[], [], [], [], [4]]

    def get_children_ids(event):
        return [child.id for child in event.cpu_children]

    assert [get_children_ids(event) for event in events] == res


def test_profiler_function_event_avg():
    """Port of TestAutograd.test_profiler_function_event_avg."""
    avg = FunctionEventAvg()
    avg.add(FunctionEvent(id=0, node_id=0, name="foo", thread=0, start_us=10, end_us=15))
    avg.add(FunctionEvent(id=1, node_id=0, name="foo", thread=0, start_us=20, end_us=30))
    avg.add(avg)
    assert avg.key == "foo"
    # aggregate stats
    assert avg.count == 4
    assert avg.cpu_time_total == 30
    assert avg.self_cpu_time_total == 30
    assert avg.cuda_time_total == 0
    # average stats
    assert avg.cpu_time == 7.5
    assert avg.cuda_time_total == 0


def test_profiler_shapes():
    """Port of TestAutograd.test_profiler_shapes."""
    layer1 = ag.nn.Linear(20, 30)
    layer2 = ag.nn.Linear(30, 40)
    input = ag.randn(128, 20)
    with profile(record_shapes=True) as prof:
        layer2(layer1(input))
    top_level_expected_events_and_shapes = [
        ('aten::linear', [[128, 20], [30, 20], [30]]),
        ('aten::linear', [[128, 30], [40, 30], [40]]),
    ]
    expected_iter = iter(top_level_expected_events_and_shapes)
    last_end = 0
    checked = 0
    for event in prof.function_events:
        if event.time_range.start > last_end:
            name_expected, input_shape_expected = next(expected_iter)
            if name_expected is not None:
                assert event.name == name_expected
            assert event.input_shapes == input_shape_expected
            last_end = event.time_range.end
            checked += 1
    assert checked == 2  # not in torch's test: both layers were seen as top-level events


def test_profiler_no_cuda():
    """Port of TestAutograd.test_profiler_no_cuda."""
    layer = ag.nn.Linear(20, 30)
    x = ag.randn(128, 20)
    with profile(use_cuda=False) as prof:
        layer(x)
    prof_str = str(prof)
    assert 'cpu' in prof_str.lower()
    assert 'cuda' not in prof_str.lower()


def test_profiler_aggregation_lstm():
    """Port of TestAutograd.test_profiler_aggregation_lstm (its prints kept as values checked)."""
    rnn = ag.nn.LSTM(10, 20, 2)
    total_time_s = 0
    with profile(record_shapes=True) as prof:
        for _ in range(20):
            input = ag.randn(5, 3, 10)
            h = ag.randn(2, 3, 20)
            c = ag.randn(2, 3, 20)
            start = time.time()
            rnn(input, (h, c))
            end = time.time()
            total_time_s += end - start
    table = prof.table(sort_by="self_cpu_time_total", row_limit=10, header="TEST")
    assert table.splitlines()[1] == "TEST"
    averages = prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=10)
    assert len(averages.splitlines()) == 3 + 10 + 2
    total_time_us = total_time_s * 1000.0 * 1000.0  # make it us which is profiler default
    assert format_time(total_time_us).endswith("s")
    assert prof.self_cpu_time_total > 0
    with tempfile.NamedTemporaryFile() as trace_file:
        prof.export_chrome_trace(trace_file.name)
        assert json.load(open(trace_file.name))["traceEvents"]


def test_record_function_multithreaded():
    """Port of TestAutograd.test_record_function_multithreaded, and the same inside a profile."""
    def run():
        rf = record_function("outer")
        rf.__enter__()
        with record_function("inner"):
            # test that exiting the record function after starting another one doesn't throw.
            rf.__exit__(None, None, None)
        with record_function("inner"):
            rf.__enter__()
        # test that exiting the record function after ending another one doesn't throw.
        rf.__exit__(None, None, None)

    run()
    with profile() as prof:
        run()
    assert [e.name for e in prof.function_events] == ["outer", "inner", "inner", "outer"]
    assert open_ranges.get() == ()


# --------------------------------------------------------------------------- asyncgrad's own
def test_top_level_names_match_torch():
    """The forward ops' events, by torch's names and in torch's order, for ops that are one aten op
    in both (torch adds children such as aten::to under a scalar operand; asyncgrad has none)."""
    torch = pytest.importorskip("torch")
    from torch.autograd.profiler import profile as torch_profile

    def run(lib, x):
        y = (x * 2 + 4 - 1) / 3
        return lib.tanh(y).exp().relu().sum()

    with torch_profile() as tp:
        run(torch, torch.randn(4, 4, requires_grad=True))
    with profile() as p:
        run(ag, ag.randn(4, 4, requires_grad=True))
    expected = [e.name for e in tp.function_events if e.cpu_parent is None]
    assert [e.name for e in p.function_events if e.cpu_parent is None] == expected


async def test_backward_nodes_pair_with_their_forward_ops():
    x = ag.randn(3, requires_grad=True)
    with profile() as p:
        loss = (x * 3).exp().sum()
        await loss.backward()
    events = p.function_events
    forward = {e.name: e.sequence_nr for e in events if e.name.startswith("aten::")}
    backward = {e.name: e.sequence_nr for e in events if "Backward" in e.name}
    assert forward["aten::mul"] == backward["MulBackward0"] >= 0
    assert forward["aten::exp"] == backward["ExpBackward0"]
    assert forward["aten::sum"] == backward["SumBackward0"]
    assert "AccumulateGrad" in {e.name for e in events}


async def test_recording_is_per_task():
    """A profile records the ops of its own task, not those another task runs meanwhile."""
    started = asyncio.Event()

    async def other():
        await started.wait()
        for _ in range(5):
            ag.ones(2) * 7
            await asyncio.sleep(0)

    async def profiled():
        with profile() as p:
            started.set()
            for _ in range(3):
                ag.ones(2) + 1
                await asyncio.sleep(0)
        return p

    p, _ = await asyncio.gather(profiled(), other())
    names = [e.name for e in p.function_events]
    assert names.count("aten::add") == 3 and "aten::mul" not in names


async def test_an_awaited_wait_is_no_op_time():
    """Note [When a forward op started]: the op after an awaited sleep does not take the sleep."""
    x = ag.randn(10)
    with profile() as p:
        x * 2
        await asyncio.sleep(0.05)
        x + 1
    add = next(e for e in p.function_events if e.name == "aten::add")
    mul = next(e for e in p.function_events if e.name == "aten::mul")
    assert add.cpu_time_total < 20_000
    assert add.time_range.start >= mul.time_range.end + 40_000


async def test_record_function_decorates_async_functions():
    @record_function("step")
    async def step(x):
        y = x * 2
        await asyncio.sleep(0)
        return y.sum()

    x = ag.randn(3)
    with profile() as p:
        await step(x)
        await step(x)
    steps = [e for e in p.function_events if e.name == "step"]
    assert len(steps) == 2
    assert all([c.name for c in s.cpu_children] == ["aten::mul", "aten::sum"] for s in steps)
    avg = {a.key: a for a in p.key_averages()}
    assert avg["step"].count == 2 and avg["aten::mul"].count == 2
    assert avg["step"].cpu_time_total == pytest.approx(sum(s.cpu_time_total for s in steps))


async def test_profile_and_trace_nest():
    """A trace inside a profile keeps its backward-only events; the profile sees both sides."""
    x = ag.randn(3, requires_grad=True)
    with profile() as p:
        with ag.profiler.trace() as t:
            await (x * 2).sum().backward()
    assert [e.name for e in t.events] == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    names = [e.name for e in p.function_events]
    assert {"aten::mul", "aten::sum", "SumBackward0", "MulBackward0", "AccumulateGrad"} <= set(names)
    with ag.profiler.trace() as t:
        with profile() as p:
            await (x * 2).sum().backward()
    assert [e.name for e in t.events] == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    assert "aten::mul" in [e.name for e in p.function_events]


def test_memory_of_ops_views_and_frees():
    x = ag.randn(10, 10, dtype=ag.float64)
    with profile(profile_memory=True) as p:
        with record_function("work"):
            y = x * 2
            v = y.view(100)
            del y, v
    by_name = {e.name: e for e in p.function_events}
    assert by_name["aten::mul"].cpu_memory_usage == 800
    assert by_name["aten::view"].cpu_memory_usage == 0
    assert by_name["work"].cpu_memory_usage == 0  # allocated and freed inside
    assert by_name["work"].self_cpu_memory_usage == -800
    assert "CPU Mem" in p.table()


def test_flag_and_errors():
    assert PROFILING == []
    p = profile()
    assert p.function_events == [] and p.key_averages() == [] and p.table() == "" == str(p)  # torch 2.13
    with pytest.raises(ZeroDivisionError):
        with p:
            assert PROFILING == [p]
            raise ZeroDivisionError
    assert PROFILING == [] and not ag.autograd._profiler_enabled()
    with pytest.raises(RuntimeError, match="not reentrant"):
        with p:
            pass
    with record_function("alone"):  # no profile: nothing recorded, nothing left open
        assert open_ranges.get() == ()
    disabled = profile(enabled=False)
    with disabled as off:
        assert off is None  # torch's __enter__ of a disabled profile
        ag.ones(1) + 1
    assert disabled.function_events == [] and disabled.table() == ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert profile(use_cuda=True).use_device is None
    assert [w.category for w in caught] == [FutureWarning, UserWarning]
    assert "use_cuda" in str(caught[0].message) and "disabling CUDA profiling" in str(caught[1].message)


def test_table_sorting_and_averages():
    x = ag.randn(50, 50)
    with profile(record_shapes=True) as p:
        for _ in range(4):
            x @ x
        x + 1
    avg = p.key_averages()
    assert {a.key: a.count for a in avg} == {"aten::mm": 4, "aten::add": 1}
    total = avg.total_average()
    assert total.key == "Total" and total.count == 5
    merged = avg[0] + avg[0]
    assert merged.count == 2 * avg[0].count and avg[0].count == 4
    rows = p.table(sort_by="cpu_time_total", row_limit=2).splitlines()
    assert len(rows) == 3 + 2 + 2
    times = [e.cpu_time_total for e in sorted(p.function_events, key=lambda e: -e.cpu_time_total)[:2]]
    assert [format_time(t) in row for t, row in zip(times, rows[3:5])] == [True, True]
    by_shape = p.key_averages(group_by_input_shape=True)
    assert [a.input_shapes for a in by_shape if a.key == "aten::mm"] == [[[50, 50], [50, 50]]]
    assert str(p) == p.table()


def test_torch_1_7_spellings():
    """torch 1.7 (part of the ported population) named the interval ``cpu_interval``, the event's
    times ``cpu_start``/``cpu_end`` and the parent pass ``populate_cpu_children``."""
    events = EventList([FunctionEvent(id=1, node_id=0, name="a", thread=0, cpu_start=0, cpu_end=4),
                        FunctionEvent(id=2, node_id=0, name="b", thread=0, cpu_start=1, cpu_end=2)])
    events.populate_cpu_children()
    assert [c.id for c in events[0].cpu_children] == [2]
    assert events[1].cpu_interval.elapsed_us() == 1 and events[0].self_cpu_time_total == 3
    with pytest.raises(TypeError, match="start_us and end_us"):
        FunctionEvent(id=3, name="c", thread=0)
