"""PyTorch's own autograd tests, items 181 to 239 of the seeded sample (issue 10), ported to asyncgrad.

The population, the seeded order and the shared helpers are in ``tests/torch_parity/torch_port.py``; the style
is that of ``tests/torch_parity/test_autograd_sample_001_060.py`` (items 1-60): each test names the torch test it
ports and carries its sample number, torch's inputs and assertions are kept, and where torch calls
``backward`` or ``grad`` these await. A test asyncgrad fails, or cannot run for want of an op, is
kept and marked ``xfail(strict=True)`` with what differs. The torch source is
``test/test_autograd.py`` of the 2020 version the population was taken from.
"""

import gc
import json
import math
import sys
import tempfile

import pytest
from torch_port import (  # noqa: F401  (double_default: an autouse fixture)
    S,
    _assert_interleaved_struct,
    _assert_same_struct,
    assert_equal,
    assert_ports_are_items,
    double_default,
    graph_desc,
    mask_not_all_zeros,
    run_functional_checks,
)

import asyncgrad as ag
import asyncgrad.nn.functional as F
from asyncgrad import Function, once_differentiable
from asyncgrad.autograd import InplaceFunction

autogradF = ag.functional
inf = math.inf
nan = math.nan


# 181
async def test_hessian_create_graph():
    """Port of TestAutogradFunctional.test_hessian_create_graph (the functions gradcheck calls are async)."""
    def pow_reducer(x):
        return x.pow(3).sum()

    inputs = ag.rand(2, 2, requires_grad=True)
    res = await autogradF.hessian(pow_reducer, inputs, create_graph=True)
    _assert_interleaved_struct(res, inputs, inputs)
    assert res.grad_fn is not None

    async def hess1(inp):
        return await autogradF.hessian(pow_reducer, inp, create_graph=True)

    assert await ag.gradcheck(hess1, inputs)
    assert await ag.gradgradcheck(hess1, inputs)

    def add_pow_reducer(x, y):
        return (x + y).pow(3).sum()

    inputs = (ag.rand(2, 2, requires_grad=True), ag.rand(2, 2, requires_grad=True))
    res = await autogradF.hessian(add_pow_reducer, inputs, create_graph=True)
    _assert_interleaved_struct(res, inputs, inputs)
    assert res[0][0].grad_fn is not None
    assert res[0][1].grad_fn is not None
    assert res[1][0].grad_fn is not None
    assert res[1][1].grad_fn is not None

    def flatten(inp):
        return tuple(el_lvl2 for el_lvl1 in inp for el_lvl2 in el_lvl1)

    async def hess2(*inp):
        return flatten(await autogradF.hessian(add_pow_reducer, inp, create_graph=True))

    assert await ag.gradcheck(hess2, inputs)
    assert await ag.gradgradcheck(hess2, inputs)

    async def foo(x, y):
        x = x.cos()
        val, hess = await autogradF.hessian(add_pow_reducer, (x, y), create_graph=True)

        res = val[0].cos().sum() + val[1].cos().sum() + hess[0].cos().sum()
        res = res + hess[1].cos().sum() + x.cos().sum() + y.cos().sum()
        return res

    assert await ag.gradcheck(foo, inputs)
    assert await ag.gradgradcheck(foo, inputs)


