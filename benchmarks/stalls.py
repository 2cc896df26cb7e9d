"""`python -m benchmarks.stalls`: how long the engine holds the event loop (issues 8 and 30).

A heartbeat coroutine sleeps 1 ms in a loop and records how late it wakes while a workload runs.
Each workload runs twice per round: with the collector off (the engine's own stalls) and with it
on (what a program sees; the collector's pauses are timed apart through ``gc.callbacks``).
``--runs N`` repeats the rounds and prints, per workload, the worst and the median over the runs
of each run's worst delay.

On a loaded machine the operating system also takes the loop thread away, which a wall-clock
heartbeat counts as lateness; ``cpu`` counts only the CPU time the loop thread spent on others
(the engine, the collector) while a beat slept, minus the beat's 1 ms: the stall an idle machine
would show. ``wall`` is the plain lateness. ``--no-freeze`` turns Note [Frozen while busy] off. ``--trace`` prints,
per run with the collector on, the loop's longest iteration in the loop thread's CPU time and the collector's
passes that started in it (generation and CPU ms each): which collections a stall is made of.

Workloads (``--scale`` multiplies every count, never an array's size):
* ``sin``: one backward through a chain of 300 ``sin`` nodes on 150k elements (each runs inline:
  Note [Nothing to overlap]).
* ``chain``: a backward through a chain of 10^6 tiny nodes (preparation and running).
* ``fanin``: a backward through a sum tree of 10^6 nodes (2^19 products of one leaf, added pairwise).
* ``many``: 1,000 backwards started in one step, each through its own 100-node graph.
* ``many_calls``, ``many_noop``: what ``many``'s own step costs, apart: the same 1,000 ``backward()``
  calls made and closed without running (asyncgrad's part of the caller's step), and ``gather`` of
  1,000 coroutines that do nothing (asyncio's part: a task each, and their first steps).
* ``shared``: 1,000 concurrent backwards through one shared 100-node graph (``retain_graph``).
* ``create_graph``: 1,000 concurrent ``grad(create_graph=True)`` through 20-node graphs, each
  followed by the backward of its gradient (the second order).
* ``create_graph_calls``: what ``create_graph``'s first loop iteration costs before the engine runs:
  the 1,000 tasks' first steps, each making its ``grad()`` call (closed unrun): the callers' own code.
* ``async_5000``: reentrant ``async def`` backwards, each awaiting the backward of a fresh graph
  whose own node nests again, 5,000 deep.
* ``sync_1000``, ``sync_5000``: the same with plain-def backwards calling ``backward_sync``.
* ``threads_1000``: ``sync_1000`` with every node sent to a kernel thread (inline threshold 0),
  so the nested calls come from kernel threads.
* ``forward``: the forward of a 10^6-node chain, written as async code that awaits
  ``asyncio.sleep(0)`` every 200 ops (what the engine cannot help is the ops' own time; what it
  can is the collector's pauses over the growing graph).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import time
from typing import Any, Awaitable, Callable

import numpy as np

import asyncgrad as ag
from asyncgrad.engine.gcfreeze import FrozenWhileBusy

from .workloads.w7_heartbeat import PERIOD_S, Heartbeat


class CPUHeartbeat(Heartbeat):
    """Records how late each beat wakes, measured from the previous wake (so that nothing that runs
    between two beats, the beat's own step included, escapes it), and the loop thread's CPU time over
    the same span (``cpu_hold``)."""

    async def _beat(self) -> None:
        self.cpu_hold: list[float] = []
        wall, self._cpu = time.perf_counter(), time.thread_time()
        while True:
            self._since = wall
            await asyncio.sleep(PERIOD_S)
            now, now_cpu = time.perf_counter(), time.thread_time()
            self.lateness.append(now - wall - PERIOD_S)
            self.cpu_hold.append(now_cpu - self._cpu)
            wall, self._cpu = now, now_cpu

    async def __aexit__(self, *exc: object) -> None:
        self.cpu_hold.append(time.thread_time() - self._cpu)  # the beat in flight
        await super().__aexit__(*exc)

    def worst_cpu_ms(self) -> float:
        return max(0.0, max(self.cpu_hold, default=0.0) - PERIOD_S) * 1e3


class GCPauses:
    """Durations of the collector's runs while the block is open (``gc.callbacks``), and for ``--trace``
    each run's generation and start (``passes``: (the loop thread's CPU time at its start, generation, CPU
    seconds))."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self.passes: list[tuple[float, int, float]] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.thread_time()  # CPU time: on a loaded machine, preemption is not the collector
        else:
            pause = time.thread_time() - self._start
            self.pauses.append(pause)
            self.passes.append((self._start, info["generation"], pause))

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


