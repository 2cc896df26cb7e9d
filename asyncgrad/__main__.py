"""``python -m asyncgrad``: command-line entry points.

``demo`` trains a small CNN (``Conv2d``, ``ReLU``, ``MaxPool2d``, ``Linear``) on scikit-learn's
bundled handwritten digits (1,797 8x8 images, no download) with ``await loss.backward()``
inside ``asyncio.run``, reports the accuracy on a held-out split, and draws the loss curve and
the test confusion matrix into a PNG. A subcommand is one ``add_parser`` call in
``build_parser`` whose ``handler`` default takes the parsed arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any, Callable, Iterable

import numpy as np

import asyncgrad as ag
from asyncgrad import nn, optim

DEMO_NEEDS = ("sklearn", "tqdm", "matplotlib")
"""The demo's own dependencies (the ``demo`` extra: ``pip install '.[demo]'``)."""


def load_digits_split(seed: int, test_fraction: float = 0.25) -> tuple[np.ndarray, ...]:
    """scikit-learn's 8x8 digits as ``(N, 1, 8, 8)`` float32 in [0, 1] and int64 labels, split
    into train and test sets stratified by class (the split depends on ``seed``)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    return tuple(train_test_split(images, labels, test_size=test_fraction, random_state=seed, stratify=labels))


def build_model() -> nn.Module:
    """Two conv blocks (8x8 -> 4x4 -> 2x2) and a linear classifier: about 6k parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10),
    )


def _progress(items: Iterable[int], total: int) -> tuple[Any, Callable[[str], None]]:
    """A tqdm bar (to stderr) and a print that keeps it intact."""
    from tqdm import tqdm

    bar = tqdm(items, total=total, desc="training", unit="epoch", file=sys.stderr)
    return bar, bar.write


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int = 10) -> np.ndarray:
    """``matrix[true, predicted]`` counts."""
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def draw(losses: list[float], steps_per_epoch: int, matrix: np.ndarray, accuracy: float, path: str) -> None:
    """The loss per step (and its per-epoch mean) beside the test set's confusion matrix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    steps = np.arange(1, len(losses) + 1)
    left.plot(steps, losses, color="tab:blue", alpha=0.35, linewidth=0.8, label="per step")
    epochs = len(losses) // steps_per_epoch
    means = np.asarray(losses[:epochs * steps_per_epoch]).reshape(epochs, steps_per_epoch).mean(axis=1)
    left.plot(np.arange(1, epochs + 1) * steps_per_epoch, means, "o-", color="tab:blue", label="epoch mean")
    left.set_yscale("log")
    left.set_xlabel("step")
    left.set_ylabel("cross-entropy loss (log scale)")
    left.set_title("training loss")
    left.legend()
    left.grid(alpha=0.3)
    image = right.imshow(matrix, cmap="Blues")
    for (i, j), count in np.ndenumerate(matrix):
        if count:
            right.text(j, i, str(count), ha="center", va="center", fontsize=8,
                       color="white" if count > matrix.max() / 2 else "black")
    right.set_xticks(range(10))
    right.set_yticks(range(10))
    right.set_xlabel("predicted digit")
    right.set_ylabel("true digit")
    right.set_title(f"test confusion matrix (accuracy {accuracy * 100:.1f}%)")
    fig.colorbar(image, ax=right, fraction=0.046)
    fig.suptitle("asyncgrad: a CNN on scikit-learn's 8x8 digits")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def demo(epochs: int, seed: int, out: str, batch_size: int = 64, lr: float = 0.01) -> float:
    """Minibatch Adam on the training split; returns the test accuracy."""
    ag.manual_seed(seed)
    x_train, x_test, y_train, y_test = load_digits_split(seed)
    model = build_model()
    optimizer = optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    print(model)
    print(f"{len(y_train)} training and {len(y_test)} test images, "
          f"{sum(p.numel() for p in model.parameters())} parameters, {epochs} epochs")
    rng = np.random.default_rng(seed)
    steps_per_epoch = len(y_train) // batch_size  # full batches only: a 3-image tail would make the loss jump
    losses: list[float] = []
    bar, report = _progress(range(epochs), epochs)
    start = time.perf_counter()
    for epoch in bar:
        model.train()
        order = rng.permutation(len(y_train))
        for first in range(0, steps_per_epoch * batch_size, batch_size):
            rows = order[first:first + batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(ag.tensor(x_train[rows])), ag.tensor(y_train[rows]))
            await loss.backward()
            optimizer.step()
            losses.append(loss.item())
        mean = float(np.mean(losses[-steps_per_epoch:]))
        bar.set_postfix(loss=f"{mean:.4f}")
        report(f"epoch {epoch + 1:3d}  loss {mean:.4f}")
    bar.close()
    model.eval()
    with ag.no_grad():
        predicted = model(ag.tensor(x_test)).argmax(1).numpy()
    accuracy = float((predicted == y_test).mean())
    print(f"trained in {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy * 100:.1f}%")
    draw(losses, steps_per_epoch, confusion(y_test, predicted), accuracy, out)
    print(f"loss curve and confusion matrix written to {out}")
    return accuracy


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 2**32 - 1, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 2**32 - 1, got {value}")
    return value


def _png_path(text: str) -> str:
    if not text.lower().endswith(".png"):
        raise argparse.ArgumentTypeError(f"the picture is a PNG: give a path ending in .png, got {text!r}")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {folder!r} does not exist")
    return text


def _missing_demo_needs() -> list[str]:
    import importlib.util

    return [name for name in DEMO_NEEDS if importlib.util.find_spec(name) is None]


def _run_demo(args: argparse.Namespace) -> None:
    missing = _missing_demo_needs()
    if missing:
        sys.exit(f"the demo needs {', '.join(missing)}: pip install 'asyncgrad[demo]' "
                 "(or scikit-learn, tqdm and matplotlib)")
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    # The demo's matrices are tiny (64 x 144 x 32): BLAS threads would spend more on waking each
    # other than they save, and the engine already runs large kernels in worker threads.
    with threadpool_limits(1, user_api="blas"):
        asyncio.run(demo(args.epochs, args.seed, args.out))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m asyncgrad",
                                     description="asyncgrad: PyTorch's autograd engine rebuilt on asyncio.")
    commands = parser.add_subparsers(dest="command", metavar="command", required=True)
    demo_parser = commands.add_parser(
        "demo", help="train a CNN on scikit-learn's handwritten digits with the async engine",
        description="Train a small CNN (Conv2d, ReLU, MaxPool2d, Linear) on scikit-learn's 8x8 handwritten digits "
                    "with asyncgrad, print the held-out test accuracy, and draw the loss curve and the test "
                    "confusion matrix into a PNG.")
    demo_parser.add_argument("--epochs", type=_positive_int, default=15,
                             help="passes over the training images (default 15)")
    demo_parser.add_argument("--seed", type=_seed, default=0,
                             help="seeds the train/test split, the initial weights and the batch order (default 0)")
    demo_parser.add_argument("--out", type=_png_path, default="asyncgrad_demo.png",
                             help="where to write the picture (default asyncgrad_demo.png)")
    demo_parser.set_defaults(handler=_run_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.handler(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
