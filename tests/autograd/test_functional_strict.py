"""functional.vjp/jvp/jacobian/hessian/vhp/hvp with ``strict=True`` (and without): they raise
where torch raises, with torch's words, and otherwise return torch's values (Note [Strict mode
as torch] in asyncgrad/autograd/functional.py)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
import asyncgrad.autograd.functional as AF

X = np.array([0.3, -0.7, 1.2])
Y = np.array([0.5, 2.0, -1.5])

# name -> (function name, func of the library, number of inputs, uses v)
FUNCS = {
    "cubic": (lambda L, x, y: (x ** 3 * y).sum()),
    "independent of y": (lambda L, x, y: (x ** 3).sum()),
    "linear": (lambda L, x, y: (2 * x + 3 * y).sum()),
    "quadratic in x, linear in y": (lambda L, x, y: (x * x).sum() + y.sum()),
    "constant": (lambda L, x, y: L.ones(()) * 2.0),
    "uses only a detached input": (lambda L, x, y: (x.detach() ** 2).sum()),
    "vector cubic": (lambda L, x, y: x ** 3 * y),
    "vector linear": (lambda L, x, y: 2 * x + y),
    "vector of x only": (lambda L, x, y: x * x),
    "two outputs": (lambda L, x, y: (x * y, x.sum() * 2)),
    "relu": (lambda L, x, y: L.relu(x) * y),
}
SCALAR = {"cubic", "independent of y", "linear", "quadratic in x, linear in y", "constant",
          "uses only a detached input"}


def _lib_functional(lib):
    return AF if lib is ag else lib.autograd.functional


async def _run(lib, api: str, name: str, strict: bool, create_graph: bool):
    fn = FUNCS[name]
    x, y = lib.tensor(X), lib.tensor(Y)
    functional = _lib_functional(lib)

    def func(a, b):
        return fn(lib, a, b)

    if api in ("vjp",):
        probe = func(x, y)
        outs = probe if isinstance(probe, tuple) else (probe,)
        v = tuple(lib.ones(o.shape) * 0.5 for o in outs)
        result = functional.vjp(func, (x, y), v if isinstance(probe, tuple) else v[0], create_graph=create_graph,
                                strict=strict)
    elif api == "jvp":
        result = functional.jvp(func, (x, y), (lib.ones(3), lib.ones(3) * 0.5), create_graph=create_graph,
                                strict=strict)
    elif api == "jacobian":
        result = functional.jacobian(func, (x, y), create_graph=create_graph, strict=strict)
    elif api == "hessian":
        result = functional.hessian(func, (x, y), create_graph=create_graph, strict=strict)
    else:
        result = getattr(functional, api)(func, (x, y), (lib.ones(3), lib.ones(3) * 0.5), create_graph=create_graph,
                                          strict=strict)
    if lib is ag:
        result = await result
    return result


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


CASES = [(api, name) for api in ("vjp", "jvp", "jacobian") for name in FUNCS] + \
        [(api, name) for api in ("hessian", "vhp", "hvp") for name in SCALAR]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("api,name", CASES)
async def test_functional_strict_is_torchs(torch, api, name, strict, create_graph):
    ag.set_default_dtype(ag.float64)  # conftest restores it
    try:
        theirs = await _run(torch, api, name, strict, create_graph)
    except RuntimeError as exc:
        with pytest.raises(RuntimeError) as mine:
            await _run(ag, api, name, strict, create_graph)
        assert str(mine.value) == str(exc)
        return
    mine = await _run(ag, api, name, strict, create_graph)
    flat_mine, flat_theirs = _flatten(mine), _flatten(theirs)
    assert len(flat_mine) == len(flat_theirs)
    for m, t in zip(flat_mine, flat_theirs):
        assert tuple(m.shape) == tuple(t.shape)
        np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
        assert m.requires_grad == t.requires_grad


async def test_strict_cases_that_raise():
    """The errors the issue names, independently of torch being installed."""
    x, y = ag.tensor(X), ag.tensor(Y)
    with pytest.raises(RuntimeError, match=r"^The output of the user-provided function is independent of input 1\. "
                                           r"This is not allowed in strict mode\.$"):
        await AF.vjp(lambda a, b: (a ** 3).sum(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match=r"^Output 0 of the user-provided function is independent of input 1\."):
        await AF.jacobian(lambda a, b: a ** 3, (x, y), strict=True)
    with pytest.raises(RuntimeError, match=r"strict mode when create_graph=True\.$"):
        await AF.vjp(lambda a: 2 * a, x, ag.ones(3, dtype=ag.float64), create_graph=True, strict=True)
    with pytest.raises(RuntimeError, match=r"strict mode when create_graph=True\.$"):
        await AF.jvp(lambda a: 2 * a, x, ag.ones(3, dtype=ag.float64), create_graph=True, strict=True)
    with pytest.raises(RuntimeError, match=r"^While computing the hessian, found that the jacobian of the "
                                           r"user-provided function with respect to input 0 is independent"):
        await AF.hessian(lambda a: (2 * a).sum(), x, strict=True)
    # not strict: zeros where the graph has no gradient
    _, (gx, gy) = await AF.vjp(lambda a, b: (a ** 3).sum(), (x, y))
    assert gy.tolist() == [0.0, 0.0, 0.0] and np.allclose(gx.numpy(), 3 * X ** 2)
    h = await AF.hessian(lambda a: (2 * a).sum(), x)
    assert h.shape == (3, 3) and not h.numpy().any()


async def test_strict_hessian_matches_finite_differences():
    x = ag.tensor(X, dtype=ag.float64)
    h = await AF.hessian(lambda a: (a ** 3).sum() * a[0], x, strict=True)
    eps = 1e-6
    numeric = np.zeros((3, 3))

    def gradient(v):
        return np.array([3 * v[i] ** 2 * v[0] for i in range(3)]) + np.array([(v ** 3).sum(), 0, 0])

    for j in range(3):
        d = np.zeros(3)
        d[j] = eps
        numeric[:, j] = (gradient(X + d) - gradient(X - d)) / (2 * eps)
    np.testing.assert_allclose(h.numpy(), numeric, rtol=1e-6, atol=1e-6)