def _n(count: int, scale: float) -> int:
    return max(1, round(count * scale))


# --------------------------------------------------------------------------- workloads
# Each builds its graphs (not measured) and returns the coroutine function the heartbeat measures.
Prepared = Callable[[], Awaitable[Any]]


def prepare_sin(scale: float) -> Prepared:
    _, loss = chain(_n(300, scale), 150_000, lambda h: h.sin())
    return loss.backward


def prepare_chain(scale: float) -> Prepared:
    _, loss = chain(_n(1_000_000, scale), 1, lambda h: h * 1.0001)
    return loss.backward


def prepare_fanin(scale: float) -> Prepared:
    x = ag.tensor([0.5], dtype=ag.float64, requires_grad=True)
    level = [x * (1.0 + i * 1e-6) for i in range(_n(1 << 19, scale))]
    while len(level) > 1:
        level = [level[i] + level[i + 1] if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    loss = level[0].sum()
    return loss.backward


def _small_graphs(count: int, steps: int) -> list[tuple[ag.Tensor, ag.Tensor]]:
    graphs = []
    for i in range(count):
        x = ag.tensor(np.random.default_rng(i).random(16), requires_grad=True)
        h = x
        for _ in range(steps):
            h = (h * 1.01).tanh()
        graphs.append((x, h.sum()))
    return graphs


def prepare_many(scale: float) -> Prepared:
    losses = [loss for _, loss in _small_graphs(_n(1000, scale), 50)]

    async def run() -> None:
        await asyncio.gather(*(loss.backward() for loss in losses))
    return run


def prepare_many_calls(scale: float) -> Prepared:
    losses = [loss for _, loss in _small_graphs(_n(1000, scale), 50)]

    async def run() -> None:
        calls = [loss.backward() for loss in losses]
        for call in calls:
            call.close()
    return run


def prepare_many_noop(scale: float) -> Prepared:
    count = _n(1000, scale)

    async def nothing() -> None:
        return None

    async def run() -> None:
        await asyncio.gather(*(nothing() for _ in range(count)))
    return run


def prepare_shared(scale: float) -> Prepared:
    ((_, loss),) = _small_graphs(1, 50)
    count = _n(1000, scale)

    async def run() -> None:
        await asyncio.gather(*(loss.backward(retain_graph=True) for _ in range(count)))
    return run


def prepare_create_graph(scale: float) -> Prepared:
    graphs = _small_graphs(_n(1000, scale), 10)

    async def second_order(x: ag.Tensor, loss: ag.Tensor) -> None:
        (g,) = await ag.grad(loss, x, create_graph=True)
        await (g * g).sum().backward()

    async def run() -> None:
        await asyncio.gather(*(second_order(x, loss) for x, loss in graphs))
    return run


def prepare_create_graph_calls(scale: float) -> Prepared:
    graphs = _small_graphs(_n(1000, scale), 10)

    async def call(x: ag.Tensor, loss: ag.Tensor) -> None:
        ag.grad(loss, x, create_graph=True).close()

    async def run() -> None:
        await asyncio.gather(*(call(x, loss) for x, loss in graphs))
    return run


def _nested(depth: int, kind: str) -> ag.Tensor:
    """The outermost loss of backwards nested ``depth`` deep: each level's custom node runs the
    backward of a fresh one-node graph of the next level from its own backward."""
    w = ag.tensor([0.5, -1.0], dtype=ag.float64, requires_grad=True)

    def graph(level: int) -> ag.Tensor:
        with ag.enable_grad():
            return (Nest.apply(w, level) * 1.5).sum()

    if kind == "async":
        class Nest(ag.Function):
            @staticmethod
            def forward(ctx, t, level):
                ctx.level = level
                return t * 2

            @staticmethod
            async def backward(ctx, g):
                if ctx.level < depth:
                    await graph(ctx.level + 1).backward()
                return g * 2, None
    else:
        class Nest(ag.Function):  # type: ignore[no-redef]
            @staticmethod
            def forward(ctx, t, level):
                ctx.level = level
                return t * 2

            @staticmethod
            def backward(ctx, g):
                if ctx.level < depth:
                    graph(ctx.level + 1).backward_sync()
                return g * 2, None
    return graph(0)


def prepare_nested(depth: int, kind: str) -> Callable[[float], Prepared]:
    return lambda scale: _nested(_n(depth, scale), kind).backward


@contextlib.contextmanager
def _kernel_threads() -> Any:
    cpu = ag.device("cpu")
    before = cpu.inline_threshold
    ag.set_inline_threshold("cpu", 0)
    try:
        yield
    finally:
        ag.set_inline_threshold("cpu", before)


def prepare_forward(scale: float) -> Prepared:
    n = _n(1_000_000, scale)

    async def run() -> ag.Tensor:
        h = ag.tensor([1.0], dtype=ag.float64, requires_grad=True)
        for i in range(n):
            h = h * 1.0000001
            if not i % 200:
                await asyncio.sleep(0)
        return h  # the graph is dropped after the heartbeat (freeing it is not the forward)
    return run


WORKLOADS: dict[str, tuple[str, Callable[[float], Prepared], Any]] = {
    "sin": ("one backward through 300 inline sin nodes of 150k elements", prepare_sin, None),
    "chain": ("10^6-node chain backward", prepare_chain, None),
    "fanin": ("10^6-node sum-tree fan-in backward", prepare_fanin, None),
    "many": ("1,000 backwards started in one step (independent small graphs)", prepare_many, None),
    "many_calls": ("  of which: the 1,000 backward() calls, made and closed unrun", prepare_many_calls, None),
    "many_noop": ("  of which: gather of 1,000 coroutines that do nothing", prepare_many_noop, None),
    "shared": ("1,000 concurrent backwards through one shared graph (retain_graph)", prepare_shared, None),
    "create_graph": ("1,000 concurrent grad(create_graph=True) and their second order", prepare_create_graph, None),
    "create_graph_calls": ("  of which: the 1,000 tasks each making its grad() call, closed unrun",
                           prepare_create_graph_calls, None),
    "async_5000": ("reentrant async def backwards, 5,000 deep", prepare_nested(5000, "async"), None),
    "sync_1000": ("reentrant backward_sync from plain backwards, 1,000 deep", prepare_nested(1000, "sync"), None),
    "sync_5000": ("reentrant backward_sync from plain backwards, 5,000 deep", prepare_nested(5000, "sync"), None),
    "threads_1000": ("the same through kernel threads, 1,000 deep", prepare_nested(1000, "sync"), _kernel_threads),
    "forward": ("forward of a 10^6-node chain (yielding every 200 ops)", prepare_forward, None),
}


class Iterations:
    """``--trace``: the loop thread's CPU time as each iteration of the running loop started (``starts``; CPU
    time, so that a loaded machine's preemption is not counted), read by wrapping the loop's ``_run_once``
    (asyncio's own event loops; other loops are left alone and give no trace)."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def __enter__(self) -> Iterations:
        self._loop = asyncio.get_running_loop()
        run_once = getattr(self._loop, "_run_once", None)
        if run_once is not None:
            starts, clock = self.starts, time.thread_time

            def traced() -> None:
                starts.append(clock())
                run_once()
            self._loop._run_once = traced  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.__dict__.pop("_run_once", None)
        self.starts.append(time.thread_time())

    def worst(self, passes: list[tuple[float, int, float]]) -> dict[str, Any]:
        """The longest iteration (CPU ms) and the collector's passes that started in it (generation, CPU ms)."""
        spans = [(b - a, a, b) for a, b in zip(self.starts, self.starts[1:])]
        if not spans:
            return {"iteration_ms": 0.0, "passes": []}
        took, a, b = max(spans)
        return {"iteration_ms": round(took * 1e3, 2),
                "passes": [(generation, round(pause * 1e3, 3)) for at, generation, pause in passes if a <= at < b]}


async def measure(name: str, scale: float, collector: bool, trace: bool = False) -> dict[str, Any]:
    """One run of workload ``name``, the collector on or off from its preparation to its end; ``trace``:
    also the longest loop iteration and the collector's passes in it (``Iterations.worst``)."""
    _, prepare, around = WORKLOADS[name]
    gc.collect()
    if collector:
        gc.enable()
    else:
        gc.disable()
    try:
        with around() if around is not None else contextlib.nullcontext():
            run = prepare(scale)
            with GCPauses() as pauses, Iterations() if trace else contextlib.nullcontext() as iterations:
                async with CPUHeartbeat() as hb:
                    t0 = time.perf_counter()
                    result = await run()
                    took = time.perf_counter() - t0
            del run, result
    finally:
        gc.enable()
    out: dict[str, Any] = {"wall_ms": max(hb.lateness) * 1e3, "cpu_ms": hb.worst_cpu_ms(),
                           "gc_ms": max(pauses.pauses, default=0.0) * 1e3, "run_ms": took * 1e3}
    if trace:
        out["worst_iteration"] = iterations.worst(pauses.passes)
    return out


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    out = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        out[f"{key}_worst"] = round(max(values), 2)
        out[f"{key}_median"] = round(statistics.median(values), 2)
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    FrozenWhileBusy.enabled = not args.no_freeze
    results: dict[str, Any] = {}
    for name in args.only:
        per = {"gc_off": [], "gc_on": []}
        for _ in range(args.runs):
            per["gc_off"].append(await measure(name, args.scale, False))
            per["gc_on"].append(await measure(name, args.scale, True, args.trace))
            if args.trace:
                worst = per["gc_on"][-1].pop("worst_iteration")
                print(f"{name}, GC on: longest iteration {worst['iteration_ms']} ms (CPU), collector passes in it "
                      f"(generation, CPU ms): {worst['passes']}", flush=True)
        results[name] = {mode: summary(runs) for mode, runs in per.items()}
        print(f"{name}: {json.dumps(results[name])}", flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    lines = ["| workload | worst ms, GC off: worst / median of runs (cpu; wall) "
             "| worst ms, GC on (cpu; wall) | worst GC pause ms | run ms |",
             "| --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        off, on = r["gc_off"], r["gc_on"]
        lines.append(
            f"| {WORKLOADS[name][0]} | {off['cpu_ms_worst']:.1f} / {off['cpu_ms_median']:.1f} "
            f"({off['wall_ms_worst']:.1f} / {off['wall_ms_median']:.1f}) "
            f"| {on['cpu_ms_worst']:.1f} / {on['cpu_ms_median']:.1f} ({on['wall_ms_worst']:.1f} / "
            f"{on['wall_ms_median']:.1f}) | {on['gc_ms_worst']:.1f} / {on['gc_ms_median']:.1f} "
            f"| {on['run_ms_median']:.0f} |")
    return "\n".join(lines)


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown: {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    return names


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stalls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=_names, default=list(WORKLOADS), help="workloads, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="rounds; worst and median over them")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every workload's counts")
    parser.add_argument("--no-freeze", action="store_true", help="turn Note [Frozen while busy] off")
    parser.add_argument("--json", action="store_true", help="print the results as JSON, not a table")
    parser.add_argument("--trace", action="store_true",
                        help="per run with the collector on, print the longest loop iteration and the collector's "
                             "passes that started in it")
    arguments = parser.parse_args()
    outcome = asyncio.run(main(arguments))
    print(json.dumps(outcome, indent=1) if arguments.json else table(outcome))
