"""W3's MLP trained as people train it, asyncgrad against torch: persistent parameters, a fresh
batch each step, ``zero_grad()``, ``await loss.backward()``, SGD with momentum (or Adam, AdamW,
RMSprop, Adagrad: ``--optimizer adam`` and so on).

``python -m benchmarks.train_loop``: 784-256-256-10, relu, cross-entropy, float64, batch 64, the
same weights in both. W3 times one forward and backward on fresh leaves; a loop also frees and
makes gradients every step (``zero_grad`` sets them to None) and updates parameters and momentum
buffers in place, where temporaries the size of a parameter cost page faults once glibc has given
the freed top of its heap back (Note [In place without a temporary] in asyncgrad/ops/inplace.py),
so the minor page faults per step are reported beside the times. Same rules as
``transformer_step``: BLAS at one thread, warm-up steps untimed, the frameworks' steps
interleaved, the minimum and the median of the timed steps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys

from .transformer_step import THREAD_ENV

if "numpy" not in sys.modules:  # before numpy and torch load their BLAS
    os.environ.update(THREAD_ENV)

import time  # noqa: E402

import numpy as np  # noqa: E402

from .transformer_step import _one_blas_thread  # noqa: E402

LAYERS = (784, 256, 256, 10)

OPTIMIZERS = {
    "sgd": ("SGD", {"lr": 0.01, "momentum": 0.9}),
    "adam": ("Adam", {"lr": 0.001}),
    "adamw": ("AdamW", {"lr": 0.001}),
    "rmsprop": ("RMSprop", {"lr": 0.001, "momentum": 0.9}),
    "adagrad": ("Adagrad", {"lr": 0.01}),
}
"""``--optimizer``: the class (torch's name, asyncgrad's the same) and its settings, alike in both."""


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.train_loop", description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="sgd",
                        help="SGD with momentum 0.9 (lr 0.01), Adam or AdamW (lr 0.001), RMSprop with momentum 0.9 "
                             "(lr 0.001), Adagrad (lr 0.01)")
    args = parser.parse_args(argv)

    import torch

    import asyncgrad as ag

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    weights = []
    for fan_in, fan_out in zip(LAYERS, LAYERS[1:]):
        weights += [rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in), 0.01 * rng.standard_normal(fan_out)]
    batches = [(rng.standard_normal((args.batch, LAYERS[0])), rng.integers(0, LAYERS[-1], args.batch))
               for _ in range(8)]
    t_params = [torch.tensor(w, requires_grad=True) for w in weights]
    a_params = [ag.tensor(w, requires_grad=True) for w in weights]
    opt_name, settings = OPTIMIZERS[args.optimizer]
    t_opt = getattr(torch.optim, opt_name)(t_params, **settings)
    a_opt = getattr(ag.optim, opt_name)(a_params, **settings)
    t_batches = [(torch.tensor(x), torch.tensor(y)) for x, y in batches]
    a_batches = [(ag.tensor(x), ag.tensor(y)) for x, y in batches]

    def model(params, x):
        w1, b1, w2, b2, w3, b3 = params
        h = (x @ w1 + b1).relu()
        h = (h @ w2 + b2).relu()
        return h @ w3 + b3

    def torch_step(i: int) -> None:
        x, y = t_batches[i % len(t_batches)]
        t_opt.zero_grad()
        torch.nn.functional.cross_entropy(model(t_params, x), y).backward()
        t_opt.step()

    async def ag_step(i: int) -> None:
        x, y = a_batches[i % len(a_batches)]
        a_opt.zero_grad()
        await ag.nn.functional.cross_entropy(model(a_params, x), y).backward()
        a_opt.step()

    loop = asyncio.new_event_loop()
    steps = {"torch": torch_step, "asyncgrad": lambda i: loop.run_until_complete(ag_step(i))}
    times: dict[str, list[float]] = {name: [] for name in steps}
    faults: dict[str, list[int]] = {name: [] for name in steps}
    try:
        with _one_blas_thread() as blas_threads:
            for i in range(args.warmup + args.repeats):
                for name, step in steps.items():
                    f0, start = _faults(), time.perf_counter()
                    step(i)
                    if i >= args.warmup:
                        times[name].append(time.perf_counter() - start)
                        faults[name].append(_faults() - f0)
    finally:
        loop.close()
    t_best, a_best = min(times["torch"]), min(times["asyncgrad"])
    # both trained the same steps from the same weights: their parameters must still agree
    drift = max(float(np.max(np.abs(t.detach().numpy() - a.detach().numpy()))) for t, a in zip(t_params, a_params))
    optimizer = opt_name + "".join(f" {key} {value}" for key, value in settings.items() if key != "lr")
    print(f"MLP training loop (W3's model, {optimizer}, zero_grad, fresh batch): batch {args.batch}, float64, "
          f"BLAS threads {blas_threads}; min and median of {args.repeats} steps after {args.warmup} warm-up")
    for name in ("torch", "asyncgrad"):
        print(f"  {name:9s} {min(times[name]) * 1e3:8.2f} ms  (median {np.median(times[name]) * 1e3:.2f})  "
              f"page faults per step {np.mean(faults[name]):.0f}")
    print(f"  ratio     {a_best / t_best:8.2f}x torch (min), "
          f"{np.median(times['asyncgrad']) / np.median(times['torch']):.2f}x (median)")
    print(f"  parameters after {args.warmup + args.repeats} steps differ by at most {drift:.1e}")
    return {"torch_s": t_best, "asyncgrad_s": a_best, "drift": drift}


if __name__ == "__main__":
    main()
