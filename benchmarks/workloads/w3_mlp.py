"""W3: one MLP training step (784-256-256-10, relu, softmax cross-entropy):
a short graph of mid-sized kernels, the everyday case."""

from __future__ import annotations

import itertools

import numpy as np

from ..frameworks import Framework, Graph, NumpyBackward
from ..measure import steps
from .common import Outcome, Workload

LAYERS = (784, 256, 256, 10)


def mlp_graph(batch: int) -> Graph:
    rng = np.random.default_rng(3)
    params = []
    for fan_in, fan_out in itertools.pairwise(LAYERS):
        params += [rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in), 0.01 * rng.standard_normal(fan_out)]
    x = rng.standard_normal((batch, LAYERS[0]))
    target = rng.integers(0, LAYERS[-1], batch).astype(np.int64)

    def build(ops, w1, b1, w2, b2, w3, b3, x, target):
        h = ops.relu(ops.affine(x, w1, b1))
        h = ops.relu(ops.affine(h, w2, b2))
        return ops.cross_entropy(ops.affine(h, w3, b3), target)

    def numpy(w1, b1, w2, b2, w3, b3, x, target) -> tuple[float, NumpyBackward]:
        z1 = x @ w1 + b1
        h1 = np.maximum(z1, 0.0)
        z2 = h1 @ w2 + b2
        h2 = np.maximum(z2, 0.0)
        z3 = h2 @ w3 + b3
        rows = np.arange(batch)
        m = z3.max(axis=1, keepdims=True)
        e = np.exp(z3 - m)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(m[:, 0] + np.log(s[:, 0]) - z3[rows, target]))

        def backward() -> list[np.ndarray]:
            d3 = e / s
            d3[rows, target] -= 1.0
            d3 /= batch
            d2 = (d3 @ w3.T) * (z2 > 0)
            d1 = (d2 @ w2.T) * (z1 > 0)
            return [x.T @ d1, d1.sum(0), h1.T @ d2, d2.sum(0), h2.T @ d3, d3.sum(0)]

        return loss, backward

    return Graph(params, [x, target], build, numpy)


async def run(fw: Framework, batch: int, repeats: int, warmup: int) -> Outcome:
    done = await steps(fw, mlp_graph(batch), repeats, warmup)
    return Outcome(
        {
            "step_ms": [(s.forward_s + s.backward_s) * 1e3 for s in done],
            "forward_ms": [s.forward_s * 1e3 for s in done],
            "backward_ms": [s.backward_s * 1e3 for s in done],
        },
        done[-1].check,
    )


WORKLOAD = Workload(
    key="W3",
    title="MLP step",
    caption="784-256-256-10 MLP, relu, softmax cross-entropy: ms per step",
    size_label="batch",
    sizes=(64,),
    quick_sizes=(64,),
    columns=(("step_ms", "fwd+bwd ms"), ("forward_ms", "forward ms"), ("backward_ms", "backward ms")),
    run=run,
)
