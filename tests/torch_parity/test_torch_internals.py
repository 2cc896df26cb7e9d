"""torch's autograd internals that ported torch tests rely on, each checked against torch:
``_backward_hooks`` (torch's settable dict of a tensor's hooks) and the errors of deleting
``data`` / ``requires_grad`` / ``_grad_fn`` / ``_backward_hooks``; ``_is_view`` / ``storage_offset``;
cat's legacy 1-d empty inputs; as_strided of an expanded input; views a custom Function returns
(rebasing, and refusing in-place changes that would record: Note [Views a Function returns] in
autograd/function.py); once_differentiable's node is torch's ``Error``, with torch's edges.
The torch comparisons skip cleanly without torch."""

import pytest
from helpers import check_op

import asyncgrad as ag

try:
    import torch
except ImportError:  # the comparisons with torch are left out
    torch = None


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


needs_torch = pytest.mark.skipif(torch is None, reason="compares with torch, which is not installed")


def _custom_view_cases(lib):
    """The message each in-place change raises (or None), for views custom Functions return."""
    class Alias(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:]

        @staticmethod
        def backward(ctx, gx):
            return gx

    class SelectOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a.clone(), a.select(0, 1)

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, None

    def attempt(fn):
        try:
            fn()
        except RuntimeError as e:
            return str(e)
        return None

    inp = lib.rand(2, requires_grad=True)
    results = {}
    with lib.no_grad():
        out = Alias.apply(inp)
    results["made in no_grad"] = attempt(lambda: out.zero_())
    out = Alias.apply(inp.clone())
    results["recorded"] = attempt(lambda: out.add_(1))
    out = Alias.apply(lib.rand(2))
    results["nothing requires grad"] = attempt(lambda: out.add_(1))
    out = Alias.apply(lib.rand(2))
    results["the value requires grad"] = attempt(lambda: out.add_(inp))
    out = Alias.apply(inp.clone())
    view = out[:1]
    results["a view of the output"] = attempt(lambda: view.add_(1))
    _, second = SelectOne.apply(inp.clone(), 0)
    results["second output"] = attempt(lambda: second.mul_(2))
    return results


def test_a_view_a_custom_function_returns_refuses_a_recorded_inplace_change():
    results = _custom_view_cases(ag)
    assert results["nothing requires grad"] is None
    assert results["recorded"].startswith("Output 0 of Alias is a view and is being modified inplace. This view was "
                                          "created inside a custom Function")
    assert results["second output"].startswith("Output 1 of SelectOne is a view and is being modified inplace.")
    assert results["made in no_grad"].startswith("A view was created in no_grad mode and is being modified inplace")
    if torch is not None:
        assert results == _custom_view_cases(torch)


@needs_torch
def test_deleting_autograd_attributes_raises_torchs_errors():
    def outcomes(lib):
        x = lib.randn(5, 5, requires_grad=True)
        found = []
        for statement in ["del x.grad", "del x.data", "x.data = None", "del x.requires_grad", "del x._grad_fn",
                          "del x._backward_hooks", "x._grad_fn = 1"]:
            try:
                exec(statement)
                found.append((statement, None))
            except Exception as e:  # the type and the words are compared
                found.append((statement, type(e).__name__, str(e)))
        y = x * 2
        y._grad_fn = None  # detaches in place
        found.append(("detached", y.grad_fn is None, y.requires_grad))
        return found

    assert outcomes(ag) == outcomes(torch)


def test_backward_hooks_are_the_hooks_register_hook_added():
    x = ag.randn(3, requires_grad=True)
    assert x._backward_hooks is None
    x.register_hook(lambda g: g)
    y = x * 2
    assert y._backward_hooks is None
    def triple(g):
        return g * 3

    y.register_hook(triple)
    assert list(y._backward_hooks.values()) == [triple]
    assert len(x._backward_hooks) == 1


def _once_differentiable_graph(lib, grad):
    class MyFunction(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t1, scalar, t2):
            return t1 * scalar + t2, t1 - t2

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, ga, gb):
            return ga * 2 + gb, None, ga + gb

    x = lib.randn(3, dtype=lib.float64, requires_grad=True)
    y = lib.randn(3, dtype=lib.float64, requires_grad=True)
    a, b = MyFunction.apply(x, 2.0, y)
    go = lib.ones(3, dtype=lib.float64, requires_grad=True)
    gx, gy = grad((a, b), (x, y), (go, lib.ones(3, dtype=lib.float64)), create_graph=True)
    fn = gx.grad_fn
    shape = [None if f is None else f.name().rsplit("::", 1)[-1] for f, _ in fn.next_functions]
    try:
        gx.sum().backward()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    return fn.name().rsplit("::", 1)[-1], shape, gx.output_nr, gy.grad_fn is fn, gy.output_nr, raised


def test_once_differentiable_results_come_from_torchs_error_node():
    found = _once_differentiable_graph(ag, ag.grad_sync)
    assert found == ("Error", ["AccumulateGrad", None, "AccumulateGrad"], 0, True, 2,
                     "trying to differentiate twice a function that was marked with @once_differentiable")
    if torch is not None:
        assert found == _once_differentiable_graph(torch, torch.autograd.grad)
