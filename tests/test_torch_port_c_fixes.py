"""The small torch behaviours the ports of items 121-180 needed (tests/test_torch_autograd_port_c.py),
each checked against torch: ``_backward_hooks`` (torch's settable dict of a tensor's hooks),
``_is_view`` / ``storage_offset``, cat's legacy 1-d empty inputs, as_strided of an expanded input."""

import pytest
from helpers import check_op

import asyncgrad as ag


async def test_backward_hooks_dict_runs_as_register_hook():
    calls = []
    x = ag.randn(3, requires_grad=True)
    x._backward_hooks = {"double": lambda g: calls.append("leaf") or g * 2}
    y = x * 1
    y._backward_hooks = {"seen": lambda g: calls.append("non-leaf")}
    await y.sum().backward()
    assert calls == ["non-leaf", "leaf"]
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    handle = x.register_hook(lambda g: calls.append("registered"))
    assert list(x._backward_hooks)[0] == "double" and len(x._backward_hooks) == 2
    handle.remove()
    x._backward_hooks = None
    x.grad = None
    await (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0] and calls == ["non-leaf", "leaf"]


def test_backward_hooks_none_before_any():
    assert ag.randn(2, requires_grad=True)._backward_hooks is None
    assert (ag.randn(2, requires_grad=True) * 2)._backward_hooks is None


def test_is_view_and_storage_offset_as_torch():
    torch = pytest.importorskip("torch")
    cases = [lambda t: t, lambda t: t[1:], lambda t: t[:, 2], lambda t: t.view(12), lambda t: t.t()[1],
             lambda t: t[1:].narrow(1, 1, 2)]
    a, b = ag.arange(12.0).view(3, 4).clone(), torch.arange(12.0).view(3, 4).clone()
    for f in cases:
        assert (f(a)._is_view(), f(a).storage_offset()) == (f(b)._is_view(), f(b).storage_offset())


@pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
async def test_cat_skips_legacy_empty_inputs(op_device):
    await check_op(lambda lib, a, b, c: lib.cat((a, b, c)), (0,), (2, 3), (4, 3), name="CatBackward0")
    await check_op(lambda lib, a, b: lib.cat((a, b), 1), (2, 3), (0,), name="CatBackward0")
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions: got 2 and 1"):
        ag.cat((ag.zeros(2, 3, device=op_device), ag.zeros(3, device=op_device)))


@pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)
async def test_as_strided_of_an_expanded_input(op_device):
    await check_op(lambda x: x.expand(5, 5).as_strided([5, 5], [0, 1], 0), (5,), name="AsStridedBackward0")
    await check_op(lambda x: x.expand(10, 2, 3).as_strided([2, 3], [3, 1], 0), (2, 3), name="AsStridedBackward0")
    await check_op(lambda x: x.expand(4, 3).as_strided([3, 3], [1, 0], 0), (3,), name="AsStridedBackward0", seed=1)


def _py_add(lib):
    """torch's test_inplace_view_python's PyAdd, in ``lib`` (asyncgrad or torch)."""
    class PyAdd(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_dirty(x)
            x.add_(y)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, grad * 3

    return PyAdd


async def test_custom_function_dirty_view_rebases_its_base_as_torch():
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (ag, torch):
        a = lib.arange(16.0).view(4, 4).requires_grad_()
        b = lib.ones(2, 2).requires_grad_()
        x = a.clone()
        view = x.narrow(1, 2, 2).narrow(0, 1, 2)
        out = _py_add(lib).apply(view, b)
        assert out is view
        assert (type(x.grad_fn).__name__ if lib is torch else x.grad_fn.name()) == "CopySlices"
        assert (type(view.grad_fn).__name__ if lib is torch else view.grad_fn.name()) == "AsStridedBackward0"
        loss = (x * lib.arange(16.0).view(4, 4)).sum()
        if lib is torch:
            loss.backward()
        else:
            await loss.backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]


def test_custom_function_dirty_view_refusals_as_torch():
    class TwoOut(ag.Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a, a + b

        @staticmethod
        def backward(ctx, ga, gab):
            return ga + gab, ga + gab

    a, b = ag.ones(2, requires_grad=True), ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="If your Function modifies inplace an input that is a view of another "
                       "Tensor, your Function cannot return more than one Tensor"):
        TwoOut.apply(a.clone().view_as(a), b)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                       "in-place operation."):
        _py_add(ag).apply(a[:1], b[:1])
