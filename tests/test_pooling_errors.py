"""max_pool2d/avg_pool2d name themselves in their size errors, with torch 2.13's words for each
argument (stride's "omitted", dilation's own word order)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

try:  # torch is optional: without it only the comparison with torch is left out
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

CASES = [
    ("max_pool2d", {"kernel_size": (2, 2, 2)},
     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    ("max_pool2d", {"kernel_size": 2, "stride": (1, 1, 1)},
     "max_pool2d: stride must either be omitted, a single int, or a tuple of two ints"),
    ("max_pool2d", {"kernel_size": 2, "padding": (1, 1, 1)},
     "max_pool2d: padding must either be a single int, or a tuple of two ints"),
    ("max_pool2d", {"kernel_size": 2, "dilation": (1, 1, 1)},
     "max_pool2d: dilation must be either a single int, or a tuple of two ints"),
    ("avg_pool2d", {"kernel_size": (2, 2, 2)},
     "avg_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    ("avg_pool2d", {"kernel_size": 2, "stride": (1, 1, 1)},
     "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints"),
    ("avg_pool2d", {"kernel_size": 2, "padding": (1, 1, 1)},
     "avg_pool2d: padding must either be a single int, or a tuple of two ints"),
]


@pytest.mark.parametrize(("fn", "kwargs", "message"), CASES)
def test_pool2d_size_errors(fn: str, kwargs: dict, message: str) -> None:
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 5))
    with pytest.raises(RuntimeError) as ours:
        getattr(ag.nn.functional, fn)(ag.tensor(x), **kwargs)
    assert str(ours.value) == message
    if torch is not None:
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch.nn.functional, fn)(torch.tensor(x), **kwargs)
        assert str(theirs.value) == message
