"""The benchmark runner keeps working: a quick run's gradients agree across frameworks.

Only correctness is asserted here; timings are reported by ``python -m benchmarks``, never
checked in tests.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_run_agrees_with_numpy():
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "W1,W2,W4", "--frameworks", "asyncgrad,numpy"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "| asyncgrad |" in line]
    assert len(rows) == 3 and all("| ok |" in row for row in rows), run.stdout


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_training_loop_benchmark_trains_as_torch_does(optimizer):
    pytest.importorskip("torch", reason="the loop is measured against torch")
    from benchmarks import train_loop

    result = train_loop.main(["--batch", "8", "--repeats", "3", "--warmup", "2", "--optimizer", optimizer])
    assert result["torch_s"] > 0 and result["asyncgrad_s"] > 0
    assert result["drift"] < 1e-10


@pytest.mark.parametrize("ab", [None, "kept-columns"])
def test_interleaved_steps_run(ab):
    pytest.importorskip("torch", reason="asyncgrad's steps are timed beside torch's")
    from benchmarks import interleaved

    argv = ["--steps", "2", "--warmup", "1"] + (["--only", "W8", "--ab", ab] if ab else [])
    results = interleaved.main(argv)
    assert set(results) == ({"W8"} if ab else {"W3", "W8"})
    assert all(ms > 0 for medians in results.values() for ms in medians.values())
    if not ab:  # the graph-free numpy step is timed beside W3's two frameworks
        assert set(results["W3"]) == {"asyncgrad", "torch", "numpy"}
