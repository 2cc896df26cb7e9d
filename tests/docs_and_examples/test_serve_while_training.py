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
