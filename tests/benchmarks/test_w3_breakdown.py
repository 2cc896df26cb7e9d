"""``python -m benchmarks.w3_breakdown``: every piece of W3's step is timed, and nothing stays patched."""

from __future__ import annotations

import numpy as np

from asyncgrad.devices import buffers
from asyncgrad.ops._node import OpNode
from benchmarks import w3_breakdown


def test_every_piece_is_timed_and_the_hooks_are_removed(capsys):
    matmul, cache_matmul, apply = np.matmul, buffers.BufferCache.matmul, OpNode.__dict__["apply"]
    medians = w3_breakdown.main(["--steps", "2", "--warmup", "1"])
    out = capsys.readouterr().out
    assert "matrix products (BLAS)" in out and "engine: between nodes" in out
    pieces = list(w3_breakdown.FORWARD) + [name for name, _ in w3_breakdown.BACKWARD]
    assert all(medians[name] > 0 for name in pieces)
    assert medians["products (forward)"] > 0 and medians["products (backward)"] > 0
    assert (np.matmul, buffers.BufferCache.matmul, OpNode.__dict__["apply"]) == (matmul, cache_matmul, apply)
