"""PyTorch's own autograd tests, items 121 to 180 of the seeded sample, ported to asyncgrad (issue 10).

The population, the seeded order and the shared helpers are in ``tests/torch_parity/torch_port.py``; the style
is that of ``tests/torch_parity/test_autograd_sample_001_060.py`` (items 1-60): each test names the torch test it
ports and carries its sample number, keeps torch's inputs and assertions, and awaits where torch
calls ``backward`` or ``grad``. A test asyncgrad fails, or cannot run for want of an op, is kept and
marked ``xfail(strict=True)`` with what differs. Where torch 2.13 itself no longer behaves as the
~2020 test asserts, the port asserts torch 2.13's behaviour and its docstring says so.

torch's file sets the default dtype to double; the ``double_default`` fixture does the same here.
"""

import gc
import math
import weakref
from copy import deepcopy

import pytest
from torch_port import (  # noqa: F401  (double_default: an autouse fixture)
    S,
    _assert_interleaved_struct,
    _assert_same_struct,
    assert_equal,
    assert_ports_are_items,
    double_default,
    run_functional_checks,
)

import asyncgrad as ag
import asyncgrad.nn.functional as F
from asyncgrad import Function, once_differentiable

PRECISION = 1e-4  # test_autograd.PRECISION


class SimulateBackwardError(Function):
    """TestAutograd.SimulateBackwardError."""

    @staticmethod
    def forward(ctx, input):
        return input.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, input):
        raise Exception("Simulate error on backward pass")


