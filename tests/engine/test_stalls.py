"""What keeps the event loop responsive, asserted as behaviour (the figures are benchmarks.stalls'):
the collector's permanent generation while backwards run (Note [Frozen while busy]), the time-based
yield of the worker and of graph preparation (Note [Yielding], Note [Slices]), and the sharded
dependency counts of huge graphs (Note [Sharded counts])."""

from __future__ import annotations

import asyncio
import gc
import weakref

import numpy as np
import pytest
from helpers import Boom

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine.counts import SHARD_AT, ShardedMap, ShardedSet
from asyncgrad.engine.gcfreeze import FrozenWhileBusy
from asyncgrad.engine.graph_task import current_graph_task
from asyncgrad.variable.accumulate import grad_accumulator


class Probe(ag.Function):
    """An async backward that reports the permanent generation's size and can be held open."""

    seen: list
    gate: asyncio.Event | None = None

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        Probe.seen.append(gc.get_freeze_count())
        if Probe.gate is not None:
            await Probe.gate.wait()
        return g


@pytest.fixture(autouse=True)
def _probe():
    """These tests need an empty permanent generation and the freezing on; tests/helpers.py freezes
    what imports made (when another test module imported it first), which turns the freezing off
    for good at the first backward: both are undone here and redone after."""
    Probe.seen, Probe.gate = [], None
    frozen_before, enabled_before = gc.get_freeze_count(), FrozenWhileBusy.enabled
    gc.unfreeze()
    FrozenWhileBusy.enabled = True
    yield
    assert gc.get_freeze_count() == 0
    FrozenWhileBusy.enabled = enabled_before
    if frozen_before:
        gc.freeze()


async def test_objects_alive_at_the_start_are_frozen_during_a_backward_and_unfrozen_after():
    x = ag.ones(3, requires_grad=True)
    await Probe.apply(x).sum().backward()
    assert Probe.seen[0] > 1000  # the interpreter's modules, the test's objects, the graph
    assert gc.get_freeze_count() == 0
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


async def test_concurrent_backwards_unfreeze_when_the_last_one_ends():
    Probe.gate = asyncio.Event()
    x = ag.ones(2, requires_grad=True)
    first = asyncio.ensure_future(Probe.apply(x).sum().backward())
    second = asyncio.ensure_future((x * 2).sum().backward())
    await second
    assert gc.get_freeze_count() > 0, "the first backward still runs"
    Probe.gate.set()
    await first
    assert gc.get_freeze_count() == 0
    assert x.grad.tolist() == [3.0, 3.0]


class Cycle:
    """Two of them pointing at each other: garbage only the cyclic collector frees."""


async def test_cyclic_garbage_from_before_the_backward_is_collected_after_it():
    a, b = Cycle(), Cycle()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    del a, b
    Probe.gate = asyncio.Event()
    x = ag.ones(2, requires_grad=True)
    task = asyncio.ensure_future(Probe.apply(x).sum().backward())
    while not Probe.seen:
        await asyncio.sleep(0)
    gc.collect()
    assert alive() is not None, "frozen while the backward runs"
    Probe.gate.set()
    await task
    gc.collect()
    assert alive() is None


async def test_a_program_that_freezes_objects_itself_is_left_alone():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        x = ag.ones(2, requires_grad=True)
        await Probe.apply(x).sum().backward()
        # Frozen objects that died since were freed (the count can only fall); had the engine
        # frozen again, the tensors and the graph made after gc.freeze() would have joined them.
        assert 0 < Probe.seen[0] <= frozen
        assert 0 < gc.get_freeze_count() <= frozen, "not unfrozen by the engine"
        assert not FrozenWhileBusy.enabled, "and not asked again"
    finally:
        gc.unfreeze()


async def test_failed_and_cancelled_backwards_unfreeze_too():
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="boom in backward"):
        await Boom.apply(x).sum().backward()
    assert gc.get_freeze_count() == 0
    Probe.gate = asyncio.Event()
    task = asyncio.ensure_future(Probe.apply(x).sum().backward())
    while not Probe.seen:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gc.get_freeze_count() == 0


