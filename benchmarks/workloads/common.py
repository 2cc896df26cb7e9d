"""What a workload module provides, and helpers several workloads share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..frameworks import Framework


@dataclass
class Outcome:
    """What a worker reports: samples per metric, and the check vector of the last step."""

    metrics: dict[str, list[float]]
    check: list[list[float]]


@dataclass(frozen=True)
class Workload:
    """A workload's definition for the runner and the report."""

    key: str
    title: str
    caption: str  # what the table shows, for the report
    size_label: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    columns: tuple[tuple[str, str], ...]  # (metric, header); the first one is the ratio's
    run: Callable[[Framework, int, int, int], Awaitable[Outcome]]  # run(fw, size, repeats, warmup)
    frameworks: tuple[str, ...] | None = None  # None: every framework
    fresh_process: bool = False  # one step per process, so memory figures start clean
    max_repeats: int | None = None
    env: dict[str, str] = field(default_factory=dict)


def pairwise_sum(items: list[Any]) -> Any:
    """Sum with a balanced tree of `+`, so no add node sits deeper than log2(n)."""
    while len(items) > 1:
        pairs = [items[i] + items[i + 1] for i in range(0, len(items) - 1, 2)]
        items = pairs + items[len(items) - len(items) % 2 :]
    return items[0]
