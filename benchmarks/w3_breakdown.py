"""Where W3's step goes, piece by piece: ``python -m benchmarks.w3_breakdown``.

W3 (benchmarks/workloads/w3_mlp.py: a 784-256-256-10 MLP, relu, softmax cross-entropy, float64, batch
64, fresh leaves) run by asyncgrad with every forward op, every backward node's ``apply`` and the
engine's time between them stamped (``time.perf_counter``), beside the workload's own numpy step
stamped kernel by kernel, in one process, the two alternating step by step after warm-up steps. Per
piece it prints the medians of both and asyncgrad's excess; then the totals: the matrix products
(BLAS, timed inside both steps), the rest of each forward op and backward node, and the engine (the
``backward()`` call up to the first node, the steps between nodes, the end after the last).

A forward op's row is the op's whole call (its Python and its kernels); a backward node's row is its
``apply`` (its formula and kernels; an AccumulateGrad's addition into ``.grad``). The stamps add a
wrapper call per op, node and product (well under a microsecond each), so the totals sit a little
above an unstamped step's. BLAS at one thread, as in the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # runner.THREAD_ENV
if "numpy" not in sys.modules:  # before numpy loads its BLAS (runner.py imports numpy: imported after)
    os.environ.update(THREAD_ENV)

import numpy as np  # noqa: E402

from .runner import THREAD_ENV as RUNNER_THREAD_ENV  # noqa: E402

assert THREAD_ENV == RUNNER_THREAD_ENV, "keep the thread settings of the workload runner"

FORWARD = ("mm1", "add1", "relu1", "mm2", "add2", "relu2", "mm3", "add3", "cross_entropy")
"""The forward's ops, in order: ``x @ w + b`` is two ops in both frameworks (matmul, then add)."""

BACKWARD = (
    ("NllLossBackward0 (log_softmax's too)", "loss"), ("AddBackward0 (b3)", "gb3"), ("AccumulateGrad b3", None),
    ("MmBackward0 (w3)", "mm3"), ("AccumulateGrad w3", None), ("ReluBackward0 (2)", "relu2"),
    ("AddBackward0 (b2)", "gb2"), ("AccumulateGrad b2", None), ("MmBackward0 (w2)", "mm2"),
    ("AccumulateGrad w2", None), ("ReluBackward0 (1)", "relu1"), ("AddBackward0 (b1)", "gb1"),
    ("AccumulateGrad b1", None), ("MmBackward0 (w1)", "mm1"), ("AccumulateGrad w1", None),
)
"""The backward's nodes in the order they run, each with the numpy step's matching piece (the loss is one
node: Note [cross_entropy is one node] in asyncgrad/ops/nn.py)."""


class Stamps:
    """The running step's stamps and product times (module-level hooks write here)."""

    def __init__(self) -> None:
        self.applies: list[tuple[float, float]] = []
        self.products = 0.0

    def clear(self) -> None:
        self.applies.clear()
        self.products = 0.0


