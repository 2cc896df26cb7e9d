"""Spawns workers with a controlled environment, merges their samples, and
checks every framework's gradients against a reference."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .workloads import Workload

ROOT = Path(__file__).resolve().parent.parent
# One BLAS thread everywhere: the peers run one kernel at a time on one core,
# and any overlap asyncgrad gets must come from its engine, not from BLAS.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
REFERENCES = ("numpy", "torch")  # whose gradients the others are checked against, first found
RTOL, SCALED_ATOL = 1e-6, 1e-9


@dataclass
class Cell:
    """One framework on one workload size."""

    framework: str
    size: int
    metrics: dict[str, list[float]] = field(default_factory=dict)
    check: list[list[float]] | None = None
    version: str = ""
    notes: str = ""
    error: str = ""
    skip: str = ""
    grad: str = ""  # "reference", "ok", or a mismatch description

    def median(self, metric: str) -> float | None:
        samples = self.metrics.get(metric)
        return statistics.median(samples) if samples else None


def _worker(framework: str, workload: Workload, size: int, repeats: int, warmup: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.worker", framework, workload.key]
    cmd += ["--size", str(size), "--repeats", str(repeats), "--warmup", str(warmup)]
    env = {**os.environ, **THREAD_ENV, **workload.env}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines and lines[-1].startswith("{"):
        return json.loads(lines[-1])
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit status {proc.returncode}: {last}"}


def measure(framework: str, workload: Workload, size: int, repeats: int, warmup: int, timeout: float) -> Cell:
    """Run the workers for one cell: one process for all repeats, or one per
    repeat (without warm-up) when the workload wants a fresh process."""
    if workload.max_repeats:
        repeats = min(repeats, workload.max_repeats)
    runs = (
        [_worker(framework, workload, size, 1, 0, timeout) for _ in range(repeats)]
        if workload.fresh_process
        else [_worker(framework, workload, size, repeats, warmup, timeout)]
    )
    cell = Cell(framework, size)
    for run in runs:
        if "skip" in run or "error" in run:
            cell.skip, cell.error = run.get("skip", ""), run.get("error", "")
            return cell
        cell.version, cell.notes, cell.check = run["version"], run["notes"], run["check"]
        for metric, samples in run["metrics"].items():
            cell.metrics.setdefault(metric, []).extend(samples)
    return cell


def _agrees(got: list[list[float]], ref: list[list[float]]) -> str:
    """'ok', or which group differs and by how much; each group at its own scale."""
    if len(got) != len(ref) or any(len(g) != len(r) for g, r in zip(got, ref, strict=True)):
        return "MISMATCH: different gradient shapes"
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        g, r = np.asarray(g), np.asarray(r)
        atol = SCALED_ATOL * np.abs(r).max(initial=0.0)
        if not np.allclose(g, r, rtol=RTOL, atol=atol):
            what = "loss" if i == 0 else f"gradient of leaf {i - 1}"
            err = np.max(np.abs(g - r) / (np.abs(r) + atol + 1e-300))
            return f"MISMATCH: {what}, max relative error {err:.2g}"
    return "ok"


def check_gradients(cells: list[Cell]) -> list[Cell]:
    """Mark each cell's gradients against the reference; return the mismatches."""
    done = [c for c in cells if c.check is not None]
    if len(done) < 2:
        return []
    by_name = {c.framework: c for c in done}
    ref = next((by_name[n] for n in REFERENCES if n in by_name), done[0])
    for cell in done:
        cell.grad = "reference" if cell is ref else _agrees(cell.check, ref.check)
    return [c for c in done if c.grad.startswith("MISMATCH")]
