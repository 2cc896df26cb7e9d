"""``python -m benchmarks.stalls --trace``: the longest loop iteration and the collector's passes in it, and
the loop is left as it was."""

from __future__ import annotations

import asyncio

from benchmarks import stalls


def test_the_longest_iteration_is_named_with_the_passes_that_started_in_it():
    iterations = stalls.Iterations()
    iterations.starts = [0.0, 0.001, 0.004, 0.005]
    passes = [(0.0005, 0, 1e-5), (0.002, 1, 2e-4), (0.0039, 0, 3e-5), (0.0045, 2, 1e-3)]
    assert iterations.worst(passes) == {"iteration_ms": 3.0, "passes": [(1, 0.2), (0, 0.03)]}
    assert stalls.Iterations().worst(passes) == {"iteration_ms": 0.0, "passes": []}


async def test_a_traced_run_reports_and_gives_the_loop_back():
    loop = asyncio.get_running_loop()
    result = await stalls.measure("many", 0.05, collector=True, trace=True)
    worst = result["worst_iteration"]
    assert worst["iteration_ms"] > 0
    assert all(generation in (0, 1, 2) and ms >= 0 for generation, ms in worst["passes"])
    assert "_run_once" not in loop.__dict__, "the loop's own _run_once is back"
