"""Reentrant ``backward_sync``/``grad_sync`` from any plain code the engine runs (Note [Servers] in
engine/worker.py), torch's reentrant priority (Note [Reentrant priority]), and the sync bridge's
context and exception chaining (Note [Sync bridge] in autograd/api.py); issue 10, items 1-3 and 5."""

from __future__ import annotations

import asyncio
import contextvars

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd.anomaly import anomaly_enabled
from asyncgrad.engine.engine import get_engine

DEPTH = 12
KINDS = ["tensor-hook", "node-prehook", "node-posthook", "post-accumulate-hook", "plain-backward"]


def _function(lib):
    return ag.Function if lib is ag else lib.autograd.Function


def _leaf(lib, values):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


def _nested_scenario(lib, nested_backward, kind, depth, fail_at=None):
    """A backward whose plain code (a hook or a plain-def backward, per ``kind``) runs a nested
    backward of a fresh graph, whose own plain code nests again, ``depth`` levels deep. Every level
    accumulates into the shared leaves ``w`` (its graph) and ``x`` (the outermost graph).
    Returns the outermost loss and the leaves."""
    x = _leaf(lib, [0.5, -1.0, 2.0])
    w = _leaf(lib, [1.5, 0.25, -0.75])
    levels = []

    def reenter(level):
        levels.append(level)
        if level == fail_at:
            raise KeyError(f"failed at level {level}")
        if level < depth:
            nested_backward(graph(level + 1, w))

    class Nest(_function(lib)):
        @staticmethod
        def forward(ctx, t, level):
            ctx.level = level
            return t * 2

        @staticmethod
        def backward(ctx, g):
            reenter(ctx.level)
            return g * 2, None

    def graph(level, leaf):
        with lib.enable_grad():
            if kind == "plain-backward":
                return (Nest.apply(leaf, level).sin() * (level + 1)).sum()
            h = (leaf * (level + 1)).sin()
            if kind == "tensor-hook":
                h.register_hook(lambda g: reenter(level))
            elif kind == "node-prehook":
                h.grad_fn.register_prehook(lambda gs: reenter(level))
            elif kind == "node-posthook":
                h.grad_fn.register_hook(lambda gi, go: reenter(level))
            else:
                extra = _leaf(lib, [1.0, 2.0, 3.0])
                extra.register_post_accumulate_grad_hook(lambda t: reenter(level))
                h = h * extra
            return (h * h).sum()

    return graph(0, x), x, w, levels


def _ag_nested(t):
    t.backward_sync()


def _torch_nested(t):
    t.backward()


def _assert_engine_idle():
    engine = get_engine()
    assert not engine.live
    for worker in engine.workers.values():
        assert not worker.in_flight and not worker.blocked


@pytest.mark.parametrize("threads", ["inline", "one-kernel-thread"])
@pytest.mark.parametrize("kind", KINDS)
async def test_nested_sync_backward_from_plain_code_matches_torch(kind, threads, torch):
    if threads == "one-kernel-thread":  # every op node in the one kernel thread; hooks call from there
        ag.set_num_workers("cpu", 1)
        ag.set_inline_threshold("cpu", 0)
    loss, x, w, levels = _nested_scenario(ag, _ag_nested, kind, DEPTH)
    await loss.backward()
    t_loss, tx, tw, t_levels = _nested_scenario(torch, _torch_nested, kind, DEPTH)
    t_loss.backward()
    assert levels == t_levels == list(range(DEPTH + 1))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    _assert_engine_idle()
    await asyncio.sleep(0)
    assert all(not worker.helpers for worker in get_engine().workers.values()), "no helper outlives its call"


@pytest.mark.parametrize("kind", ["tensor-hook", "plain-backward"])
def test_nested_sync_backward_under_an_outer_backward_sync(kind, torch):
    """A plain script: the outer call runs on the bridge's thread loop, the nested ones reenter it."""
    loss, x, w, levels = _nested_scenario(ag, _ag_nested, kind, DEPTH)
    loss.backward_sync()
    t_loss, tx, tw, _ = _nested_scenario(torch, _torch_nested, kind, DEPTH)
    t_loss.backward()
    assert levels == list(range(DEPTH + 1))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


