"""`python -m benchmarks.stalls`: how long the engine holds the event loop (issue 8's figures).

A heartbeat coroutine sleeps 1 ms in a loop and records how late it wakes, while the engine
runs a backward. Python's GC pauses are measured apart (``gc.callbacks``): the engine's own
stalls are measured with the collector off, the collector's pauses in their own scenario.

On a loaded machine the operating system also takes the loop thread away, which a wall-clock
heartbeat counts as lateness; ``worst_cpu_ms`` counts only the CPU time the loop thread spent
on others (the engine) while a beat slept, minus the beat's 1 ms: the stall an idle machine
would show. ``--no-freeze`` turns Note [Frozen while busy] off, for the GC figures before it.

Scenarios:
* ``medium``: a chain of 300 inline nodes just under the inline threshold (``x * 1.01`` on
  150k float64 elements, one multiply per element: inline by design).
* ``sin``: a chain of 300 ``sin`` nodes on 150k elements (their backward costs about nine
  multiplies per element, Note [Cost classes]: the engine sends them to its executor).
* ``huge``: a backward through a chain of 10^6 tiny nodes (preparation and running).
* ``huge_grad`` (not run by default): ``grad()`` through the same chain (``init_to_execute`` too).
* ``gc``: 1,000 concurrent backwards of 50-node graphs with the collector on: the worst and
  total GC pause, and the heartbeat's worst lateness.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from typing import Any, Callable

import numpy as np

import asyncgrad as ag
from asyncgrad.engine.gcfreeze import FrozenWhileBusy

from .workloads.w7_heartbeat import PERIOD_S, Heartbeat


class CPUHeartbeat(Heartbeat):
    """Also records, per beat, the loop thread's CPU time while it slept (``cpu_hold``)."""

    async def _beat(self) -> None:
        self.cpu_hold: list[float] = []
        while True:
            self._since = time.perf_counter()
            cpu = time.thread_time()
            await asyncio.sleep(PERIOD_S)
            self.lateness.append(time.perf_counter() - self._since - PERIOD_S)
            self.cpu_hold.append(time.thread_time() - cpu)

    def worst_cpu_ms(self) -> float:
        return max(0.0, max(self.cpu_hold, default=0.0) - PERIOD_S) * 1e3


class GCPauses:
    """Durations of the collector's runs while the block is open (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._start)

    def __enter__(self) -> GCPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.callbacks.remove(self._callback)


def chain(n: int, size: int, step: Callable[[ag.Tensor], ag.Tensor]) -> tuple[ag.Tensor, ag.Tensor]:
    x = ag.tensor(np.random.default_rng(0).random(size), requires_grad=True)
    h = x
    for _ in range(n):
        h = step(h)
    return x, h.sum()


async def heartbeat_during(make: Callable[[], tuple[ag.Tensor, ag.Tensor]], use_grad: bool = False) -> dict[str, float]:
    """``make()`` gives a leaf and a loss: the loss's backward, or with ``use_grad`` ``grad(loss, leaf)``."""
    x, loss = make()
    async with CPUHeartbeat() as hb:
        t0 = time.perf_counter()
        if use_grad:
            await ag.grad(loss, x)
        else:
            await loss.backward()
        backward_s = time.perf_counter() - t0
    late = sorted(hb.lateness)
    return {"worst_ms": late[-1] * 1e3, "median_ms": late[len(late) // 2] * 1e3, "worst_cpu_ms": hb.worst_cpu_ms(),
            "backward_ms": backward_s * 1e3}


async def scenario_gc(graphs: int, nodes: int) -> dict[str, float]:
    leaves = [ag.tensor(np.random.default_rng(i).random(16), requires_grad=True) for i in range(graphs)]
    losses = []
    for x in leaves:
        h = x
        for _ in range(nodes):
            h = (h * 1.01).tanh()
        losses.append(h.sum())
    with GCPauses() as pauses:
        async with CPUHeartbeat() as hb:
            t0 = time.perf_counter()
            await asyncio.gather(*(loss.backward() for loss in losses))
            backward_s = time.perf_counter() - t0
    worst_gc = max(pauses.pauses, default=0.0)
    return {"worst_gc_ms": worst_gc * 1e3, "total_gc_ms": sum(pauses.pauses) * 1e3, "collections": len(pauses.pauses),
            "worst_heartbeat_ms": max(hb.lateness) * 1e3, "worst_cpu_ms": hb.worst_cpu_ms(),
            "backward_ms": backward_s * 1e3}


async def main(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    results = {}
    FrozenWhileBusy.enabled = not args.no_freeze
    gc.disable()
    try:
        if "medium" in args.only:
            results["medium"] = await heartbeat_during(lambda: chain(300, 150_000, lambda h: h * 1.01))
        if "sin" in args.only:
            results["sin"] = await heartbeat_during(lambda: chain(300, 150_000, lambda h: h.sin()))
        if "huge" in args.only:
            results["huge"] = await heartbeat_during(lambda: chain(args.huge, 1, lambda h: h * 1.0001))
        if "huge_grad" in args.only:
            results["huge_grad"] = await heartbeat_during(lambda: chain(args.huge, 1, lambda h: h * 1.0001), True)
    finally:
        gc.enable()
    if "gc" in args.only:
        gc.collect()
        results["gc"] = await scenario_gc(args.graphs, 50)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stalls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=lambda text: set(text.split(",")), default="medium,sin,huge,gc",
                        help="scenarios, comma-separated (huge_grad too)")
    parser.add_argument("--huge", type=int, default=1_000_000, help="nodes in the huge chain")
    parser.add_argument("--graphs", type=int, default=1000, help="concurrent backwards in the gc scenario")
    parser.add_argument("--no-freeze", action="store_true", help="turn Note [Frozen while busy] off")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=1))
