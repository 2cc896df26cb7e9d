"""W1: a long chain of tiny ops, where the engine's per-node cost is all there is.

`chain_graph` is also W5's (a million nodes) and W6's (on large arrays).
"""

from __future__ import annotations

import numpy as np

from ..frameworks import Framework, Graph, NumpyBackward
from ..measure import steps
from .common import Outcome, Workload

MUL, ADD = 1.0001, 0.0001


def chain_graph(n: int, shape: tuple[int, ...]) -> Graph:
    """n nodes alternating `y * MUL`, `y + ADD`, `tanh(y)` from one leaf, then a sum."""
    x = np.random.default_rng(1).uniform(-1.0, 1.0, shape)

    def build(ops, y):
        for i in range(n):
            if i % 3 == 0:
                y = y * MUL
            elif i % 3 == 1:
                y = y + ADD
            else:
                y = ops.tanh(y)
        return ops.sum(y)

    def numpy(x: np.ndarray) -> tuple[float, NumpyBackward]:
        saved = []  # tanh outputs, the only thing the backward needs
        y = x
        for i in range(n):
            if i % 3 == 0:
                y = y * MUL
            elif i % 3 == 1:
                y = y + ADD
            else:
                y = np.tanh(y)
                saved.append(y)

        def backward() -> list[np.ndarray]:
            g = np.ones_like(x)
            for i in reversed(range(n)):
                if i % 3 == 0:
                    g = g * MUL
                elif i % 3 == 2:
                    t = saved.pop()
                    g = g * (1.0 - t * t)
            return [g]

        return float(y.sum()), backward

    return Graph([x], [], build, numpy)


async def run(fw: Framework, n: int, repeats: int, warmup: int) -> Outcome:
    done = await steps(fw, chain_graph(n, (4,)), repeats, warmup)
    return Outcome(
        {
            "backward_us": [s.backward_s / n * 1e6 for s in done],
            "forward_us": [s.forward_s / n * 1e6 for s in done],
        },
        done[-1].check,
    )


WORKLOAD = Workload(
    key="W1",
    title="chain",
    caption="N tiny ops in a chain on a (4,) leaf: µs per node",
    size_label="N",
    sizes=(10**3, 10**4, 10**5),
    quick_sizes=(10**3,),
    columns=(("backward_us", "backward µs/node"), ("forward_us", "forward µs/node")),
    run=run,
)
