"""ag.functional against finite differences and torch.autograd.functional; gradcheck (the profiler's
tests are in test_profiler.py)."""

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad import functional as F


def f_vec(x):
    return (x ** 2).sin() * x.sum()


def f_scalar(x, y):
    return ((x * y).tanh() ** 2).sum() + (x ** 3).sum()


def numeric_jacobian(f, x, eps=1e-6):
    out = f(x)
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        jac[(...,) + idx] = (f(xp) - f(xm)) / (2 * eps)
    return jac


def f_vec_np(x):
    return np.sin(x ** 2) * x.sum()


async def test_jacobian_and_vjp_jvp_match_finite_differences(rng):
    x_np = rng.standard_normal(4)
    x = ag.tensor(x_np)
    jac = await F.jacobian(f_vec, x)
    expected = numeric_jacobian(f_vec_np, x_np)
    np.testing.assert_allclose(jac.numpy(), expected, rtol=1e-6, atol=1e-8)
    v = rng.standard_normal(4)
    _, vjp = await F.vjp(f_vec, x, ag.tensor(v))
    np.testing.assert_allclose(vjp.numpy(), v @ expected, rtol=1e-6, atol=1e-8)
    out, jvp = await F.jvp(f_vec, x, ag.tensor(v))
    np.testing.assert_allclose(jvp.numpy(), expected @ v, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(out.numpy(), f_vec_np(x_np))


async def test_hessian_hvp_vhp_match_finite_differences(rng):
    x_np, y_np = rng.standard_normal(3), rng.standard_normal(3)
    x, y = ag.tensor(x_np), ag.tensor(y_np)

    def grad_np(x):
        return 2 * np.tanh(x * y_np) * (1 - np.tanh(x * y_np) ** 2) * y_np + 3 * x ** 2

    expected = numeric_jacobian(grad_np, x_np)
    hxx, hxy = (await F.hessian(f_scalar, (x, y)))[0]
    np.testing.assert_allclose(hxx.numpy(), expected, rtol=1e-5, atol=1e-7)
    v = rng.standard_normal(3)
    _, (hv, _) = await F.hvp(f_scalar, (x, y), (ag.tensor(v), ag.zeros(3, dtype=ag.float64)))
    np.testing.assert_allclose(hv.numpy(), expected @ v, rtol=1e-5, atol=1e-7)
    _, (vh, _) = await F.vhp(f_scalar, (x, y), (ag.tensor(v), ag.zeros(3, dtype=ag.float64)))
    np.testing.assert_allclose(vh.numpy(), v @ expected, rtol=1e-5, atol=1e-7)


async def test_functional_matches_torch(torch, rng):
    x_np, y_np = rng.standard_normal(3), rng.standard_normal(3)
    tx, ty = torch.tensor(x_np), torch.tensor(y_np)
    x, y = ag.tensor(x_np), ag.tensor(y_np)
    t_h = torch.autograd.functional.hessian(f_scalar, (tx, ty))
    a_h = await F.hessian(f_scalar, (x, y))
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(a_h[i][j].numpy(), t_h[i][j].numpy(), rtol=1e-10, atol=1e-12)
    t_j = torch.autograd.functional.jacobian(f_vec, tx)
    np.testing.assert_allclose((await F.jacobian(f_vec, x)).numpy(), t_j.numpy(), rtol=1e-10, atol=1e-12)
    v = torch.tensor(rng.standard_normal(3))
    _, t_jvp = torch.autograd.functional.jvp(f_vec, tx, v)
    _, a_jvp = await F.jvp(f_vec, x, ag.tensor(v.numpy()))
    np.testing.assert_allclose(a_jvp.numpy(), t_jvp.numpy(), rtol=1e-10)


async def test_functional_create_graph_and_strict():
    x = ag.tensor([0.3, -0.7], dtype=ag.float64, requires_grad=True)
    _, g = await F.vjp(lambda t: (t ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    (gg,) = await ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        await F.vjp(lambda t: ag.ones(2, dtype=ag.float64) * 1.0, x, ag.ones(2, dtype=ag.float64), strict=True)
    with pytest.raises(RuntimeError, match="The vector v can only be None"):
        await F.vjp(lambda t: t * 2, x)


async def test_gradcheck_catches_a_wrong_backward():
    class Wrong(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    with pytest.raises(ag.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        await ag.gradcheck(Wrong.apply, (x,))
    assert not await ag.gradcheck(Wrong.apply, (x,), raise_exception=False)
    assert await ag.gradcheck(lambda t: (t.exp() * t).sum(), (x,))
    assert await ag.gradgradcheck(lambda t: (t.exp() * t).sum(), (x,))


# ------------------------------------------------- refusals (Note [One Jacobian whatever the strategy])
def _sq(x):
    return x * x


def _scalar(x):
    return (x * x).sum()


TORCH_REFUSALS = [
    # (what, call args) -> torch and asyncgrad raise the same type with the same words
    ("jacobian", dict(strategy="sideways")),
    ("jacobian", dict(strategy="forward-mode", create_graph=True)),
    ("jacobian", dict(strategy="forward-mode", strict=True)),
    ("jacobian", dict(strategy="forward-mode")),
    ("jacobian", dict(vectorize=True, strict=True)),
    ("hessian", dict(outer_jacobian_strategy="sideways")),
    ("hessian", dict(outer_jacobian_strategy="forward-mode")),
    ("hessian", dict(outer_jacobian_strategy="forward-mode", create_graph=True)),
]


@pytest.mark.parametrize("fn, kwargs", TORCH_REFUSALS, ids=[f"{f}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                           for f, kw in TORCH_REFUSALS])
async def test_what_torch_refuses_is_refused_in_its_words(torch, fn, kwargs):
    func = _sq if fn == "jacobian" else _scalar
    with pytest.raises(Exception) as expected:
        getattr(torch.autograd.functional, fn)(func, torch.ones(3, requires_grad=True), **kwargs)
    with pytest.raises(type(expected.value)) as got:
        await getattr(F, fn)(func, ag.ones(3, requires_grad=True), **kwargs)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("fn, kwargs", [
    ("jacobian", dict(vectorize=True)),
    ("hessian", dict(vectorize=True)),
    ("jacobian", dict(strategy="forward-mode", vectorize=True)),
    ("hessian", dict(outer_jacobian_strategy="forward-mode", vectorize=True)),
    ("jacobian", dict(vectorize=True, create_graph=True)),
], ids=["jacobian-vectorize", "hessian-vectorize", "jacobian-forward-vectorize", "hessian-forward-vectorize",
        "jacobian-vectorize-create-graph"])
async def test_vectorize_and_forward_mode_give_torchs_values(torch, fn, kwargs):
    """torch computes these with vmap or dual tensors; asyncgrad computes the same Jacobian one
    vjp per row (Note [One Jacobian whatever the strategy])."""
    func = _sq if fn == "jacobian" else _scalar
    values = np.array([1.0, -2.0, 0.5])
    expected = getattr(torch.autograd.functional, fn)(func, torch.tensor(values, requires_grad=True), **kwargs)
    got = await getattr(F, fn)(func, ag.tensor(values, dtype=ag.float64, requires_grad=True), **kwargs)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy())
    if "forward-mode" not in kwargs.values():  # torch's forward mode hands back its dual tensors' history
        assert (got.grad_fn is not None) == (expected.grad_fn is not None)
