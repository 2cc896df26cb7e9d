"""``python -m asyncgrad``: command-line entry points.

``demo`` trains a small MLP on a three-armed spiral with ``await loss.backward()`` inside
``asyncio.run``, end to end on the async engine. A subcommand is one ``add_parser`` call
in ``build_parser`` whose ``handler`` default takes the parsed arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Callable, Iterable

import numpy as np

import asyncgrad as ag
from asyncgrad import nn, optim


def spiral(points_per_class: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """cs231n's spiral: ``classes`` interleaved noisy arms, not linearly separable."""
    rng = np.random.default_rng(seed)
    features, labels = [], []
    radius = np.linspace(0.0, 1.0, points_per_class)
    for label in range(classes):
        theta = np.linspace(label * 4.0, (label + 1) * 4.0, points_per_class) + rng.normal(0, 0.2, points_per_class)
        features.append(np.stack([radius * np.sin(theta), radius * np.cos(theta)], axis=1))
        labels.append(np.full(points_per_class, label))
    return np.concatenate(features).astype(np.float32), np.concatenate(labels).astype(np.int64)


def _progress(epochs: int) -> tuple[Iterable[int], Callable[[str], None]]:
    """A tqdm bar when tqdm is installed (and stderr is a terminal), with a print that keeps it intact."""
    try:
        from tqdm import tqdm
    except ImportError:
        return range(epochs), print
    bar = tqdm(range(epochs), desc="training", leave=False, disable=None)
    return bar, bar.write


async def demo(epochs: int, seed: int, hidden: int, lr: float) -> float:
    """Full-batch training; returns the final training accuracy."""
    ag.manual_seed(seed)
    features, labels = spiral(100, 3, seed)
    x, y = ag.tensor(features), ag.tensor(labels)
    model = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 3))
    optimizer = optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    print(model)
    print(f"{len(labels)} points, {sum(p.numel() for p in model.parameters())} parameters, {epochs} epochs")
    epochs_iter, report = _progress(epochs)
    every = max(1, epochs // 10)
    start = time.perf_counter()
    for epoch in epochs_iter:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        await loss.backward()
        optimizer.step()
        if epoch % every == 0 or epoch == epochs - 1:
            report(f"epoch {epoch:5d}  loss {loss.item():.4f}")
    with ag.no_grad():
        accuracy = float((model(x).argmax(1) == y).numpy().mean())
    print(f"trained in {time.perf_counter() - start:.2f} s")
    print(f"final training accuracy: {accuracy * 100:.2f}%")
    return accuracy


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m asyncgrad",
                                     description="asyncgrad: PyTorch's autograd engine rebuilt on asyncio.")
    commands = parser.add_subparsers(dest="command", metavar="command", required=True)
    demo_parser = commands.add_parser("demo", help="train an MLP on a 3-class spiral with the async engine")
    demo_parser.add_argument("--epochs", type=int, default=1000, help="full-batch training steps (default 1000)")
    demo_parser.add_argument("--seed", type=int, default=0, help="seeds the data and the initial weights")
    demo_parser.add_argument("--hidden", type=int, default=32, help="width of both hidden layers")
    demo_parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    demo_parser.set_defaults(handler=lambda args: asyncio.run(demo(args.epochs, args.seed, args.hidden, args.lr)))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.handler(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