def _instrument(stamps: Stamps) -> Callable[[], None]:
    """Stamp every node's apply and time every matrix product asyncgrad runs (forward: the device's
    ``xp.matmul``, numpy's; backward: the gradient products of devices/buffers.py); returns the
    function that puts everything back."""
    import asyncgrad  # noqa: F401  (every node class defined)
    from asyncgrad.devices import buffers
    from asyncgrad.graph.node import Node

    clock = time.perf_counter
    classes, stack = [], [Node]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "apply" in cls.__dict__:
            classes.append(cls)
    originals = [(cls, "apply", cls.__dict__["apply"]) for cls in classes]
    originals += [(np, "matmul", np.matmul), (buffers.BufferCache, "matmul", buffers.BufferCache.matmul)]
    for cls in classes:  # each class that defines its own apply
        def stamped(self: Any, grads: list, create_graph: bool, _apply: Any = cls.__dict__["apply"]) -> Any:
            start = clock()
            try:
                return _apply(self, grads, create_graph)
            finally:
                stamps.applies.append((start, clock()))
        cls.apply = stamped

    matmul = np.matmul

    def timed_matmul(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        out = matmul(*args, **kwargs)
        stamps.products += clock() - start
        return out

    np.matmul = timed_matmul  # the forward's dev.xp.matmul (numpy's module attribute)
    cache_matmul = buffers.BufferCache.matmul

    def timed_cache_matmul(self: Any, a: Any, b: Any) -> Any:
        before = stamps.products
        start = clock()
        out = cache_matmul(self, a, b)
        stamps.products = before + clock() - start  # a large product's np.matmul is counted once
        return out

    buffers.BufferCache.matmul = timed_cache_matmul

    def undo() -> None:
        for owner, name, value in originals:
            setattr(owner, name, value)

    return undo


def _asyncgrad_step(stamps: Stamps) -> Any:
    import asyncgrad as ag

    from .frameworks import Asyncgrad
    from .workloads.w3_mlp import mlp_graph

    Asyncgrad()  # the runner's settings (worker threads)
    graph = mlp_graph(64)
    clock = time.perf_counter
    cross_entropy = ag.nn.functional.cross_entropy

    async def step() -> dict[str, float]:
        w1, b1, w2, b2, w3, b3 = [ag.tensor(a, requires_grad=True) for a in graph.params]  # untimed, as in the runner
        x, target = [ag.from_numpy(a) for a in graph.data]
        stamps.clear()
        t = [clock()]
        z = x @ w1
        t.append(clock())
        z = z + b1
        t.append(clock())
        h = z.relu()
        t.append(clock())
        z = h @ w2
        t.append(clock())
        z = z + b2
        t.append(clock())
        h = z.relu()
        t.append(clock())
        z = h @ w3
        t.append(clock())
        z = z + b3
        t.append(clock())
        loss = cross_entropy(z, target)
        t.append(clock())
        forward_products = stamps.products
        stamps.products = 0.0
        start = clock()
        await loss.backward()
        end = clock()
        row = {name: t[i + 1] - t[i] for i, name in enumerate(FORWARD)}
        applies = stamps.applies
        if len(applies) != len(BACKWARD):
            raise RuntimeError(f"expected {len(BACKWARD)} backward nodes, ran {len(applies)}")
        for (name, _), (a, b) in zip(BACKWARD, applies):
            row[name] = b - a
        row["engine: backward() call to the first node"] = applies[0][0] - start
        row["engine: between nodes"] = sum(applies[i + 1][0] - applies[i][1] for i in range(len(applies) - 1))
        row["engine: after the last node"] = end - applies[-1][1]
        row["products (forward)"] = forward_products
        row["products (backward)"] = stamps.products
        return row

    return step


def _numpy_step() -> Any:
    """The workload's numpy step (w3_mlp.py's ``numpy``), stamped kernel by kernel."""
    from .workloads.w3_mlp import mlp_graph

    graph = mlp_graph(64)
    clock = time.perf_counter
    batch = 64
    rows = np.arange(batch)

    async def step() -> dict[str, float]:
        w1, b1, w2, b2, w3, b3 = [p.copy() for p in graph.params]  # fresh leaves, untimed
        x, target = graph.data
        products = 0.0
        t = [clock()]
        z1 = x @ w1
        t.append(clock())
        z1 = z1 + b1
        t.append(clock())
        h1 = np.maximum(z1, 0.0)
        t.append(clock())
        z2 = h1 @ w2
        t.append(clock())
        z2 = z2 + b2
        t.append(clock())
        h2 = np.maximum(z2, 0.0)
        t.append(clock())
        z3 = h2 @ w3
        t.append(clock())
        z3 = z3 + b3
        t.append(clock())
        m = z3.max(axis=1, keepdims=True)
        e = np.exp(z3 - m)
        s = e.sum(axis=1, keepdims=True)
        float(np.mean(m[:, 0] + np.log(s[:, 0]) - z3[rows, target]))
        t.append(clock())
        row = {name: t[i + 1] - t[i] for i, name in enumerate(FORWARD)}
        products += row["mm1"] + row["mm2"] + row["mm3"]
        row["products (forward)"] = products
        b = [clock()]
        d3 = e / s
        d3[rows, target] -= 1.0
        d3 /= batch
        b.append(clock())
        d3.sum(0)
        b.append(clock())
        h2.T @ d3
        d2 = d3 @ w3.T
        b.append(clock())
        d2 = d2 * (z2 > 0)
        b.append(clock())
        d2.sum(0)
        b.append(clock())
        h1.T @ d2
        d1 = d2 @ w2.T
        b.append(clock())
        d1 = d1 * (z1 > 0)
        b.append(clock())
        d1.sum(0)
        b.append(clock())
        x.T @ d1
        b.append(clock())
        for i, name in enumerate(("loss", "gb3", "mm3", "relu2", "gb2", "mm2", "relu1", "gb1", "mm1")):
            row["bwd " + name] = b[i + 1] - b[i]
        row["products (backward)"] = row["bwd mm3"] + row["bwd mm2"] + row["bwd mm1"]
        return row

    return step


async def measure(steps: int, warmup: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    stamps = Stamps()
    undo = _instrument(stamps)
    try:
        runs = {"asyncgrad": _asyncgrad_step(stamps), "numpy": _numpy_step()}
        rows: dict[str, list] = {name: [] for name in runs}
        for i in range(warmup + steps):
            for name in runs if i % 2 else list(runs)[::-1]:
                row = await runs[name]()
                if i >= warmup:
                    rows[name].append(row)
    finally:
        undo()
    return tuple({key: np.array([r[key] for r in rows[name]]) * 1e6 for key in rows[name][0]}  # type: ignore[return-value]
                 for name in runs)


def report(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> dict[str, float]:
    """Print the table; return asyncgrad's medians by piece (µs)."""
    med = {key: float(np.median(v)) for key, v in ours.items()}
    ref = {key: float(np.median(v)) for key, v in theirs.items()}
    print(f"{'piece':48s} {'asyncgrad µs':>12s} {'numpy µs':>9s} {'excess':>8s}")
    print("forward")
    for name in FORWARD:
        print(f"  {name:46s} {med[name]:12.1f} {ref[name]:9.1f} {med[name] - ref[name]:8.1f}")
    print("backward (numpy: the same gradient's kernels)")
    for name, theirs_name in BACKWARD:
        other = ref["bwd " + theirs_name] if theirs_name else 0.0
        print(f"  {name:46s} {med[name]:12.1f} {other:9.1f} {med[name] - other:8.1f}")
    engine = [key for key in med if key.startswith("engine:")]
    for key in engine:
        print(f"  {key:46s} {med[key]:12.1f} {0.0:9.1f} {med[key]:8.1f}")
    products = med["products (forward)"] + med["products (backward)"]
    ref_products = ref["products (forward)"] + ref["products (backward)"]
    forward = sum(med[name] for name in FORWARD)
    nodes = sum(med[name] for name, _ in BACKWARD)
    engine_total = sum(med[key] for key in engine)
    ref_forward = sum(ref[name] for name in FORWARD)
    ref_backward = sum(ref["bwd " + n] for _, n in BACKWARD if n)
    print("totals (sums of medians)")
    rows = [
        ("matrix products (BLAS)", products, ref_products),
        ("forward ops, less their products", forward - med["products (forward)"],
         ref_forward - ref["products (forward)"]),
        ("backward nodes, less their products", nodes - med["products (backward)"],
         ref_backward - ref["products (backward)"]),
        ("engine", engine_total, 0.0),
        ("step", forward + nodes + engine_total, ref_forward + ref_backward),
    ]
    for name, a, b in rows:
        print(f"  {name:46s} {a:12.1f} {b:9.1f} {a - b:8.1f}")
    return med


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.w3_breakdown", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per framework (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    args = parser.parse_args(argv)
    print(f"W3 step, medians of {args.steps} steps after {args.warmup}, asyncgrad and numpy alternating; "
          f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', '?')}")
    ours, theirs = asyncio.run(measure(args.steps, args.warmup))
    return report(ours, theirs)


if __name__ == "__main__":
    main()