# 182
async def test_vjp_err_check_strict():
    """Port of TestAutogradFunctional.test_vjp_err_check_strict."""
    def foo(a):
        return a.detach()

    def bar(a):
        # Make a non-leaf Tensor that requires_grad but that is not connected to the input
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.vjp(foo, inp, v, strict=True)
    res = await autogradF.vjp(foo, inp, v, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await autogradF.vjp(bar, inp, v, strict=True)
    res = await autogradF.vjp(bar, inp, v, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.)

    # The Jacobian does not depend on the input
    def foo(a):  # noqa: F811  (torch redefines foo here)
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await autogradF.vjp(foo, inp, v, create_graph=True, strict=True)
    res = await autogradF.vjp(foo, inp, v, create_graph=True, strict=False)
    _assert_same_struct(res[1], inp)
    assert_equal(res[1], v)


# 183
async def test_fill():
    """Port of TestAutograd.test_fill."""
    root = ag.randn(4, 5, requires_grad=True)

    def func(root):
        x = root.clone()
        x.fill_(2)
        return x

    assert await ag.gradcheck(func, [root])
    assert await ag.gradgradcheck(func, [root])


# 184
def test_grad_assignment():
    """Port of TestAutogradDeviceType.test_grad_assignment (devices = ["cpu"]: the device-only and
    multi-device branches are skipped as torch skips them on a CPU-only run)."""
    devices = ["cpu"]
    x = ag.randn(5, 5, device=devices[0])

    # Tests that the wrong shape raises
    with pytest.raises(RuntimeError):
        x.grad = ag.randn(2, 2, device=devices[0])

    # Tests that the wrong dtype raises
    with pytest.raises(RuntimeError):
        x.grad = ag.randn(5, 5, dtype=ag.int64, device=devices[0])

    # Tests that self-assignment raises
    with pytest.raises(RuntimeError):
        x.grad = x


# 185
def test_custom_function_local_inplace():
    """Port of TestAutograd.test_custom_function_local_inplace."""
    class MyFn(Function):
        @staticmethod
        def forward(ctx, inp, inplace):
            view = inp.clone()[:3]
            if inplace:
                view += 2
            return view

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    base = ag.rand(10, requires_grad=True)

    foo = MyFn.apply(base, False)
    assert foo.grad_fn.__class__.__name__ == "MyFnBackward"

    foo = MyFn.apply(base, True)
    assert foo.grad_fn.__class__.__name__ == "MyFnBackward"


# 186
async def test_triangular_solve():
    """Port of TestAutograd.test_triangular_solve."""
    async def _test_with_size(A_dims, B_dims):
        A = ag.rand(*A_dims).requires_grad_()
        b = ag.rand(*B_dims).requires_grad_()

        for upper in (True, False):
            for transpose in (True, False):
                for unitriangular in (True, False):
                    def func(A, b):
                        return ag.triangular_solve(b, A, upper, transpose, unitriangular)  # noqa: B023

                    assert await ag.gradcheck(func, [A, b])
                    assert await ag.gradgradcheck(func, [A, b])

    await _test_with_size((3, 3), (3, 4))
    await _test_with_size((3, 3), (3, 2))
    await _test_with_size((2, 3, 3), (2, 3, 4))
    await _test_with_size((2, 3, 3), (2, 3, 2))


# 187
async def test_grad_badcalls():
    """Port of TestAutograd.test_grad_badcalls."""
    x = ag.ones(1)
    y = x ** 2
    with pytest.raises(RuntimeError, match='does not require grad'):
        await ag.grad(x, y)
    with pytest.raises(RuntimeError, match='does not require grad'):
        await ag.grad(y, x)

    x = ag.ones(1, requires_grad=True)
    y = x ** 2
    await ag.grad(y, x)  # this should succeed now


# 188
def test_inplace_view_saved_output():
    """Port of TestAutograd.test_inplace_view_saved_output.

    asyncgrad refuses a hook that is not callable when it is registered (torch takes any object
    and fails when it calls it), so ``IncrementOnDelete`` has a ``__call__``; the hook never runs:
    what is tested is that the node holding it is freed when ``test()`` returns."""
    dealloc = [0]

    class IncrementOnDelete:
        def __call__(self, *args):
            return None

        def __del__(self):
            dealloc[0] += 1

    def test():
        root = ag.randn(3, 3, requires_grad=True)
        copy = root.clone()
        copy.grad_fn.register_hook(IncrementOnDelete())
        view = copy.view(9)
        F.relu(view, inplace=True)

    test()
    assert dealloc[0] == 1


# 189
async def test_deep_reentrant():
    """Port of TestAutograd.test_deep_reentrant (the reentrant ``backward()`` is awaited, in an
    ``async def`` backward)."""
    class DeepReentrant(Function):
        @staticmethod
        def forward(ctx, x):
            with ag.enable_grad():
                ctx.x = x.detach().requires_grad_(True)
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        @staticmethod
        async def backward(ctx, x):
            if ctx.x < 0:
                return x
            with ag.enable_grad():
                await DeepReentrant.apply(ctx.x).sum().backward()
            return x

    # Test stack overflow escape mechanism
    v = ag.tensor(2000.0, requires_grad=True)
    # This will cause stack overflow if reentrant calls are handled
    # in the same thread recursively
    await DeepReentrant.apply(v).sum().backward()

    # Test stack overflow escape mechanism multiple times
    # to ensure reusing workers in the pool works fine
    v2 = ag.tensor(200.0, requires_grad=True)
    await DeepReentrant.apply(v2).sum().backward()


# 190
async def test_hvp_create_graph():
    """Port of TestAutogradFunctional.test_hvp_create_graph (the functions gradcheck calls are async)."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4, 4, requires_grad=True)
    v = ag.ones(4, 4, requires_grad=True)
    res = await autogradF.hvp(foo, inputs, v, create_graph=True)
    _assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    async def hvp1(inp, v):
        return await autogradF.hvp(foo, inp, v, create_graph=True)

    assert await ag.gradcheck(hvp1, (inputs, v))
    assert await ag.gradgradcheck(hvp1, (inputs, v))

    def bar(a, b):
        return (a + 3 * b.narrow(0, 0, 3)).exp().sum()

    inputs = (ag.rand(3, requires_grad=True), ag.rand(4, requires_grad=True))
    v = (ag.ones(3, requires_grad=True), ag.ones(4, requires_grad=True))
    out, hvp_val = await autogradF.hvp(bar, inputs, v, create_graph=True)
    _assert_same_struct(hvp_val, inputs)
    assert out.grad_fn is not None
    assert hvp_val[0].grad_fn is not None
    assert hvp_val[1].grad_fn is not None

    async def hvp2(*args):
        return (await autogradF.hvp(bar, args[:2], args[2:], create_graph=True))[1]

    assert await ag.gradcheck(hvp2, inputs + v)
    assert await ag.gradgradcheck(hvp2, inputs + v)

    async def foo2(*args):
        x, y = args[:2]
        v = args[2:]

        x = x.cos()
        val, grad = await autogradF.hvp(bar, (x, y), v, create_graph=True)

        return val.cos() + grad[0].cos().sum() + grad[1].cos() + x.cos().sum() + y.cos()

    assert await ag.gradcheck(foo2, inputs + v)
    assert await ag.gradgradcheck(foo2, inputs + v)


# 191
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64"])
def test_set_requires_grad_only_for_floats(dtype):
    """Port of TestAutogradDeviceType.test_set_requires_grad_only_for_floats (its CPU dtypes)."""
    dtype = getattr(ag, dtype)
    device = "cpu"

    def f1():
        a = ag.ones(1, dtype=dtype, device=device)
        a.requires_grad_()

    def f2():
        a = ag.ones(1, dtype=dtype, device=device)
        a.requires_grad = True

    def f3():
        ag.ones(1, dtype=dtype, device=device, requires_grad=True)

    a = ag.ones(1, dtype=dtype, device=device)
    a.requires_grad = False  # should always work
    a.requires_grad_(False)

    for f in [f1, f2, f3]:
        if dtype.is_floating_point:
            f()
        else:
            with pytest.raises(RuntimeError, match='floating point'):
                f()


# 192
def test_free_deep_graph():
    """Port of TestAutograd.test_free_deep_graph."""
    def scope():
        depth = 150000
        x = ag.randn(1, requires_grad=True)
        y = x.clone()

        # build a "chain" computation graph
        for _ in range(depth):
            y = y + y * 0.000001

        # graph deletion occurs when the above locals go out of scope.

    # Should not stack overflow
    scope()


# 193
async def test_multi_backward_no_grad():
    """Port of TestAutograd.test_multi_backward_no_grad."""
    x = ag.randn(5, 5, requires_grad=True)
    y = ag.randn(5, 5, requires_grad=False)

    z = x + y
    q = y * 2

    async def call_backwards():
        await ag.backward([z, q], [ag.ones(5, 5), ag.ones(5, 5)])

    with pytest.raises(RuntimeError):
        await call_backwards()


# 194
async def test_chain_matmul():
    """Port of TestAutograd.test_chain_matmul."""
    def gen_matrices(p):
        matrices = []
        for (pi, pi_1) in zip(p[:-1], p[1:]):
            matrices.append(ag.randn(pi, pi_1).requires_grad_())
        return matrices

    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([5, 10, 15, 5]))
    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([3, 5, 2, 6]))
    assert await ag.gradcheck(ag.chain_matmul, gen_matrices([6, 2, 4, 8, 10]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([5, 10, 15, 5]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([3, 5, 2, 6]))
    assert await ag.gradgradcheck(ag.chain_matmul, gen_matrices([6, 2, 4, 8, 10]))


# 195
async def test_hessian_output():
    """Port of TestAutogradFunctional.test_hessian_output."""
    def pow_reducer(x):
        return x.pow(3).sum()

    inputs = ag.rand(2, 2)
    res = await autogradF.hessian(pow_reducer, inputs)
    _assert_interleaved_struct(res, inputs, inputs)
    assert res.grad_fn is None

    def add_pow_reducer(x, y):
        return (x + y).pow(3).sum()

    inputs = (ag.rand(2, 2), ag.rand(2, 2))
    res = await autogradF.hessian(add_pow_reducer, inputs)
    _assert_interleaved_struct(res, inputs, inputs)
    assert res[0][0].grad_fn is None
    assert res[0][1].grad_fn is None
    assert res[1][0].grad_fn is None
    assert res[1][1].grad_fn is None


# 196
async def test_return_duplicate_inplace():
    """Port of TestAutograd.test_return_duplicate_inplace."""
    class DoubleInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x

        @staticmethod
        def backward(ctx, grad1, grad2):
            return grad1 * 2 + grad2 * 2

    def inplace_fn(x):
        a, b = DoubleInplace.apply(x.clone())
        assert a is b
        return a + b

    x = ag.randn(5, 5, requires_grad=True)
    assert await ag.gradcheck(inplace_fn, [x])
    assert await ag.gradgradcheck(inplace_fn, [x])

    # Can't modify leaf variables in-place
    with pytest.raises(RuntimeError):
        InplaceFunction.apply(x)
    # Functions which modify views in-place must return only one output
    with pytest.raises(RuntimeError):
        InplaceFunction.apply(x.clone()[0])


# 197
async def test_hvp_output():
    """Port of TestAutogradFunctional.test_hvp_output."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await autogradF.hvp(foo, inputs, v)
    _assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def bar(a, b):
        return (a + 3 * b.narrow(0, 0, 3)).exp().sum()

    inputs = (ag.rand(3), ag.rand(4))
    v = (ag.ones(3), ag.ones(4))
    out, hvp_val = await autogradF.hvp(bar, inputs, v)
    _assert_same_struct(hvp_val, inputs)
    assert out.grad_fn is None
    assert hvp_val[0].grad_fn is None
    assert hvp_val[1].grad_fn is None


# 198
async def test_block_diag():
    """Port of TestAutograd.test_block_diag."""
    f_args_variable = (ag.randn(1, S, requires_grad=True),
                       ag.randn(2, S, requires_grad=True),
                       ag.randn(3, S, requires_grad=True))
    await run_functional_checks("block_diag", lambda a, b, c: ag.block_diag(a, b, c), True, f_args_variable)


# 199
def test_profiler_tracing():
    """Port of TestAutograd.test_profiler_tracing (CPU part; ``torch.autograd.profiler.profile`` is
    ``ag.profiler.trace``)."""
    t1, t2 = ag.ones(1), ag.ones(1)
    with ag.profiler.trace() as prof:
        ag.add(t1, t2)

    with tempfile.NamedTemporaryFile(mode="w+") as f:
        prof.export_chrome_trace(f.name)
        # read the trace and expect valid json
        # if the JSON generated by export_chrome_trace is not valid, this will throw and fail the test.
        json.load(f)


# 200
async def test_backward_twice_without_saved_values():
    """Port of TestAutograd.test_backward_twice_without_saved_values."""
    b = ag.randn(3, requires_grad=True, dtype=ag.float64)
    c = b + 1
    await c.backward(ag.tensor([1, 1, 1], dtype=ag.float64))
    await c.backward(ag.tensor([1, 1, 1], dtype=ag.float64))


# 201
async def test_dependent_backward():
    """Port of TestAutograd.test_dependent_backward."""
    x = ag.randn(10, requires_grad=True)
    y = x ** 2
    z = y ** 3

    go_y = ag.randn(10)
    go_z = ag.randn(10)
    await ag.backward([y, z], [go_y, go_z])

    xd = x
    assert_equal(x.grad, 2 * xd * go_y + 6 * xd.pow(5) * go_z)


# 202
async def test_nansum_dtype():
    """Port of TestAutograd.test_nansum_dtype (torch's body sums with ``torch.sum(a, dtype=...)``)."""
    inp = ag.randn(2, 2, 2, 2)
    with ag.no_grad():
        inp[inp < 0.2] = float('nan')

    async def test(inp, inp_dtype, out_dtype):
        with ag.no_grad():
            a = inp.to(inp_dtype)
        a.requires_grad = True
        b = ag.sum(a, dtype=out_dtype)
        await b.backward()
        assert a.dtype == a.grad.dtype

    await test(inp, ag.float32, ag.float64)
    await test(inp, ag.float64, ag.float32)


# 203
async def test_hvp_err_check():
    """Port of TestAutogradFunctional.test_hvp_err_check."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    def bar2(a):
        return 3 * a.narrow(0, 0, 3)

    inp = ag.rand(4)
    v = ag.rand(4)
    res = await autogradF.hvp(foo, inp, v)
    with pytest.raises(TypeError, match="The inputs given to hvp must be either a Tensor"):
        await autogradF.hvp(foo, (inp, 2), v)

    with pytest.raises(TypeError, match="The outputs of the user-provided function given to hvp must"):
        await autogradF.hvp(bar, inp, v)

    err_msg_out = "The Tensor returned by the function given to hvp should contain a single element"
    with pytest.raises(RuntimeError, match=err_msg_out):
        await autogradF.hvp(bar2, inp, v)

    with pytest.raises(RuntimeError, match="v has invalid size:"):
        await autogradF.hvp(foo, inp, ag.rand(5))

    with pytest.raises(TypeError, match="The v given to hvp must be either a Tensor or a tuple of Tensors"):
        await autogradF.hvp(foo, inp, (v, 2))

    res = await autogradF.hvp(foo, inp, v)
    _assert_same_struct(res[1], inp)

    def foo2(a, b):
        return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

    inp = (ag.rand(4), ag.rand(5))
    v = (ag.rand(4), ag.rand(5))

    res = await autogradF.hvp(foo2, inp, v)
    _assert_same_struct(res[1], inp)


# 204
async def test_grad_nonleaf():
    """Port of TestAutograd.test_grad_nonleaf."""
    x_init = ag.randn(2, 2, requires_grad=True)
    x = x_init
    y = ag.randn(2, 2, requires_grad=True)
    grad_output = ag.ones(2, 2)

    def fn(x):
        return x ** 2 + y * x + y ** 2

    for _ in range(5):
        grad_x, = await ag.grad(fn(x), x, grad_outputs=grad_output, create_graph=True)

        grad_x_expected = 2 * x + y
        assert y.grad is None
        assert x.grad is None
        assert_equal(grad_x, grad_x_expected)

        x = x + 0.05 * grad_x

    val_init = fn(x_init).sum()
    val_final = fn(x).sum()
    assert bool(val_final > val_init)

    await x.backward(grad_output)
    assert y.grad is not None
    assert x_init.grad is not None


# 205
async def test_leaky_relu_inplace_with_neg_slope():
    """Port of TestAutogradDeviceType.test_leaky_relu_inplace_with_neg_slope."""
    a = ag.tensor([-1., 1.], requires_grad=True)
    b = F.leaky_relu_(a.clone(), -2)
    with pytest.raises(RuntimeError, match="call out-of-place version"):
        await b.backward(ag.ones(2))

    a = ag.tensor([-1., 1.], requires_grad=True)
    b = F.rrelu_(a.clone(), -5.0, 1.0)
    with pytest.raises(RuntimeError, match="call out-of-place version"):
        await b.backward(ag.ones(2))


# 206
def test_pyscalar_conversions():
    """Port of TestAutogradDeviceType.test_pyscalar_conversions (``t`` is ``x.to("cpu")``)."""
    def _test_pyscalar_conversions(t, integral_conv):
        # integral -> integral
        l = t(ag.zeros(1, 1, 1, dtype=ag.int64))  # noqa: E741  (torch's name)
        pyscalar = -12345
        l[0] = pyscalar
        assert integral_conv(l) == pyscalar

        # floating point -> floating point
        f = t(ag.randn(1, 1))
        pyscalar = -12345.1
        f[0] = pyscalar
        assert float(f) == pyscalar
        f[0] = nan
        assert math.isnan(float(f))
        f[0] = inf
        assert float(f) == inf
        f[0] = -inf
        assert float(f) == -inf

        # integral -> floating point
        # check we can convert something that loses precision
        pyscalar = 1234567890123456789
        assert pyscalar != integral_conv(float(pyscalar))
        l[0] = pyscalar
        assert float(l) == float(pyscalar)

        # floating point -> integral
        f[0] = nan
        with pytest.raises(ValueError):
            integral_conv(f[0])
        f[0] = inf
        with pytest.raises(OverflowError):
            integral_conv(f[0])
        f[0] = -inf
        with pytest.raises(OverflowError):
            integral_conv(f[0])
        f[0] = sys.float_info.max
        assert integral_conv(f) == sys.float_info.max

        # bool, nonzero
        def test_nonzero(tensor, value, expected):
            tensor[0] = value
            assert expected == bool(tensor)
            assert expected == (True if tensor else False)

        test_nonzero(l, 0, False)
        test_nonzero(l, -2, True)
        test_nonzero(f, 0.0, False)
        test_nonzero(f, sys.float_info.min, True)
        test_nonzero(f, nan, bool(nan))
        test_nonzero(f, inf, bool(inf))
        test_nonzero(f, -inf, bool(-inf))

    _test_pyscalar_conversions(lambda x: x.to("cpu"), lambda x: int(x))


# 207
async def test_reduce_dtype():
    """Port of TestAutograd.test_reduce_dtype."""
    async def test_reduction(op, has_no_dim, takes_dtype=True):
        x = ag.randn(3, 3, dtype=ag.float32, requires_grad=True)

        if has_no_dim:
            grad1, = await ag.grad([op(x)], [x])
            grad2, = await ag.grad([op(x, dtype=ag.float64)], [x])
            assert_equal(grad1, grad2)
            assert grad2.dtype == ag.float32

        gi = ag.randn(*op(x, dim=0).shape, dtype=ag.float32)
        grad1, = await ag.grad([op(x, dim=0)], [x], gi)
        if takes_dtype:
            grad2, = await ag.grad([op(x, dim=0, dtype=ag.float64)], [x], gi.double())
        else:
            grad2, = await ag.grad([op(x.double(), dim=0)], [x], gi.double())
        assert_equal(grad1, grad2)
        assert grad2.dtype == ag.float32

    await test_reduction(ag.sum, True)
    await test_reduction(ag.prod, True)
    await test_reduction(ag.cumsum, False)
    await test_reduction(ag.cumprod, False)
    await test_reduction(ag.logcumsumexp, False, takes_dtype=False)


# 208
async def test_simple_reentrant():
    """Port of TestAutograd.test_simple_reentrant (the reentrant ``backward()`` is awaited, in an
    ``async def`` backward)."""
    y_data = ag.randn(2, 2)

    class Reenter(Function):
        @staticmethod
        def forward(ctx, x):
            with ag.enable_grad():
                ctx.x = x.detach().requires_grad_(True)
                ctx.y = y_data.detach().requires_grad_(True)
                ctx.output_var = ctx.x * ctx.y
            return ctx.output_var.detach()

        @staticmethod
        async def backward(ctx, grad_output):
            with ag.enable_grad():
                await ctx.output_var.sum().backward()
            return ctx.x.grad * grad_output

    x = ag.randn(2, 2, requires_grad=True)
    out = Reenter.apply(x)
    await out.sum().backward()
    assert_equal(x.grad, y_data)


# 209
@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence:UserWarning")  # torch 2.13 warns here too
async def test_indexing_duplicates():
    """Port of TestAutograd.test_indexing_duplicates (``Variable(x, requires_grad=True)`` is
    ``x.detach().requires_grad_()``; ``torch.Tensor(...)`` is ``ag.tensor``/``ag.zeros``)."""
    x = ag.arange(1., 17).view(4, 4)
    y = x.detach().requires_grad_()

    idx = ag.tensor([1, 1, 3, 2, 1, 2], dtype=ag.int64)
    await y[idx].sum().backward()
    expected_grad = ag.zeros(4, 4)
    for i in idx:
        expected_grad[i] += 1
    assert_equal(y.grad, expected_grad)

    # with advanced indexing
    x = ag.arange(1., 17).view(4, 4)
    y = x.detach().requires_grad_()

    idx = [[1, 1, 3, 2, 1, 2], [0]]
    await y[idx].sum().backward()
    expected_grad = ag.zeros(4, 4)
    for i in idx[0]:
        for j in idx[1]:
            expected_grad[i][j] += 1

    assert_equal(y.grad, expected_grad)

    x = ag.arange(1., 17).view(4, 4)
    y = x.detach().requires_grad_()
    idx = [[[1, 2], [0, 0]], [[0, 1], [1, 1]]]
    await y[idx].sum().backward()
    expected_grad = ag.tensor([[0., 2, 0, 0],
                               [1, 0, 0, 0],
                               [0, 1, 0, 0],
                               [0, 0, 0, 0]])
    assert_equal(y.grad, expected_grad)

    x = ag.arange(1., 65).view(4, 4, 4)
    y = x.detach().requires_grad_()

    idx = [[1, 1, 1], slice(None), slice(None)]
    await y[idx].sum().backward()
    expected_grad = ag.zeros(4, 4, 4)
    expected_grad[1].fill_(3)
    assert_equal(y.grad, expected_grad)


# 210
async def test_nansum_with_nans():
    """Port of TestAutograd.test_nansum_with_nans."""
    a = ag.randn(2, 2, 2, 2)
    with ag.no_grad():
        a[a < 0.2] = float('nan')
    a.requires_grad = True

    # No args
    assert await ag.gradcheck(lambda x: x.nansum(), a)
    assert await ag.gradgradcheck(lambda x: x.nansum(), a)

    # Single dim
    assert await ag.gradcheck(lambda x: x.nansum((0)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0)), a)

    # Multi dim
    assert await ag.gradcheck(lambda x: x.nansum((0, 2)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, 2)), a)

    assert await ag.gradcheck(lambda x: x.nansum((0, -1)), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, -1)), a)

    # With keep-dim
    assert await ag.gradcheck(lambda x: x.nansum((0, -1), True), a)
    assert await ag.gradgradcheck(lambda x: x.nansum((0, -1), True), a)


# 211
async def test_mv_grad_stride_0():
    """Port of TestAutogradDeviceType.test_mv_grad_stride_0."""
    mat = ag.randn(2, 2)
    vec = ag.randn(1).requires_grad_(True)

    def fn(vec):
        # Expand inside the function to make sure the input to
        # gradcheck does not have overlapping memory
        vec = vec.expand(2)
        return (mat @ vec).sum()

    assert await ag.gradcheck(fn, (vec))
    assert await ag.gradgradcheck(fn, (vec))


# 212
def test_set_data_preserve_pyobj():
    """Port of TestAutograd.test_set_data_preserve_pyobj."""
    a = ag.randn(1, 2)
    b = ag.randn(1, 2)
    b_id_saved = id(b)
    b.data = a
    assert b_id_saved == id(b)


# 213
def test_profiler_no_cuda():
    """Port of TestAutograd.test_profiler_no_cuda."""
    print("")
    layer = ag.nn.Linear(20, 30)
    x = ag.randn(128, 20)
    with ag.autograd.profiler.profile(use_cuda=False) as prof:
        layer(x)

    prof_str = str(prof)
    print(prof_str)
    assert 'cpu' in prof_str.lower()
    assert 'cuda' not in prof_str.lower()


# 214
async def test_jacobian_err_check_strict():
    """Port of TestAutogradFunctional.test_jacobian_err_check_strict."""
    def foo(a):
        return a.detach()

    def bar(a):
        # Make a non-leaf Tensor that requires_grad but that is not connected to the input
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.jacobian(foo, inp, strict=True)
    res = await autogradF.jacobian(foo, inp, strict=False)
    _assert_interleaved_struct(res, foo(inp), inp)
    assert_equal(res.abs().sum(), 0.)

    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 0."):
        await autogradF.jacobian(bar, inp, strict=True)
    res = await autogradF.jacobian(bar, inp, strict=False)
    _assert_interleaved_struct(res, foo(inp), inp)
    assert_equal(res.abs().sum(), 0.)

    # The Jacobian does not depend on the input
    def foo(a):  # noqa: F811  (torch redefines foo here)
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await autogradF.jacobian(foo, inp, create_graph=True, strict=True)
    res = await autogradF.jacobian(foo, inp, create_graph=True, strict=False)
    _assert_interleaved_struct(res, inp, inp)
    assert_equal(res, ag.eye(4))


# 215
def test_no_grad_input():
    """Port of TestAutograd.test_no_grad_input."""
    class MyFunction(Function):
        @staticmethod
        def forward(self, x):
            return x

        @staticmethod
        def backward(self, grad_output):
            return grad_output

    x = ag.randn(5, requires_grad=True)
    with ag.no_grad():
        y = MyFunction.apply(x)

    assert x.requires_grad
    assert y.grad_fn is None


# 216
async def test_jvp_output():
    """Port of TestAutogradFunctional.test_jvp_output."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await autogradF.jvp(reducer, inputs, v)
    _assert_same_struct(res[1], res[0])
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def adder(x, y):
        return 2 * x + 3 * y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.ones(2), ag.ones(2))
    out, jvp_val = await autogradF.jvp(adder, inputs, v)
    _assert_same_struct(jvp_val, out)
    assert out.grad_fn is None
    assert jvp_val[0].grad_fn is None
    assert jvp_val[1].grad_fn is None

    def adder2(x, y):
        return 2 * x + 3 * y, x + y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.tensor([1., 0.]), ag.tensor([1., 0.]))
    out, jvp_val = await autogradF.jvp(adder2, inputs, v)
    _assert_same_struct(jvp_val, out)
    assert out[0].grad_fn is None
    assert out[1].grad_fn is None
    assert jvp_val[0].grad_fn is None
    assert jvp_val[1].grad_fn is None


