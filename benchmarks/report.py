"""The markdown report: machine facts, one table per workload, notes; splicing it into a page
between markers; and the README's summary of it.

``python -m benchmarks --page docs/benchmarks.md --readme README.md`` measures, writes the whole
report into the site's benchmarks page and its summary into the README; ``python -m benchmarks.report``
writes the summary again from the page alone (tests/docs_and_examples/test_readme.py checks that the two agree)."""

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
    """A page's text and where its bench section lies; exits when the markers are missing."""
    text = path.read_text()
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: no '{START}' ... '{END}' section to replace")
    return text, start + len(START), end


def splice_readme(path: Path, markdown: str) -> None:
    """Replace what lies between the markers in `path` with `markdown`."""
    text, start, end = readme_section(path)
    path.write_text(text[:start] + "\n" + markdown + text[end:])


def section(path: Path) -> str:
    """What lies between the markers in `path`."""
    text, start, end = readme_section(path)
    return text[start:end].strip("\n") + "\n"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def summary(report: str, page: str = "docs/benchmarks.md") -> str:
    """The README's summary of a whole report: asyncgrad against torch on each workload's first metric,
    one row per size, under the report's measurement line (its date and machine)."""
    lines = report.splitlines()
    measured = next((line for line in lines if line.startswith("Measured ")), "Measured on an unknown machine.")
    rows = ["| workload | size | metric | asyncgrad | torch | asyncgrad / torch |", "|---|---|---|---|---|---|"]
    title = metric = ""
    ours: dict[str, str] = {}
    for line in lines:
        if line.startswith("**W"):
            title, ours = line.split("**")[1], {}
        elif line.startswith("| ") and "| framework |" in line:
            metric = _cells(line)[2]
        elif line.startswith("| ") and title:
            size, framework, first, *_, ratio = _cells(line)
            median = first.split(" (")[0]
            if framework == "asyncgrad":
                ours[size] = median
            elif framework == "torch" and size in ours:
                rows.append(f"| {title} | {size} | {metric} | {ours[size]} | {median} | {ratio} |")
    return (f"{measured.split(';')[0].rstrip('.')}; medians, float64; the last column below 1 means asyncgrad "
            f"is faster. The whole report, with the other frameworks and the spread of each cell, is in "
            f"[{page}]({page}).\n\n" + "\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.report [--page P] [--readme R]``: the README's summary again, from the page."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=main.__doc__)
    parser.add_argument("--page", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    args = parser.parse_args(argv)
    splice_readme(args.readme, summary(section(args.page), args.page.as_posix()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
