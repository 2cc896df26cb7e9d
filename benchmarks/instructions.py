"""`python -m benchmarks.instructions W1`: instructions per node under callgrind, forward and backward
(`... W3`: per MLP step, see below).

Wall-clock timings on a shared machine move by more than the effects a hot-path change has; an
instruction count does not. This runs a workload's asyncgrad graph in child processes under
``valgrind --tool=callgrind`` at N and 2N nodes and takes differences, so that start-up, imports
and warm-up cancel out:

* forward per node  = (F(2N) - F(N)) / N, where F(n) runs the forward of n nodes;
* backward per node = ((FB(2N) - F(2N)) - (FB(N) - F(N))) / N, where FB(n) also runs the backward.

Each is measured with the garbage collector on (the default thresholds) and off (``gc.disable()``
after the imports). The engine's clock-driven yields (Note [Reading the clock] in engine/worker.py,
Note [One budget per loop] in engine/budget.py) are switched off, since they depend on time and
valgrind runs about 50x slower. The figures quoted in benchmarks/HISTORY.md were taken this way.

W3 (the MLP step of benchmarks/workloads/w3_mlp.py) is counted per step the same way, N and 2N
steps after warm-up steps, each step with fresh leaves (made before the counted region starts to
matter: all of them before the first step); ``--nodes`` is then the smaller run's steps (default
20). ``--tiny`` takes W3's graph with 8-8-8-4 layers and a batch of 2, so the count is almost only
Python's: the figure a change to the ops' or the engine's per-call cost moves.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("W1", "W3")  # W1: its node count is its size; W3: counted per step
PHASES = ("forward", "both")
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=WORKLOADS, help="the workload to count")
    parser.add_argument("--nodes", type=int, default=None,
                        help="N: the smaller run's nodes (W1, default 3000) or steps (W3, default 20)")
    parser.add_argument("--tiny", action="store_true", help="W3 with 8-8-8-4 layers and a batch of 2")
    parser.add_argument("--gc", choices=("both", "on", "off"), default="both",
                        help="count with the collector on, off, or both (default)")
    parser.add_argument("--valgrind", default="valgrind", help="the valgrind executable")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--child", nargs=3, metavar=("PHASE", "N", "GC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nodes is None:
        args.nodes = 3000 if args.workload == "W1" else 20
    if args.nodes < 3:
        parser.error("--nodes must be at least 3")
    if args.tiny and args.workload != "W3":
        parser.error("--tiny is W3's")
    return args


def _child(workload: str, phase: str, n: int, collect: bool, tiny: bool = False) -> None:
    """W1: build the workload's graph of ``n`` nodes once (and run its backward for ``both``).
    W3: run ``n`` steps' forwards (and backwards for ``both``), each on fresh leaves."""
    from asyncgrad.engine import budget, worker

    from .frameworks import Asyncgrad
    from .workloads import w3_mlp
    from .workloads.w1_chain import chain_graph

    worker.CLOCK_BUDGET = float("inf")  # no clock reads, no time-driven yields
    budget.YIELD_AFTER_S = float("inf")  # nor the loop budget's (Note [One budget per loop])
    fw = Asyncgrad()

    if workload == "W3":
        if tiny:
            w3_mlp.LAYERS = (8, 8, 8, 4)
        mlp = w3_mlp.mlp_graph(2 if tiny else 64)

        async def steps() -> None:
            for _ in range(3):  # first calls fill caches the same way at N and 2N
                await fw.backward(fw.forward(mlp, fw.leaves(mlp)))
            leaves = [fw.leaves(mlp) for _ in range(n)]
            if not collect:
                gc.disable()
            for i in range(n):
                rec = fw.forward(mlp, leaves[i])
                if phase == "both":
                    await fw.backward(rec)
                rec = None

        asyncio.run(steps())
        return

    async def main() -> None:
        warm = chain_graph(30, (4,))  # first calls fill caches the same way at N and 2N
        rec = fw.forward(warm, fw.leaves(warm))
        await fw.backward(rec)
        graph = chain_graph(n, (4,))
        leaves = fw.leaves(graph)
        if not collect:
            gc.disable()
        rec = fw.forward(graph, leaves)
        if phase == "both":
            await fw.backward(rec)

    asyncio.run(main())


def _command(args: argparse.Namespace, phase: str, n: int, collect: bool, out: Path) -> list[str]:
    return [args.valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
            "benchmarks.instructions", args.workload, *(["--tiny"] if args.tiny else []),
            "--child", phase, str(n), "on" if collect else "off"]


def _count(command: list[str]) -> int:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found[-1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        phase, n, collect = args.child
        _child(args.workload, phase, int(n), collect == "on", args.tiny)
        return 0
    settings = {"both": (True, False), "on": (True,), "off": (False,)}[args.gc]
    n = args.nodes
    if not args.dry_run and shutil.which(args.valgrind) is None:
        print(f"{args.valgrind} not found: install valgrind to count instructions", file=sys.stderr)
        return 2
    unit = "node" if args.workload == "W1" else "step"
    title = args.workload + (" (tiny: 8-8-8-4, batch 2)" if args.tiny else "")
    print(f"{title}, N={n:,} against 2N={2 * n:,}: instructions per {unit} (callgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        for collect in settings:
            counts = {}
            for phase in PHASES:
                for size in (n, 2 * n):
                    command = _command(args, phase, size, collect, Path(tmp) / f"{phase}.{size}.out")
                    if args.dry_run:
                        print(" ".join(command))
                        continue
                    counts[phase, size] = _count(command)
            if args.dry_run:
                continue
            forward = (counts["forward", 2 * n] - counts["forward", n]) / n
            both = (counts["both", 2 * n] - counts["both", n]) / n
            label = "with GC" if collect else "without GC"
            print(f"  {label:<11} forward {forward:>9,.0f}   backward {both - forward:>9,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
