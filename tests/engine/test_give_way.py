"""``await ag.give_way()``: a coroutine that computes for long (a forward, a training step) hands the
loop back on the engine's budget (Note [One budget per loop] in asyncgrad/engine/budget.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

import asyncgrad as ag


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _beats_during(work) -> int:
    """How many times a 0-second heartbeat ran while ``work`` ran."""
    beats = 0
    done = False

    async def heartbeat() -> None:
        nonlocal beats
        while not done:
            await asyncio.sleep(0)
            beats += 1

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    beats = 0
    try:
        await work()
    finally:
        done = True
        await beat
    return beats


async def test_long_work_that_gives_way_lets_the_loop_run():
    async def chunks(give_way: bool) -> None:
        for _ in range(60):  # 60 ms of work in 1 ms pieces, 30 budgets' worth
            _busy(0.001)
            if give_way:
                await ag.give_way()

    assert await _beats_during(lambda: chunks(False)) <= 1  # never handed back: the heartbeat waits throughout
    assert await _beats_during(lambda: chunks(True)) >= 5


async def test_give_way_returns_at_once_while_budget_is_left():
    loop = asyncio.get_running_loop()
    ran = []
    loop.call_soon(ran.append, True)
    await ag.give_way()  # the budget's spell opens here: nothing spent yet
    assert not ran


def test_give_way_outside_an_event_loop():
    coro = ag.give_way()
    with pytest.raises(RuntimeError, match="asyncio event loop"):
        coro.send(None)
    coro.close()
