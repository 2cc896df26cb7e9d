"""Timing and memory sampling shared by every workload.

A step is: make fresh leaves (untimed), forward, backward, read the gradients,
delete the recording. The backward is awaited when the adapter returns an
awaitable, so asyncgrad is timed on `await loss.backward()` alone, inside an
event loop that already runs (loop creation is never timed).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from dataclasses import dataclass

import numpy as np
import psutil

from .frameworks import Framework, Graph

SAMPLE_PERIOD_S = 0.001


class RssSampler:
    """A thread reading this process's RSS every millisecond: peaks that a
    before/after pair would miss, and the shape of memory over a backward."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[tuple[float, int]] = []  # (perf_counter, rss): one append, atomic under the GIL

    def now(self) -> int:
        """Read RSS at once, and keep it as a sample."""
        rss = self._process.memory_info().rss
        self.samples.append((time.perf_counter(), rss))
        return rss

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            self.now()

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _series(self) -> tuple[np.ndarray, np.ndarray]:
        t, rss = np.asarray(sorted(self.samples)).T
        return t, rss

    def at(self, t: float) -> float:
        """RSS at time t, interpolated between samples."""
        return float(np.interp(t, *self._series()))

    def peak(self, start: float = -np.inf, end: float = np.inf) -> float:
        """Highest RSS within [start, end]: the samples inside, and the interpolated ends."""
        t, rss = self._series()
        inside = rss[(t >= start) & (t <= end)]
        return max(inside.max(initial=0.0), self.at(start), self.at(end))


@dataclass
class Step:
    """One step's timings (seconds; backward as perf_counter stamps, to place
    memory samples within it), its check vector and its memory trace."""

    forward_s: float
    backward_start: float
    backward_end: float
    delete_s: float
    check: list[list[float]]
    memory: RssSampler | None = None
    rss_before: int = 0
    rss_recorded: int = 0

    @property
    def backward_s(self) -> float:
        return self.backward_end - self.backward_start


def fingerprint(loss: float, grads: list[np.ndarray]) -> list[list[float]]:
    """The loss, then per gradient a group of floats: the gradient itself when
    tiny, else a few sums and entries that any wrong or misplaced entry moves.
    Groups are compared each at its own scale."""
    out = [[float(loss)]]
    for g in grads:
        flat = np.asarray(g, dtype=np.float64).ravel()
        if flat.size <= 8:
            out.append(flat.tolist())
        else:
            ramp = np.linspace(-1.0, 1.0, flat.size)
            sums = [flat.sum(), np.abs(flat).sum(), flat @ ramp, flat @ np.cos(37.0 * ramp)]
            out.append([float(v) for v in sums] + flat[:: flat.size // 4].tolist())
    return out


async def step(fw: Framework, graph: Graph, *, memory: bool = False) -> Step:
    """Run one forward + backward + deletion; with `memory`, sample RSS throughout."""
    gc.collect()
    leaves = fw.leaves(graph)
    with RssSampler() if memory else contextlib.nullcontext() as sampler:
        rss_before = sampler.now() if sampler else 0
        t0 = time.perf_counter()
        rec = fw.forward(graph, leaves)
        forward_s = time.perf_counter() - t0
        rss_recorded = sampler.now() if sampler else 0
        t1 = time.perf_counter()
        pending = fw.backward(rec)
        if pending is not None:
            await pending
        t2 = time.perf_counter()
        check = fingerprint(fw.value(rec), fw.grads(rec))
        t3 = time.perf_counter()
        del rec, leaves, pending
        delete_s = time.perf_counter() - t3
        if sampler:
            sampler.now()
    return Step(forward_s, t1, t2, delete_s, check, sampler, rss_before, rss_recorded)


async def steps(fw: Framework, graph: Graph, repeats: int, warmup: int, *, memory: bool = False) -> list[Step]:
    """`warmup` untimed steps, then `repeats` measured ones."""
    for _ in range(warmup):
        await step(fw, graph)
    return [await step(fw, graph, memory=memory) for _ in range(repeats)]
