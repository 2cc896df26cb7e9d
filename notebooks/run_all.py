"""Execute the notebooks top to bottom, each in a fresh kernel, and save them with their outputs.

    python notebooks/run_all.py            # all of them
    python notebooks/run_all.py 03 05      # those whose name starts so

The notebooks are committed with their outputs so that a reader sees every picture without
running anything; this script is how those outputs are made. ``tests/docs_and_examples/test_notebooks.py``
executes them through the same :func:`execute`, so what the suite checks is what gets saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent
NOTEBOOKS = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
TIMEOUT_S = 120
"""Per cell. Every notebook runs in a few seconds; the limit only catches a hang."""


@contextlib.contextmanager
def this_interpreter_kernel() -> Iterator[str]:
    """A ``python3`` kernel spec that runs this interpreter, found before any user-wide one.

    A spec installed elsewhere may point at a Python without asyncgrad; ``JUPYTER_PATH`` is
    searched first, so the kernel always shares this environment. Figures go through the
    inline backend, which is what stores them in the notebook as PNG.
    """
    saved = {key: os.environ.get(key) for key in ("JUPYTER_PATH", "MPLBACKEND")}
    with tempfile.TemporaryDirectory() as tmp:
        spec_dir = Path(tmp) / "kernels" / "python3"
        spec_dir.mkdir(parents=True)
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        os.environ["JUPYTER_PATH"] = tmp
        os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        try:
            yield "python3"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


async def _execute_one(path: Path, kernel_name: str, slots: asyncio.Semaphore) -> tuple[nbformat.NotebookNode, float]:
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name=kernel_name, timeout=TIMEOUT_S, record_timing=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    async with slots:
        started = time.perf_counter()
        await client.async_execute()
        return notebook, time.perf_counter() - started


def execute(paths: list[Path], parallel: int | None = None) -> dict[Path, tuple[nbformat.NotebookNode, float]]:
    """Run each notebook in a fresh kernel of this interpreter; ``{path: (executed notebook, seconds)}``.

    Kernels start and import concurrently (``parallel`` at once, default the CPU count): most
    of a short notebook's time is its kernel starting up, which overlaps well. A failing cell
    raises ``nbclient.exceptions.CellExecutionError`` naming the notebook's cell and error.
    """
    parallel = parallel or os.cpu_count() or 1

    async def run_all(kernel_name: str) -> list:
        slots = asyncio.Semaphore(parallel)
        return await asyncio.gather(*(_execute_one(p, kernel_name, slots) for p in paths), return_exceptions=True)

    with this_interpreter_kernel() as kernel_name:
        results = asyncio.run(run_all(kernel_name))
    return dict(zip(paths, results))


def main(argv: list[str]) -> int:
    paths = [p for p in NOTEBOOKS if not argv or any(p.name.startswith(a) for a in argv)]
    failed = 0
    for path, result in execute(paths).items():
        if isinstance(result, BaseException):
            failed += 1
            print(f"{path.name}: FAILED\n{result}", file=sys.stderr)
            continue
        notebook, seconds = result
        nbformat.write(notebook, path)
        print(f"{path.name}: executed in {seconds:.1f} s, saved")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
