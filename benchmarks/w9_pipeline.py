"""W9 pipeline: a 2-stage model of large matmuls on 2 workers, 8 micro-batches (issue 13).

``python -m benchmarks.w9_pipeline [--backend local|ray] [--repeats 5] [--size 1024]`` prints the
wall time of one training step (forward + backward of 8 micro-batches) three ways, each the
minimum of ``--repeats`` after one warm-up (the 2-core machine is shared and noisy):

* ``one process``: the same two stages as plain local modules, micro-batches one by one;
* ``cluster, one by one``: the stages on workers 0 and 1, each micro-batch's forward and
  backward awaited before the next starts;
* ``cluster, pipelined``: the same, all 8 micro-batches at once (``asyncio.gather``), so
  stage 0 works on micro-batch k+1 while stage 1 works on k, forward and backward.

BLAS runs one thread (the environment is set before numpy loads when run as a module), so
any overlap comes from the workers. Each stage is three ``size x size`` matmuls with tanh.
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import time  # noqa: E402
from typing import Any, Awaitable, Callable  # noqa: E402

import numpy as np  # noqa: E402

import asyncgrad as ag  # noqa: E402
from asyncgrad import distributed as dist  # noqa: E402

MICRO_BATCHES = 8


class Stage(ag.nn.Module):
    """Three square matmuls with tanh: about 3 * 2 * batch * size^2 flops forward."""

    def __init__(self, size: int, layers: int = 3) -> None:
        super().__init__()
        self.layers = ag.nn.Sequential(*(m for _ in range(layers) for m in (ag.nn.Linear(size, size), ag.nn.Tanh())))

    def forward(self, x):
        return self.layers(x)


async def _best(step: Callable[[], Awaitable[Any]], repeats: int) -> float:
    await step()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await step()
        times.append(time.perf_counter() - started)
    return min(times)


async def run(backend: str, repeats: int, size: int, batch: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    xs = [ag.tensor(rng.standard_normal((batch, size)).astype(np.float32)) for _ in range(MICRO_BATCHES)]
    local0, local1 = Stage(size), Stage(size)

    async def local_step() -> None:
        for x in xs:
            await local1(local0(x)).pow(2).mean().backward()

    results = {"one process": await _best(local_step, repeats)}
    async with dist.cluster(backend=backend, workers=2) as cluster:
        s0 = await cluster.remote(0, Stage, size)
        s1 = await cluster.remote(1, Stage, size)

        async def one(x: ag.Tensor) -> None:
            await (await s1(await s0(x))).pow(2).mean().backward()

        async def one_by_one() -> None:
            for x in xs:
                await one(x)

        async def pipelined() -> None:
            await asyncio.gather(*(one(x) for x in xs))

        results["cluster, one by one"] = await _best(one_by_one, repeats)
        results["cluster, pipelined"] = await _best(pipelined, repeats)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.backend, args.repeats, args.size, args.batch))
    base = results["one process"]
    print(f"W9 pipeline: 2 stages x 3 matmuls of {args.batch}x{args.size} @ {args.size}x{args.size}, "
          f"{MICRO_BATCHES} micro-batches, backend={args.backend}, cores={os.cpu_count()}, "
          f"min of {args.repeats}")
    for name, seconds in results.items():
        print(f"  {name:22s} {seconds * 1e3:9.1f} ms   {base / seconds:5.2f}x of one process")


if __name__ == "__main__":
    main()
