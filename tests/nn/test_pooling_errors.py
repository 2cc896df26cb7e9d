"""Pooling size arguments of the wrong length get torch 2.13's errors: max_pool2d/avg_pool2d name
themselves, with each argument's own words (stride's "omitted", dilation's word order); the 1-D
poolings refuse anything but one int instead of pooling with the first."""

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


CASES_1D = [
    ("max_pool1d", {"kernel_size": (2, 2)},
     "max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got size 2"),
    ("max_pool1d", {"kernel_size": ()},
     "max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got size 0"),
    ("max_pool1d", {"kernel_size": 2, "stride": [1, 1]},
     "max_pool1d() stride must be None, an int, list of ints, or tuple of ints of size 1 but got size 2"),
    ("max_pool1d", {"kernel_size": 2, "padding": (1, 1)},
     "max_pool1d() padding must be an int, list of ints, or tuple of ints of size 1 but got size 2"),
    ("max_pool1d", {"kernel_size": 2, "dilation": (1, 1)},
     "max_pool1d() dilation must be an int, list of ints or tuple of ints of size 1 but got size 2"),
    ("avg_pool1d", {"kernel_size": (2, 2)}, "avg_pool1d() argument 'kernel_size' should contain one int (got 2)"),
    ("avg_pool1d", {"kernel_size": 2, "stride": (1, 1)},
     "avg_pool1d() argument 'stride' should contain one int (got 2)"),
    ("avg_pool1d", {"kernel_size": 2, "padding": (1, 1)},
     "avg_pool1d() argument 'padding' should contain one int (got 2)"),
]


@pytest.mark.parametrize(("fn", "kwargs", "message"), CASES_1D)
def test_pool1d_size_errors(fn: str, kwargs: dict, message: str) -> None:
    """A 1-D pooling refuses a size of more (or fewer) than one int, as torch does, instead of
    pooling with its first element."""
    x = np.random.default_rng(0).standard_normal((1, 2, 6))
    with pytest.raises(RuntimeError) as ours:
        getattr(ag.nn.functional, fn)(ag.tensor(x), **kwargs)
    assert str(ours.value) == message
    if torch is not None:
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch.nn.functional, fn)(torch.tensor(x), **kwargs)
        assert str(theirs.value) == message


@pytest.mark.parametrize("fn", ["max_pool1d", "avg_pool1d"])
def test_pool1d_one_element_sizes_and_omitted_stride(fn: str) -> None:
    """One-element lists and tuples, and ``stride=()`` (omitted: the kernel size), pool as plain ints do."""
    x = np.random.default_rng(1).standard_normal((1, 2, 7))
    pool = getattr(ag.nn.functional, fn)
    expected = pool(ag.tensor(x), 2, 2, 1).numpy()
    np.testing.assert_array_equal(pool(ag.tensor(x), [2], (), (1,)).numpy(), expected)
    if torch is not None:
        theirs = getattr(torch.nn.functional, fn)(torch.tensor(x), [2], (), (1,))
        np.testing.assert_allclose(theirs.numpy(), expected)
