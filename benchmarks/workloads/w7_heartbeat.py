"""W7: event-loop responsiveness during W4's backward (asyncgrad only): a
coroutine sleeping 1 ms in a loop records how late it wakes. An engine that
runs large kernels on the loop thread shows the kernels' length here."""

from __future__ import annotations

import asyncio
import contextlib
import time

from ..frameworks import Framework
from ..measure import fingerprint
from .common import Outcome, Workload
from .w4_branches import branches_graph

PERIOD_S = 0.001


class Heartbeat:
    """`async with Heartbeat() as hb:` beats while the block runs; `hb.lateness` in seconds."""

    def __init__(self) -> None:
        self.lateness: list[float] = []
        self._since = 0.0

    async def _beat(self) -> None:
        while True:
            self._since = time.perf_counter()
            await asyncio.sleep(PERIOD_S)
            self.lateness.append(time.perf_counter() - self._since - PERIOD_S)

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        await asyncio.sleep(0)  # let the first beat start
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.lateness.append(max(0.0, time.perf_counter() - self._since - PERIOD_S))  # the beat in flight
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def run(fw: Framework, n: int, repeats: int, warmup: int) -> Outcome:
    graph = branches_graph(n)
    metrics: dict[str, list[float]] = {"worst_ms": [], "median_ms": [], "backward_ms": []}
    for i in range(warmup + repeats):
        rec = fw.forward(graph, fw.leaves(graph))
        async with Heartbeat() as hb:
            t0 = time.perf_counter()
            await fw.backward(rec)
            backward_s = time.perf_counter() - t0
        if i >= warmup:
            late = sorted(hb.lateness)
            metrics["worst_ms"].append(late[-1] * 1e3)
            metrics["median_ms"].append(late[len(late) // 2] * 1e3)
            metrics["backward_ms"].append(backward_s * 1e3)
    return Outcome(metrics, fingerprint(fw.value(rec), fw.grads(rec)))


WORKLOAD = Workload(
    key="W7",
    title="responsiveness",
    caption=f"a coroutine sleeping {PERIOD_S * 1e3:g} ms in a loop during W4's backward: how late it wakes, ms",
    size_label="n",
    sizes=(512,),
    quick_sizes=(256,),
    columns=(("worst_ms", "worst lateness ms"), ("median_ms", "median lateness ms"), ("backward_ms", "backward ms")),
    run=run,
    frameworks=("asyncgrad",),
)
