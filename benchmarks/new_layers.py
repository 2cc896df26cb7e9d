"""`python -m benchmarks.new_layers`: forward + backward of the ConvTranspose2d and Conv3d layers,
asyncgrad against torch in one run (same shapes, float32, CPU, torch on one thread as asyncgrad's
BLAS would be on a busy machine unless ``--torch-threads`` says otherwise).

A step is: a fresh input leaf (untimed), the layer's forward, ``sum()``, the backward (awaited
for asyncgrad), the weight's gradient read. Each layer is timed over ``--repeats`` steps after
``--warmup`` untimed ones; the best and the median are reported (on a shared machine the best is
the steadier), with asyncgrad / torch for each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

import asyncgrad as ag

CASES = {  # name: (layer class name, constructor arguments, input shape)
    "ConvTranspose2d 32->16 k4 s2 (8x32x16x16)": ("ConvTranspose2d", dict(in_channels=32, out_channels=16,
                                                                          kernel_size=4, stride=2, padding=1),
                                                  (8, 32, 16, 16)),
    "ConvTranspose2d 16->8 k3 s1 (4x16x32x32)": ("ConvTranspose2d", dict(in_channels=16, out_channels=8,
                                                                         kernel_size=3, padding=1), (4, 16, 32, 32)),
    "Conv3d 8->16 k3 (4x8x12x12x12)": ("Conv3d", dict(in_channels=8, out_channels=16, kernel_size=3, padding=1),
                                       (4, 8, 12, 12, 12)),
    "Conv3d 4->8 k3 s2 (2x4x16x16x16)": ("Conv3d", dict(in_channels=4, out_channels=8, kernel_size=3, stride=2),
                                         (2, 4, 16, 16, 16)),
}


async def _time_asyncgrad(cls: str, kw: dict, x: np.ndarray, repeats: int, warmup: int) -> tuple[float, float]:
    layer = getattr(ag.nn, cls)(**kw)
    times = []
    for i in range(warmup + repeats):
        leaf = ag.tensor(x, requires_grad=True)
        start = time.perf_counter()
        await layer(leaf).sum().backward()
        _ = layer.weight.grad
        if i >= warmup:
            times.append(time.perf_counter() - start)
        layer.weight.grad = None
    return min(times), statistics.median(times)


def _time_torch(cls: str, kw: dict, x: np.ndarray, repeats: int, warmup: int) -> tuple[float, float]:
    import torch

    layer = getattr(torch.nn, cls)(**kw)
    times = []
    for i in range(warmup + repeats):
        leaf = torch.tensor(x, requires_grad=True)
        start = time.perf_counter()
        layer(leaf).sum().backward()
        _ = layer.weight.grad
        if i >= warmup:
            times.append(time.perf_counter() - start)
        layer.weight.grad = None
    return min(times), statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.new_layers", description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to compare against")
        return 1
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(0)
    print(f"| layer (forward + backward, float32, {args.repeats} steps) | asyncgrad best / median ms | "
          "torch best / median ms | ratio best / median |")
    print("| --- | ---: | ---: | ---: |")
    for name, (cls, kw, shape) in CASES.items():
        x = rng.standard_normal(shape).astype(np.float32)
        ours = asyncio.run(_time_asyncgrad(cls, kw, x, args.repeats, args.warmup))
        theirs = _time_torch(cls, kw, x, args.repeats, args.warmup)
        print(f"| {name} | {ours[0] * 1e3:.2f} / {ours[1] * 1e3:.2f} | {theirs[0] * 1e3:.2f} / {theirs[1] * 1e3:.2f} "
              f"| {ours[0] / theirs[0]:.1f} / {ours[1] / theirs[1]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
