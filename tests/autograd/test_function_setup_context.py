"""Custom Functions as torch 2.13: setup_context, vjp, clear_saved_tensors_on_access,
InplaceFunction, non-Tensor outputs, set_materialize_grads, calling a node, once_differentiable
around an async def backward."""

import warnings

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch")

X = np.array([0.4, -1.3, 2.2])


def make(lib):
    """The same Functions for asyncgrad and torch."""
    F = lib.autograd.Function

    class Scale(F):  # setup_context style, backward spelt vjp, a default bound
        @staticmethod
        def forward(x, k=3.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]
            ctx.seen = (len(inputs), tuple(output.shape))

        @staticmethod
        def vjp(ctx, g):
            return g * ctx.k, None

    class Both(F):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def vjp(ctx, g):
            return g

    class Once(F):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            try:
                ctx.saved_tensors  # noqa: B018  (the access itself raises)
            except RuntimeError as e:
                ctx.second = str(e)
            return g * x.exp()

    class Mixed(F):  # non-Tensor outputs keep their slots
        @staticmethod
        def forward(ctx, x):
            return 3, x * 2, "s", x.sin()

        @staticmethod
        def backward(ctx, *grads):
            Mixed.seen = [None if g is None else g.tolist() for g in grads]
            return grads[1] * 2 + grads[3] * ctx.saved_cos

    class Unmaterialized(F):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            a, b = x * 2, x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            Unmaterialized.seen = (ga is None, gb is None)
            return ga * 2

    class Short(F):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    return Scale, Both, Once, Mixed, Unmaterialized, Short


def _mixed_apply(lib, Mixed, x):
    out = Mixed.apply(x)
    out[3].grad_fn.saved_cos = x.detach().cos()
    return out


async def test_setup_context_and_vjp_match_torch_and_finite_differences():
    Scale, *_ = make(ag)
    TScale, *_ = make(torch)
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    y = Scale.apply(x)
    assert y.grad_fn.seen == (2, (3,))
    (g,) = await ag.grad((y * y).sum(), x)
    tx = torch.tensor(X, requires_grad=True)
    (tg,) = torch.autograd.grad((TScale.apply(tx) ** 2).sum(), tx)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), 18 * X, rtol=1e-12)
    assert await ag.gradcheck(Scale.apply, (x,))


def test_errors_and_warnings_are_torchs():
    """Plain tests: with no loop running, backward() runs at once, as in torch."""
    def errors(lib):
        _, Both, Once, _, _, Short = make(lib)
        x = lib.ones(3, requires_grad=True)
        found = []
        for fn in (lambda: Both.apply(x).sum().backward(), lambda: Short.apply(x, x).sum().backward(),
                   lambda: lib.autograd.function.InplaceFunction(True)(x)):
            try:
                fn()
            except RuntimeError as e:
                found.append(str(e).split("\n")[0])
        y = Once.apply(x)
        node = y.grad_fn
        y.sum().backward()
        found.append(node.second)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Both()
        found.append(str(caught[0].message).split(">", 1)[1])
        return found

    assert errors(ag) == errors(torch)


async def test_non_tensor_outputs_keep_one_gradient_slot_each():
    _, _, _, Mixed, _, _ = make(ag)
    _, _, _, TMixed, _, _ = make(torch)
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    out = _mixed_apply(ag, Mixed, x)
    assert out[0] == 3 and out[2] == "s" and out[1].output_nr == 1 and out[3].output_nr == 3
    await (out[1] * out[3]).sum().backward()
    tx = torch.tensor(X, requires_grad=True)
    tout = _mixed_apply(torch, TMixed, tx)
    assert tout[1].output_nr == 1 and tout[3].output_nr == 3
    (tout[1] * tout[3]).sum().backward()
    assert Mixed.seen == [None, pytest.approx(np.sin(X).tolist()), None, pytest.approx((2 * X).tolist())]
    assert [s is None for s in Mixed.seen] == [s is None for s in TMixed.seen]
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    # d/dx sum(2x * sin x) = 2 sin x + 2x cos x
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.sin(X) + 2 * X * np.cos(X), rtol=1e-12)


async def test_set_materialize_grads_false_with_a_non_differentiable_output():
    *_, Unmaterialized, _ = make(ag)
    *_, TUnmaterialized, _ = make(torch)
    x = ag.ones(3, requires_grad=True)
    a, b = Unmaterialized.apply(x)
    assert not b.requires_grad
    await a.sum().backward()
    tx = torch.ones(3, requires_grad=True)
    ta, _ = TUnmaterialized.apply(tx)
    ta.sum().backward()
    assert Unmaterialized.seen == TUnmaterialized.seen == (False, True)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


async def test_calling_a_node_runs_its_backward_as_torch():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    ours = (x * x).grad_fn(ag.ones(3, dtype=ag.float64))
    theirs = (tx * tx).grad_fn(torch.ones(3, dtype=torch.float64))
    assert len(ours) == len(theirs) == 2 and ours[0].grad_fn is not None
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy())
    np.testing.assert_allclose(x.sin().grad_fn(ag.ones(3, dtype=ag.float64)).detach().numpy(), np.cos(X))
    assert (x * x).grad_fn(None) == (None, None) == (tx * tx).grad_fn(None)
    with pytest.raises(TypeError, match="^expected 1 arguments, got 2 instead$"):
        (x * x).grad_fn(ag.ones(3), ag.ones(3))
    Scale, *_ = make(ag)
    np.testing.assert_allclose(Scale.apply(x).grad_fn(ag.ones(3, dtype=ag.float64))[0].detach().numpy(), [3.0] * 3)


class AsyncOnce(ag.Function):
    recorded = None

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    @ag.once_differentiable
    async def backward(ctx, g):
        import asyncio
        await asyncio.sleep(0)  # grad mode must stay off across the suspension
        AsyncOnce.recorded = ag.is_grad_enabled()
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


async def test_once_differentiable_holds_grad_mode_off_for_an_async_backward():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    (g,) = await ag.grad(AsyncOnce.apply(x).sum(), x, create_graph=True)
    assert AsyncOnce.recorded is False and not g.requires_grad  # as torch: no incoming grad required grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * X ** 2)
    v = ag.ones(3, dtype=ag.float64, requires_grad=True)
    (g,) = await ag.grad(AsyncOnce.apply(x), x, grad_outputs=v, create_graph=True)
    assert g.requires_grad
    # as torch, the Error node's edges lead to detached copies of the backward's results, not to v
    with pytest.raises(RuntimeError, match="^The differentiated Tensor at index 0 appears to not have been used"):
        await ag.grad(g.sum(), v)
    with pytest.raises(RuntimeError, match="^trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        await g.sum().backward()
