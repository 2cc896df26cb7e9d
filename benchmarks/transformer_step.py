"""One TransformerEncoderLayer training step, asyncgrad against torch.

``python -m benchmarks.transformer_step``: d_model 64, 4 heads, sequence 32, batch 16, float32,
forward + backward + SGD, the same weights in both (torch's, loaded into asyncgrad). The workloads
of ``python -m benchmarks`` are graphs with a hand-written numpy reference; a layer this size has
none, so this step is measured on its own, with the same rules: BLAS at one thread
(``runner.THREAD_ENV``, ``torch.set_num_threads(1)``), warm-up steps untimed, the minimum of
several timed steps reported (the least disturbed run on a shared machine), the two frameworks'
steps interleaved. ``--device cuda:0`` runs asyncgrad's step on CuPy and torch's on CUDA (each
step ends with the loss read on the host, which waits for the GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # runner.THREAD_ENV
if "numpy" not in sys.modules:  # before numpy and torch load their BLAS (runner.py imports numpy: imported after)
    os.environ.update(THREAD_ENV)

import time  # noqa: E402

import numpy as np  # noqa: E402

from .runner import THREAD_ENV as RUNNER_THREAD_ENV  # noqa: E402

assert THREAD_ENV == RUNNER_THREAD_ENV, "keep the thread settings of the workload runner"


def _torch_step(torch, layer, optimizer, x, target):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(layer(x), target)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _ag_step(ag, layer, optimizer, x, target):
    optimizer.zero_grad()
    loss = ag.nn.functional.mse_loss(layer(x), target)
    loss.backward_sync()
    optimizer.step()
    return float(loss.item())


def _time(steps: dict, repeats: int, warmup: int) -> dict[str, list[float]]:
    """Each framework's step, interleaved (torch, asyncgrad, torch, ...) so that a burst of load
    on a shared machine hits both alike; warm-up steps untimed."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return times


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[str]:
    """BLAS limited to one thread for the measurement, also where numpy was imported first (a test,
    an interactive session), through threadpoolctl when it is there (the limit is lifted after);
    yields the counts the pools then report."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        yield "1 by environment (no threadpoolctl to check)"
        return
    with threadpool_limits(limits=1):
        yield "/".join(str(c) for c in sorted({pool["num_threads"] for pool in threadpool_info()}))


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transformer_step", description=__doc__)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--ff", type=int, default=256, help="dim_feedforward (4 x d_model)")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--activation", choices=("relu", "gelu"), default="relu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu",
                        help="asyncgrad's device (cpu, sim:N, cuda:N); torch runs on cuda for cuda:N, else on cpu")
    args = parser.parse_args(argv)

    import torch

    import asyncgrad as ag

    torch.set_num_threads(1)
    torch.manual_seed(0)
    shape = dict(d_model=args.d_model, nhead=args.heads, dim_feedforward=args.ff, dropout=args.dropout,
                 activation=args.activation, batch_first=True)
    reference = torch.nn.TransformerEncoderLayer(**shape, dtype=torch.float32)
    layer = ag.nn.TransformerEncoderLayer(**shape, dtype=ag.float32)
    layer.load_state_dict({k: ag.tensor(v.detach().numpy().copy()) for k, v in reference.state_dict().items()})
    torch_device = args.device if args.device.startswith("cuda") else "cpu"
    reference.to(torch_device)
    layer.to(args.device)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.seq, args.d_model)).astype(np.float32)
    target = rng.standard_normal(x.shape).astype(np.float32)

    t_opt = torch.optim.SGD(reference.parameters(), lr=1e-3)
    a_opt = ag.optim.SGD(layer.parameters(), lr=1e-3)
    tx, tt = torch.tensor(x, device=torch_device), torch.tensor(target, device=torch_device)
    ax, at = ag.tensor(x, device=args.device), ag.tensor(target, device=args.device)
    with _one_blas_thread() as blas_threads:
        times = _time({"torch": lambda: _torch_step(torch, reference, t_opt, tx, tt),
                       "asyncgrad": lambda: _ag_step(ag, layer, a_opt, ax, at)}, args.repeats, args.warmup)
    t_all, a_all = times["torch"], times["asyncgrad"]
    t_best, a_best = min(t_all), min(a_all)
    print(f"TransformerEncoderLayer step: d_model {args.d_model}, {args.heads} heads, seq {args.seq}, "
          f"batch {args.batch}, ff {args.ff}, {args.activation}, dropout {args.dropout}, float32, "
          f"asyncgrad on {args.device}, torch on {torch_device}, "
          f"BLAS threads {blas_threads}; "
          f"min of {args.repeats} after {args.warmup} warm-up")
    print(f"  torch     {t_best * 1e3:8.2f} ms  (median {np.median(t_all) * 1e3:.2f})")
    print(f"  asyncgrad {a_best * 1e3:8.2f} ms  (median {np.median(a_all) * 1e3:.2f})")
    print(f"  ratio     {a_best / t_best:8.2f}x torch")
    return {"torch_s": t_best, "asyncgrad_s": a_best}


if __name__ == "__main__":
    main()
