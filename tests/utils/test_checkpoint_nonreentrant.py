"""Non-reentrant checkpointing (the default): recomputation on unpack, with ag.grad(), inputs=,
nested checkpoints, retained graphs, RNG replay, and torch's errors."""

import contextlib

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.checkpoint import REENTRANT_WITH_GRAD, CheckpointError, set_checkpoint_early_stop

pytest.importorskip("torch.utils.checkpoint")
torch = pytest.importorskip("torch")

X = np.array([0.3, -0.7, 1.1])
W = np.array([1.5, -0.5, 0.8])


def block(lib, w, calls):
    def run(h):
        calls.append(1)
        return (h * w).sin() * h.exp()
    return run


def loss_np(x, w):
    h = np.sin(x * w) * np.exp(x)
    return np.sum(np.sin(h * w) * np.exp(h))


def fd(f, v, eps=1e-6):
    g = np.zeros_like(v)
    for i in range(v.size):
        d = np.zeros_like(v)
        d[i] = eps
        g[i] = (f(v + d) - f(v - d)) / (2 * eps)
    return g


async def test_grad_and_backward_through_two_checkpoints_match_torch_and_finite_differences():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    w = ag.tensor(W, dtype=ag.float64, requires_grad=True)
    calls = []
    h = await ag.checkpoint(block(ag, w, calls), x)
    out = (await ag.checkpoint(block(ag, w, calls), h)).sum()
    assert calls == [1, 1] and out.grad_fn.name() == "SumBackward0"
    gx, gw = await ag.grad(out, (x, w), retain_graph=True)
    assert len(calls) == 4, "each region recomputed once in that backward"
    await out.backward()  # a second backward of the retained graph recomputes again
    assert len(calls) == 6
    np.testing.assert_allclose(x.grad.numpy(), gx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), fd(lambda v: loss_np(v, W), X), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), fd(lambda v: loss_np(X, v), W), rtol=1e-6)
    tx = torch.tensor(X, requires_grad=True)
    tw = torch.tensor(W, requires_grad=True)
    th = torch.utils.checkpoint.checkpoint(block(torch, tw, []), tx, use_reentrant=False)
    tout = torch.utils.checkpoint.checkpoint(block(torch, tw, []), th, use_reentrant=False).sum()
    tgx, tgw = torch.autograd.grad(tout, (tx, tw))
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-12)


async def test_nested_checkpoints_and_inputs():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    w = ag.tensor(W, dtype=ag.float64, requires_grad=True)

    async def outer(h):
        inner = await ag.checkpoint(lambda t: (t * w).sin() * t.exp(), h)
        return (inner * w).sin() * inner.exp()

    out = (await ag.checkpoint(outer, x)).sum()
    await out.backward(inputs=[x])
    assert w.grad is None
    np.testing.assert_allclose(x.grad.numpy(), fd(lambda v: loss_np(v, W), X), rtol=1e-6)


async def test_rng_state_is_replayed_in_the_recomputation():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)

    def noisy(h):
        return h * ag.rand(3, dtype=ag.float64)

    ag.manual_seed(3)
    y = await ag.checkpoint(noisy, x)
    noise = (y / x).detach().numpy()
    ag.rand(5)  # the generator moves on before the backward
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), noise, rtol=1e-12)


async def test_a_different_recomputation_is_torchs_checkpoint_error():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    state = {"n": 1}

    def changing(h):
        for _ in range(state["n"]):
            h = h.sin()
        return h

    with set_checkpoint_early_stop(False):  # the recomputation runs fn to its end
        y = await ag.checkpoint(changing, x)
    state["n"] = 2
    with pytest.raises(CheckpointError, match="trying to save more tensors during recomputation"):
        await y.sum().backward()
    state["n"] = 1
    y = await ag.checkpoint(changing, x)
    state["n"] = 2  # early stop (the default, as torch): the recomputation ends at the first sin's saved input
    x.grad = None
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(X), rtol=1e-12)
    calls = []
    y2 = await ag.checkpoint(lambda h: calls.append(1) or (h.exp().exp() if len(calls) == 1 else h.exp()), x)
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        await (y2 * 1).sum().backward()


