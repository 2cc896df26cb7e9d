"""W8: one LeNet-like CNN training step on (32, 1, 28, 28) float32 images:
Conv2d(1,8,5), ReLU, MaxPool2d(2), Conv2d(8,16,5), ReLU, MaxPool2d(2), Flatten,
Linear(256,10), cross-entropy, SGD with momentum. Convolutions through im2col and
BLAS, pooling on strided windows: the case a user training a real model meets.

Only frameworks with convolutions and an optimizer run it (asyncgrad, torch), each
through its own `nn.functional` and `optim.SGD`, from the same weights and images.
The timed steps are float32, as models train; the check vector is one extra step
in float64 from the same start, so that gradients are compared with torch's at the
runner's float64 tolerance, not float32 rounding."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..frameworks import Framework
from ..measure import fingerprint
from .common import Outcome, Workload

LR, MOMENTUM = 0.01, 0.9


def lenet_arrays(batch: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Weights (torch's default init bounds), images and labels, float64; seeded."""
    rng = np.random.default_rng(8)

    def uniform(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        bound = 1 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, shape)

    params = [uniform((8, 1, 5, 5), 25), uniform((8,), 25), uniform((16, 8, 5, 5), 200), uniform((16,), 200),
              uniform((10, 256), 256), uniform((10,), 256)]
    return params, rng.standard_normal((batch, 1, 28, 28)), rng.integers(0, 10, batch).astype(np.int64)


def forward(F: Any, x: Any, target: Any, w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any) -> Any:
    """The model, written once against `torch.nn.functional` / `asyncgrad.nn.functional`."""
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2)), 2)
    return F.cross_entropy(F.linear(h.flatten(1), w3, b3), target)


class _Torch:
    def __init__(self, fw: Framework) -> None:
        import torch
        import torch.nn.functional as F

        self.torch, self.F = torch, F

    def setup(self, arrays: list[np.ndarray], x: np.ndarray, target: np.ndarray, dtype: str) -> tuple:
        t = self.torch
        params = [t.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
        return params, t.tensor(x.astype(dtype)), t.tensor(target), t.optim.SGD(params, lr=LR, momentum=MOMENTUM)

    async def backward(self, loss: Any) -> None:
        loss.backward()

    def grads(self, params: list[Any]) -> list[np.ndarray]:
        return [p.grad.numpy() for p in params]


class _Asyncgrad:
    def __init__(self, fw: Framework) -> None:
        import asyncgrad as ag

        self.ag, self.F = ag, ag.nn.functional

    def setup(self, arrays: list[np.ndarray], x: np.ndarray, target: np.ndarray, dtype: str) -> tuple:
        ag = self.ag
        params = [ag.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
        return params, ag.tensor(x.astype(dtype)), ag.tensor(target), ag.optim.SGD(params, lr=LR, momentum=MOMENTUM)

    async def backward(self, loss: Any) -> None:
        await loss.backward()

    def grads(self, params: list[Any]) -> list[np.ndarray]:
        return [p.grad.numpy() for p in params]


async def run(fw: Framework, batch: int, repeats: int, warmup: int) -> Outcome:
    impl = _Asyncgrad(fw) if fw.name == "asyncgrad" else _Torch(fw)
    arrays, x_host, target_host = lenet_arrays(batch)

    params, x, target, optimizer = impl.setup(arrays, x_host, target_host, "float64")
    loss = forward(impl.F, x, target, *params)
    await impl.backward(loss)
    check = fingerprint(loss.item(), impl.grads(params))

    params, x, target, optimizer = impl.setup(arrays, x_host, target_host, "float32")
    metrics: dict[str, list[float]] = {"step_ms": [], "forward_ms": [], "backward_ms": [], "update_ms": []}
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        loss = forward(impl.F, x, target, *params)
        t1 = time.perf_counter()
        await impl.backward(loss)
        t2 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t3 = time.perf_counter()
        if i >= warmup:
            for name, seconds in (("step_ms", t3 - t0), ("forward_ms", t1 - t0), ("backward_ms", t2 - t1),
                                  ("update_ms", t3 - t2)):
                metrics[name].append(seconds * 1e3)
    return Outcome(metrics, check)


WORKLOAD = Workload(
    key="W8",
    title="LeNet step",
    caption="LeNet-like CNN on (32, 1, 28, 28) float32, cross-entropy, SGD momentum: ms per step "
            "(gradients checked in float64)",
    size_label="batch",
    sizes=(32,),
    quick_sizes=(32,),
    columns=(("step_ms", "step ms"), ("forward_ms", "forward ms"), ("backward_ms", "backward ms"),
             ("update_ms", "SGD ms")),
    run=run,
    frameworks=("asyncgrad", "torch"),
)
