"""A tensor a custom Function marks dirty and saves is freed with its graph, by reference counting
(Note [The ctx lets go of its marks] in asyncgrad/autograd/function.py): the node keeps no
reference to what mark_dirty or mark_non_differentiable were given, so neither a dirty view (whose
base's CopySlices wraps the node) nor a dirty non-view output makes a cycle through the node; with
the cyclic collector off, both go as soon as the caller's scope ends, as torch's do."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import asyncgrad as ag


class DirtySaved(ag.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2.0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0


class DirtyWithNonDifferentiable(ag.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2.0)
        flag = x > 0
        ctx.mark_dirty(x)
        ctx.mark_non_differentiable(flag)
        ctx.save_for_backward(x, flag)
        return x, flag

    @staticmethod
    def backward(ctx, g, _):
        return g * 2.0


def _record(as_view: bool, function: type) -> tuple[weakref.ref, weakref.ref]:
    leaf = ag.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
    x = leaf.clone()
    if as_view:
        x = x.view_as(x)
    function.apply(x)
    node = x.grad_fn  # CopySlices over the Function's node for a view, the node itself otherwise
    return weakref.ref(x), weakref.ref(node)


@pytest.mark.parametrize(("function", "as_view"), [
    (DirtySaved, True),
    (DirtySaved, False),
    (DirtyWithNonDifferentiable, False),  # a dirty view may be the only output (torch's refusal)
], ids=["view", "not_view", "not_view_with_non_differentiable"])
def test_a_dirty_saved_tensor_is_freed_with_its_graph(as_view, function, collector_off):
    tensor_ref, node_ref = _record(as_view, function)
    assert tensor_ref() is None
    assert node_ref() is None


async def test_a_dirty_saved_view_still_backpropagates():
    """Letting go of the marks changes nothing the backward sees: the gradient through the dirty
    view reaches the leaf, as torch computes it."""
    torch = pytest.importorskip("torch")
    values = np.linspace(0.5, 1.5, 4)

    leaf = ag.tensor(values, requires_grad=True)
    x = leaf.clone()
    x = x.view_as(x)
    DirtySaved.apply(x)
    await (x * x).sum().backward()

    class TorchDirtySaved(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            t.mul_(2.0)
            ctx.mark_dirty(t)
            ctx.save_for_backward(t)
            return t

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    tleaf = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    tx = tleaf.clone()
    tx = tx.view_as(tx)
    TorchDirtySaved.apply(tx)
    (tx * tx).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy())