async def test_reentrant_refuses_grad_and_inputs_with_torchs_words():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    y = await ag.checkpoint(lambda t: t.sin(), x, use_reentrant=True)
    with pytest.raises(RuntimeError) as ours:
        await ag.grad(y.sum(), x)
    tx = torch.tensor(X, requires_grad=True)
    ty = torch.utils.checkpoint.checkpoint(lambda t: t.sin(), tx, use_reentrant=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.grad(ty.sum(), tx)
    assert str(ours.value) == str(theirs.value) == REENTRANT_WITH_GRAD
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        await ag.checkpoint(lambda t, k=1: t, x, use_reentrant=True, k=2)
    y = await ag.checkpoint(lambda t, k=1: (t * k).sin(), x, k=2)  # keyword arguments: non-reentrant
    (g,) = await ag.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(2 * X))


async def test_context_fn_and_determinism_check_as_torch():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    entered = []

    class Mark:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            return None

    y = await ag.checkpoint(lambda t: t.sin(), x, context_fn=lambda: (Mark("forward"), Mark("recompute")))
    assert entered == ["forward"]
    await y.sum().backward()
    assert entered == ["forward", "recompute"]
    np.testing.assert_allclose(x.grad.numpy(), np.cos(X))

    state = {"k": 3}
    y = await ag.checkpoint(lambda t: t[:state["k"]].sin(), x)
    state["k"] = 2
    with pytest.raises(CheckpointError, match="Recomputed values for the following tensors have different metadata"):
        await y.sum().backward()

    def texts(lib, check):
        tx = lib.ones(2, requires_grad=True)
        found = []
        for call in (lambda: check(lambda t: t, tx, use_reentrant=False, determinism_check="sometimes"),
                     lambda: check(lambda t: t, tx, use_reentrant=True, context_fn=lambda: (None, None))):
            try:
                call()
            except ValueError as e:
                found.append(str(e))
        return found

    def ours(*args, **kwargs):
        import asyncio
        asyncio.run(ag.checkpoint(*args, **kwargs))

    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a thread with no running loop
        mine = pool.submit(texts, ag, ours).result()
    assert mine == texts(torch, torch.utils.checkpoint.checkpoint)
    assert len(mine) == 2


async def test_a_checkpoint_on_the_sim_device_matches_the_cpu():
    grads = []
    for dev in ("cpu", "sim:0"):
        x = ag.tensor(X, dtype=ag.float64, device=dev, requires_grad=True)
        w = ag.tensor(W, dtype=ag.float64, device=dev, requires_grad=True)
        out = (await ag.checkpoint(block(ag, w, []), x)).sum()
        gx, gw = await ag.grad(out, (x, w))
        assert gx.device == x.device
        grads.append((gx.cpu().numpy(), gw.cpu().numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


async def test_graph_exec_groups_do_not_nest_and_end_with_their_block():
    from asyncgrad.utils.checkpoint import GraphExecGroup

    outer = GraphExecGroup()
    with outer:
        assert GraphExecGroup._get_current_group() is outer
        with pytest.raises(RuntimeError, match="GraphExecGroup contexts cannot be nested. Already inside group"):
            with GraphExecGroup():
                pass
        assert GraphExecGroup._get_current_group() is outer
    assert GraphExecGroup._get_current_group() is None


async def test_debug_is_refused_with_a_context_fn():
    x = ag.tensor(X, dtype=ag.float64, requires_grad=True)
    with pytest.raises(ValueError, match="debug=True is incompatible with non-default context_fn"):
        await ag.checkpoint(lambda t: t.sin(), x, use_reentrant=False, debug=True,
                            context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()))
