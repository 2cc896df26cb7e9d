"""W6: memory over a backward on large arrays: the graph's size after the
forward, the peak during backward, and how fast saved tensors are released
(the RSS at 25/50/75 % of the backward's duration)."""

from __future__ import annotations

from ..frameworks import Framework
from ..measure import steps
from .common import Outcome, Workload
from .w1_chain import chain_graph

MB = 2**20
SHAPE = (256, 256)


async def run(fw: Framework, n: int, repeats: int, warmup: int) -> Outcome:
    done = await steps(fw, chain_graph(n, SHAPE), repeats, warmup, memory=True)
    metrics: dict[str, list[float]] = {}
    for s in done:
        base, mem = s.rss_before, s.memory
        peak = (mem.peak(s.backward_start, s.backward_end) - base) / MB
        graph = (s.rss_recorded - base) / MB
        values = {"peak_mb": peak, "graph_mb": graph, "ratio": peak / graph}
        for p in (25, 50, 75):
            values[f"at{p}_mb"] = (mem.at(s.backward_start + p / 100 * s.backward_s) - base) / MB
        for key, value in values.items():
            metrics.setdefault(key, []).append(value)
    return Outcome(metrics, done[-1].check)


WORKLOAD = Workload(
    key="W6",
    title="memory",
    caption=f"N elementwise nodes (W1's ops) on a {SHAPE[0]}×{SHAPE[1]} float64 leaf: MB of RSS above the "
    "pre-forward baseline, sampled every ms",
    size_label="N",
    sizes=(2000,),
    quick_sizes=(300,),
    columns=(
        ("peak_mb", "backward peak MB"),
        ("graph_mb", "graph MB"),
        ("at25_mb", "at 25% MB"),
        ("at50_mb", "at 50% MB"),
        ("at75_mb", "at 75% MB"),
        ("ratio", "peak / graph"),
    ),
    run=run,
    fresh_process=True,
    max_repeats=3,
    # A fixed mmap threshold makes glibc return every freed array to the OS at
    # once, so RSS follows live memory instead of the allocator's high-water mark.
    env={"MALLOC_MMAP_THRESHOLD_": "131072"},
)
