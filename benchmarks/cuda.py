"""`python -m benchmarks.cuda`: W1 and W4 on ``cuda:0`` (needs CuPy and a GPU).

W1: a chain of tiny ops on a (4,) leaf; backward µs per node on ``cuda:0`` against ``cpu`` in the
same run (the engine's per-node overhead on a GPU device: streams, events, CuPy launches).
W4: 8 independent branches of 4 chained (n, n) matmuls from one leaf; the backward's wall time
against the floor, the same backward written by hand in CuPy on one stream (and torch's CUDA
backward where torch with CUDA is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import numpy as np

import asyncgrad as ag

from .workloads.common import pairwise_sum
from .workloads.w1_chain import ADD, MUL
from .workloads.w4_branches import BRANCHES, DEPTH


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import cupy

        cupy.cuda.Device(int(device.split(":")[1])).synchronize()


async def w1_backward_us(device: str, n: int, repeats: int) -> float:
    """Median backward µs per node of W1's chain on ``device``."""
    times = []
    for _ in range(repeats + 1):
        x = ag.tensor(np.random.default_rng(1).uniform(-1, 1, 4), device=device, requires_grad=True)
        y = x
        for i in range(n):
            y = y * MUL if i % 3 == 0 else (y + ADD if i % 3 == 1 else y.tanh())
        loss = y.sum()
        _sync(device)
        t0 = time.perf_counter()
        await loss.backward()
        _sync(device)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times[1:])


def w1_floor_us(device: str, n: int, repeats: int) -> float:
    """W1's backward written by hand on the device's arrays (numpy or CuPy): the kernels alone, µs per node."""
    xp = np
    if device.startswith("cuda"):
        import cupy as xp
    x = xp.asarray(np.random.default_rng(1).uniform(-1, 1, 4))
    saved, y = [], x
    for i in range(n):
        if i % 3 == 0:
            y = y * MUL
        elif i % 3 == 1:
            y = y + ADD
        else:
            y = xp.tanh(y)
            saved.append(y)
    times = []
    for _ in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        g, k = xp.ones_like(x), len(saved)
        for i in reversed(range(n)):
            if i % 3 == 0:
                g = g * MUL
            elif i % 3 == 2:
                k -= 1
                g = g * (1.0 - saved[k] * saved[k])
        _sync(device)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times[1:])


def profile_w1(device: str, n: int) -> None:
    """cProfile of one W1 backward on ``device``: where the per-node time goes."""
    import cProfile
    import pstats

    async def one() -> None:
        x = ag.tensor(np.random.default_rng(1).uniform(-1, 1, 4), device=device, requires_grad=True)
        y = x
        for i in range(n):
            y = y * MUL if i % 3 == 0 else (y + ADD if i % 3 == 1 else y.tanh())
        loss = y.sum()
        prof = cProfile.Profile()
        prof.enable()
        await loss.backward()
        _sync(device)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)

    asyncio.get_running_loop()  # called from main's loop
    return one()


def torch_w1_backward_us(device: str, n: int, repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if device.startswith("cuda") and not torch.cuda.is_available():
        return None
    times = []
    for _ in range(repeats + 1):
        x = torch.tensor(np.random.default_rng(1).uniform(-1, 1, 4), device=device, requires_grad=True)
        y = x
        for i in range(n):
            y = y * MUL if i % 3 == 0 else (y + ADD if i % 3 == 1 else y.tanh())
        loss = y.sum()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times[1:])


def _w4_arrays(n: int, dtype: str) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, n)).astype(dtype)
    ws = [(rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype) for _ in range(BRANCHES * DEPTH)]
    return x, ws


async def w4_backward_s(n: int, dtype: str, repeats: int) -> tuple[float, np.ndarray]:
    """Median wall seconds of asyncgrad's W4 backward on cuda:0, and x's gradient (for the check)."""
    x_np, ws_np = _w4_arrays(n, dtype)
    times, grad = [], None
    for _ in range(repeats + 1):
        x = ag.tensor(x_np, device="cuda:0", requires_grad=True)
        ws = [ag.tensor(w, device="cuda:0", requires_grad=True) for w in ws_np]
        outs = []
        for b in range(BRANCHES):
            y = x
            for w in ws[b * DEPTH : (b + 1) * DEPTH]:
                y = y @ w
            outs.append(y)
        loss = pairwise_sum(outs).sum()
        _sync("cuda:0")
        t0 = time.perf_counter()
        await loss.backward()
        _sync("cuda:0")
        times.append(time.perf_counter() - t0)
        grad = x.grad.cpu().numpy()
    return statistics.median(times[1:]), grad


