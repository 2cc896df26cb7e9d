"""out= and memory overlap (review fix): torch refuses an out that partly overlaps an input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import check_raises

import asyncgrad as ag


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.add(x[1:], x[:-1], out=x[:-1]),
    lambda lib, x: lib.mul(x[:4], 2, out=x[2:]),
])
def test_out_partially_overlapping_an_input_is_refused(fn):
    """torch refuses an out= that shares some, not all, memory with an input; asyncgrad used to
    write the out-of-place result, which no torch code could rely on."""
    def run(lib):
        x = lib.arange(6.0)
        try:
            fn(lib, x)
        finally:
            assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    check_raises(run, RuntimeError, "some elements of the input tensor and the written-to tensor refer to a single "
                                    "memory location")


def test_out_fully_overlapping_an_input_is_allowed():
    x = ag.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ag.exp(x, out=x)
    np.testing.assert_allclose(x.tolist(), np.exp(np.arange(4.0)), rtol=1e-6)
