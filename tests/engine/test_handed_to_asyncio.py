"""A ``backward()``/``grad()`` call handed to asyncio as a future (``gather``, ``ensure_future``,
``wait_for``, ``shield``) behaves as the task asyncio used to wrap it in, and waits its turn on the
loop's budget without one (Note [Handed to asyncio as a future] in graph/awaitable.py)."""

from __future__ import annotations

import asyncio
import gc
import warnings

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine.engine import get_engine
from asyncgrad.graph import awaitable
from asyncgrad.graph.awaitable import HandedCall


def _loss(scale: float = 1.0) -> tuple[ag.Tensor, ag.Tensor]:
    x = ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64, requires_grad=True)
    return x, ((x * scale).tanh() * x).sum()


class Slow(ag.autograd.Function):
    """A node whose backward awaits: it runs for ``delay`` seconds of the loop's time."""

    @staticmethod
    def forward(ctx, x, delay):
        ctx.delay = delay
        return x.clone()

    @staticmethod
    async def backward(ctx, g):
        await asyncio.sleep(ctx.delay)
        return g, None


async def test_gather_gives_each_call_its_gradients_and_no_task_in_the_callers_step(monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)  # the calls spend the budget: all wait their turn
    graphs = [_loss(0.1 * (i + 1)) for i in range(50)]
    alone = [_loss(0.1 * (i + 1)) for i in range(50)]
    tasks_before = len(asyncio.all_tasks())
    calls = [loss.backward() for _, loss in graphs]
    together = asyncio.gather(*calls)
    assert all(type(call) is HandedCall for call in calls)
    assert len(asyncio.all_tasks()) == tasks_before  # waiting in the budget's line: no task made in this step
    assert not awaitable.pending  # handed over: none of them counts as un-awaited
    assert await together == [None] * 50
    for _, loss in alone:
        await loss.backward()
    for (x, _), (y, _) in zip(graphs, alone):
        np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())


async def test_gather_of_grad_gives_the_tuples():
    (x, loss), (y, loss2) = _loss(), _loss(2.0)
    (gx,), (gy,) = await asyncio.gather(ag.grad(loss, x), ag.grad(loss2, y))
    assert x.grad is None and y.grad is None
    t = x.detach()
    np.testing.assert_allclose(gx.numpy(), (ag.tanh(t) + t / ag.cosh(t) ** 2).numpy(), rtol=1e-12)
    assert gy.shape == (3,)


async def test_ensure_future_gives_a_future_that_asyncio_wait_takes():
    x, loss = _loss()
    future = asyncio.ensure_future(loss.backward())
    assert asyncio.isfuture(future) and not asyncio.iscoroutine(future)
    done, _ = await asyncio.wait({future}, timeout=5)
    assert done == {future} and future.done() and not future.cancelled()
    assert future.result() is None and future.exception() is None
    assert x.grad is not None
    assert "handed to asyncio" in repr(future)


async def test_many_calls_in_one_step_wait_their_turn_in_the_budgets_line(monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    graphs = [_loss(0.1 * (i + 1)) for i in range(20)]
    futures = [asyncio.ensure_future(loss.backward()) for _, loss in graphs]
    line = get_engine().budget.line
    assert len(line) >= 19 and all(f._task is None for f in futures[1:])  # no task until their turn
    await asyncio.gather(*futures)
    assert all(x.grad is not None for x, _ in graphs) and not line


async def test_cancelled_while_it_waits_its_turn_it_never_runs(monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    graphs = [_loss() for _ in range(6)]
    futures = [asyncio.ensure_future(loss.backward()) for _, loss in graphs]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left unawaited would warn when collected
        assert futures[3].cancel() and futures[3].cancelled() and futures[3].done()
        assert not futures[3].cancel()
        results = await asyncio.gather(*futures, return_exceptions=True)
        gc.collect()
    assert isinstance(results[3], asyncio.CancelledError)
    assert [x.grad is None for x, _ in graphs] == [False, False, False, True, False, False]
    with pytest.raises(asyncio.CancelledError):
        futures[3].result()
    with pytest.raises(asyncio.CancelledError):
        await futures[3]


async def test_cancelling_a_running_one_cancels_its_graph_task():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    future = asyncio.ensure_future((Slow.apply(x * 2, 10.0) * 3).sum().backward())
    await asyncio.sleep(0.01)
    assert future._task is not None and not future.done()
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future
    assert future.cancelled() and x.grad is None


async def test_wait_for_times_out_and_cancels_it():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(Slow.apply(x, 10.0).sum().backward(), 0.02)
    await asyncio.sleep(0)
    assert x.grad is None
    assert not get_engine().live


async def test_shield_and_its_result():
    x, loss = _loss()
    (g,) = await asyncio.shield(ag.grad(loss, x))
    assert g.shape == (3,)


async def test_a_failing_one_raises_in_gather():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    good_x, good = _loss()
    bad = (x * 2).sum()
    await bad.backward()  # its graph is freed: a second backward fails
    results = await asyncio.gather(good.backward(), bad.backward(), return_exceptions=True)
    assert results[0] is None and good_x.grad is not None
    assert isinstance(results[1], RuntimeError) and "second time" in str(results[1])
    with pytest.raises(RuntimeError, match="second time"):
        await asyncio.gather(_loss()[1].backward(), bad.backward())


async def test_an_error_nobody_retrieves_is_logged_as_for_a_task():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    bad = (x * 2).sum()
    await bad.backward()
    seen = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, context: seen.append(context))
    try:
        future = asyncio.ensure_future(bad.backward())
        while not future.done():
            await asyncio.sleep(0)
        del future
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert any("never retrieved" in c.get("message", "") and "second time" in str(c.get("exception"))
               for c in seen)


async def test_create_task_still_takes_the_call_as_a_coroutine():
    x, loss = _loss()
    task = asyncio.create_task(loss.backward())
    assert isinstance(task, asyncio.Task)
    await task
    assert x.grad is not None


async def test_awaited_while_it_waits_its_turn_it_starts_at_once(monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)
    graphs = [_loss() for _ in range(5)]
    futures = [asyncio.ensure_future(loss.backward()) for _, loss in graphs]
    assert futures[-1]._task is None
    await futures[-1]
    assert graphs[-1][0].grad is not None
    await asyncio.gather(*futures)
    assert all(x.grad is not None for x, _ in graphs)
