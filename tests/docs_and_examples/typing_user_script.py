"""A user's training script, type-checked by ``tests/docs_and_examples/test_typing.py`` (never run by pytest).

It touches the public surface a user types against: factories, Tensor operators and methods
(installed at runtime by ``asyncgrad/_surface.py``, declared in ``asyncgrad/tensor.pyi``), ``nn``,
``optim`` and the awaited backward. mypy must report nothing here with its default flags.
"""

from __future__ import annotations

import asyncio
from typing import assert_type

import numpy as np

import asyncgrad as ag
from asyncgrad import Tensor


def plain_script_step() -> float:
    """A plain script (no event loop): a bare ``backward()`` runs at once; ``backward_sync`` too."""
    w = ag.ones(3, requires_grad=True)
    loss = (w * ag.tensor([1.0, 2.0, 3.0])).sum()
    loss.backward()
    (w * w).sum().backward_sync()
    grad = w.grad
    assert grad is not None
    return float(grad.sum())


def standardize(x: Tensor) -> Tensor:
    mean = x.mean(dim=0, keepdim=True)
    std = ((x - mean) ** 2).mean(0, keepdim=True).sqrt()
    return (x - mean) / (std + 1e-6)


async def main() -> None:
    ag.manual_seed(0)

    # factories and arithmetic with numbers and tensors
    x = ag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    w = ag.randn(3, 2, requires_grad=True)
    b = ag.zeros(2, requires_grad=True)
    y = 2 * x + 1.5 - x / 3
    y = y * y - 0.5 * x ** 2 + (-x).abs()
    z = (y @ w + b).relu()
    flat: Tensor = x.reshape(6)
    again = x.reshape((3, 2)).transpose(0, 1).flatten()
    total: Tensor = z.sum() + flat.sum() + again.mean() + x.T.sum() + x.mT.sum()

    # indexing
    first_row: Tensor = x[0]
    column = x[:, 1]
    picked = x[ag.tensor([1, 0])]
    masked = x[x > 2.0]
    x_np = np.asarray(x.detach())
    assert x_np.shape == (2, 3) and first_row.shape == (3,) and column.ndim == 1
    values, indices = z.max(dim=1)
    largest: Tensor = z.max()
    best: int = int(indices[0])
    shape: tuple[int, ...] = picked.shape
    n: int = masked.numel()
    dtype: ag.dtype = x.dtype  # torch's dtype object over a numpy dtype
    print(best, shape, n, dtype, values.shape, largest.item(), standardize(x.detach()).tolist())

    # the stub's types, not Any
    assert_type(x + 2, Tensor)
    assert_type(1 - x, Tensor)
    assert_type(x @ w, Tensor)
    assert_type(x > 0, Tensor)
    assert_type(x == x, Tensor)
    assert_type(x[0, 1:], Tensor)
    assert_type(x.shape, ag.Size)  # a tuple subclass, as torch.Size
    assert_type(x.size(0), int)
    assert_type(x.dtype, ag.dtype)
    assert_type(x.grad, Tensor | None)
    assert_type(x.sum().item(), int | float | bool)
    assert_type(ag.nn.functional.mse_loss(z, z), Tensor)

    # backward, awaited and through ag.grad
    await total.backward()
    g_x = x.grad
    if g_x is not None:
        print("x.grad", g_x.shape, float(g_x.sum()))
    (g,) = await ag.grad((x * x).sum(), [x])
    assert_type(g, Tensor)
    print(g)
    x.grad = None
    w.grad = ag.zeros_like(w)

    # a small model, its loss and its optimizers
    model = ag.nn.Sequential(ag.nn.Linear(3, 8), ag.nn.ReLU(), ag.nn.Linear(8, 2))
    sgd = ag.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    adam = ag.optim.Adam(model.parameters(), lr=1e-3)
    inputs = ag.randn(16, 3)
    labels = ag.randint(0, 2, (16,))
    targets = ag.randn(16, 2)
    for step in range(3):
        optimizer = sgd if step % 2 == 0 else adam
        optimizer.zero_grad()
        logits: Tensor = model(inputs)
        loss = ag.nn.functional.cross_entropy(logits, labels) + 0.1 * ag.nn.functional.mse_loss(logits, targets)
        assert_type(await loss.backward(), None)
        optimizer.step()
        print(step, loss.item())

    # no_grad, in-place updates and a device round trip
    with ag.no_grad():
        w -= 0.1 * w
        b.add_(1.0)
        prediction = (inputs @ w + b).softmax(dim=1)
    assert not prediction.requires_grad
    grad_of_b: Tensor | None = b.grad
    print(grad_of_b, prediction.argmax(dim=1).cpu().tolist(), x.to(ag.float64).dtype)


if __name__ == "__main__":
    print("plain script step", plain_script_step())
    asyncio.run(main())
