"""W4: independent branches of large matmuls: the case where an engine that
keeps several kernels in flight can beat a serial one. Compared with the
backward's matmuls timed alone in numpy, and half that (the 2-core limit)."""

from __future__ import annotations

import time

import numpy as np

from ..frameworks import Framework, Graph, NumpyBackward
from ..measure import steps
from .common import Outcome, Workload, pairwise_sum

BRANCHES, DEPTH = 8, 4


def branches_graph(n: int) -> Graph:
    """BRANCHES chains of DEPTH (n, n) matmuls from a shared leaf x, summed; all weights require grad."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, n))
    ws = [rng.standard_normal((n, n)) / np.sqrt(n) for _ in range(BRANCHES * DEPTH)]

    def build(ops, x, *ws):
        outs = []
        for b in range(BRANCHES):
            y = x
            for w in ws[b * DEPTH : (b + 1) * DEPTH]:
                y = y @ w
            outs.append(y)
        return ops.sum(pairwise_sum(outs))

    def numpy(x: np.ndarray, *ws: np.ndarray) -> tuple[float, NumpyBackward]:
        inputs = []  # inputs[b][j]: the left operand of branch b's j-th matmul
        outs = []
        for b in range(BRANCHES):
            y, ins = x, []
            for w in ws[b * DEPTH : (b + 1) * DEPTH]:
                ins.append(y)
                y = y @ w
            inputs.append(ins)
            outs.append(y)
        loss = float(pairwise_sum(outs).sum())

        def backward() -> list[np.ndarray]:
            gx, gws = np.zeros_like(x), [None] * len(ws)
            for b in range(BRANCHES):
                g = np.ones_like(x)
                for j in reversed(range(DEPTH)):
                    gws[b * DEPTH + j] = inputs[b][j].T @ g
                    g = g @ ws[b * DEPTH + j].T
                gx += g
            return [gx, *gws]

        return loss, backward

    return Graph([x, *ws], [], build, numpy)


def kernels_alone_s(graph: Graph) -> float:
    """The backward's 2 * BRANCHES * DEPTH matmuls, serially, with nothing around them."""
    x, *ws = graph.params
    g = np.ones_like(x)
    t0 = time.perf_counter()
    for w in ws:
        x.T @ g
        g @ w.T
    return time.perf_counter() - t0


async def run(fw: Framework, n: int, repeats: int, warmup: int) -> Outcome:
    graph = branches_graph(n)
    done = await steps(fw, graph, repeats, warmup)
    metrics = {"backward_ms": [s.backward_s * 1e3 for s in done], "forward_ms": [s.forward_s * 1e3 for s in done]}
    if fw.name == "numpy":
        alone = [kernels_alone_s(graph) * 1e3 for _ in range(repeats)]
        metrics |= {"kernels_ms": alone, "limit_ms": [t / 2 for t in alone]}
    return Outcome(metrics, done[-1].check)


WORKLOAD = Workload(
    key="W4",
    title="matmul branches",
    caption=f"{BRANCHES} branches of {DEPTH} chained n×n matmuls from a shared leaf: ms "
    "(numpy row: the backward's matmuls alone, serially, and the 2-core limit, alone / 2)",
    size_label="n",
    sizes=(512,),
    quick_sizes=(256,),
    columns=(
        ("backward_ms", "backward ms"),
        ("forward_ms", "forward ms"),
        ("kernels_ms", "matmuls alone ms"),
        ("limit_ms", "2-core limit ms"),
    ),
    run=run,
)