def test_a_backward_left_on_a_closed_loop_does_not_keep_the_process_frozen():
    """Its graph task never ends; the next backward on another loop forgets the closed loop and
    unfreezes what it left frozen before freezing anew."""
    Probe.gate = asyncio.Event()
    x = ag.ones(2, requires_grad=True)
    loop = asyncio.new_event_loop()

    async def start():
        task = asyncio.ensure_future(Probe.apply(x).sum().backward())
        while not Probe.seen:
            await asyncio.sleep(0)
        return task

    task = loop.run_until_complete(start())
    loop.close()  # the backward is left waiting on its gate for good
    stuck = gc.get_freeze_count()
    assert stuck > 0
    seen = len(Probe.seen)

    async def again():
        await Probe.apply(x).sum().backward()

    Probe.gate = None
    asyncio.run(again())
    assert len(Probe.seen) == seen + 1 and Probe.seen[-1] > 0, "frozen anew by the second backward"
    assert gc.get_freeze_count() == 0, "and unfrozen when it ended"
    assert x.grad.tolist() == [1.0, 1.0]
    del task


async def test_turned_off_nothing_is_frozen():
    FrozenWhileBusy.enabled = False
    x = ag.ones(2, requires_grad=True)
    await Probe.apply(x).sum().backward()
    assert Probe.seen == [0]


# --------------------------------------------------------------------------- yielding
async def test_graph_preparation_yields_to_the_loop_in_slices(monkeypatch):
    """Preparing a 5,000-node chain, with the slice length set to nothing, lets another coroutine
    run between slices of 1,024 nodes before the first node of the backward runs."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    at_first_node = []

    class First(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        async def backward(ctx, g):
            at_first_node.append(ticks)
            return g

    x = ag.ones(1, requires_grad=True)
    h = x
    for _ in range(5000):
        h = h * 1.0
    loss = First.apply(h).sum()
    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    start = ticks
    await loss.backward()
    task.cancel()
    assert x.grad.tolist() == [1.0]
    assert at_first_node[0] - start >= 4, "one tick per slice at least"


# --------------------------------------------------------------------------- sharded counts
class Spy(ag.Function):
    """Records the type of its graph task's dependency counts while the backward runs."""

    kinds: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        graph_task = current_graph_task.get()
        Spy.kinds.append((type(graph_task.dependencies), type(graph_task.exec_info)))
        return g


