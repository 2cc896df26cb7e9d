"""Port of torch's current ``test/test_autograd.py``, class TestAllowMutationOnSaved.

Source: the same copy as the TestAutograd ports (cyyever/pytorch at 0f3f4a53, test/test_autograd.py),
torch's order kept; each test names the torch test it ports in its docstring. torch's
``assertClonedLenEqual``/``assertTIDMapLenEqual`` read the context's ``cloned`` and
``tid_to_weakhandle`` maps (torch clones a saved tensor when it is about to be mutated, and forgets
the clone when the graph that saved it dies): the same reads here.

Left out (not ported), one line per family:
- ``test_with_math_views``: complex ``conj`` views;
- ``test_inplace_foreach``: the private ``torch._foreach_*`` ops.
"""

import pytest
from autograd_port import double_default  # noqa: F401

import asyncgrad as ag

allow_mutation_on_saved_tensors = ag.autograd.graph.allow_mutation_on_saved_tensors

def assert_cloned_len_equal(ctx, n):
    assert len(list(ctx.cloned.items())) == n


def assert_tid_map_len_equal(ctx, n):
    assert len(list(ctx.tid_to_weakhandle.items())) == n


MSG = "variables needed for gradient computation has been modified by an inplace"


async def test_basic():
    """Port of TestAllowMutationOnSaved.test_basic."""
    a = ag.rand(2, 3, requires_grad=True)

    async def fn(a):
        b = a.clone()
        out = (b**2).sum()
        b.sin_()
        await out.sum().backward()
        return a.grad

    with pytest.raises(RuntimeError, match=MSG):
        await fn(a)
    with allow_mutation_on_saved_tensors() as ctx:
        da = await fn(a)
    assert ag.allclose(a * 2, da)
    assert_cloned_len_equal(ctx, 0)


async def test_views():
    """Port of TestAllowMutationOnSaved.test_views."""
    a = ag.rand(2, 3, requires_grad=True)

    async def fn(a):
        b = a.clone()
        c = b.view_as(b)
        out = (b**2).sum()
        c.sin_()
        await out.sum().backward()
        return a.grad

    with pytest.raises(RuntimeError, match=MSG):
        await fn(a)
    with allow_mutation_on_saved_tensors() as ctx:
        da = await fn(a)
    assert_cloned_len_equal(ctx, 0)
    assert ag.allclose(a * 2, da)


async def test_save_base_and_modify_view():
    """Port of TestAllowMutationOnSaved.test_save_base_and_modify_view."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.rand(2, 3, requires_grad=True)
        b = a.clone()
        c = b[:1]
        out = b**2
        c *= 10
        await out.sum().backward()
        assert_cloned_len_equal(ctx, 0)
    assert_cloned_len_equal(ctx, 0)
    assert ag.allclose(a * 2, a.grad)


async def test_save_view_modify_base():
    """Port of TestAllowMutationOnSaved.test_save_view_modify_base."""
    with allow_mutation_on_saved_tensors():
        a = ag.rand(2, 3, requires_grad=True)
        b = a.clone()
        c = b[:]
        out = (c**2).sum()
        b *= 2
        await out.backward()
        assert ag.allclose(a * 2, a.grad)


async def test_double_backward():
    """Port of TestAllowMutationOnSaved.test_double_backward."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.rand(2, 3, requires_grad=True)
        b = a.clone()
        out = (b**2).sum()
        b.sin_()
        await ag.autograd.grad(out, a, create_graph=True)
        (da,) = await ag.autograd.grad(out, a, create_graph=True)
        (d2a,) = await ag.autograd.grad(da.sum(), a)
    assert ag.allclose(ag.ones_like(a) * 2, d2a)
    assert_cloned_len_equal(ctx, 0)


async def test_saved_but_not_anymore():
    """Port of TestAllowMutationOnSaved.test_saved_but_not_anymore."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.randn(2, 3, requires_grad=True).clone()
        out = (a**2).sum()
        assert_tid_map_len_equal(ctx, 1)
        assert_cloned_len_equal(ctx, 0)
        await out.backward()
        a.sin_()
        assert_cloned_len_equal(ctx, 0)
        out = (a**2).sum()
        a.sin_()
        assert_cloned_len_equal(ctx, 1)
        del out
        assert_cloned_len_equal(ctx, 0)


async def test_saved_same_tensor_many_times():
    """Port of TestAllowMutationOnSaved.test_saved_same_tensor_many_times."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.randn(2, 3, requires_grad=True).clone()
        b = a**2
        c = a**2
        a.sin_()
        assert_cloned_len_equal(ctx, 1)
        del b, c
        assert_cloned_len_equal(ctx, 0)


async def test_saved_same_tensor_different_versions():
    """Port of TestAllowMutationOnSaved.test_saved_same_tensor_different_versions."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.randn(2, 3, requires_grad=True).clone()
        b = a**2
        a.sin_()
        c = a**2
        a.sin_()
        assert_cloned_len_equal(ctx, 2)
        del b
        assert_cloned_len_equal(ctx, 1)
        del c
        assert_cloned_len_equal(ctx, 0)


async def test_with_out_variant():
    """Port of TestAllowMutationOnSaved.test_with_out_variant."""
    with allow_mutation_on_saved_tensors() as ctx:
        a = ag.tensor([1.0], requires_grad=True)
        b = ag.tensor([1.0])
        c = ag.tensor([2.0])
        out = a * b
        assert_tid_map_len_equal(ctx, 1)
        ag.sin(c, out=b)
        assert_cloned_len_equal(ctx, 1)
        await out.backward()
        assert_cloned_len_equal(ctx, 0)


async def test_backward_out_of_context():
    """Port of TestAllowMutationOnSaved.test_backward_out_of_context."""
    with allow_mutation_on_saved_tensors():
        a = ag.rand(2, 3, requires_grad=True)
        out = (a**2).sum()
    msg = "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
    with pytest.raises(AssertionError, match=msg):
        await out.backward()

    with allow_mutation_on_saved_tensors():
        a = ag.rand(2, 3, requires_grad=True)
        out = (a**2).sum()
    with allow_mutation_on_saved_tensors():
        with pytest.raises(AssertionError, match=msg):
            await out.backward()


async def test_disallow_nesting():
    """Port of TestAllowMutationOnSaved.test_disallow_nesting."""
    with allow_mutation_on_saved_tensors():
        msg = "allow_mutation_on_saved_tensors contexts cannot be nested"
        with pytest.raises(RuntimeError, match=msg):
            with allow_mutation_on_saved_tensors():
                pass
