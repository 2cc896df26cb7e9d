"""gradcheck as torch's current tests use it: ``check_batched_grad=True`` computed (not refused),
``nondet_tol`` deciding "Backward is not reentrant", and torch's AssertionError when an output's
shape or dtype depends on the input's values (Note [gradcheck as torch])."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import asyncgrad as ag


def _x():
    return ag.tensor(np.random.RandomState(0).randn(3, 2), dtype=ag.float64, requires_grad=True)


@pytest.mark.parametrize("fn", [lambda t: t.sin(), lambda t: (t * t).sum(0), lambda t: (t.exp(), t.t() @ t)])
async def test_check_batched_grad_is_computed(fn):
    assert await ag.gradcheck(fn, (_x(),), check_batched_grad=True)
    assert await ag.gradgradcheck(fn, (_x(),), check_batched_grad=True)


async def test_check_batched_grad_with_an_unused_input():
    y = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    assert await ag.gradcheck(lambda a, b: a * 2, (_x(), y), check_batched_grad=True)


async def test_check_batched_grad_failure_is_torchs_message(monkeypatch):
    """A batched backward that differs from the one-at-a-time one fails with torch's words."""
    gc_module = sys.modules["asyncgrad.autograd.gradcheck"]
    real = gc_module.grad

    async def skewed(*args, **kwargs):
        grads = await real(*args, **kwargs)
        if kwargs.get("is_grads_batched"):
            return tuple(g * 2 if g is not None else g for g in grads)
        return grads

    monkeypatch.setattr(gc_module, "grad", skewed)
    with pytest.raises(ag.GradcheckError, match="For output 0 and input 0:\n\ngradcheck or gradgradcheck failed while "
                                                "testing batched gradient computation"):
        await ag.gradcheck(lambda t: t.sin(), (_x(),), check_batched_grad=True)


class _NonDet(ag.autograd.Function):
    """torch's NonDetFunc: the backward scales by ``1 + jitter * uniform``."""

    @staticmethod
    def forward(ctx, x, jitter=0.0):
        ctx._jitter = jitter
        return x

    @staticmethod
    def backward(ctx, grad_out):
        return _NonDet.apply(grad_out, ctx._jitter) * (1 + ag.rand_like(grad_out) * ctx._jitter), None


@pytest.mark.parametrize("fast_mode", [False, True])
async def test_nondet_tol(fast_mode):
    inp = ag.tensor(np.random.RandomState(1).randn(5, 5), dtype=ag.float64, requires_grad=True)
    assert await ag.gradcheck(lambda x: _NonDet.apply(x, 0.0), inp, check_batched_grad=False, fast_mode=fast_mode)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        await ag.gradcheck(lambda x: _NonDet.apply(x, 1e-6), inp, check_batched_grad=False, fast_mode=fast_mode)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        await ag.gradgradcheck(lambda x: _NonDet.apply(x, 1e-12), inp, check_batched_grad=False, fast_mode=fast_mode)
    assert await ag.gradcheck(lambda x: _NonDet.apply(x, 0.0), inp, nondet_tol=1e-5, fast_mode=fast_mode)
    assert await ag.gradcheck(lambda x: _NonDet.apply(x, 1e-6), inp, nondet_tol=1e-5, fast_mode=fast_mode)
    assert await ag.gradgradcheck(lambda x: _NonDet.apply(x, 1e-12), inp, nondet_tol=1e-5, fast_mode=fast_mode)


async def test_output_shape_depends_on_values(torch):
    def fn(lib):
        def f(x):
            return lib.cat([x, x]) if lib.all(x >= 1) else x
        return f

    with pytest.raises(AssertionError) as expected:
        torch.autograd.gradcheck(fn(torch), (torch.ones(1, dtype=torch.double, requires_grad=True),))
    with pytest.raises(AssertionError) as got:
        await ag.gradcheck(fn(ag), (ag.ones(1, dtype=ag.float64, requires_grad=True),))
    assert str(got.value) == str(expected.value).replace("torch.Size", "asyncgrad.Size")
    assert "return outputs with the same shape when inputs are perturbed on index (0,) by 1e-06" in str(got.value)


async def test_output_dtype_depends_on_values(torch):
    def fn(lib):
        def f(x):
            return x.to(lib.float32) if lib.all(x >= 1) else x
        return f

    with pytest.raises(AssertionError) as expected:
        torch.autograd.gradcheck(fn(torch), (torch.ones(1, dtype=torch.double, requires_grad=True),))
    with pytest.raises(AssertionError) as got:
        await ag.gradcheck(fn(ag), (ag.ones(1, dtype=ag.float64, requires_grad=True),), raise_exception=False)
    assert str(got.value) == str(expected.value).replace("torch.", "asyncgrad.")