# 121
async def test_mark_non_differentiable_none():
    """Port of TestAutograd.test_mark_non_differentiable_none."""
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, input):
            output = input.clone()
            ctx.mark_non_differentiable(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return None

    x = ag.randn(5, 5, requires_grad=True)
    r = MyFunction.apply(x * x)
    await (r * x).sum().backward()


# 122
async def test_select_sum():
    """Port of TestAutograd.test_select_sum."""
    x = ag.randn(10, requires_grad=True)

    def func(x):
        return x.select(0, 1).sum()

    assert await ag.gradcheck(func, [x])
    assert await ag.gradgradcheck(func, [x])


# 123
async def test_jacobian_match_vjp_jvp():
    """Port of TestAutogradFunctional.test_jacobian_match_vjp_jvp."""
    def foo(x):
        return x ** 3 + x.sum()

    inputs = ag.rand(4)
    v = ag.rand(4)

    jac = await ag.functional.jacobian(foo, inputs)
    jvp = (await ag.functional.jvp(foo, inputs, v))[1]
    vjp = (await ag.functional.vjp(foo, inputs, v))[1]

    assert_equal(jvp, ag.mm(jac, v.unsqueeze(1)).squeeze(1))
    assert_equal(vjp, ag.mm(v.unsqueeze(0), jac).squeeze(0))


# 124
def test_numpy_requires_grad():
    """Port of TestAutograd.test_numpy_requires_grad."""
    x = ag.randn(2, 2, requires_grad=True)
    err_msg_outputs = r"Can't call numpy\(\) on Tensor that requires grad. Use tensor.detach\(\).numpy\(\) instead."
    with pytest.raises(RuntimeError, match=err_msg_outputs):
        x.numpy()

    with ag.no_grad():
        x.numpy()

    x = ag.randn(2, 2)
    x.numpy()

    with ag.no_grad():
        x.numpy()


# 125
async def test_save_none_for_backward():
    """Port of TestAutograd.test_save_none_for_backward."""
    class MyFn(Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(None, input, None)
            return input * input

        @staticmethod
        def backward(ctx, grad_output):
            n1, input, n2 = ctx.saved_tensors
            assert n1 is None
            assert n2 is None
            return 2 * input * grad_output

    x = ag.randn(5, requires_grad=True)
    y = MyFn.apply(x)
    await y.sum().backward()
    assert_equal(x.grad, 2 * x)


# 126
async def test_cat_empty_legacy():
    """Port of TestAutograd.test_cat_empty_legacy."""
    f_args_variable = (ag.randn(0, requires_grad=True),
                       ag.randn(S, S, requires_grad=True))
    await run_functional_checks("cat", lambda a, b: ag.cat((a, b)), False, f_args_variable)
    assert await ag.gradcheck(lambda a, b: ag.cat((a, b)), f_args_variable, eps=1e-6, atol=PRECISION)


# 127
async def test_no_requires_grad_inplace():
    """Port of TestAutograd.test_no_requires_grad_inplace."""
    a = ag.randn(2, 3)
    a.add_(5)
    a.requires_grad = True
    await a.sum().backward()
    assert_equal(a.grad, ag.ones(2, 3))

    a = ag.randn(2, 3)
    b = a[:]
    b.add_(5)
    a.requires_grad = True
    await a.sum().backward()
    assert_equal(a.grad, ag.ones(2, 3))

    a = ag.randn(2, 3)
    b = a[:]
    a.requires_grad = True
    with pytest.raises(RuntimeError):
        a.add_(5)
    with pytest.raises(RuntimeError):
        b.add_(5)


# 128
def test_inplace_view_multi_output_safe():
    """Port of TestAutogradDeviceType.test_inplace_view_multi_output_safe.

    The ~2020 test expects a deprecation warning ('Consider using `unsafe_` version'); the
    deprecation ended and torch 2.13 raises instead, so the port asserts torch 2.13's error, as
    torch's current test_inplace_on_view_multi_output_safe does.
    """
    for f in [lambda t: t.split(1),
              lambda t: t.split_with_sizes((1, 1, 1)),
              lambda t: t.chunk(3)]:
        a = ag.randn(3, 3, requires_grad=True)
        b = a + a
        s1, s2, s3 = f(b)
        error_msg = 'This view is the output of a function that returns multiple views.'
        with pytest.raises(RuntimeError, match=error_msg):
            s1.mul_(s2)


# 129
async def test_index_backward_does_not_save_tensor():
    """Port of TestAutograd.test_index_backward_does_not_save_tensor."""
    a = ag.tensor([1., 0, 0])
    b = ag.zeros(3, requires_grad=True)
    tensor = b + 0
    tensor[a != 0] = tensor[a != 0]
    await tensor.backward(ag.zeros_like(tensor))


# 130
def test_detach_base():
    """Port of TestAutograd.test_detach_base."""
    x = ag.randn(10, 10, requires_grad=True)
    view = x.narrow(0, 1, 4)
    x.detach_()
    assert not x.requires_grad
    assert view.requires_grad
    assert view.grad_fn is not None
    assert view._base is x


# 131
async def test_grad_nonleaf_many_outputs():
    """Port of TestAutograd.test_grad_nonleaf_many_outputs."""
    x = ag.randn(4, 2, requires_grad=True)
    a, b = x.chunk(2)

    def hook(*grads):
        hook_called[0] = True
    hook_called = [False]
    x.register_hook(hook)

    go = ag.randn(2, 2)
    grad_a, grad_b = await ag.grad((a + 2 * b), [a, b], grad_outputs=go, create_graph=True)

    assert_equal(grad_a, go)
    assert_equal(grad_b, go * 2)
    assert not hook_called[0]
    assert x.grad is None


# 132
async def test_hessian_match_vhp_hvp():
    """Port of TestAutogradFunctional.test_hessian_match_vhp_hvp."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4)
    v = ag.rand(4)

    hes = await ag.functional.hessian(foo, inputs)
    hvp = (await ag.functional.hvp(foo, inputs, v))[1]
    vhp = (await ag.functional.vhp(foo, inputs, v))[1]

    assert_equal(hvp, ag.mm(hes, v.unsqueeze(1)).squeeze(1))
    assert_equal(vhp, ag.mm(v.unsqueeze(0), hes).squeeze(0))


# 133
async def test_inplace_view_python():
    """Port of TestAutogradDeviceType.test_inplace_view_python."""
    a = ag.randn(4, 4, requires_grad=True)
    b = ag.randn(2, 2, requires_grad=True)

    class PyAdd(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_dirty(x)
            x.add_(y)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    def func(root, b):
        x = root.clone()
        PyAdd.apply(x.narrow(1, 2, 2).narrow(0, 1, 2), b)
        PyAdd.apply(x.narrow(1, 0, 2).narrow(0, 1, 2), b)
        return x

    assert await ag.gradcheck(func, [a, b], raise_exception=True)
    go = ag.randn(*a.shape, requires_grad=True)
    assert await ag.gradgradcheck(func, (a, b), (go,))


# 134
async def test_vhp_create_graph():
    """Port of TestAutogradFunctional.test_vhp_create_graph."""
    vhp = ag.functional.vhp

    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4, 4, requires_grad=True)
    v = ag.ones(4, 4, requires_grad=True)
    res = await vhp(foo, inputs, v, create_graph=True)
    _assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    assert await ag.gradcheck(lambda inp, v: vhp(foo, inp, v, create_graph=True), (inputs, v))
    assert await ag.gradgradcheck(lambda inp, v: vhp(foo, inp, v, create_graph=True), (inputs, v))

    def bar(a, b):
        return (a + 3 * b.narrow(0, 0, 3)).exp().sum()

    inputs = (ag.rand(3, requires_grad=True), ag.rand(4, requires_grad=True))
    v = (ag.ones(3, requires_grad=True), ag.ones(4, requires_grad=True))
    out, vhp_val = await vhp(bar, inputs, v, create_graph=True)
    _assert_same_struct(vhp_val, inputs)
    assert out.grad_fn is not None
    assert vhp_val[0].grad_fn is not None
    assert vhp_val[1].grad_fn is not None

    async def f2(*args):
        return (await vhp(bar, args[:2], args[2:], create_graph=True))[1]

    assert await ag.gradcheck(f2, inputs + v)
    assert await ag.gradgradcheck(f2, inputs + v)

    async def foo2(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = await vhp(bar, (x, y), v, create_graph=True)
        return val.cos() + grad[0].cos().sum() + grad[1].cos() + x.cos().sum() + y.cos()

    assert await ag.gradcheck(foo2, inputs + v)
    assert await ag.gradgradcheck(foo2, inputs + v)


# 135
async def test_requires_grad():
    """Port of TestAutograd.test_requires_grad."""
    x = ag.randn(5, 5)
    y = ag.randn(5, 5)
    z = ag.randn(5, 5, requires_grad=True)
    a = x + y
    assert not a.requires_grad
    b = a + z
    assert b.requires_grad

    def error():
        raise RuntimeError
    # Make sure backward isn't called on these
    a._backward_hooks = {}
    x._backward_hooks = {}
    y._backward_hooks = {}
    a._backward_hooks['test'] = error
    x._backward_hooks['test'] = error
    y._backward_hooks['test'] = error
    await b.backward(ag.ones(5, 5))


# 136
async def _test_atleast(torch_fn):
    """TestAutogradDeviceType._test_atleast."""
    # 0-dim
    s = ag.tensor(0.5, dtype=ag.float64, requires_grad=True)

    assert await ag.gradcheck(lambda x: torch_fn(x), s)
    assert await ag.gradgradcheck(lambda x: torch_fn(x), s)

    # 1-dim
    a = ag.rand(4, dtype=ag.float64, requires_grad=True)

    assert await ag.gradcheck(lambda x: torch_fn(x), a)
    assert await ag.gradgradcheck(lambda x: torch_fn(x), a)

    # 2,3,4-dim
    b = ag.rand(4, 3, dtype=ag.float64, requires_grad=True)
    c = ag.rand(4, 3, 2, dtype=ag.float64, requires_grad=True)
    d = ag.rand(4, 3, 2, 1, dtype=ag.float64, requires_grad=True)

    input_tuple = (s, a, b, c, d)
    assert await ag.gradcheck(lambda s, w, x, y, z: torch_fn(s, w, x, y, z), input_tuple)
    assert await ag.gradgradcheck(lambda s, w, x, y, z: torch_fn(s, w, x, y, z), input_tuple)


async def test_atleast():
    """Port of TestAutogradDeviceType.test_atleast."""
    await _test_atleast(ag.atleast_1d)
    await _test_atleast(ag.atleast_2d)
    await _test_atleast(ag.atleast_3d)


# 137
async def test_jvp_err_check_strict():
    """Port of TestAutogradFunctional.test_jvp_err_check_strict."""
    jvp = ag.functional.jvp

    def foo(a):
        return a.detach()

    def bar(a):
        # Make a non-leaf Tensor that requires_grad but that is not connected to the input
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await jvp(foo, inp, v, strict=True)
    res = await jvp(foo, inp, v, strict=False)
    _assert_same_struct(res[1], res[0])
    assert_equal(res[1].abs().sum(), 0.)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await jvp(bar, inp, v, strict=True)
    res = await jvp(bar, inp, v, strict=False)
    _assert_same_struct(res[1], res[0])
    assert_equal(res[1].abs().sum(), 0.)

    # The Jacobian does not depend on the input
    def foo(a):
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await jvp(foo, inp, v, create_graph=True, strict=True)
    res = await jvp(foo, inp, v, create_graph=True, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1], v)


# 138
async def test_function_returns_input():
    """Port of TestAutograd.test_function_returns_input."""
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    for shape in [(1,), ()]:
        v = ag.ones(shape, requires_grad=True)
        await MyFunction.apply(v).backward()
        assert_equal(v.grad, ag.full(shape, 2.))

        with ag.no_grad():
            v.grad.zero_()
        await MyFunction.apply(v.clone()).backward()
        assert_equal(v.grad, ag.full(shape, 2.))


# 139
def test_set_grad_enabled():
    """Port of TestAutograd.test_set_grad_enabled."""
    x = ag.tensor([1.], requires_grad=True)
    with ag.set_grad_enabled(False):
        y = x * 2
    assert not y.requires_grad
    with ag.set_grad_enabled(True):
        y = x * 2
    assert y.requires_grad
    with ag.set_grad_enabled(False):
        ag.set_grad_enabled(True)
        y = x * 2
    assert y.requires_grad


# 140
def test_free_deep_graph_pyfunction():
    """Port of TestAutograd.test_free_deep_graph_pyfunction."""
    class MyOp(Function):
        @staticmethod
        def forward(ctx, tensor1, tensor2):
            return tensor1 + tensor2

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output

    def scope():
        depth = 150000
        x = ag.randn(1, requires_grad=True)
        y = x.clone()

        # build deeply nested computation graph
        for _ in range(depth):
            y = MyOp.apply(y, y)

        # graph deletion occurs when the above locals go out of scope.

    # Should not stack overflow
    scope()


# 141
async def test_symeig():
    """Port of TestAutograd.test_symeig.

    torch removed ``symeig``; the port uses its torch 2.13 equivalent ``linalg.eigh(x, UPLO)``
    (``upper=True`` is ``UPLO='U'``) and ``random_symmetric_matrix`` as ``(A + A^T) / 2``.
    """
    def func(root, upper):
        x = 0.5 * (root + root.transpose(-2, -1))
        return ag.linalg.eigh(x, UPLO='U' if upper else 'L')

    for upper in (True, False):
        for dims in [(3, 3), (5, 3, 3), (4, 3, 2, 2)]:
            root = ag.rand(*dims, requires_grad=True)

            assert await ag.gradcheck(func, [root, upper])
            assert await ag.gradgradcheck(func, [root, upper])

            A = ag.randn(*dims)
            root = ((A + A.transpose(-2, -1)) / 2).requires_grad_()
            w, v = ag.linalg.eigh(root)
            await (w.sum() + v.sum()).backward()
            assert_equal(root.grad, root.grad.transpose(-1, -2))  # Check the gradient is symmetric


# 142
async def test_hvp_err_check_strict():
    """Port of TestAutogradFunctional.test_hvp_err_check_strict."""
    hvp = ag.functional.hvp

    def foo(a):
        return a.detach().sum()

    def bar(a):
        # Make a non-leaf Tensor that requires_grad but that is not connected to the input
        return a.long().float().requires_grad_().clone().sum()

    def bar2(a):
        # A Linear function for which the jacobian is independent of the input
        return (3 * a).sum()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await hvp(foo, inp, v, strict=True)
    res = await hvp(foo, inp, v, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await hvp(bar, inp, v, strict=True)
    res = await hvp(bar, inp, v, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.)

    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"):
        await hvp(bar2, inp, v, strict=True)
    res = await hvp(bar2, inp, v, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.)


# 143
async def test_multi_backward():
    """Port of TestAutograd.test_multi_backward."""
    x = ag.randn(5, 5, requires_grad=True)
    y = ag.randn(5, 5, requires_grad=True)

    q = ag.randn(5, 5, requires_grad=True)

    a = ag.randn(5, 5, requires_grad=True)
    b = ag.randn(5, 5, requires_grad=True)

    q2 = q * 2
    z = x + y + q2
    c = a * b + q2
    grad_z = ag.randn(5, 5)
    grad_c = ag.randn(5, 5)
    await ag.backward([z, c], [grad_z, grad_c])

    assert_equal(x.grad, grad_z)
    assert_equal(y.grad, grad_z)
    assert_equal(a.grad, grad_c * b)
    assert_equal(b.grad, grad_c * a)
    assert_equal(q.grad, (grad_c + grad_z) * 2)


# 144
def test_version_counter():
    """Port of TestAutograd.test_version_counter."""
    x = ag.randn(1, 2)

    # In-place op bumps version
    x_saved_version = x._version
    x.add_(1).add_(1)
    assert x._version > x_saved_version

    # Differentiable view shares version counter
    xz = x[:]
    assert x._version == xz._version
    xz.add_(1)
    assert x._version == xz._version

    # `x.data = y` preserves version counter of `x`
    x_saved_version = x._version
    x.data = ag.randn(2, 3)
    assert x._version == x_saved_version
    x.add_(1)
    assert x._version > x_saved_version
    # Make sure `x` is still using the same version counter it shares with `xz`
    assert x._version == xz._version

    # In-place op on `xz` also updates version of `x`,
    # because they share the version counter
    xz.add_(1)
    assert x._version == xz._version


# 145
async def test_grad_unreachable():
    """Port of TestAutograd.test_grad_unreachable."""
    x = ag.ones(1, requires_grad=True)
    y = ag.ones(1, requires_grad=True)
    # Make sure x and y have grad accumulators allocated
    z = x * 2
    w = y * 2  # noqa: F841

    grad_x, grad_y = await ag.grad(x * 2, [x, y], allow_unused=True)
    assert_equal(grad_x, x * 2)
    assert grad_y is None

    # This is slightly different than the case above, because z doesn't even
    # have a grad accumulator allocated.
    z = ag.ones(1, requires_grad=True)
    grad_x, grad_z = await ag.grad(x * 2, [x, z], allow_unused=True)
    assert_equal(grad_x, x * 2)
    assert grad_z is None

    # allow_unused=False, but grads contains None inside, should throw
    with pytest.raises(RuntimeError, match="Set allow_unused=True"):
        grad_x, grad_y = await ag.grad(x * 2, [x, y], allow_unused=False)


# 146
async def test_var_mean_differentiable():
    """Port of TestAutograd.test_var_mean_differentiable."""
    dim = [2, 4]
    keepdim = False
    input1 = ag.randn(3, 4, 5, 6, 2, 3, requires_grad=True)
    input2 = deepcopy(input1)
    var1, mean1 = ag.var_mean(input1, dim=dim, keepdim=keepdim)
    var2 = input2.var(dim=dim, keepdim=keepdim)
    mean2 = input2.mean(dim=dim, keepdim=keepdim)
    grad = ag.randn(3, 4, 6, 3, requires_grad=True)

    r1 = var1 * var1 * mean1 * mean1
    r2 = var2 * var2 * mean2 * mean2
    assert ag.allclose(r1, r2, rtol=0.01, atol=0.0)

    await ag.backward(r1, grad)
    await ag.backward(r2, grad)
    assert ag.allclose(input1.grad, input2.grad, rtol=0.01, atol=0.0)


# 147
async def test_inplace():
    """Port of TestAutograd.test_inplace (``torch.Tensor(5, 5).fill_(v)`` is ``ag.empty(5, 5).fill_(v)``)."""
    x = ag.ones(5, 5, requires_grad=True)
    y = (ag.ones(5, 5) * 4).requires_grad_()

    z = x * y
    q = z + y
    w = z * y
    z.add_(2)
    # Add doesn't need it's inputs to do backward, so it shouldn't raise
    await q.backward(ag.ones(5, 5), retain_graph=True)
    # Mul saves both inputs in forward, so it should raise
    with pytest.raises(RuntimeError):
        await w.backward(ag.ones(5, 5))

    z = x * y
    q = z * y
    r = z + y
    w = z.add_(y)
    # w is a the last expression, so this should succeed
    await w.backward(ag.ones(5, 5), retain_graph=True)
    # r doesn't use the modified value in backward, so it should succeed
    await r.backward(ag.ones(5, 5), retain_graph=True)
    # q uses dirty z, so it should raise
    with pytest.raises(RuntimeError):
        await q.backward(ag.ones(5, 5))

    with ag.no_grad():
        x.grad.zero_()
    m = x / 2
    z = m + y / 8
    q = z * y
    r = z + y
    prev_version = z._version
    w = z.exp_()
    assert z._version != prev_version
    await r.backward(ag.ones(5, 5), retain_graph=True)
    assert_equal(x.grad, ag.ones(5, 5) / 2)
    await w.backward(ag.ones(5, 5), retain_graph=True)
    assert_equal(x.grad, ag.empty(5, 5).fill_((1 + math.e) / 2))
    with pytest.raises(RuntimeError):
        await q.backward(ag.ones(5, 5))

    leaf = ag.ones(5, 5, requires_grad=True)
    x = leaf.clone()
    x.add_(10)
    assert_equal(x, ag.ones(5, 5) * 11)
    # x should be still usable
    y = x + 2
    await y.backward(ag.ones(5, 5))
    assert_equal(leaf.grad, ag.ones(5, 5))
    z = x * y
    x.add_(2)
    with pytest.raises(RuntimeError):
        await z.backward(ag.ones(5, 5))


# 148
async def test_invalid_gradients():
    """Port of TestAutograd.test_invalid_gradients."""
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            return ag.randn(10, dtype=ag.float)

    with pytest.raises(RuntimeError, match='expected shape'):
        input = ag.randn(5, 5, dtype=ag.float, requires_grad=True)
        await MyFunction.apply(input).sum().backward()


# 149
async def test_grad():
    """Port of TestAutograd.test_grad."""
    x = ag.randn(2, 2, requires_grad=True)
    y = ag.randn(2, 2, requires_grad=True)
    z = x ** 2 + y * x + y ** 2
    await z.backward(ag.ones(2, 2), create_graph=True)

    x_grad = 2 * x + y
    y_grad = x + 2 * y
    assert_equal(x.grad, x_grad)
    assert_equal(y.grad, y_grad)

    grad_sum = 2 * x.grad + y.grad
    x_hv = await ag.grad(
        outputs=[grad_sum], grad_outputs=[ag.ones(2, 2)],
        inputs=[x], create_graph=True)
    expected_x_hv = ag.ones(2, 2) * 5

    assert_equal(x_hv[0], expected_x_hv)
    assert_equal(x.grad, x_grad)
    assert_equal(y.grad, y_grad)

    # Test that grad_outputs and outputs have the same shape
    grad_out = ag.ones(2)
    with pytest.raises(RuntimeError) as error:
        await ag.grad(
            outputs=[grad_sum], grad_outputs=[grad_out],
            inputs=[x], create_graph=True)
    assert str(error.value) == ("Mismatch in shape: grad_output[0] has a shape of "
                                + str(grad_out.shape) + " and output[0] has a shape of "
                                + str(grad_sum.shape) + ".")


# 150
async def test_ctc_loss():
    """Port of TestAutogradDeviceType.test_ctc_loss (CPU cases)."""
    batch_size = 64
    num_labels = 101
    target_length = 15
    gradcheck_input_size = 10

    ZERO_NONE = 0
    ZERO_SOME = 1
    ZERO_ALL = 2

    # input_length, vary_lengths, zero_lengths
    tests = [(150, False, ZERO_NONE),
             (150, True, ZERO_NONE),
             (50, True, ZERO_SOME),
             (50, True, ZERO_ALL)]

    for input_length, vary_lengths, zero_mode in tests:
        targets = ag.randint(1, num_labels, (batch_size, target_length), dtype=ag.long)
        x = ag.randn(gradcheck_input_size, requires_grad=True)
        tile_factors = ag.randn(input_length * batch_size * num_labels // gradcheck_input_size + 1)
        input_lengths = [(ag.randint(input_length // 2, input_length + 1, ()).item()
                          if vary_lengths or i == 0 else input_length) for i in range(batch_size)]
        if zero_mode == ZERO_ALL:
            target_lengths = [0 for _ in range(batch_size)]
        else:
            target_lengths = [(ag.randint(target_length // 2, target_length + 1, ()).item()
                               if vary_lengths else target_length) for _ in range(batch_size)]
            if zero_mode == ZERO_SOME:
                idxes = ag.randint(0, batch_size, (10,))
                for i in idxes:
                    target_lengths[i] = 0

        def ctc_after_softmax(x, input_length=input_length, tile_factors=tile_factors, targets=targets,
                              input_lengths=input_lengths, target_lengths=target_lengths):
            x_full = ((x[:, None] * tile_factors[None, :]).view(-1)[:input_length * batch_size * num_labels]
                      .view(input_length, batch_size, num_labels))
            log_probs = ag.log_softmax(x_full, 2)
            return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)

        assert await ag.gradcheck(ctc_after_softmax, [x])


# 151
async def test_broadcast_tensors():
    """Port of TestAutograd.test_broadcast_tensors."""
    f_args_variable = (ag.randn(3, requires_grad=True),
                       ag.randn(1, 2, 1, requires_grad=True),
                       ag.randn(1, 1, requires_grad=True),
                       ag.randn(5, 1, 1, requires_grad=True))
    await run_functional_checks("broadcast", lambda a, b, c, d: ag.broadcast_tensors(a, b, c, d),
                                True, f_args_variable)


# 152
async def test_dont_materialize_grads():
    """Port of TestAutograd.test_dont_materialize_grads.

    torch's ``torch._C._functions.UndefinedGrad()`` is the Function below: the identity, whose
    backward hands on an undefined (None) gradient, as torch's does.
    """
    class UndefinedGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return None

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x

        @staticmethod
        def backward(ctx, grad):
            assert grad is None
            return grad

    x = ag.ones(1, requires_grad=True)
    await UndefinedGrad.apply(MyFunction.apply(x)).backward()


# 153
async def test_inplace_view_backprop_view_of_view():
    """Port of TestAutogradDeviceType.test_inplace_view_backprop_view_of_view."""
    root = ag.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = x.narrow(0, 0, 1)
    v1.mul_(2)
    await v2.sum().backward()
    assert root.grad.tolist() == [[2, 2], [0, 0]]


# 154
async def test_jacobian_err_check():
    """Port of TestAutogradFunctional.test_jacobian_err_check."""
    jacobian = ag.functional.jacobian

    def foo(a):
        return 3 * a.narrow(0, 0, 3)

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    inp = ag.rand(4)
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor"):
        await jacobian(foo, (inp, 2))

    with pytest.raises(TypeError, match="The outputs of the user-provided function given to jacobian must"):
        await jacobian(bar, inp)

    res = await jacobian(foo, inp)
    _assert_interleaved_struct(res, foo(inp), inp)

    def foo(a, b):
        return b, 3 * a.narrow(0, 0, 3)

    inp = (ag.rand(4), ag.rand(5))

    res = await jacobian(foo, inp)
    _assert_interleaved_struct(res, foo(*inp), inp)


# 155
async def test_unbind():
    """Port of TestAutograd.test_unbind."""
    stacked = ag.randn(3, 10, 10, requires_grad=True)
    x, y, z = stacked.unbind()
    grad = ag.randn(3, 10, 10)
    await ag.backward([x, y, z], grad.unbind())
    assert_equal(stacked.grad, grad)
    # check that it works with only one gradient provided (#9977)
    for i in range(3):
        stacked = ag.randn(3, 10, 10, requires_grad=True)
        outs = stacked.unbind()
        gi = grad.unbind()[i]
        g, = await ag.grad(outs[i], stacked, gi)
        g_expected = ag.stack([gi if j == i else ag.zeros_like(gi)
                               for j in range(3)], dim=0)
        assert_equal(g, g_expected)


# 156
async def test_reentrant_with_leaf_variable_hook():
    """Port of TestAutograd.test_reentrant_with_leaf_variable_hook.

    Tensor hooks are plain functions, so the hook's reentrant ``out.backward()`` is
    ``out.backward_sync()``, as API.md allows from the kernel thread a hook runs on.
    """
    handle = None
    param = ag.rand(10, requires_grad=True)

    def add_gradient_penalty_to_grad(grad):
        handle.remove()
        old_param_grad = grad
        param.grad = None
        # Add some sort of gradient penalty by directly updating the gradients
        with ag.enable_grad():
            g = grad.detach().requires_grad_()
            new_param = param.detach().requires_grad_()
            out = ((g * 2) + new_param).sum()
            out.backward_sync()
        res = g.grad + grad
        param.grad = old_param_grad
        return res

    handle = param.register_hook(add_gradient_penalty_to_grad)
    # Forward pass
    tmp = (param * param)
    loss = tmp.sum()
    # Compute the gradients
    await loss.backward()


# 157
async def test_as_strided():
    """Port of TestAutograd.test_as_strided.

    torch's guard that a case does not resize the storage reads ``len(y.storage())`` and
    ``y.storage_offset()``; here the storage is the view's base (or the tensor itself) and the
    offset its ``storage_offset()``.
    """
    async def test(x, prepro_fn, size, strides, offset=None):
        x = x.to(ag.float64).detach().requires_grad_()

        # Check that forward will **not** resize storage because it may
        # cause NaN in output and fail numerical Jacobian check consequently
        with ag.no_grad():
            y = prepro_fn(x) if prepro_fn is not None else x
            max_offset = sum((si - 1) * st for si, st in zip(size, strides))
            max_offset += offset if offset is not None else y.storage_offset()
            storage = y._base if y._base is not None else y
            assert max_offset < storage.numel(), "test case resizes storage"

        def closure(x):
            if prepro_fn is not None:
                x = prepro_fn(x)
            return x.as_strided(size, strides, offset)

        assert await ag.gradcheck(closure, [x])
        assert await ag.gradgradcheck(closure, [x])

    # test
    await test(ag.arange(0, 25), lambda x: x.view(5, 5), [3, 3], [6, 2], 2)

    # test crazy stride at dim with size 1 case
    await test(ag.randn(12), None, [1, 2, 1, 5], [0, 5, 100, 1], 2)

    # test expand case
    await test(ag.randn(5), None, [3, 3, 3], [0, 1, 0], 2)
    await test(ag.randn(5), None, [3, 3, 3], [0, 0, 0], 4)
    await test(ag.randn(5), lambda x: x.expand(5, 5), [5, 5], [0, 1], 0)

    # test non-expand overlapping case
    await test(ag.randn(35), None, [6, 6], [5, 1], 2)
    await test(ag.randn(15), None, [3, 2], [3, 6], 2)

    # test transpose case
    await test(ag.randn(3, 4), None, [4, 3], [1, 4])

    # test "getting things outside the input" case
    x = ag.randn(6, 2)
    await test(x[3:], None, [3, 2], [2, 1], 0)  # should be all zeros
    assert_equal(x[3:].as_strided([3, 2], [2, 1], 0), x[:3])

    # test select on expanded input case
    await test(ag.randn(2, 3), lambda x: x.expand(10, 2, 3), [2, 3], [3, 1], 0)


# 158
async def test_jacobian_scalar():
    """Port of TestAutogradFunctional.test_jacobian_scalar."""
    def reducer(x):
        return x.sum()
    inputs = ag.rand(4, 4)
    res = await ag.functional.jacobian(reducer, inputs)
    _assert_same_struct(res, inputs)

    def expander(x):
        return x.unsqueeze(0).repeat(4)
    inputs = ag.rand([])
    res = await ag.functional.jacobian(expander, inputs)
    _assert_same_struct(res, ag.zeros(4))


# 159
async def test_hessian_err_check():
    """Port of TestAutogradFunctional.test_hessian_err_check."""
    hessian = ag.functional.hessian

    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    def bar2(a):
        return 3 * a.narrow(0, 0, 3)

    def bar3(a):
        return 3 * a.narrow(0, 0, 3), 3 * a.narrow(0, 0, 3)

    inp = ag.rand(4)
    with pytest.raises(TypeError, match="The inputs given to hessian must be either a Tensor"):
        await hessian(foo, (inp, 2))

    with pytest.raises(TypeError, match="The outputs of the user-provided function given to hessian must"):
        await hessian(bar, inp)

    err_msg_out = "The Tensor returned by the function given to hessian should contain a single element"
    with pytest.raises(RuntimeError, match=err_msg_out):
        await hessian(bar2, inp)

    with pytest.raises(RuntimeError, match="The function given to hessian should return a single Tensor"):
        await hessian(bar3, inp)

    res = await hessian(foo, inp)
    _assert_interleaved_struct(res, inp, inp)

    def foo(a, b):
        return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

    inp = (ag.rand(4), ag.rand(5))

    res = await hessian(foo, inp)
    _assert_interleaved_struct(res, inp, inp)


# 160
async def test_inplace_view_modify_base():
    """Port of TestAutogradDeviceType.test_inplace_view_modify_base."""
    r = ag.ones(1, requires_grad=True)

    def fn(r):
        x = ag.ones(5)
        v = x.select(0, 1)
        assert not v.requires_grad
        assert v.grad_fn is None
        x.add_(r)  # v is now dependent on r due to the in-place op on x
        assert v.requires_grad
        return v

    assert await ag.gradcheck(fn, [r])
    assert await ag.gradgradcheck(fn, [r])


# 161
async def test_vjp_output():
    """Port of TestAutogradFunctional.test_vjp_output."""
    vjp = ag.functional.vjp

    def reducer(x):
        return x.sum(dim=1)
    inputs = ag.rand(4, 4)
    v = ag.ones(4)
    res = await vjp(reducer, inputs, v)
    _assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def adder(x, y):
        return 2 * x + 3 * y

    inputs = (ag.rand(2), ag.rand(2))
    v = ag.ones(2)
    out, vjp_val = await vjp(adder, inputs, v)
    _assert_same_struct(vjp_val, inputs)
    assert out.grad_fn is None
    assert vjp_val[0].grad_fn is None
    assert vjp_val[1].grad_fn is None

    def adder(x, y):
        return 2 * x + 3 * y, x + y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.tensor([1., 0.]), ag.tensor([1., 0.]))
    out, vjp_val = await vjp(adder, inputs, v)
    _assert_same_struct(vjp_val, inputs)
    assert out[0].grad_fn is None
    assert out[1].grad_fn is None
    assert vjp_val[0].grad_fn is None
    assert vjp_val[1].grad_fn is None


# 162
def test_autograd_views_codegen():
    """Port of TestAutograd.test_autograd_views_codegen.

    The expected error for unbind's outputs is torch 2.13's wording, ``Output 0 of Unbind is a
    view``; the ~2020 test's ``UnbindBackward`` does not match what torch 2.13 says.
    """
    def run_test(grad_mode, requires_grad, is_view, should_raise_tuple):
        def maybe_check_raise(fn, should_raise):
            assert should_raise is None or isinstance(should_raise, str)
            if should_raise is not None:
                with pytest.raises(RuntimeError, match=should_raise):
                    fn()
            else:
                fn()

        inp = ag.rand(2, requires_grad=requires_grad).clone()
        with ag.set_grad_enabled(grad_mode):
            out = inp.view_as(inp)
        # Are they differentiable views?
        assert out._is_view() == is_view
        # Are inplace allowed?
        maybe_check_raise(lambda: out.add_(1), should_raise_tuple[0])

        inp = ag.rand(2, requires_grad=requires_grad).clone()
        with ag.set_grad_enabled(grad_mode):
            out = inp.unbind()
        # Are they differentiable views?
        assert out[0]._is_view() == is_view
        assert out[1]._is_view() == is_view
        # Are inplace allowed?
        maybe_check_raise(lambda: out[0].add_(1), should_raise_tuple[1])
        maybe_check_raise(lambda: out[1].add_(1), should_raise_tuple[2])

    run_test(grad_mode=True, requires_grad=False, is_view=True,
             should_raise_tuple=(None, None, None))
    inp_change_err = "Output {} of Unbind is a view and is being modified inplace."
    run_test(grad_mode=True, requires_grad=True, is_view=True,
             should_raise_tuple=(None, inp_change_err.format("0"), inp_change_err.format("1")))
    leaf_grad_err = "A view was created in no_grad mode and is being modified inplace"
    run_test(grad_mode=False, requires_grad=True, is_view=True,
             should_raise_tuple=(leaf_grad_err, leaf_grad_err, leaf_grad_err))
    run_test(grad_mode=False, requires_grad=False, is_view=True,
             should_raise_tuple=(None, None, None))


# 163
def test_profiler_aggregation_fake():
    """Port of TestAutograd.test_profiler_aggregation_fake."""
    events = ag.profiler.EventList()
    id = [0]

    def get_id():
        id[0] = id[0] + 1
        return id[0]

    threads = [
        [1, [(0, 1, get_id()), (1, 2, get_id())]],
        [0, [(0, 2, get_id()), (1, 2, get_id()), (1, 3, get_id())]],
    ]
    for thread, ranges in threads:
        for range_ in ranges:
            assert len(range_) == 3
            events.append(
                ag.profiler.FunctionEvent(
                    id=range_[2],
                    node_id=0,
                    name="",
                    thread=thread,
                    cpu_start=range_[0],
                    cpu_end=range_[1],
                )
            )

    events.populate_cpu_children()

    # Note that [1, 3] pushes out [0, 2] first. Then we record [1, 2]
    # as a child of [1, 3]
    res = [[], [], [], [], [4]]

    def get_children_ids(event):
        return [child.id for child in event.cpu_children]

    assert [get_children_ids(event) for event in events] == res


# 164
async def test_backward_twice_retained_graph_with_saved_values():
    """Port of TestAutograd.test_backward_twice_retained_graph_with_saved_values."""
    b = ag.randn(3, requires_grad=True, dtype=ag.double)
    c = ag.zeros(3, dtype=ag.double)
    c[[1, 2]] = b[[1, 1]]
    await c.backward(ag.tensor([1, 1, 1], dtype=ag.double), retain_graph=True)
    await c.backward(ag.tensor([1, 1, 1], dtype=ag.double))


# 165
async def test_hessian_vector():
    """Port of TestAutograd.test_hessian_vector."""
    x = ag.randn(2, 2, requires_grad=True)
    y = ag.randn(2, 2, requires_grad=True)

    z = x ** 2 + y * x + y ** 2
    await z.backward(ag.ones(2, 2), create_graph=True)

    with ag.no_grad():
        x_grad = 2 * x + y
        y_grad = x + 2 * y
    assert_equal(x.grad, x_grad)
    assert_equal(y.grad, y_grad)

    grad_sum = 2 * x.grad + y.grad
    await grad_sum.backward(ag.ones(2, 2))
    x_hv = ag.ones(2, 2) * 5
    y_hv = ag.ones(2, 2) * 4
    assert_equal(x.grad, x_grad + x_hv)
    assert_equal(y.grad, y_grad + y_hv)


# 166
async def test_reentrant_child_error():
    """Port of TestAutograd.test_reentrant_child_error (the reentrant ``backward()`` is awaited).

    torch 2.13 raises the child's own exception (an ``Exception``), not a RuntimeError as the
    ~2020 test expects; the port asserts torch 2.13's type, as torch's current test does.
    """
    # Parent graph.
    a = ag.rand(3, 3, requires_grad=True)
    c = a * a

    # Reentrant child graph.
    b = ag.rand(3, 3, requires_grad=True)
    e = b * b
    f = SimulateBackwardError.apply(e)
    reentrant_root = f.sum()

    class ReentrantFunc(Function):

        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        async def backward(ctx, grad):
            # Reentrant backward in child will throw an error.
            await reentrant_root.backward()
            return grad

    d = ReentrantFunc.apply(c)
    with pytest.raises(Exception, match='Simulate error'):
        await d.sum().backward()


# 167
async def test_symeig_no_eigenvectors():
    """Port of TestAutograd.test_symeig_no_eigenvectors (``torch.symeig`` as ``ag.symeig``)."""
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.symeig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match='cannot compute backward'):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


# 168
async def test_materialize_grads():
    """Port of TestAutograd.test_materialize_grads.

    torch's ``torch._C._functions.UndefinedGrad()`` is the Function below: the identity, whose
    backward hands on an undefined (None) gradient, as torch's does.
    """
    class UndefinedGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return None

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            assert_equal(grad, ag.zeros(1))
            return grad

    x = ag.ones(1, requires_grad=True)
    await UndefinedGrad.apply(MyFunction.apply(x)).backward()


# 169
async def test_no_grad_copy():
    """Port of TestAutograd.test_no_grad_copy."""
    # create autograd function that saves grad pointer as class static
    class MyFunc(Function):
        static_grad_ptr = None

        @staticmethod
        def forward(ctx, inp1, inp2):
            return inp1 + inp2

        @staticmethod
        def backward(ctx, grad):
            MyFunc.static_grad_ptr = grad.data_ptr()
            return grad, grad

    class NonContGradFunc(Function):
        @staticmethod
        def forward(ctx, inp1):
            ctx.size = inp1.size()
            return ag.tensor([1.])

        @staticmethod
        def backward(ctx, grad):
            return ag.ones(1).expand(ctx.size)

    a = ag.randn(5, 6, requires_grad=True)
    b = ag.randn(5, 6, requires_grad=True)
    # non-contiguous grad should be copied
    await NonContGradFunc.apply(MyFunc.apply(a, b)).backward()
    assert not a.grad.data_ptr() == MyFunc.static_grad_ptr
    assert not b.grad.data_ptr() == MyFunc.static_grad_ptr
    # test case that should trigger no copy for one of a,b
    a.grad = b.grad = None
    await MyFunc.apply(a, b)[1][0].backward()
    p_g = MyFunc.static_grad_ptr
    p_a = a.grad.data_ptr()
    p_b = b.grad.data_ptr()
    # check a,b uses different grad buffer
    assert not p_a == p_b
    # check one of them is using the computed buffer
    assert p_a == p_g or p_b == p_g


# 170
async def test_advanced_indexing_backwards_memory_format():
    """Port of TestAutogradDeviceType.test_advanced_indexing_backwards_memory_format."""
    shape = (2, 8, 1, 2)
    i = ag.randint(1, shape).contiguous(memory_format=ag.channels_last)
    x = ag.randn(shape, requires_grad=True)
    await x[i].sum().backward()


# 171
async def test_svd_no_singularvectors():
    """Port of TestAutograd.test_svd_no_singularvectors.

    A backward through U and V of ``svd(compute_uv=False)`` is refused. The 2020 text is "cannot
    compute backward"; torch 2.13 refuses earlier, because the zero U and V it returns do not
    require grad: the port matches torch 2.13's text (checked with the torch in the test venv).
    """
    A = ag.randn(2, 2, dtype=ag.float32, requires_grad=True)
    u, s, v = ag.svd(A, compute_uv=False)
    with pytest.raises(RuntimeError, match='element 0 of tensors does not require grad and does not have a grad_fn'):
        await ag.backward([u, s, v], [ag.ones_like(u), ag.ones_like(s), ag.ones_like(v)])


# 172
async def test_custom_autograd_no_early_free():
    """Port of TestAutograd.test_custom_autograd_no_early_free."""
    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            y = x ** 2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, _ = ctx.saved_tensors
            return grad_output * 2 * x

    # this is equivalent, but uses the output of .forward() in .backward()
    class Double2(Double):
        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            return grad_output * 2 * y / x

    double = Double.apply
    double2 = Double2.apply

    x = ag.tensor(2).double().requires_grad_()

    assert await ag.gradcheck(double, x)
    assert await ag.gradgradcheck(double, x)
    assert await ag.gradcheck(double2, x)
    assert await ag.gradgradcheck(double2, x)

    y = double(x)
    await ag.grad(y, x, create_graph=True)
    await ag.grad(y, x)

    y = double2(x)
    await ag.grad(y, x, create_graph=True)
    await ag.grad(y, x)  # should not error!


# 173
async def test_eig_no_eigenvectors():
    """Port of TestAutograd.test_eig_no_eigenvectors (``torch.eig`` as ``ag.eig``; torch removed it)."""
    A = ag.tensor([[1., 2.], [2., 4.]], dtype=ag.float32, requires_grad=True)
    w, v = ag.eig(A, eigenvectors=False)
    with pytest.raises(RuntimeError, match='cannot compute backward'):
        await ag.backward([w, v], [ag.ones_like(w), ag.ones_like(v)])


# 174
async def test_retain_grad_cycle():
    """Port of TestAutograd.test_retain_grad_cycle."""
    counter = [0]
    refs = [None]

    x = ag.ones(5, 5, requires_grad=True)

    def run_test():
        y = x * 2
        y.retain_grad()

        def inc(*args):
            counter[0] += 1
        refs[0] = weakref.ref(y, inc)
        return y / 2

    z = run_test()
    gc.collect()
    assert refs[0]() is None
    assert counter[0] == 1
    await z.sum().backward()


# 175
async def test_inplace_view_of_view():
    """Port of TestAutogradDeviceType.test_inplace_view_of_view."""
    root = ag.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = v1.narrow(1, 1, 1)
    v2.mul_(2)
    await x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1]]


# 176
@pytest.mark.xfail(strict=True, reason="bfloat16 missing (and dtypes have no is_floating_point)")
def test_copy_():
    """Port of TestAutogradDeviceType.test_copy_ (torch.testing.get_all_dtypes()'s floating dtypes listed)."""
    x = ag.randn(10, requires_grad=True)
    floating_dt = [ag.float16, ag.bfloat16, ag.float32, ag.float64]
    for dt in floating_dt:
        y = ag.empty(10, dtype=dt)
        y.copy_(x)
        assert y.requires_grad
        z = x.to(ag.bfloat16)
        assert z.requires_grad


# 177
async def test_cat_negdim_1():
    """Port of TestAutograd.test_cat_negdim_1."""
    f_args_variable = (ag.randn(S, S, 1, requires_grad=True),
                       ag.randn(S, S, 2, requires_grad=True),
                       ag.randn(S, S, 3, requires_grad=True),
                       -1)
    await run_functional_checks("cat", lambda a, b, c, dim: ag.cat((a, b, c), dim), True, f_args_variable)


# 178
async def test_pdist_large():
    """Port of TestAutogradDeviceType.test_pdist_large."""
    shape = (1000, 1)
    x = ag.randn(shape).requires_grad_()
    output = ag.pdist(x, p=2)
    # just run a single backward, as gradcheck/gradgradcheck is expensive here
    await output.sum().backward()


# 179
@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence:UserWarning")
async def test_indexing():
    """Port of TestAutograd.test_indexing.

    ``Variable(x, requires_grad=True)`` (a tensor sharing ``x``'s data) is ``x.detach().requires_grad_()``,
    ``torch.Tensor(size).fill_(0)`` is ``ag.empty(size).fill_(0)``, ``torch.LongTensor(l)`` is
    ``ag.tensor(l)``.
    """
    x = ag.arange(1., 17).view(4, 4)
    y = x.detach().requires_grad_()

    async def compare(x, y, idx, indexed_tensor, indexed_var):
        indexed_var_t = indexed_var.data
        if not isinstance(indexed_tensor, ag.Tensor):
            indexed_var_t = indexed_var_t[0]
        assert_equal(indexed_tensor, indexed_var_t)

        await indexed_var.sum().backward()
        expected_grad = ag.empty(*x.size()).fill_(0)
        expected_grad[idx] = 1
        assert_equal(y.grad, expected_grad)

    async def check_index(x, y, idx):
        if y.grad is not None:
            with ag.no_grad():
                y.grad.zero_()
        indexed_tensor = x[idx]
        indexed_var = y[idx]
        await compare(x, y, idx, indexed_tensor, indexed_var)

    await check_index(x, y, 1)
    await check_index(x, y, (1, 1))
    await check_index(x, y, slice(1, None))
    await check_index(x, y, slice(None, 2))
    await check_index(x, y, (slice(None, 2), 2))
    await check_index(x, y, (slice(1, 2), 2))
    await check_index(x, y, (1, slice(2, None)))
    await check_index(x, y, (slice(None, None), slice(2, None)))
    await check_index(x, y, ag.tensor([0, 2]))
    await check_index(x, y, ag.rand(4, 4).bernoulli().bool())
    await check_index(x, y, (Ellipsis, slice(2, None)))
    await check_index(x, y, ([0], [0]))
    await check_index(x, y, ([1, 2, 3], [0]))
    await check_index(x, y, ([1, 2], [2, 1]))
    await check_index(x, y, ([[1, 2], [3, 0]], [[0, 1], [2, 3]]))
    await check_index(x, y, ([slice(None), [2, 3]]))
    await check_index(x, y, ([[2, 3], slice(None)]))

    # advanced indexing, with less dim, or ellipsis
    await check_index(x, y, ([0]))
    await check_index(x, y, ([0], ))

    x = ag.arange(1., 49).view(4, 3, 4)
    y = x.detach().requires_grad_()

    await check_index(x, y, (slice(None), [0], [0]))
    await check_index(x, y, ([0], [0], slice(None)))
    await check_index(x, y, (slice(None), [0, 1, 2], [0]))
    await check_index(x, y, ([0, 1, 2], [0], slice(None)))
    await check_index(x, y, (slice(None), [1, 2], [2, 1]))
    await check_index(x, y, ([1, 2], [2, 1], slice(None)))
    await check_index(x, y, (slice(None), [[1, 2], [2, 0]], [[0, 1], [2, 3]]))
    await check_index(x, y, ([[1, 2], [3, 0]], [[0, 1], [2, 2]], slice(None)))
    await check_index(x, y, (slice(None), slice(None), [2, 1]))
    await check_index(x, y, (slice(None), [2, 1], slice(None)))
    await check_index(x, y, ([2, 1], slice(None), slice(None)))

    # advanced indexing, with less dim, or ellipsis
    await check_index(x, y, ([0], ))
    await check_index(x, y, ([0], slice(None)))
    await check_index(x, y, ([0], Ellipsis))
    await check_index(x, y, ([1, 2], [0, 1]))
    await check_index(x, y, ([1, 2], [0, 1], Ellipsis))
    await check_index(x, y, (Ellipsis, [1, 2], [0, 1]))

    # advanced indexing, with a tensor wrapped in a variable
    z = ag.tensor([0, 1])
    zv = z.detach()
    seq = [z, Ellipsis]
    seqv = [zv, Ellipsis]

    if y.grad is not None:
        with ag.no_grad():
            y.grad.zero_()
    indexed_tensor = x[seq]
    indexed_var = y[seqv]
    await compare(x, y, seq, indexed_tensor, indexed_var)


# 180
async def test_custom_function_exception():
    """Port of TestAutograd.test_custom_function_exception.

    torch 2.13 raises the backward's own exception (here an ``Exception``), not a RuntimeError
    as the ~2020 test expects; the port asserts torch 2.13's type, as torch's current test does.
    """
    t1 = ag.rand((3, 3), requires_grad=True)
    t2 = ag.rand((3, 3), requires_grad=True)

    tmp = (t1 + t2) * (t1 + t2)
    t3 = SimulateBackwardError.apply(tmp)
    with pytest.raises(Exception, match="Simulate error on backward pass"):
        await t3.sum().backward()


def test_the_ports_are_the_seeded_sample_in_order():
    """The tests above port exactly items 121 to 180 of the seeded sample, in its order."""
    assert_ports_are_items(globals(), 121, 180)
