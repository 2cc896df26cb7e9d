"""A server parked on the loop's budget (Note [One budget per loop] in engine/budget.py) holds nothing of
a graph: when the node it just ran finished its graph task, the caller resumes with the graph freed."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.engine import budget as budget_module
from asyncgrad.engine import worker as worker_module


@pytest.mark.parametrize("last", ["sink beside the chain", "queued sink"])
async def test_the_graph_is_freed_when_the_caller_resumes(last, monkeypatch):
    monkeypatch.setattr(budget_module, "YIELD_AFTER_S", 0.0)  # due at every reading
    monkeypatch.setattr(worker_module, "CLOCK_BUDGET", 0)  # Note [Reading the clock]: after every node
    if last == "queued sink":
        monkeypatch.setattr(worker_module, "CHAIN_STEP", False)
    gc.disable()  # only reference counts may free it
    try:
        w = ag.tensor(np.full((5, 3), 0.5), requires_grad=True)
        x = ag.ones(4, 5, dtype=ag.float64)
        await (x @ w).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), np.full((5, 3), 4.0))
        leaf = weakref.ref(w)
        del w
        assert leaf() is None, gc.get_referrers(leaf())
    finally:
        gc.enable()
