"""One time budget per event loop, shared by every graph task and server on it (Note [One budget per
loop] in engine/budget.py): backwards started together prepare in turns, a parked caller that is
cancelled leaves the line, and the results are those of backwards run one by one. The caller's step
that starts them counts (Note [A caller's step is on the budget]), and what a call need not do where
it is made waits for the engine's turn (Note [The implicit gradient is made on the budget])."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine import engine as engine_module
from asyncgrad.engine.engine import get_engine


def _graphs(count: int, steps: int = 5) -> list[tuple[ag.Tensor, ag.Tensor]]:
    graphs = []
    for i in range(count):
        x = ag.tensor(np.full(3, 0.1 * (i + 1)), requires_grad=True)
        h = x
        for _ in range(steps):
            h = (h * 1.5).tanh()
        graphs.append((x, h.sum()))
    return graphs


class Ticker:
    def __init__(self) -> None:
        self.ticks = 0

    async def __aenter__(self) -> Ticker:
        async def tick() -> None:
            while True:
                self.ticks += 1
                await asyncio.sleep(0)

        self._task = asyncio.ensure_future(tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()


async def test_backwards_started_in_one_step_prepare_in_turns(monkeypatch):
    """With a budget of nothing, each spell admits one graph task's preparation: another coroutine
    runs between them, where a budget per graph task would have prepared all of them in one step."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    seen = []
    original = engine_module.compute_dependencies

    async def counted(root, graph_task, min_topo_nr):
        seen.append(ticker.ticks)
        await original(root, graph_task, min_topo_nr)

    monkeypatch.setattr(engine_module, "compute_dependencies", counted)
    graphs = _graphs(30)
    async with Ticker() as ticker:
        await asyncio.gather(*(loss.backward() for _, loss in graphs))
    assert len(seen) == 30
    assert len(set(seen)) >= 15, "the preparations were spread over loop iterations"


@pytest.mark.parametrize("budget_s", [0.0, 0.002])
async def test_many_backwards_at_once_give_the_gradients_of_one_at_a_time(monkeypatch, budget_s):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", budget_s)
    together, alone = _graphs(40), _graphs(40)
    await asyncio.gather(*(loss.backward() for _, loss in together))
    for _, loss in alone:
        await loss.backward()
    for (x, _), (y, _) in zip(together, alone):
        np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())
    budget = get_engine().budget
    assert not budget.line and not budget.closed


async def test_a_cancelled_caller_leaves_the_line_and_the_others_finish(monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    graphs = _graphs(20)
    tasks = [asyncio.ensure_future(loss.backward()) for _, loss in graphs]
    await asyncio.sleep(0)  # every task has started and all but the first wait in the line
    assert len(get_engine().budget.line) >= 10
    for task in tasks[1::2]:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [isinstance(r, asyncio.CancelledError) for r in results]
    assert cancelled == [i % 2 == 1 for i in range(20)]
    for (x, _), was_cancelled in zip(graphs, cancelled):
        assert (x.grad is None) == was_cancelled
    budget = get_engine().budget
    assert not budget.line


async def test_a_callers_step_that_spent_the_budget_lets_the_loop_run_before_any_preparation(monkeypatch):
    """Note [A caller's step is on the budget]: the graph tasks of calls made in a step that outlasted the
    budget park at their first step; what the loop queued behind them runs before any of them prepares."""
    seen = []
    original = engine_module.compute_dependencies

    async def counted(root, graph_task, min_topo_nr):
        seen.append(root)
        await original(root, graph_task, min_topo_nr)

    monkeypatch.setattr(engine_module, "compute_dependencies", counted)
    graphs = _graphs(20)
    calls = [loss.backward() for _, loss in graphs]
    time.sleep(2 * budget_module.YIELD_AFTER_S)  # the caller's own work, after its calls
    together = asyncio.gather(*calls)
    prepared_then = []
    asyncio.get_running_loop().call_soon(lambda: prepared_then.append(len(seen)))  # after their first steps
    await together
    assert prepared_then == [0] and len(seen) == 20
    alone = _graphs(20)
    for _, loss in alone:
        await loss.backward()
    for (x, _), (y, _) in zip(graphs, alone):
        np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())


async def test_the_implicit_gradient_is_made_when_the_graph_task_starts(monkeypatch):
    """Note [The implicit gradient is made on the budget]: the call checks its root and makes no array;
    the engine makes the ones when the graph task starts."""
    backend = ag.device("cpu").backend
    made = []
    ones, from_host = backend.ones, backend.from_host

    def counted(shape, dtype):
        made.append((shape, dtype))
        return ones(shape, dtype)

    def counted_host(host, dtype=None, copy=None):  # a 0-d root's ones: the number 1 copied in
        out = from_host(host, dtype, copy)
        made.append((out.shape, out.dtype))
        return out

    monkeypatch.setattr(backend, "ones", counted)
    monkeypatch.setattr(backend, "from_host", counted_host)
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    calls = [(x * 3).sum().backward(), (x * x).sum().backward(), ag.grad((x * x * x).sum(), x, create_graph=True)]
    assert made == []
    _, _, (g,) = await asyncio.gather(*calls)
    assert made == [((), np.float64)] * 3
    assert x.grad.tolist() == [5.0, 7.0]
    assert g.requires_grad and g.tolist() == [3.0, 12.0]
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 3).backward()  # still refused where it is called
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        ag.grad(x * 3, x, create_graph=True)
    assert len(made) == 3


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
async def test_the_implicit_gradient_has_the_roots_dtype_and_device(device, dtype):
    dtype = getattr(ag, dtype)
    x = ag.tensor([0.5, -1.5], dtype=dtype, device=device, requires_grad=True)
    await (x * x).sum().backward()  # one root
    assert x.grad.dtype == dtype and x.grad.device == x.device and x.grad.tolist() == [1.0, -3.0]
    x.grad = None
    await ag.backward([(x * 2).sum(), x.sum() * 0.5])  # two roots, through GraphRoot
    assert x.grad.dtype == dtype and x.grad.tolist() == [2.5, 2.5]
    (g,) = await ag.grad((x * 3).sum(), x)
    assert g.dtype == dtype and g.device == x.device and g.tolist() == [3.0, 3.0]
    leaf = ag.tensor(2.0, dtype=dtype, device=device, requires_grad=True)
    await leaf.backward()  # the root is a leaf: its AccumulateGrad gets the ones
    assert leaf.grad.dtype == dtype and leaf.grad.item() == 1.0
    (g,) = await ag.grad((x * x * x).sum(), x, create_graph=True)  # a Tensor, made by the front door
    assert g.dtype == dtype and g.device == x.device and g.requires_grad and g.tolist() == [0.75, 6.75]
    (gg,) = await ag.grad(g.sum(), x)
    assert gg.dtype == dtype and gg.tolist() == [3.0, -9.0]


async def test_set_loop_budget_sets_what_every_slice_uses():
    before = ag.get_loop_budget()
    try:
        ag.set_loop_budget(0.0005)
        assert ag.get_loop_budget() == budget_module.YIELD_AFTER_S == 0.0005
        graphs = _graphs(10)
        await asyncio.gather(*(loss.backward() for _, loss in graphs))
        assert all(x.grad is not None for x, _ in graphs)
        for bad in (-1.0, float("nan"), "1", True, None):
            with pytest.raises(ValueError, match="set_loop_budget"):
                ag.set_loop_budget(bad)
        assert ag.get_loop_budget() == 0.0005
    finally:
        ag.set_loop_budget(before)
