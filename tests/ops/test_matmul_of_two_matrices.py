"""Note [Two matrices first] (ops/linalg.py): two matrices are recorded as the general path records them,
and everything else (errors included) is the general path's."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.ops import linalg


class Sub(ag.Tensor):
    """Not Tensor itself: takes the general path."""

    __slots__ = ()


def _as_sub(t: ag.Tensor) -> ag.Tensor:
    sub = Sub.__new__(Sub)
    for slot in ("_data", "device", "_requires_grad", "grad_fn", "output_nr", "_grad", "_counter", "_extra"):
        setattr(sub, slot, getattr(t, slot))
    return sub


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", [ag.float64, ag.float32])
async def test_recorded_as_the_general_path_records(needs, dtype):
    rng = np.random.default_rng(0)
    a = ag.tensor(rng.standard_normal((3, 4)), dtype=dtype, requires_grad=needs[0])
    b = ag.tensor(rng.standard_normal((4, 5)), dtype=dtype, requires_grad=needs[1])
    fast = linalg.matmul(a, b)
    general = linalg.matmul(_as_sub(a), b)
    assert type(fast.grad_fn) is type(general.grad_fn) is linalg.MmBackward0
    assert fast.grad_fn.work == general.grad_fn.work
    assert (fast.grad_fn.a_shape, fast.grad_fn.b_shape) == (general.grad_fn.a_shape, general.grad_fn.b_shape)
    assert [s is None for s in fast.grad_fn.saved] == [s is None for s in general.grad_fn.saved]
    assert fast.detach().numpy().tobytes() == general.detach().numpy().tobytes()
    await fast.sum().backward()
    grads = [t.grad.numpy().copy() if t.grad is not None else None for t in (a, b)]
    a.grad = b.grad = None
    await general.sum().backward()
    for got, t in zip(grads, (a, b)):
        assert (got is None) == (t.grad is None)
        if got is not None:
            assert got.tobytes() == t.grad.numpy().tobytes()


def test_mismatches_are_the_general_paths_errors():
    a = ag.ones(3, 4, dtype=ag.float64)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x2\)"):
        a @ ag.ones(5, 2, dtype=ag.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: double != float"):
        a @ ag.ones(4, 2, dtype=ag.float32)
