"""W3 and W8 steps of asyncgrad and torch interleaved in one process, timed in CPU time.

``python -m benchmarks.interleaved --only W3,W8``: the runner (``python -m benchmarks``) times each
framework in its own process by the wall clock, which on a shared machine moves by more than the
changes being judged, and whose heap settles differently from process to process. Here both
frameworks' steps alternate in one process (order swapped every step), each timed with
``time.process_time`` (the CPU time of every thread of the process, so work handed to kernel
threads is counted), after warm-up steps; the medians and tenth percentiles of the timed steps and
asyncgrad's ratio to torch are printed. W3 is the runner's step (fresh leaves, forward and
backward, float64), with the workload's hand-written numpy step beside them (no graph at all: the
floor a Python autograd's step can approach, as a ratio to torch too); W8 the runner's too
(persistent parameters, forward, backward, SGD with momentum, float32, after one float64 step as the
runner's check makes first).

``--ab kept-columns`` interleaves asyncgrad with itself instead, W8 with its convolutions keeping
their columns (Note [A convolution keeps its columns] in asyncgrad/ops/conv.py) against not.
BLAS at one thread, as in the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # runner.THREAD_ENV
if "numpy" not in sys.modules:  # before numpy and torch load their BLAS (runner.py imports numpy: imported after)
    os.environ.update(THREAD_ENV)

import time  # noqa: E402

import numpy as np  # noqa: E402

from .runner import THREAD_ENV as RUNNER_THREAD_ENV  # noqa: E402

assert THREAD_ENV == RUNNER_THREAD_ENV, "keep the thread settings of the workload runner"

WORKLOADS = ("W3", "W8")


def _w3_steps() -> dict[str, Any]:
    from .frameworks import Asyncgrad, Numpy, Torch
    from .workloads.w3_mlp import mlp_graph

    graph = mlp_graph(64)

    def make(fw: Any) -> Any:
        async def step() -> tuple[float, ...]:
            leaves = fw.leaves(graph)  # untimed, as in the runner
            start = time.process_time()
            rec = fw.forward(graph, leaves)
            middle = time.process_time()
            pending = fw.backward(rec)
            if pending is not None:
                await pending
            return middle - start, time.process_time() - middle

        return step

    return {"asyncgrad": make(Asyncgrad()), "torch": make(Torch()), "numpy": make(Numpy())}


async def _w8_steps(frameworks: tuple[str, ...]) -> dict[str, Any]:
    from .frameworks import Asyncgrad
    from .workloads import w8_lenet as w8

    Asyncgrad()  # the runner's worker threads for asyncgrad
    arrays, x_host, target_host = w8.lenet_arrays(32)
    steps = {}
    for name in frameworks:
        impl = w8._Torch(None) if name == "torch" else w8._Asyncgrad(None)
        if name == "torch":
            impl.torch.set_num_threads(1)
        params, x, target, _ = impl.setup(arrays, x_host, target_host, "float64")
        await impl.backward(w8.forward(impl.F, x, target, *params))  # the runner's float64 check step
        params, x, target, optimizer = impl.setup(arrays, x_host, target_host, "float32")

        def make(impl: Any, params: list, x: Any, target: Any, optimizer: Any) -> Any:
            async def step() -> tuple[float, ...]:
                start = time.process_time()
                loss = w8.forward(impl.F, x, target, *params)
                forward = time.process_time()
                await impl.backward(loss)
                backward = time.process_time()
                optimizer.step()
                optimizer.zero_grad()
                return forward - start, backward - forward, time.process_time() - backward

            return step

        steps[name] = make(impl, params, x, target, optimizer)
    return steps


def _kept_columns(step: Any, keep: bool) -> Any:
    from asyncgrad.ops import conv

    limit = conv.KEPT_COLUMNS_BYTES

    async def switched() -> tuple[float, ...]:
        conv.KEPT_COLUMNS_BYTES = limit if keep else -1
        try:
            return await step()
        finally:
            conv.KEPT_COLUMNS_BYTES = limit

    return switched


async def measure(workload: str, steps: int, warmup: int, ab: str | None = None) -> dict[str, np.ndarray]:
    """Per framework (or variant), an array of per-step CPU seconds, one column per phase."""
    if workload == "W3":
        if ab is not None:
            raise SystemExit("--ab kept-columns is a W8 comparison")
        runs = _w3_steps()
    elif ab is None:
        runs = await _w8_steps(("asyncgrad", "torch"))
    else:
        base = (await _w8_steps(("asyncgrad",)))["asyncgrad"]
        runs = {"columns kept": _kept_columns(base, True), "columns copied again": _kept_columns(base, False)}
    names = list(runs)
    times: dict[str, list] = {name: [] for name in names}
    for i in range(warmup + steps):
        for name in names if i % 2 else names[::-1]:
            phases = await runs[name]()
            if i >= warmup:
                times[name].append(phases)
    return {name: np.asarray(t) for name, t in times.items()}


def report(workload: str, times: dict[str, np.ndarray]) -> dict[str, float]:
    phases = ("forward", "backward", "update")
    medians = {}
    for name, t in times.items():
        total = t.sum(axis=1) * 1e3
        medians[name] = float(np.median(total))
        parts = ", ".join(f"{phase} {np.median(t[:, j]) * 1e3:.3f}" for j, phase in enumerate(phases[:t.shape[1]]))
        print(f"  {workload} {name:22s} step median {medians[name]:.3f} ms, p10 {np.percentile(total, 10):.3f} "
              f"({parts})")
    first, second, *others = list(medians)
    print(f"  {workload} {first} / {second}: {medians[first] / medians[second]:.3f} (medians)")
    for other in others:
        print(f"  {workload} {other} / {second}: {medians[other] / medians[second]:.3f} (medians)")
    return medians


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.interleaved", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="W3,W8", help="workloads, comma-separated (W3, W8)")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per framework (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    parser.add_argument("--ab", choices=("kept-columns",), help="asyncgrad against itself instead (W8)")
    args = parser.parse_args(argv)
    workloads = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    print(f"CPU time per step (time.process_time), {args.steps} steps after {args.warmup}, interleaved; "
          f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', '?')}")
    results = {}
    for workload in workloads:
        times = asyncio.run(measure(workload, args.steps, args.warmup, args.ab))
        results[workload] = report(workload, times)
    return results


if __name__ == "__main__":
    main()
