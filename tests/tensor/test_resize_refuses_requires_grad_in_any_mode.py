"""resize_ refuses a tensor that requires grad in any grad mode, to its own shape too, as torch's;
an out= result that requires grad is still resized under no_grad (torch's resize_output)."""

from __future__ import annotations

import warnings

import pytest
from helpers import check_raises, torch

import asyncgrad as ag

RESIZE_GRAD = "cannot resize variables that require grad"


def _libs():
    return (ag, torch) if torch is not None else (ag,)


@pytest.mark.parametrize("resize", [
    lambda lib, x: x.resize_(2),
    lambda lib, x: x.resize_(3),
    lambda lib, x: x.resize_as_(lib.ones(3)),
])
@pytest.mark.parametrize("leaf", [True, False])
def test_resize_refuses_a_tensor_that_requires_grad_under_no_grad(resize, leaf):
    def attempt(lib):
        x = lib.zeros(2, requires_grad=True)
        if not leaf:
            x = x * 1
        with lib.no_grad():
            resize(lib, x)

    check_raises(attempt, RuntimeError, RESIZE_GRAD)


def test_an_out_result_that_requires_grad_is_resized_under_no_grad():
    for lib in _libs():
        out = lib.zeros(2, requires_grad=True)
        with lib.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecation warning of resizing a non-empty out
            lib.add(lib.ones(3), 1, out=out)
        assert tuple(out.shape) == (3,) and out.tolist() == [2.0, 2.0, 2.0]
