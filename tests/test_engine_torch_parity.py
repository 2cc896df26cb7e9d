"""Engine, graph and custom-Function behaviours checked against torch 2.13: reentrant priority of an
awaited nested backward, hooks on undefined gradients, custom Function output checks, the
create_graph leaf ``.grad`` copy, pickle under every protocol, inference tensors, multi-grad hooks."""

from __future__ import annotations

import asyncio
import pickle

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.autograd import Function


# --------------------------------------------------------------------------- reentrant priority
def _reentrant_classes(order: list, awaited: bool):
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append("MyFunction")
            return x

    class Reentrant(Function):
        @staticmethod
        def forward(ctx, x):
            with ag.enable_grad():
                ctx.x = x.detach().requires_grad_(True) - 1
            return ctx.x.detach()

        if awaited:
            @staticmethod
            async def backward(ctx, x):
                order.append("Reentrant")
                if ctx.x < 0:
                    return x
                with ag.enable_grad():
                    await Reentrant.apply(ctx.x).backward()
                return x
        else:
            @staticmethod
            def backward(ctx, x):
                order.append("Reentrant")
                if ctx.x < 0:
                    return x
                with ag.enable_grad():
                    ag.backward_sync(Reentrant.apply(ctx.x))
                return x

    return MyFunction, Reentrant


@pytest.mark.parametrize("awaited", [True, False])
async def test_a_reentrant_backward_runs_ahead_of_the_parents_ready_nodes(awaited, torch):
    """torch's order: every nested Reentrant backward before the parent's other ready node."""
    expected = []
    TMy, TRe = _torch_reentrant_classes(torch, expected)
    (TMy.apply(torch.tensor(6.0, requires_grad=True)) * TRe.apply(torch.tensor(9.0, requires_grad=True))).backward()

    order: list = []
    MyFunction, Reentrant = _reentrant_classes(order, awaited)
    await (MyFunction.apply(ag.tensor(6.0, requires_grad=True)) * Reentrant.apply(ag.tensor(9.0, requires_grad=True))
           ).backward()
    assert order == expected == ["Reentrant"] * 10 + ["MyFunction"]


def _torch_reentrant_classes(torch, order: list):
    class MyFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append("MyFunction")
            return x

    class Reentrant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with torch.enable_grad():
                ctx.x = x.detach().requires_grad_(True) - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, x):
            order.append("Reentrant")
            if ctx.x < 0:
                return x
            with torch.enable_grad():
                Reentrant.apply(ctx.x).backward()
            return x

    return MyFunction, Reentrant


async def test_two_awaited_reentrant_backwards_of_one_graph_both_finish_before_the_rest():
    order: list = []
    MyFunction, Reentrant = _reentrant_classes(order, True)
    a = MyFunction.apply(ag.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(ag.tensor(2.0, requires_grad=True))
    c = Reentrant.apply(ag.tensor(3.0, requires_grad=True))
    await (a * b * c).backward()
    assert order[-1] == "MyFunction" and order.count("Reentrant") == 3 + 4


async def test_an_async_backward_that_awaits_no_backward_holds_nothing():
    """Only a nested backward holds the parent: an ``async def`` backward awaiting other work lets
    the graph's other ready nodes run meanwhile, as before."""
    order: list = []
    release = asyncio.Event()

    class Slow(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        async def backward(ctx, g):
            await asyncio.wait_for(release.wait(), 5)
            order.append("Slow")
            return g

    class Fast(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("Fast")
            release.set()
            return g

    x = ag.tensor(2.0, requires_grad=True)
    await (Fast.apply(x) * Slow.apply(x)).backward()
    assert order == ["Fast", "Slow"]
    assert x.grad.item() == 4.0


async def test_a_failing_nested_backward_fails_its_parent_and_releases_nothing_late():
    order: list = []

    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    class Outer(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        async def backward(ctx, g):
            with ag.enable_grad():
                y = ag.tensor(1.0, requires_grad=True)
                await Boom.apply(y).backward()
            return g

    class Other(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("Other")
            return g

    x = ag.tensor(2.0, requires_grad=True)
    with pytest.raises(ValueError, match="boom"):
        await (Other.apply(x) * Outer.apply(x)).backward()
    assert order == [] and x.grad is None


# --------------------------------------------------------------------------- pickle
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_every_protocol_as_torch(protocol, torch):
    x = ag.randn(3, 2, requires_grad=True, dtype=ag.float64)
    x.grad = ag.ones(3, 2, dtype=ag.float64)
    y = x * 2
    p = ag.nn.Parameter(ag.ones(2), requires_grad=False)
    xs, ys, ps, ps2 = pickle.loads(pickle.dumps([x, y, p, p], protocol=protocol))
    tx = torch.randn(3, 2, requires_grad=True, dtype=torch.float64)
    tx.grad = torch.ones(3, 2, dtype=torch.float64)
    tp = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    txs, tys, tps, tps2 = pickle.loads(pickle.dumps([tx, tx * 2, tp, tp], protocol=protocol))
    assert np.array_equal(xs.detach().numpy(), x.detach().numpy())
    assert xs.dtype == x.dtype and np.array_equal(ys.detach().numpy(), y.detach().numpy())
    for mine, theirs in ((xs, txs), (ys, tys), (ps, tps)):
        assert (mine.requires_grad, mine.is_leaf, mine.grad is None) == (
            theirs.requires_grad, theirs.is_leaf, theirs.grad is None)
    assert type(ps) is ag.nn.Parameter and ps is ps2 and type(tps) is torch.nn.Parameter and tps is tps2


def test_pickle_keeps_the_device():
    s = ag.arange(4.0, device="sim:0")
    back = pickle.loads(pickle.dumps(s, protocol=0))
    assert str(back.device) == "sim:0" and back.tolist() == [0.0, 1.0, 2.0, 3.0]