# 217
async def test_dstack():
    """Port of TestAutograd.test_dstack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.dstack([x, y, z])
    grad = ag.randn(10, 10, 3)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[:, :, 0])
    assert_equal(y.grad, grad[:, :, 1])
    assert_equal(z.grad, grad[:, :, 2])


# 218
async def test_autograd_complex_views_python():
    """Port of TestAutograd.test_autograd_complex_views_python.

    In 2020 torch warned (once) when a view a custom Function returned was modified in place;
    torch 2.13, which asyncgrad follows, raises instead (the deprecation ended): the port asserts
    torch 2.13's error."""
    bw_called = [0]

    class ComplexView(Function):
        @staticmethod
        def forward(ctx, a, idx):
            res = a.narrow(0, idx, 1)
            res = a.select(0, idx)
            ctx.save_for_backward(a)
            ctx.idx = idx
            return res

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            a, = ctx.saved_tensors
            res = ag.zeros_like(a)
            res.select(0, ctx.idx).copy_(grad)
            return res, None

    a = ag.ones(2, requires_grad=True)
    idx = 1

    bw_called[0] = 0
    out = ComplexView.apply(a.clone(), idx)
    await out.sum().backward()
    assert bw_called[0] == 1

    out = ComplexView.apply(a.clone(), idx)
    with pytest.raises(RuntimeError, match="Output 0 of ComplexView is a view and is being modified inplace. This "
                                           "view was created inside a custom Function"):
        out += 1


