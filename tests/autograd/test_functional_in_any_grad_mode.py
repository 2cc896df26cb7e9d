"""autograd.functional as torch's current tests use it (Note [The functional API records in any
grad mode], Note [One Jacobian whatever the strategy] in asyncgrad/autograd/functional.py):

* ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp`` called under ``no_grad`` still
  differentiate, give no history without ``create_graph`` and history with it, and leave grad
  mode off for the caller (torch's test_*_no_grad);
* ``jacobian``/``hessian`` with ``vectorize=True`` (and forward-mode strategies) give torch's
  values, for several inputs and outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

F = ag.autograd.functional


def _exp_reducer(x):
    return x.exp().sum(dim=1)


def _cube(x):
    return (x ** 3).sum()


def _rand(*shape):
    return ag.tensor(np.random.RandomState(3).rand(*shape), dtype=ag.float64)


CALLS = {
    "vjp": lambda x, v, cg: F.vjp(_exp_reducer, x, v[:, 0].contiguous(), create_graph=cg),
    "jvp": lambda x, v, cg: F.jvp(_exp_reducer, x, v, create_graph=cg),
    "jacobian": lambda x, v, cg: F.jacobian(_exp_reducer, x, create_graph=cg),
    "hessian": lambda x, v, cg: F.hessian(_cube, x, create_graph=cg),
    "hvp": lambda x, v, cg: F.hvp(_cube, x, v, create_graph=cg),
    "vhp": lambda x, v, cg: F.vhp(_cube, x, v, create_graph=cg),
}


def _last(result):
    return result[1] if isinstance(result, tuple) else result


@pytest.mark.parametrize("name", list(CALLS))
async def test_under_no_grad(name):
    x, v = _rand(4, 4), ag.ones(4, 4, dtype=ag.float64)
    with ag.no_grad():
        plain = _last(await CALLS[name](x, v, False))
        assert not ag.is_grad_enabled()
    assert plain.grad_fn is None
    assert np.any(plain.numpy() != 0)
    x.requires_grad_()
    v.requires_grad_()
    with ag.no_grad():
        recorded = _last(await CALLS[name](x, v, True))
        assert not ag.is_grad_enabled()
    assert recorded.grad_fn is not None
    np.testing.assert_allclose(recorded.detach().numpy(), plain.numpy())


@pytest.mark.parametrize("name", list(CALLS))
async def test_under_no_grad_matches_torch(torch, name):
    x, v = _rand(4, 4), ag.ones(4, 4, dtype=ag.float64)
    tx, tv = torch.tensor(x.numpy()), torch.ones(4, 4, dtype=torch.float64)
    fns = {"vjp": lambda: torch.autograd.functional.vjp(lambda t: t.exp().sum(dim=1), tx, tv[:, 0]),
           "jvp": lambda: torch.autograd.functional.jvp(lambda t: t.exp().sum(dim=1), tx, tv),
           "jacobian": lambda: torch.autograd.functional.jacobian(lambda t: t.exp().sum(dim=1), tx),
           "hessian": lambda: torch.autograd.functional.hessian(lambda t: (t ** 3).sum(), tx),
           "hvp": lambda: torch.autograd.functional.hvp(lambda t: (t ** 3).sum(), tx, tv),
           "vhp": lambda: torch.autograd.functional.vhp(lambda t: (t ** 3).sum(), tx, tv)}
    with torch.no_grad():
        expected = _last(fns[name]())
    with ag.no_grad():
        got = _last(await CALLS[name](x, v, False))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)


def _two_in_two_out(lib):
    def f(a, b):
        return (a * b.sum()).sin(), lib.stack([a.sum() * b[0], b.exp().sum()])
    return f


@pytest.mark.parametrize("vectorize,strategy",
                         [(True, "reverse-mode"), (True, "forward-mode"), (False, "reverse-mode")])
async def test_jacobian_vectorized_matches_torch(torch, vectorize, strategy):
    a, b = np.random.RandomState(4).randn(3), np.random.RandomState(5).randn(2)
    expected = torch.autograd.functional.jacobian(_two_in_two_out(torch), (torch.tensor(a), torch.tensor(b)),
                                                  vectorize=vectorize, strategy=strategy)
    got = await F.jacobian(_two_in_two_out(ag), (ag.tensor(a), ag.tensor(b)), vectorize=vectorize, strategy=strategy)
    for got_row, expected_row in zip(got, expected):
        for g, e in zip(got_row, expected_row):
            assert tuple(g.shape) == tuple(e.shape)
            np.testing.assert_allclose(g.numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
async def test_hessian_vectorized_matches_torch(torch, strategy):
    a, b = np.random.RandomState(6).randn(3), np.random.RandomState(7).randn(3)

    def f(lib):
        return lambda x, y: (x.exp() * y.sin()).sum() + (x * x * y).sum()

    expected = torch.autograd.functional.hessian(f(torch), (torch.tensor(a), torch.tensor(b)), vectorize=True,
                                                 outer_jacobian_strategy=strategy)
    got = await F.hessian(f(ag), (ag.tensor(a), ag.tensor(b)), vectorize=True, outer_jacobian_strategy=strategy)
    for got_row, expected_row in zip(got, expected):
        for g, e in zip(got_row, expected_row):
            np.testing.assert_allclose(g.numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-14)