async def test_grad_sync_from_a_hook_matches_torch(torch):
    def run(lib, grad_fn):
        x = _leaf(lib, [0.3, -0.7])
        seen = []

        def hook(g):
            inner = _leaf(lib, [1.0, 2.0])
            with lib.enable_grad():
                (gi,) = grad_fn((inner ** 3).sum(), inner)
            seen.append(gi.detach().numpy().copy())
            return g * gi

        y = x.exp()
        y.register_hook(hook)
        return y.sum(), x, seen

    loss, x, seen = run(ag, ag.grad_sync)
    await loss.backward()
    t_loss, tx, t_seen = run(torch, torch.autograd.grad)
    t_loss.backward()
    np.testing.assert_allclose(seen[0], t_seen[0])
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("threads", ["inline", "one-kernel-thread"])
@pytest.mark.parametrize("kind", ["tensor-hook", "post-accumulate-hook", "plain-backward"])
async def test_an_error_deep_in_nested_sync_backwards_reaches_the_outermost_caller(kind, threads):
    if threads == "one-kernel-thread":
        ag.set_num_workers("cpu", 1)
        ag.set_inline_threshold("cpu", 0)
    loss, x, w, levels = _nested_scenario(ag, _ag_nested, kind, DEPTH, fail_at=7)
    with pytest.raises(KeyError, match="failed at level 7"):
        await loss.backward()
    assert levels == list(range(8))
    _assert_engine_idle()
    # the engine is still usable
    y = ag.ones(2, requires_grad=True)
    await (y * 3).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [3.0, 3.0])


class _Stuck(ag.Function):
    """An async def backward that waits until released: holds a nested backward open."""

    entered: asyncio.Event | None = None
    release: asyncio.Event | None = None

    @staticmethod
    def forward(ctx, t):
        return t * 1

    @staticmethod
    async def backward(ctx, g):
        _Stuck.entered.set()
        await _Stuck.release.wait()
        return g


async def _backward_stuck_in_a_nested_one(x: ag.Tensor, inner: ag.Tensor) -> asyncio.Future:
    """``(x * 2).sum().backward()`` started, and waited for until the hook on ``x * 2`` sits in a nested
    ``backward_sync`` through ``inner``, held by ``_Stuck`` until ``_Stuck.release`` is set."""
    _Stuck.entered, _Stuck.release = asyncio.Event(), asyncio.Event()

    def hook(g):
        with ag.enable_grad():
            (_Stuck.apply(inner) * 5).sum().backward_sync()
        return g

    y = x * 2
    y.register_hook(hook)
    task = asyncio.ensure_future(y.sum().backward())
    await asyncio.wait_for(_Stuck.entered.wait(), 5)
    return task


