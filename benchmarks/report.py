"""The markdown report: machine facts, one table per workload, notes; and
splicing it into a README between markers."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
from pathlib import Path

import numpy as np
import psutil

from .runner import THREAD_ENV, Cell
from .workloads import Workload

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine_facts() -> dict[str, str]:
    """What the numbers depend on, as short strings."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        blas = "unknown BLAS"
    threads = "/".join(k.split("_")[0] for k in THREAD_ENV)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {psutil.cpu_count(logical=False)} cores / {os.cpu_count()} threads "
        f"({len(os.sched_getaffinity(0))} usable), {psutil.virtual_memory().total / 2**30:.0f} GiB",
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "numpy": f"numpy {np.__version__} on {blas}, "
        f"BLAS threads 1 ({threads}_NUM_THREADS=1, torch.set_num_threads(1))",
    }


def _number(v: float) -> str:
    """Three significant digits, never in exponent notation."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else np.format_float_positional(v, precision=3, fractional=False, trim="-")


def _spread(samples: list[float]) -> str:
    """Median, and (min–max) when the repeats differ."""
    mid, lo, hi = (_number(f(samples)) for f in (statistics.median, min, max))
    return mid if lo == hi else f"{mid} ({lo}–{hi})"


def _table(workload: Workload, cells: list[Cell]) -> list[str]:
    metric = workload.columns[0][0]
    headers = [workload.size_label, "framework", *(h for _, h in workload.columns), "gradients", "asyncgrad / this"]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for cell in cells:
        ours = next((c for c in cells if c.framework == "asyncgrad" and c.size == cell.size), None)
        if cell.error:
            values = [f"error: {cell.error}"] + [""] * (len(workload.columns) - 1)
        else:
            values = [_spread(cell.metrics[k]) if k in cell.metrics else "—" for k, _ in workload.columns]
        ratio = "—"
        if ours is not None and cell is not ours and ours.median(metric) and cell.median(metric):
            ratio = f"{ours.median(metric) / cell.median(metric):.2f}×"
        grad = f"**{cell.grad}**" if cell.grad.startswith("MISMATCH") else cell.grad or "—"
        out.append("| " + " | ".join([f"{cell.size:,}", cell.framework, *values, grad, ratio]) + " |")
    return out


def render(
    results: list[tuple[Workload, list[Cell]]],
    facts: dict[str, str],
    skipped: dict[str, str],
    repeats: int,
    warmup: int,
) -> str:
    """The whole report as markdown."""
    cells = [c for _, cs in results for c in cs]
    versions = {c.framework: c.version for c in cells if c.version}
    lines = [
        f"Measured {facts['date']} on {facts['cpu']}; {facts['os']}; Python {facts['python']}; "
        f"{facts['numpy']}; float64 everywhere.",
        "",
        "Versions: " + ", ".join(f"{name} {v}" for name, v in versions.items()) + ".",
        f"Each cell: median of {repeats} repeat(s) after {warmup} warm-up, (min–max) when they differ"
        + "".join(
            f"; {w.key} runs each repeat (at most {w.max_repeats}) in a fresh process, without warm-up"
            for w, _ in results
            if w.fresh_process
        )
        + ". Last column: asyncgrad's median over this framework's, on the first metric "
        "(below 1: asyncgrad is faster, or uses less memory).",
    ]
    mismatches = [c for c in cells if c.grad.startswith("MISMATCH")]
    if mismatches:
        lines += ["", f"**GRADIENT MISMATCH in {len(mismatches)} cell(s): see the gradients column.**"]
    for workload, wcells in results:
        lines += ["", f"**{workload.key} {workload.title}**: {workload.caption}", ""]
        only = f": {', '.join(workload.frameworks)} only" if workload.frameworks else ""
        lines += _table(workload, wcells) if wcells else [f"(no framework ran{only})"]
    notes = {c.framework: c.notes for c in cells if c.notes}
    if notes or skipped:
        lines.append("")
    lines += [f"- {name}: {note}" for name, note in notes.items()]
    lines += [f"- {name} skipped: {why}" for name, why in skipped.items()]
    return "\n".join(lines) + "\n"


def readme_section(path: Path) -> tuple[str, int, int]:
    """The README's text and where its bench section lies; exits when the markers are missing."""
    text = path.read_text()
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: no '{START}' ... '{END}' section to replace")
    return text, start + len(START), end


def splice_readme(path: Path, markdown: str) -> None:
    """Replace what lies between the markers in `path` with `markdown`."""
    text, start, end = readme_section(path)
    path.write_text(text[:start] + "\n" + markdown + text[end:])
