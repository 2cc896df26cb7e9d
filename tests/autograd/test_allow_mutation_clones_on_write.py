"""allow_mutation_on_saved_tensors as torch's (Note [Mutation on saved tensors] in
asyncgrad/autograd/graph.py): a saved tensor is kept as itself and cloned only when an in-place op
is about to write its memory, once; the clone goes with the graph that saved it; the backward sees
the values saved; torch's errors for a backward outside the block or in another block, and for
nesting. The counts read torch's maps (``cloned``, ``tid_to_weakhandle``)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

allow = ag.autograd.graph.allow_mutation_on_saved_tensors
MSG = "variables needed for gradient computation has been modified by an inplace"


def _cloned(ctx):
    return len(list(ctx.cloned.items()))


def _saved(ctx):
    return len(list(ctx.tid_to_weakhandle.items()))


@pytest.mark.parametrize("mutate", [lambda b: b.sin_(), lambda b: b.view_as(b).sin_(), lambda b: b.mul_(3),
                                    lambda b: b.copy_(b * 0 + 5)])
async def test_mutated_after_saving_gives_the_saved_values(mutate):
    a = ag.rand(2, 3, dtype=ag.float64, requires_grad=True)

    async def fn():
        b = a.clone()
        out = (b ** 2).sum()
        mutate(b)
        await out.backward()

    with pytest.raises(RuntimeError, match=MSG):
        await fn()
    a.grad = None
    with allow() as ctx:
        await fn()
        assert _cloned(ctx) == 0  # the backward freed the graph, and its clone with it
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy())


async def test_base_saved_view_modified_and_view_saved_base_modified():
    with allow() as ctx:
        a = ag.rand(2, 3, dtype=ag.float64, requires_grad=True)
        b = a.clone()
        out = b ** 2
        b[:1].mul_(10)
        assert _cloned(ctx) == 1
        await out.sum().backward()
        assert _cloned(ctx) == 0
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy())
    with allow():
        a = ag.rand(2, 3, dtype=ag.float64, requires_grad=True)
        b = a.clone()
        out = (b[:] ** 2).sum()
        b *= 2
        await out.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy())


async def test_double_backward():
    with allow() as ctx:
        a = ag.rand(2, 3, dtype=ag.float64, requires_grad=True)
        b = a.clone()
        out = (b ** 2).sum()
        b.sin_()
        await ag.autograd.grad(out, a, create_graph=True)
        (da,) = await ag.autograd.grad(out, a, create_graph=True)
        (d2a,) = await ag.autograd.grad(da.sum(), a)
    np.testing.assert_allclose(d2a.numpy(), np.full((2, 3), 2.0))
    assert _cloned(ctx) == 0


async def test_clones_once_per_saved_version_and_only_while_saved():
    with allow() as ctx:
        a = ag.randn(2, 3, requires_grad=True).clone()
        out = (a ** 2).sum()
        assert (_saved(ctx), _cloned(ctx)) == (1, 0)
        await out.backward()
        a.sin_()  # saved once, freed by its backward since: nothing to clone
        assert _cloned(ctx) == 0
        out = (a ** 2).sum()
        a.sin_()
        assert _cloned(ctx) == 1
        del out
        assert _cloned(ctx) == 0

        b = a ** 2
        c = a ** 2  # the same tensor at the same version: one handle, one clone
        a.sin_()
        assert _cloned(ctx) == 1
        del b, c
        assert _cloned(ctx) == 0

        b = a ** 2
        a.sin_()
        c = a ** 2
        a.sin_()
        assert _cloned(ctx) == 2
        del b
        assert _cloned(ctx) == 1
        del c
        assert _cloned(ctx) == 0


async def test_out_variant_and_resize_clone_first():
    with allow() as ctx:
        a = ag.tensor([1.0], requires_grad=True)
        b = ag.tensor([1.0])
        out = a * b
        assert _saved(ctx) == 1
        ag.sin(ag.tensor([2.0]), out=b)
        assert _cloned(ctx) == 1
        await out.backward()
        assert _cloned(ctx) == 0
        assert a.grad.tolist() == [1.0]
        w = ag.tensor([2.0, 3.0])
        out = (a * w).sum()
        w.resize_(1)
        assert _cloned(ctx) == 1
        await out.backward()
        assert a.grad.tolist() == [6.0]


async def test_backward_outside_or_in_another_block_is_refused():
    with allow():
        a = ag.rand(2, 3, requires_grad=True)
        out = (a ** 2).sum()
    msg = "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
    with pytest.raises(AssertionError, match=msg):
        await out.backward()
    with allow():
        a = ag.rand(2, 3, requires_grad=True)
        out = (a ** 2).sum()
    with allow():
        with pytest.raises(AssertionError, match=msg):
            await out.backward()


def test_nesting_is_refused_and_the_outer_block_stays_open():
    with allow() as outer:
        with pytest.raises(RuntimeError, match="allow_mutation_on_saved_tensors contexts cannot be nested"):
            with allow():
                pass
        a = ag.rand(2, requires_grad=True).clone()
        out = a * a
        a.add_(1)
        assert _cloned(outer) == 1
        del out


async def test_values_match_torch(torch):
    x = np.random.RandomState(0).rand(2, 3)
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        ta = torch.tensor(x, requires_grad=True)
        tb = ta.clone()
        tout = (tb.exp() * tb).sum()
        tb.mul_(3)
        tb[0].add_(1)
        tout.backward()
    with allow():
        a = ag.tensor(x, requires_grad=True)
        b = a.clone()
        out = (b.exp() * b).sum()
        b.mul_(3)
        b[0].add_(1)
        await out.backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy())