def cupy_w4_backward_s(n: int, dtype: str, repeats: int) -> tuple[float, np.ndarray]:
    """The floor: W4's backward written by hand in CuPy, on one stream."""
    import cupy

    x_np, ws_np = _w4_arrays(n, dtype)
    x, ws = cupy.asarray(x_np), [cupy.asarray(w) for w in ws_np]
    inputs = []
    for b in range(BRANCHES):
        y, ins = x, []
        for w in ws[b * DEPTH : (b + 1) * DEPTH]:
            ins.append(y)
            y = y @ w
        inputs.append(ins)
    times, gx = [], None
    for _ in range(repeats + 1):
        cupy.cuda.Device(0).synchronize()
        t0 = time.perf_counter()
        gx, gws = cupy.zeros_like(x), [None] * len(ws)
        for b in range(BRANCHES):
            g = cupy.ones_like(x)
            for j in reversed(range(DEPTH)):
                gws[b * DEPTH + j] = inputs[b][j].T @ g
                g = g @ ws[b * DEPTH + j].T
            gx += g
        cupy.cuda.Device(0).synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]), cupy.asnumpy(gx)


def torch_w4_backward_s(n: int, dtype: str, repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x_np, ws_np = _w4_arrays(n, dtype)
    times = []
    for _ in range(repeats + 1):
        x = torch.tensor(x_np, device="cuda", requires_grad=True)
        ws = [torch.tensor(w, device="cuda", requires_grad=True) for w in ws_np]
        outs = []
        for b in range(BRANCHES):
            y = x
            for w in ws[b * DEPTH : (b + 1) * DEPTH]:
                y = y @ w
            outs.append(y)
        loss = pairwise_sum(outs).sum()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


async def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cuda", description=__doc__)
    parser.add_argument("--w1-nodes", type=int, default=3000)
    parser.add_argument("--w4-n", type=int, default=4096)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one W1 backward on cuda:0")
    parser.add_argument("--inline-threshold", type=int,
                        help="cuda:0's inline threshold for this run (ag.set_inline_threshold), default: as set")
    args = parser.parse_args(argv)
    if args.inline_threshold is not None:
        ag.set_inline_threshold("cuda:0", args.inline_threshold)
    out: dict = {"w1_nodes": args.w1_nodes, "w4_n": args.w4_n, "dtype": args.dtype,
                 "cuda_inline_threshold": ag.device("cuda:0").inline_threshold}
    # each device's chain is measured twice, interleaved, and the better median kept: the first
    # backwards of a process pay one-time costs (imports, allocator growth) that are not per node
    cpu_us, cuda_us = [], []
    for _ in range(2):
        cpu_us.append(await w1_backward_us("cpu", args.w1_nodes, args.repeats))
        cuda_us.append(await w1_backward_us("cuda:0", args.w1_nodes, args.repeats))
    out["w1_cpu_us"], out["w1_cuda_us"] = min(cpu_us), min(cuda_us)
    out["w1_cpu_floor_us"] = w1_floor_us("cpu", args.w1_nodes, args.repeats)
    out["w1_cuda_floor_us"] = w1_floor_us("cuda:0", args.w1_nodes, args.repeats)
    out["w1_torch_cpu_us"] = torch_w1_backward_us("cpu", args.w1_nodes, args.repeats)
    out["w1_torch_cuda_us"] = torch_w1_backward_us("cuda", args.w1_nodes, args.repeats)
    out["w4_asyncgrad_s"], g_ag = await w4_backward_s(args.w4_n, args.dtype, args.repeats)
    out["w4_cupy_floor_s"], g_floor = cupy_w4_backward_s(args.w4_n, args.dtype, args.repeats)
    out["w4_torch_s"] = torch_w4_backward_s(args.w4_n, args.dtype, args.repeats)
    tol = 1e-3 if args.dtype == "float32" else 1e-9
    out["w4_grad_max_rel_diff"] = float(np.max(np.abs(g_ag - g_floor)) / np.max(np.abs(g_floor)))
    out["w4_grad_agrees"] = out["w4_grad_max_rel_diff"] < tol
    out["w1_cuda_over_cpu"] = out["w1_cuda_us"] / out["w1_cpu_us"]
    # per-node overhead: the engine's time beyond the same kernels written by hand on that device
    out["w1_cpu_overhead_us"] = out["w1_cpu_us"] - out["w1_cpu_floor_us"]
    out["w1_cuda_overhead_us"] = out["w1_cuda_us"] - out["w1_cuda_floor_us"]
    out["w1_overhead_cuda_over_cpu"] = out["w1_cuda_overhead_us"] / out["w1_cpu_overhead_us"]
    out["w4_over_floor"] = out["w4_asyncgrad_s"] / out["w4_cupy_floor_s"]
    if args.profile:
        await profile_w1("cuda:0", args.w1_nodes)
    for key, value in out.items():
        print(f"{key:24} {value:.4g}" if isinstance(value, float) else f"{key:24} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    asyncio.run(main())
