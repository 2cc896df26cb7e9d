"""examples/serve_while_training.py: a server answers every request while a model trains on its loop."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the example's server needs aiohttp (the 'examples' extra)")
pytest.importorskip("sklearn", reason="the example trains on scikit-learn's digits (the 'demo' extra)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve_while_training.py"


def test_every_request_is_answered_while_asyncgrad_trains():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--engine", "asyncgrad", "--seconds", "1", "--rate", "50", "--batch", "16"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    header, row = done.stdout.strip().splitlines()[-2:]
    assert header.split()[:2] == ["engine", "requests"]
    engine, requests, p50, p99, worst, steps_per_s, lag_p99, lag_max = row.split()
    assert engine == "asyncgrad" and int(requests) == 50
    assert 0 < float(p50) <= float(p99) <= float(worst)
    assert float(steps_per_s) > 0
    assert 0 <= float(lag_p99) <= float(lag_max)


async def test_table_rows_run_on_the_callers_loop_and_skip_torch_with_a_reason(monkeypatch):
    """What notebooks/07_serving_while_training.ipynb does: import the example and await its rows on the
    running loop; where torch is not installed its row is skipped and the reason printed."""
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))  # the load generator's process imports it by name too
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the import sets them
        monkeypatch.setenv(name, "1")
    example = __import__(EXAMPLE.stem)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed: find_spec gives None
    lines: list[str] = []
    rows = await example.table_rows(("none", "torch"), rate=20, seconds=0.5, warmup=0.1, echo=lines.append)
    assert [row["engine"] for row in rows] == ["none"]
    assert rows[0]["requests"] == 10 and 0 < rows[0]["p50_ms"] <= rows[0]["p99_ms"] <= rows[0]["max_ms"]
    assert lines[0] == example.HEADER and lines[1].split()[0] == "none"
    assert lines[2] == "torch      skipped: torch is not installed (pip install torch)"
