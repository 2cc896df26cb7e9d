"""Property test: binary elementwise ops over random broadcastable shapes, against finite differences."""

from __future__ import annotations

import asyncio

import numpy as np
from helpers import check_op
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: x ** y,
    "maximum": lambda lib, x, y: lib.maximum(x, y),
    "minimum": lambda lib, x, y: lib.minimum(x, y),
    "where": lambda lib, x, y: lib.where(x > y, x * y, y - x),
    "chain": lambda x, y: (x * y + x / y) ** 2 - y,
}


@settings(max_examples=40, deadline=None)
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3),
    op=st.sampled_from(sorted(BINARY)),
    seed=st.integers(0, 2**16),
    requires_grad=st.sampled_from([(True, True), (True, False), (False, True)]),
)
def test_binary_broadcasting_property(shapes, op, seed, requires_grad):
    a, b = shapes.input_shapes
    # positive inputs in [0.5, 2] keep div, pow and the selections smooth; random draws almost
    # never tie, and a tie within the FD step would be caught as a mismatch
    out, grads = asyncio.run(check_op(BINARY[op], a, b, seed=seed, low=0.5, high=2.0, requires_grad=requires_grad))
    assert out.shape == shapes.result_shape
    wanted = [s for s, r in zip((a, b), requires_grad) if r]
    assert [g.shape for g in grads] == wanted
    assert all(np.isfinite(g.cpu().numpy()).all() for g in grads)