@pytest.mark.parametrize("api", ["backward", "grad"])
async def test_a_graph_past_shard_at_counts_in_shards_and_stays_exact(api, torch):
    """A graph past SHARD_AT (four nodes a step, each step a diamond: two consumers of one node),
    so counts of 2 are split over the shards (and grad()'s exec_info and visited set too); the
    gradient is torch's, through backward() and through grad()."""
    Spy.kinds = []
    x = ag.tensor([0.3, -1.2], dtype=ag.float64, requires_grad=True)
    xt = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    h, ht = Spy.apply(x), xt
    for _ in range(SHARD_AT // 4 + 1024):
        h = h * 0.5 + h.sin() * 0.25
        ht = ht * 0.5 + ht.sin() * 0.25
    assert len(counted_nodes(h.grad_fn)) > SHARD_AT + 2 * 1024
    expected = torch.autograd.grad(ht.sum(), xt)[0].numpy()
    if api == "backward":
        await h.sum().backward()
        got = x.grad.numpy()
    else:
        (g,) = await ag.grad(h.sum(), x)
        got = g.numpy()
    assert Spy.kinds == [(ShardedMap, ShardedMap if api == "grad" else type(None))]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def counted_nodes(root):
    seen, stack = {root}, [root]
    while stack:
        for fn, _ in stack.pop().next_edges:
            if fn is not None and fn not in seen:
                seen.add(fn)
                stack.append(fn)
    return seen


def test_sharded_counts_is_the_mapping_route_uses():
    nodes = [grad_accumulator(ag.ones(1, requires_grad=True)) for _ in range(3000)]
    counts = ShardedMap({fn: i + 1 for i, fn in enumerate(nodes)})
    assert len(counts) == 3000 and set().union(*counts.shards) == set(nodes)
    assert all(counts[fn] == i + 1 and fn in counts for i, fn in enumerate(nodes))
    counts[nodes[0]] = 7
    assert counts.get(nodes[0]) == 7
    for fn in nodes:
        del counts[fn]
    assert len(counts) == 0 and nodes[5] not in counts and counts.get(nodes[5]) is None
    with pytest.raises(KeyError):
        counts[nodes[5]]
    assert len({len(shard) for shard in ShardedMap({fn: 1 for fn in nodes}).shards}) > 1, "unequal shards"


def test_sharded_set_adds_finds_and_frees_shard_by_shard():
    nodes = [grad_accumulator(ag.ones(1, requires_grad=True)) for _ in range(3000)]
    visited = ShardedSet(set(nodes[:1000]))
    for fn in nodes[1000:]:
        visited.add(fn)
    assert sum(map(len, visited.shards)) == 3000 and all(fn in visited for fn in nodes)
    drops = 0
    while visited.drop_shard():
        drops += 1
    assert not any(visited.shards) and 1 < drops <= 64 and nodes[0] not in visited


# --------------------------------------------------------------------------- the collector while busy
@pytest.fixture
def eager_collector():
    """Thresholds low enough that the allocator starts full passes within a small test; restored."""
    before = gc.get_threshold()
    gc.set_threshold(100, 2, 2)
    yield
    gc.set_threshold(*before)


class Hoard(ag.Function):
    """An async backward that keeps many new objects alive and reports the permanent generation
    before and after making them; it also drops a reference cycle (``Hoard.cycle``: alive or not)."""

    kept: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        before = gc.get_freeze_count()
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        Hoard.cycle = weakref.ref(a)
        del a, b
        Hoard.kept = [[i] for i in range(20_000)]
        Hoard.seen = (before, gc.get_freeze_count())
        return g


async def test_full_passes_while_busy_freeze_what_the_backward_made(eager_collector):
    """Note [Full passes while busy]: survivors made during the backward are frozen by the full
    passes the allocator starts meanwhile (not walked); all of it is unfrozen when the backward ends."""
    x = ag.ones(2, requires_grad=True)
    await Hoard.apply(x).sum().backward()
    before, after = Hoard.seen
    assert after > before + 10_000, "the new lists were frozen by a full pass"
    assert gc.get_freeze_count() == 0
    Hoard.kept = []


async def test_middle_passes_while_busy_freeze_instead_of_walking():
    """Note [Middle passes while busy]: with full passes made rare, the survivors made during the
    backward are frozen by the middle generation's passes; a cycle that outlived them is collected
    after the backward ends."""
    before_threshold = gc.get_threshold()
    gc.set_threshold(100, 2, 1_000_000)  # middle passes often, full passes never
    try:
        x = ag.ones(2, requires_grad=True)
        await Hoard.apply(x).sum().backward()
        before, after = Hoard.seen
        assert after > before + 10_000, "the new lists were frozen by a middle pass"
        assert gc.get_freeze_count() == 0
        Hoard.kept = []
        gc.collect()
        assert Hoard.cycle() is None, "the cycle made while busy is collected after it"
    finally:
        gc.set_threshold(*before_threshold)


# --------------------------------------------------------------------------- a caller's burst
def _losses(count: int) -> list[ag.Tensor]:
    x = ag.ones(2, requires_grad=True)
    return [(x * float(i)).sum() for i in range(count)]


@pytest.fixture
def young_passes_often():
    """Passes of the youngest generation every 100 allocations, so that a step of a few hundred calls
    has several; the thresholds are restored after."""
    before = gc.get_threshold()
    gc.set_threshold(100, 10, 10)
    yield
    gc.set_threshold(*before)


def _burst_over() -> bool:
    return not FrozenWhileBusy._loops and FrozenWhileBusy._bursts == 0 and gc.get_freeze_count() == 0


async def test_young_passes_in_a_callers_burst_freeze_instead_of_walking(young_passes_often):
    """Note [A caller's burst is frozen]: the objects of the calls made in one step are frozen by the
    young passes of that step, not walked; the next loop iteration hands them back, and a cycle made in
    the burst is collected once it ends."""
    losses = _losses(300)
    calls = [loss.backward(retain_graph=True) for loss in losses]
    a, b = Cycle(), Cycle()
    a.other, b.other = b, a
    cycle = weakref.ref(a)
    del a, b
    [[i] for i in range(1_000)]  # noqa: B018  (allocations, so that young passes start)
    walked = {id(obj) for obj in gc.get_objects()}  # every generation but the permanent one
    assert not any(id(call) in walked for call in calls[:200]), "the calls made in this step were frozen"
    assert gc.get_threshold() == (100, 10, 10), "the thresholds are left alone"
    await asyncio.sleep(0)
    assert _burst_over(), "the next iteration ends the burst"
    for call in calls:
        call.close()
    gc.collect()
    assert cycle() is None, "the cycle made in the burst is collected after it"


async def test_a_callers_burst_ends_after_errors_cancellation_and_closed_calls(young_passes_often):
    x = ag.ones(2, requires_grad=True)
    calls = [Boom.apply(x).sum().backward() for _ in range(200)]
    with pytest.raises(ValueError, match="boom in backward"):
        await asyncio.gather(*calls)
    await asyncio.gather(*calls, return_exceptions=True)  # the others end after the first error
    assert _burst_over()

    calls = [loss.backward() for loss in _losses(200)]
    gathered = asyncio.gather(*calls)
    gathered.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathered
    await asyncio.gather(*calls, return_exceptions=True)
    assert _burst_over()

    for loss in _losses(200):
        loss.backward().close()
    assert FrozenWhileBusy._bursts == 1
    await asyncio.sleep(0)
    assert _burst_over()


async def test_no_burst_opens_while_the_collector_is_off(collector_off):
    calls = [loss.backward() for loss in _losses(10)]
    assert FrozenWhileBusy._bursts == 0 and not FrozenWhileBusy._loops
    for call in calls:
        call.close()
    await asyncio.sleep(0)
    assert _burst_over()


def test_a_burst_left_on_a_closed_loop_does_not_keep_the_process_frozen(young_passes_often):
    """The loop stopped in the step that made the calls and was closed before its next iteration: the
    young passes that follow forget it and hand back what it left frozen."""
    losses = _losses(10)
    loop = asyncio.new_event_loop()

    def calls_then_stop():
        for loss in losses:
            loss.backward().close()
        loop.stop()

    loop.call_soon(calls_then_stop)
    loop.run_forever()
    loop.close()
    assert FrozenWhileBusy._bursts == 1 and gc.get_freeze_count() > 0, "left open by the closed loop"
    [[i] for i in range(1_000)]  # noqa: B018  (allocations, so that young passes start)
    assert _burst_over()


async def test_an_explicit_collect_while_busy_still_collects_new_cycles(eager_collector):
    seen = []

    class Collect(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        async def backward(ctx, g):
            a, b = Cycle(), Cycle()
            a.other, b.other = b, a
            alive = weakref.ref(a)
            del a, b
            gc.collect()
            seen.append(alive() is None)
            return g

    x = ag.ones(2, requires_grad=True)
    await Collect.apply(x).sum().backward()
    assert seen == [True]


async def test_a_huge_graph_recorded_outside_a_backward_is_frozen_until_the_next_backward_ends(eager_collector):
    """Note [Full passes while busy]: past GROWING_NODES recorded since the last backward, the full
    passes freeze instead of walking the growing graph; the backward's end unfreezes."""
    from asyncgrad.engine.gcfreeze import GROWING_NODES

    x = ag.ones(1, requires_grad=True)
    h = x
    for _ in range(GROWING_NODES + 100):
        h = h * 1.0
    # what else the program keeps meanwhile: enough survivors that the allocator starts a full pass
    kept = [[i] for i in range(len(gc.get_objects()))]
    assert gc.get_freeze_count() > len(kept) // 2
    await h.sum().backward()
    assert gc.get_freeze_count() == 0
    assert x.grad.tolist() == [1.0]


async def test_a_short_forward_leaves_the_collector_alone(eager_collector):
    x = ag.ones(1, requires_grad=True)
    await (x * 2).sum().backward()  # a busy spell ended: the count of recorded nodes starts again
    h = x
    for _ in range(200):
        h = h * 1.0
        [[i] for i in range(50)]  # noqa: B018  (allocations, so that passes start)
    assert gc.get_freeze_count() == 0


async def test_a_huge_graph_preparation_freezes_its_maps():
    """The sharded counts are frozen once made (``settle``): no pass of a young generation walks them."""
    seen = []

    class Maps(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        async def backward(ctx, g):
            shards = current_graph_task.get().dependency_shards
            tracked = {id(obj) for obj in gc.get_objects()}  # every generation but the permanent one
            seen.append(any(id(shard) in tracked for shard in shards))
            return g

    x = ag.ones(1, requires_grad=True)
    h = Maps.apply(x)
    for _ in range(SHARD_AT + 2048):
        h = h * 1.0
    await h.sum().backward()
    assert seen == [False]


# --------------------------------------------------------------------------- issue 30's workloads, small
SMALL = {"sin": 0.1, "chain": 0.02, "fanin": 0.04, "many": 0.1, "shared": 0.1, "create_graph": 0.1,
         "async_5000": 0.1, "sync_1000": 0.1, "sync_5000": 0.1, "threads_1000": 0.1, "forward": 0.02}
"""Each workload of ``python -m benchmarks.stalls`` at a small scale (the huge graphs past SHARD_AT still)."""


@pytest.mark.parametrize("name", list(SMALL))
async def test_no_workload_holds_the_loop_long(name):
    """The loop thread's CPU time between two beats of a 1 ms heartbeat stays under a bound generous
    enough for a loaded machine, with the collector on (Note [One budget per loop], Note [Full passes
    while busy])."""
    from benchmarks import stalls

    result = await stalls.measure(name, SMALL[name], collector=True)
    x = ag.ones(1, requires_grad=True)
    await (x * 2).sum().backward()  # ends what the forward workload left frozen
    assert result["cpu_ms"] < 50, result
