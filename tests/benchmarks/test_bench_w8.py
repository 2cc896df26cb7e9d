"""W8 (the LeNet step) computes torch's gradients: the benchmark's own check, run as a test.

Only correctness is asserted; ``python -m benchmarks --only W8`` reports the timings.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_w8_gradients_agree_with_torch():
    pytest.importorskip("torch", reason="W8 compares asyncgrad's LeNet step with torch's")
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "W8", "--frameworks", "asyncgrad,torch"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| 32 |")]
    assert len(rows) == 2, run.stdout
    assert "| ok |" in rows[0] and "| reference |" in rows[1], run.stdout


async def test_w8_step_matches_torch_in_process(torch):
    """The same check without the runner: one float64 step's loss and gradients, fingerprinted."""
    from benchmarks.frameworks import load
    from benchmarks.runner import _agrees
    from benchmarks.workloads.w8_lenet import run

    ours = await run(load("asyncgrad"), 4, 1, 0)
    theirs = await run(load("torch"), 4, 1, 0)
    assert _agrees(ours.check, theirs.check) == "ok"
    assert set(ours.metrics) == {"step_ms", "forward_ms", "backward_ms", "update_ms"}
