"""W2: K short branches from one leaf, summed by an add tree: a wide fan-in,
where the engine's dependency counting and input-buffer accumulation dominate."""

from __future__ import annotations

import numpy as np

from ..frameworks import Framework, Graph, NumpyBackward
from ..measure import steps
from .common import Outcome, Workload, pairwise_sum


def fanin_graph(k: int) -> Graph:
    """tanh(x * a_k + c_k) for K python-float pairs, pairwise-summed, then a sum."""
    x = np.random.default_rng(2).uniform(-1.0, 1.0, (4,))
    coeffs = [(0.5 + j / k, (j % 10) / 10 - 0.45) for j in range(k)]

    def build(ops, x):
        return ops.sum(pairwise_sum([ops.tanh(x * a + c) for a, c in coeffs]))

    def numpy(x: np.ndarray) -> tuple[float, NumpyBackward]:
        ts = [np.tanh(x * a + c) for a, c in coeffs]
        loss = float(pairwise_sum(ts).sum())

        def backward() -> list[np.ndarray]:
            g = np.zeros_like(x)
            for (a, _), t in zip(coeffs, ts, strict=True):
                g += (1.0 - t * t) * a
            return [g]

        return loss, backward

    return Graph([x], [], build, numpy)


async def run(fw: Framework, k: int, repeats: int, warmup: int) -> Outcome:
    done = await steps(fw, fanin_graph(k), repeats, warmup)
    nodes = 3 * k + k - 1  # x*a, +c, tanh per branch; the add tree
    return Outcome(
        {
            "backward_us": [s.backward_s / nodes * 1e6 for s in done],
            "forward_us": [s.forward_s / nodes * 1e6 for s in done],
        },
        done[-1].check,
    )


WORKLOAD = Workload(
    key="W2",
    title="fan-in",
    caption="K branches tanh(x·a+c) on one (4,) leaf, add tree: µs per node (4K-1 nodes)",
    size_label="K",
    sizes=(10**3, 10**4),
    quick_sizes=(10**3,),
    columns=(("backward_us", "backward µs/node"), ("forward_us", "forward µs/node")),
    run=run,
)
