"""`python -m benchmarks`: run the workloads for every framework, print the
markdown report, optionally splice it into the site's benchmarks page and its summary into the README."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import report, runner
from .frameworks import ADAPTERS
from .workloads import WORKLOADS


def _names(text: str, known: dict) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat: a smoke test")
    parser.add_argument("--only", type=lambda s: _names(s, WORKLOADS), default=list(WORKLOADS), help="e.g. W1,W3")
    parser.add_argument("--frameworks", type=lambda s: _names(s, ADAPTERS), default=list(ADAPTERS))
    parser.add_argument("--repeats", type=int, help="measured repeats (default 5; 1 with --quick)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before them")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per worker process")
    parser.add_argument("--page", type=Path, help="replace the bench:start/end section of this page with the report "
                        "(docs/benchmarks.md)")
    parser.add_argument("--readme", type=Path, help="replace the bench:start/end section of this file with the "
                        "report's summary (README.md)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 5)
    for path in (args.page, args.readme):
        if path:
            report.readme_section(path)  # fail before the long run, not after

    facts = report.machine_facts()
    skipped: dict[str, str] = {}
    results, mismatches = [], []
    for key in args.only:
        workload, cells = WORKLOADS[key], []
        for size in workload.quick_sizes if args.quick else workload.sizes:
            size_cells = []
            for name in args.frameworks:
                if name in skipped or (workload.frameworks and name not in workload.frameworks):
                    continue
                t0 = time.perf_counter()
                cell = runner.measure(name, workload, size, repeats, args.warmup, args.timeout)
                status = cell.skip or cell.error or "done"
                print(f"{key} {size:>9,} {name:<10} {time.perf_counter() - t0:6.1f} s  {status}", file=sys.stderr)
                if cell.skip:
                    skipped[name] = cell.skip
                else:
                    size_cells.append(cell)
            for bad in runner.check_gradients(size_cells):
                print(f"!!! {key} {size:,} {bad.framework}: GRADIENT {bad.grad}", file=sys.stderr)
                mismatches.append(bad)
            cells += size_cells
        results.append((workload, cells))

    markdown = report.render(results, facts, skipped, repeats, args.warmup)
    print(markdown)
    if args.page:
        report.splice_readme(args.page, markdown)
    if args.readme:
        page = (args.page or Path("docs/benchmarks.md")).as_posix()
        report.splice_readme(args.readme, report.summary(markdown, page))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
