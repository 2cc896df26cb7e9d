"""One framework, one workload, one size, in a process of its own:
`python -m benchmarks.worker FRAMEWORK WORKLOAD --size N --repeats R --warmup W`
prints one JSON object on its last stdout line (metrics, check vector, version,
or `skip` / `error`). The runner sets the thread environment before numpy loads."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback

from .frameworks import ADAPTERS, NotImportable, load
from .workloads import WORKLOADS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker")
    parser.add_argument("framework", choices=ADAPTERS)
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0)
    args = parser.parse_args(argv)

    result: dict = {}
    try:
        fw = load(args.framework)
    except NotImportable as exc:
        result["skip"] = str(exc)
    else:
        result |= {"version": fw.version, "notes": fw.notes}
        try:
            # One loop for the whole run: every timed backward is awaited in an
            # engine that is already up, and loop creation is never timed.
            outcome = asyncio.run(WORKLOADS[args.workload].run(fw, args.size, args.repeats, args.warmup))
            result |= {"metrics": outcome.metrics, "check": outcome.check}
        except Exception as exc:
            traceback.print_exc()
            result["error"] = f"{type(exc).__name__}: {exc}"
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
