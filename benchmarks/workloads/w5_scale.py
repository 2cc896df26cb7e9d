"""W5: W1's chain at a million nodes: whether recording, backward and deletion
scale linearly (and without recursion), and what one node costs in memory."""

from __future__ import annotations

from ..frameworks import Framework
from ..measure import steps
from .common import Outcome, Workload
from .w1_chain import chain_graph

MB = 2**20


async def run(fw: Framework, n: int, repeats: int, warmup: int) -> Outcome:
    done = await steps(fw, chain_graph(n, (4,)), repeats, warmup, memory=True)
    return Outcome(
        {
            "forward_s": [s.forward_s for s in done],
            "backward_s": [s.backward_s for s in done],
            "delete_s": [s.delete_s for s in done],
            "bytes_per_node": [(s.rss_recorded - s.rss_before) / n for s in done],
            "peak_rss_mb": [s.memory.peak() / MB for s in done],
        },
        done[-1].check,
    )


WORKLOAD = Workload(
    key="W5",
    title="scale",
    caption="W1's chain with N nodes: seconds; bytes/node = RSS growth over the forward / N; "
    "peak RSS of the whole process (interpreter and imports included)",
    size_label="N",
    sizes=(10**6,),
    quick_sizes=(10**5,),
    columns=(
        ("backward_s", "backward s"),
        ("forward_s", "forward s"),
        ("delete_s", "delete s"),
        ("bytes_per_node", "bytes/node"),
        ("peak_rss_mb", "peak RSS MB"),
    ),
    run=run,
    fresh_process=True,
    max_repeats=3,
)
