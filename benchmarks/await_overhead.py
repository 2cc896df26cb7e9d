"""What the front door and the profiler cost on the hot path: source trees compared in one run.

    python -m benchmarks.await_overhead [--repeats 7] [--trees LABEL=PATH ...]

``backward()`` returns an ``EngineCall`` (Note [Await or not] in graph/awaitable.py) and the
engine consults the profiler's context variable per graph task and per node (Note [Recording
is per task] in profiler.py). Both costs are per call and per node, so two workloads show them:

* W1 (``benchmarks/workloads/w1_chain.py``): a chain of N tiny ops on a (4,) leaf, backward in
  µs per node: the per-node cost.
* a tiny backward (3 nodes on a (4,) leaf) called again and again: µs per ``await backward()``,
  where the wrapper's per-call cost is all there is besides the engine's fixed cost;
* the front door alone: ``api._call`` around a trivial coroutine, awaited 100,000 times
  without yielding (trees from before ``EngineCall``: none).

Within a process each figure is the fastest of its batches (W1: of 3 backward passes).

Each tree is measured in its own subprocess (``PYTHONPATH`` puts it first), the trees
alternating round by round so that load on a shared machine spreads over all of them; the
table gives median (min–max) over the rounds. ``--profiler`` adds the last tree again with
``ag.profiler.trace()`` active around both workloads, to set beside it off.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import asyncio, gc, json, sys, time
    import numpy as np
    import asyncgrad as ag

    N, CALLS, TRACE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "on"
    assert ag.__file__.startswith(sys.argv[4]), (ag.__file__, sys.argv[4])

    def chain(x, n):  # W1's graph (benchmarks/workloads/w1_chain.py): y*MUL, y+ADD, tanh, ..., sum
        y = x
        for i in range(n):
            y = y * 1.0001 if i % 3 == 0 else (y + 0.0001 if i % 3 == 1 else y.tanh())
        return y.sum()

    async def w1_backward_us(x):
        best = []
        for _ in range(3):
            loss = chain(x, N)
            gc.collect()
            start = time.perf_counter()
            await loss.backward()
            best.append((time.perf_counter() - start) / N * 1e6)
            x.grad = None
        return min(best)

    async def call_us(x):
        loss = (x * 2.0).tanh().sum()
        for _ in range(200):
            await loss.backward(retain_graph=True)
        batches = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(CALLS):
                await loss.backward(retain_graph=True)
            batches.append((time.perf_counter() - start) / CALLS * 1e6)
        return min(batches)

    async def wrapper_us():
        # The front door alone: a trivial coroutine through api._call, 100,000 times without yielding.
        from asyncgrad.autograd import api
        if not hasattr(api, "_call"):
            return None  # a tree from before EngineCall

        async def trivial():
            return None

        best = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(100_000):
                await api._call("backward", trivial, (), 1)
            best.append((time.perf_counter() - start) / 100_000 * 1e6)
        return min(best)

    async def main():
        x = ag.tensor(np.random.default_rng(1).uniform(-1, 1, 4), requires_grad=True)
        await w1_backward_us(x)  # warm-up
        return {"w1_us_per_node": await w1_backward_us(x), "call_us": await call_us(x),
                "wrapper_us": await wrapper_us()}

    async def measured():
        if not TRACE:
            return await main()
        with ag.profiler.trace() as prof:
            result = await main()
        assert prof.events
        return result

    print(json.dumps(asyncio.run(measured())))
""")


def measure(tree: str, n: int, calls: int, trace: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(n), str(calls), trace, tree], env=env,
                          capture_output=True, text=True, check=True, cwd="/")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="rounds; each tree once per round")
    parser.add_argument("--n", type=int, default=10000, help="W1's chain length")
    parser.add_argument("--calls", type=int, default=1000,
                        help="tiny backward calls per batch (5 batches a round, the fastest kept)")
    parser.add_argument("--trees", nargs="*", default=[f"current={ROOT}"], metavar="LABEL=PATH",
                        help="source trees to compare (a git worktree of an older commit, say)")
    parser.add_argument("--profiler", action="store_true", help="also the last tree with a trace active")
    args = parser.parse_args(argv)
    runs = [(label, path, "off") for label, path in (t.split("=", 1) for t in args.trees)]
    if args.profiler:
        runs.append((runs[-1][0] + " traced", runs[-1][1], "on"))
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in runs}
    for _ in range(args.repeats):
        for label, path, trace in runs:
            results[label].append(measure(path, args.n, args.calls, trace))
    print(f"W1 N={args.n} backward µs/node, and µs per 'await backward()' of a 3-node graph; median (min–max) of "
          f"{args.repeats} rounds, trees alternating, each round a fresh process")
    print("| tree | W1 backward µs/node | tiny backward µs/call | front door alone µs/call |\n|---|---|---|---|")
    for label, rows in results.items():
        cells = []
        for key in ("w1_us_per_node", "call_us", "wrapper_us"):
            values = [r[key] for r in rows if r.get(key) is not None]
            cells.append(f"{statistics.median(values):.3g} ({min(values):.3g}–{max(values):.3g})" if values else "—")
        print(f"| {label} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