# 219
@pytest.mark.xfail(strict=True, reason="the top-level events match (aten::mul, aten::add), but torch also records "
                   "its C++ wrapping of the Python scalar (aten::to, _to_copy, empty_strided, copy_ under each "
                   "op, torch 2.13 too): asyncgrad has no such internal ops to report")
def test_profiler():
    """Port of TestAutograd.test_profiler."""
    x = ag.randn(10, 10)

    with ag.profiler.trace() as p:
        assert ag.autograd._profiler_enabled()
        x * 2 + 4

    assert not ag.autograd._profiler_enabled()

    last_end = 0
    names = ['aten::mul', 'aten::to', 'aten::empty_strided', 'aten::copy_',
             'aten::empty', 'aten::add', 'aten::to', 'aten::empty_strided',
             'aten::copy_', 'aten::empty']
    top_level_names = ['aten::mul', 'aten::add']
    top_level_iter = iter(top_level_names)
    assert len(p.function_events) == len(names)
    for info, expected_name in zip(p.function_events, names):
        if info.cpu_interval.start > last_end:
            top_level_name_expected = next(top_level_iter)
            assert info.name == top_level_name_expected
            last_end = info.cpu_interval.end
        assert info.name == expected_name


# 220
async def test_jvp_err_check():
    """Port of TestAutogradFunctional.test_jvp_err_check (torch.Size prints as asyncgrad.Size here)."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3)

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(TypeError, match="The inputs given to jvp must be either a Tensor"):
        await autogradF.jvp(foo, (inp, 2), v)

    with pytest.raises(TypeError, match="The outputs of the user-provided function given to jvp must"):
        await autogradF.jvp(bar, inp, v)

    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the user-provided function"):
        await autogradF.jvp(foo, inp)

    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
        await autogradF.jvp(foo, inp, (v, v))

    with pytest.raises(RuntimeError, match="v has invalid size: should be asyncgrad.Size"):
        await autogradF.jvp(foo, inp, v[:2])

    res = (await autogradF.jvp(foo, inp, v))[1]
    _assert_same_struct(res, foo(inp))


# 221
def test_requires_grad_inplace():
    """Port of TestAutograd.test_requires_grad_inplace."""
    a = ag.randn(5, 5)
    b = ag.randn(5, 5, requires_grad=True)
    a += b
    assert a.requires_grad

    # non-leaf
    a = ag.randn(5, 5) + 0
    b = ag.randn(5, 5, requires_grad=True)
    a += b
    assert a.requires_grad


# 222
async def test_pow_scalar_base():
    """Port of TestAutograd.test_pow_scalar_base."""
    a = ag.arange(1, 13, dtype=ag.float64).view(3, 4).requires_grad_()
    assert await ag.gradcheck(lambda a: ag.pow(2, a), (a,))


# 223
async def test_backward_twice_with_saved_values():
    """Port of TestAutograd.test_backward_twice_with_saved_values."""
    b = ag.randn(3, requires_grad=True, dtype=ag.float64)
    c = ag.zeros(3, dtype=ag.float64)
    c[[1, 2]] = b[[1, 1]]
    await c.backward(ag.tensor([1, 1, 1], dtype=ag.float64))
    with pytest.raises(RuntimeError, match='Specify retain_graph=True'):
        await c.backward(ag.tensor([1, 1, 1], dtype=ag.float64))


# 224
async def test_return_duplicate():
    """Port of TestAutograd.test_return_duplicate."""
    class DoubleDuplicate(Function):
        @staticmethod
        def forward(ctx, x):
            output = x * 2
            return output, output

        @staticmethod
        def backward(ctx, grad1, grad2):
            return grad1 * 2 + grad2 * 2

    def fn(x):
        a, b = DoubleDuplicate.apply(x)
        assert a is b
        return a + b

    x = ag.randn(5, 5, requires_grad=True)
    assert await ag.gradcheck(fn, [x])
    assert await ag.gradgradcheck(fn, [x])


# 225
def test_record_function_multithreaded():
    """Port of TestAutograd.test_record_function_multithreaded."""
    rf = ag.profiler.record_function("outer")
    rf.__enter__()
    with ag.profiler.record_function("inner"):
        # test that exiting the record function after starting another one
        # doesn't throw.
        rf.__exit__(None, None, None)

    with ag.profiler.record_function("inner"):
        rf.__enter__()
    # test that exiting the record function after ending another one
    # doesn't throw.
    rf.__exit__(None, None, None)


# 226
async def test_cholesky_inverse():
    """Port of TestAutograd.test_cholesky_inverse."""
    async def _test_with_size(upper, dims):
        A = ag.randn(*dims)
        A.diagonal().uniform_(0.1, 5.0)
        A.requires_grad_()

        def func(A, upper):
            if upper:
                root = A.triu()
            else:
                root = A.tril()
            return ag.cholesky_inverse(root, upper)

        assert await ag.gradcheck(func, [A, upper])
        assert await ag.gradgradcheck(func, [A, upper])

    for upper in (True, False):
        for dims in [(3, 3), (5, 5)]:
            await _test_with_size(upper, dims)


# 227
async def test_dep_nograd():
    """Port of TestAutograd.test_dep_nograd."""
    class F1(Function):
        @staticmethod
        def forward(ctx, input):
            out = ag.randn(*input.size())
            ctx.mark_non_differentiable(out)
            return input, out

        @staticmethod
        def backward(ctx, grad_output, ignored):
            return grad_output

    class F2(Function):
        @staticmethod
        def forward(ctx, input, ignored):
            return input

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None

    x = ag.randn(5, requires_grad=True)
    a, b = F1.apply(x)
    b = b + 1  # separate F1 from F2 by another op
    assert a.requires_grad
    assert not b.requires_grad
    c = F2.apply(a, b)
    await c.backward(ag.ones(*c.size()))
    assert_equal(x.grad, ag.ones(*x.size()))


# 228
async def test_variable_traverse():
    """Port of TestAutograd.test_variable_traverse."""
    def get_out_and_unrefed_cycle():
        inp = ag.randn(10, requires_grad=True)
        tmp = inp.view(10, 1)
        out = tmp.view(10)

        # Create a reference cycle that contains an
        # intermediary Variable in the graph
        my_list = []
        my_list.append(tmp)
        my_list.append(my_list)

        return out

    out = get_out_and_unrefed_cycle()
    gc.collect()
    # This will segfault if things have been erroneously released
    await out.backward(ag.randn(*out.size()))


# 229
def test_attribute_deletion():
    """Port of TestAutograd.test_attribute_deletion."""
    x = ag.randn((5, 5), requires_grad=True)
    del x.grad
    assert x.grad is None
    with pytest.raises(RuntimeError):
        del x.data
    with pytest.raises(TypeError):
        x.data = None
    with pytest.raises(RuntimeError):
        del x.requires_grad
    with pytest.raises(RuntimeError):
        del x._grad_fn
    with pytest.raises(RuntimeError):
        del x._backward_hooks


# 230
async def test_pinverse():
    """Port of TestAutograd.test_pinverse."""
    m, n = 5, 10
    U = ag.randn(n, m).qr()[0].t()  # Orthogonal with dimensions m x n
    V = ag.randn(n, m).qr()[0].t()  # Orthogonal with dimensions m x n

    def func(x):
        S = ag.cat([x, ag.zeros(n - m)], 0)
        M = U.mm(ag.diag(S)).mm(V.t())
        return M.pinverse()

    assert await ag.gradcheck(func, [ag.rand(m).add_(1).requires_grad_()])
    assert await ag.gradcheck(func, [ag.rand(m).add_(10).requires_grad_()])
    assert await ag.gradgradcheck(func, [ag.rand(m).add_(1).requires_grad_()])
    assert await ag.gradgradcheck(func, [ag.rand(m).add_(10).requires_grad_()])


# 231
async def test_where_scalar():
    """Port of TestAutogradDeviceType.test_where_scalar."""
    x = ag.randn(5, 5, requires_grad=True)
    scalar = 4.
    cond = mask_not_all_zeros((5, 5))

    def where_scalar_first(cond, x):
        return ag.where(cond, scalar, x)

    def where_scalar_second(cond, x):
        return ag.where(cond, x, scalar)

    assert await ag.gradcheck(where_scalar_first, (cond, x))
    assert await ag.gradgradcheck(where_scalar_first, (cond, x))

    assert await ag.gradcheck(where_scalar_second, (cond, x))
    assert await ag.gradgradcheck(where_scalar_second, (cond, x))


# 232
async def test_once_differentiable():
    """Port of TestAutograd.test_once_differentiable (with _function_test)."""
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, tensor1, pyscalar, tensor2):
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            assert not ag.is_grad_enabled()
            t1, t2 = ctx.saved_tensors
            return (grad_output + grad_output * t2, None,
                    grad_output * ctx.pyscalar + grad_output * t1)

    x = ag.randn(5, 5, requires_grad=True)
    y = ag.randn(5, 5, requires_grad=True)
    result = MyFunction.apply(x, 2, y)
    go = ag.ones((), requires_grad=True)
    await result.sum().backward(go, create_graph=True)

    assert_equal(x.grad, y + ag.ones(5, 5))
    assert_equal(y.grad, x + ag.ones(5, 5) * 2)
    assert x.grad.grad_fn is not None
    assert y.grad.grad_fn is not None

    assert graph_desc(x.grad.grad_fn) == 'CopyBackwards(None, Error(AccumulateGrad(), None, AccumulateGrad()))'
    assert graph_desc(y.grad.grad_fn) == 'CopyBackwards(None, Error(AccumulateGrad(), None, AccumulateGrad()))'


# 233
async def test_cholesky_solve():
    """Port of TestAutograd.test_cholesky_solve."""
    async def _test_with_size(A_dims, B_dims, upper):
        root = ag.rand(*A_dims).requires_grad_()
        b = ag.rand(*B_dims).requires_grad_()

        def func(root, b, upper):
            if upper:
                A = root.triu()
            else:
                A = root.tril()
            return ag.cholesky_solve(b, A, upper)

        assert await ag.gradcheck(func, [root, b, upper])
        assert await ag.gradgradcheck(func, [root, b, upper])

    for a_size, b_size in [((3, 3), (3, 4)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4)), ((2, 3, 3), (2, 3, 2))]:
        for upper in [True, False]:
            await _test_with_size(a_size, b_size, upper)


# 234
async def test_put():
    """Port of TestAutograd.test_put."""
    root = ag.randn(4, 5, requires_grad=True)
    values = ag.randn(6, requires_grad=True)
    idx = ag.tensor([1, 2, 3, -1, -2, -3], dtype=ag.int64)

    def func(root, values):
        x = root.clone()
        x.put_(idx, values)
        return x

    assert await ag.gradcheck(func, [root, values])
    assert await ag.gradgradcheck(func, [root, values])


# 235
async def test_logcumsumexp_large_value():
    """Port of TestAutogradDeviceType.test_logcumsumexp_large_value."""
    a = ag.rand(4, 4, 4, dtype=ag.float64, requires_grad=True)
    with ag.no_grad():
        # Large Number
        a[0] = 10000

    assert await ag.gradcheck(lambda x: x.logcumsumexp(0), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(0), a)

    assert await ag.gradcheck(lambda x: x.logcumsumexp(1), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(1), a)

    assert await ag.gradcheck(lambda x: x.logcumsumexp(2), a)
    assert await ag.gradgradcheck(lambda x: x.logcumsumexp(2), a)


# 236
def test_requires_grad_():
    """Port of TestAutograd.test_requires_grad_."""
    x = ag.randn(5, 5)
    y = ag.randn(5, 5, requires_grad=True)
    assert x is x.requires_grad_()
    assert x.requires_grad
    assert y is y.requires_grad_()
    assert y.requires_grad
    assert x is x.requires_grad_(True)
    assert x.requires_grad
    assert y is y.requires_grad_(True)
    assert y.requires_grad
    z = x * y
    with pytest.raises(RuntimeError):
        z.requires_grad_(False)
    assert z is z.requires_grad_()
    assert z.requires_grad
    assert z is z.requires_grad_(True)
    assert z.requires_grad

    assert x is x.requires_grad_(False)
    assert not x.requires_grad
    assert y is y.requires_grad_(False)
    assert not y.requires_grad


# 237
def test_profiler_aggregation_lstm():
    """Port of TestAutograd.test_profiler_aggregation_lstm (``time.time`` as torch measures)."""
    import time

    print("")
    rnn = ag.nn.LSTM(10, 20, 2)
    total_time_s = 0
    with ag.autograd.profiler.profile(record_shapes=True) as prof:
        for _ in range(20):
            input = ag.randn(5, 3, 10)
            h = ag.randn(2, 3, 20)
            c = ag.randn(2, 3, 20)
            start = time.time()
            rnn(input, (h, c))
            end = time.time()
            total_time_s += end - start

    print(prof.table(sort_by="self_cpu_time_total", row_limit=10, header="TEST"))
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=10))

    total_time_us = total_time_s * 1000.0 * 1000.0  # make it us which is profiler default
    print("Total time based on python measurements: ", ag.autograd.profiler.format_time(total_time_us))
    print("CPU time measurement python side overhead: {:.2f}%".format(
        (total_time_us / prof.self_cpu_time_total - 1.0) * 100.0))

    with tempfile.NamedTemporaryFile() as trace_file:
        prof.export_chrome_trace(trace_file.name)


# 238
async def test_backward_copy():
    """Port of TestAutograd.test_backward_copy."""
    x = ag.ones(5, 5, requires_grad=True)
    y = ag.ones(5, 5, requires_grad=True)
    # Simulate that we're in the middle of the graph
    a = x + 2
    b = y + 2
    c = x + 2
    # This op will just return grad_output two times in backward
    add1 = a + b
    add2 = add1 + c
    # Simulate a long branch, so grad_output will get buffered.
    for _ in range(4):
        a = a * 2
        b = b * 2
        c = c * 2
    branch = a + b + c
    out = add2 + branch
    # expected gradients are:
    # for x: 34 (16 from final a, 16 from final c, 2 from add2)
    # for y: 17 (16 from final b, 1 from add2)
    grad_output = ag.ones(5, 5)
    await out.backward(grad_output)
    assert_equal(x.grad, ag.ones(5, 5) * 34)
    assert_equal(y.grad, ag.ones(5, 5) * 17)


# 239
async def test_hstack():
    """Port of TestAutograd.test_hstack."""
    x = ag.randn(10, 10, requires_grad=True)
    y = ag.randn(10, 10, requires_grad=True)
    z = ag.randn(10, 10, requires_grad=True)
    stacked = ag.hstack([x, y, z])
    grad = ag.randn(10, 30)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[:, 0:10])
    assert_equal(y.grad, grad[:, 10:20])
    assert_equal(z.grad, grad[:, 20:30])

    x = ag.randn(10, requires_grad=True)
    y = ag.randn(10, requires_grad=True)
    z = ag.randn(10, requires_grad=True)
    stacked = ag.hstack([x, y, z])
    grad = ag.randn(30)
    await stacked.backward(grad)
    assert_equal(x.grad, grad[0:10])
    assert_equal(y.grad, grad[10:20])
    assert_equal(z.grad, grad[20:30])


def test_the_ports_are_the_seeded_sample_in_order():
    """The tests above port exactly items 181 to 239 of ``random.Random(0).sample(population, 239)``."""
    assert_ports_are_items(globals(), 181, 239)