async def test_cancelling_the_outer_backward_while_a_hook_waits_in_a_nested_one():
    x = ag.ones(2, requires_grad=True)
    inner = ag.ones(2, requires_grad=True)
    task = await _backward_stuck_in_a_nested_one(x, inner)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _assert_engine_idle()
    _Stuck.release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert inner.grad is None and x.grad is None, "nothing of a cancelled call writes a .grad"
    assert all(not worker.helpers for worker in get_engine().workers.values())
    await (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


async def test_a_stalled_nested_backward_does_not_stall_other_backwards():
    """While a hook waits in a nested backward, its helper serves every graph task of the queue."""
    inner = ag.ones(2, requires_grad=True)
    x = ag.ones(2, requires_grad=True)
    first = await _backward_stuck_in_a_nested_one(x, inner)
    other = ag.ones(3, requires_grad=True)
    await asyncio.wait_for((other.exp() * 2).sum().backward(), 5)
    np.testing.assert_allclose(other.grad.numpy(), 2 * np.e * np.ones(3))
    _Stuck.release.set()
    await asyncio.wait_for(first, 5)
    np.testing.assert_allclose(inner.grad.numpy(), [5.0, 5.0])
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


# --------------------------------------------------------------------------- reentrant priority
def _priority_order(lib, nested):
    """torch's test_reentrant_priority (test/test_autograd.py)."""
    order = []

    class MyFunction(_function(lib)):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            order.append("MyFunction")
            return g

    class Reentrant(_function(lib)):
        @staticmethod
        def forward(ctx, x):
            with lib.enable_grad():
                ctx.x = x.detach().requires_grad_() - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, g):
            order.append("Reentrant")
            if ctx.x.item() < 0:
                return g
            with lib.enable_grad():
                nested(Reentrant.apply(ctx.x).sum())
            order.append("Reentrant returns")
            return g

    a = MyFunction.apply(lib.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(lib.tensor(9.0, requires_grad=True))
    return a * b, order


@pytest.mark.parametrize("threads", ["inline", "one-kernel-thread"])
async def test_reentrant_priority_matches_torch(threads, torch):
    if threads == "one-kernel-thread":
        ag.set_num_workers("cpu", 1)
    loss, order = _priority_order(ag, _ag_nested)
    await loss.backward()
    t_loss, t_order = _priority_order(torch, _torch_nested)
    t_loss.backward()
    assert t_order == ["Reentrant"] * 10 + ["Reentrant returns"] * 9 + ["MyFunction"]
    assert order == t_order


def test_reentrant_priority_under_backward_sync(torch):
    loss, order = _priority_order(ag, _ag_nested)
    loss.backward_sync()
    t_loss, t_order = _priority_order(torch, _torch_nested)
    t_loss.backward()
    assert order == t_order


# --------------------------------------------------------------------------- the bridge's context
_user_var = contextvars.ContextVar("user_var", default="unset")


def test_each_sync_call_runs_in_the_callers_current_context():
    x = ag.ones(3, requires_grad=True)
    seen = []

    def traced(t):
        t.register_hook(lambda g: seen.append((anomaly_enabled.get()[0], _user_var.get())))
        return t

    traced(x.exp()).sum().backward_sync()  # the thread's first call
    with ag.detect_anomaly():
        traced(x.tanh()).sum().backward_sync()
    token = _user_var.set("second")
    try:
        traced(x.sin()).sum().backward_sync()
        (gx,) = ag.grad_sync(traced(x.cos()).sum(), x)
    finally:
        _user_var.reset(token)
    traced(x.exp()).sum().backward_sync()
    assert seen == [(False, "unset"), (True, "unset"), (False, "second"), (False, "second"), (False, "unset")]
    np.testing.assert_allclose(gx.numpy(), -np.sin(np.ones(3)))


def test_no_grad_around_a_sync_call_is_seen_by_what_the_call_records():
    """create_graph=True under no_grad: torch records the backward anyway (the engine sets grad mode
    to create_graph); the first call's grad mode must not leak into later calls either."""
    x = ag.tensor([0.5, 1.5], dtype=ag.float64, requires_grad=True)
    (x ** 3).sum().backward_sync(create_graph=True)
    first = x.grad
    assert first.requires_grad
    x.grad = None
    loss = (x ** 3).sum()
    with ag.no_grad():
        loss.backward_sync(create_graph=True)
    assert x.grad.requires_grad
    np.testing.assert_allclose(x.grad.detach().numpy(), 3 * np.array([0.5, 1.5]) ** 2)


def test_an_error_through_the_bridge_carries_no_unrelated_context(torch):
    with pytest.raises(RuntimeError, match="does not require grad") as info:
        ag.ones(2).sum().backward_sync()
    assert info.value.__context__ is None and info.value.__cause__ is None
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors") as info:
        ag.grad_sync((x * 2).sum(), ag.ones(2))
    assert info.value.__context__ is None


async def test_sync_calls_at_the_top_of_a_running_loop_still_refuse():
    """Outside code the engine runs there is no portal: blocking the loop would deadlock it."""
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be called while an event loop is running"):
        (x * 2).sum().backward_sync()


# --------------------------------------------------------------------------- functions given to the library
def _grad_of_cube(grad_fn):
    def f(x):
        (g,) = grad_fn((x ** 3).sum(), x, create_graph=True)
        return g * x
    return f


async def test_functions_given_to_gradcheck_functional_and_checkpoint_may_call_grad_sync(torch):
    x = ag.tensor([0.5, -1.5, 2.0], dtype=ag.float64, requires_grad=True)
    f = _grad_of_cube(ag.grad_sync)

    def scaled(t):  # gradcheck's finite differences run under no_grad: a graph of its own, under enable_grad
        w = ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64, requires_grad=True)
        with ag.enable_grad():
            (g,) = ag.grad_sync((w ** 2).sum(), w)
        return t * g

    assert await ag.gradcheck(scaled, (x,))
    jac = await ag.functional.jacobian(f, x)
    tx = torch.tensor([0.5, -1.5, 2.0], requires_grad=True)
    t_jac = torch.autograd.functional.jacobian(_grad_of_cube(torch.autograd.grad), tx)
    np.testing.assert_allclose(jac.numpy(), t_jac.numpy(), rtol=1e-12)
    # checkpoint runs fn under no_grad first, then again during the backward (an async def node's portal)
    y = await ag.checkpoint(lambda t: scaled(t).sin(), x)
    await y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy() * [2, 4, 6]) * [2, 4, 6], rtol=1e-12)


async def test_a_hook_ported_from_torch_may_call_backward_without_sync(torch):
    """In a hook there is nothing to await: ``t.backward()`` runs at once there, as torch's does."""
    def run(lib):
        x, inner = _leaf(lib, [0.2, 0.4]), _leaf(lib, [1.0, -1.0])

        def hook(g):
            with lib.enable_grad():
                (inner.exp() * 2).sum().backward()
            return g * inner.grad

        y = x * 3
        y.register_hook(hook)
        return y.sum(), x, inner

    loss, x, inner = run(ag)
    await loss.backward()
    t_loss, tx, t_inner = run(torch)
    t_loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(inner.grad.numpy(), t_inner.grad.numpy(), rtol=1e-12)
