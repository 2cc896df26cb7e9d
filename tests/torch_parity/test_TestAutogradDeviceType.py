"""Port of torch's current ``test/test_autograd.py``, class TestAutogradDeviceType, on cpu.

Source: the same copy as the TestAutograd ports (cyyever/pytorch at 0f3f4a53, test/test_autograd.py),
the class's tests from its start to ``test_pdist_gradgrad_small_p``, torch's order kept; each test
names the torch test it ports in its docstring (``device`` is ``"cpu"``; ``@dtypes`` become pytest
parameters).

Left out (not ported), one line per family:
- ``@onlyCUDA``/``@deviceCountAtLeast(2)``/accelerator tests (``test_free_unneeded_tensor``,
  ``test_pin_memory``, ``test_profiler_emit_nvtx``, ``test_rnn_backward_to_input_but_not_parameters``,
  ``test_advanced_indexing_backwards_large``, ``test_reentrant_parent_error_on_cpu``,
  ``test_unused_output_device``, ``test_backward_device``, ``test_inputbuffer_add_multidevice``,
  ``test_simple_reentrant_cross_device``, ``test_cross_device_reentrant_autograd``,
  ``test_gradcheck_input_output_different_device``, ``test_zero_dim_param_mixed_device_grad``): CUDA;
- ``test_sparse_ctor_getter_backward``, ``test_sparse_backward``, ``test_sparse_mask_autograd``: sparse;
- ``test_copy_forward_ad_*``: forward-mode AD; ``test_copy_r_to_c``, ``test_to_r_to_c``,
  ``test_complex_scalar_backward``, ``test_pow_real_negative_base_complex_exponent``: complex;
- ``test_enforce_grad_layout_policy``: an engine switch newer than torch 2.13;
- ``test_warning_in_backward``: torch._C._nn._test_warn_in_autograd, a C++ test op.
"""

import math
import sys
from itertools import product

import pytest
from autograd_port import assert_equal, double_default  # noqa: F401

import asyncgrad as ag
from asyncgrad import Function

device = "cpu"
nan = float("nan")
inf = float("inf")


def _xfail(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


def mask_not_all_zeros(shape):
    """common_methods_invocations.mask_not_all_zeros."""
    while True:
        result = ag.randn(*shape).gt(0)
        if bool(result.sum() > 0):
            return result


def make_tensor(shape, dtype=ag.double, requires_grad=False):
    """torch.testing.make_tensor for float64: uniform in [-9, 9)."""
    t = ag.rand(*shape, dtype=dtype) * 18 - 9
    return t.detach().requires_grad_(requires_grad)


async def test_min_max_aminmax_median_backprops_to_all_values():
    """Port of TestAutogradDeviceType.test_min_max_aminmax_median_backprops_to_all_values."""
    for f in [ag.min, ag.max, ag.median, ag.nanmedian]:
        x1 = ag.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], requires_grad=True)
        x2 = ag.tensor([nan, nan, nan], requires_grad=True)
        for x in [x1, x2]:
            y = f(x)
            await y.backward()
            assert_equal(x.grad.sum(), 1.0)
            assert int((x.grad == 1 / 3).sum()) == 3

    def amin2(x):
        return ag.aminmax(x)[0]

    def amax2(x):
        return ag.aminmax(x)[1]

    for f in [ag.amin, ag.amax, amax2, amin2]:
        x1 = ag.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], requires_grad=True)
        y = f(x1)
        await y.backward()
        assert_equal(x1.grad.sum(), 1.0)
        assert int((x1.grad == 1.0 / 3.0).sum()) == 3

    x = ag.tensor([3.0, 1.0, 3.0, 1.0], requires_grad=True)
    min_val, max_val = ag.aminmax(x)
    await (min_val + max_val).backward()
    assert_equal(x.grad, ag.tensor([0.5, 0.5, 0.5, 0.5]))


async def test_scatter_index_reduce_amin_amax_aminmax_backprops_to_all_values():
    """Port of TestAutogradDeviceType.test_scatter_index_reduce_amin_amax_aminmax_backprops_to_all_values."""
    fns = (ag.scatter_reduce, ag.index_reduce)
    reduces = ("amin", "amax")
    for fn, reduction in product(fns, reduces):
        input = ag.randn((2, 3), dtype=ag.float64, requires_grad=True)
        src = input.clone().detach_().requires_grad_(True)
        idx = ag.arange(2).to(dtype=ag.long)
        if fn is ag.scatter_reduce:
            idx = idx.unsqueeze(-1).expand((2, 3))
        assert await ag.gradcheck(fn, (input, 0, idx, src, reduction), check_batched_grad=False)


async def test_scatter_index_reduce_prod_gradgrad_error():
    """Port of TestAutogradDeviceType.test_scatter_index_reduce_prod_gradgrad_error."""
    input = ag.tensor([1.0], dtype=ag.float64, requires_grad=True)
    src = ag.tensor([0.0, 0.0], dtype=ag.float64, requires_grad=True)
    idx = ag.tensor([0, 0], dtype=ag.long)
    for fn in (ag.scatter_reduce, ag.index_reduce):
        assert await ag.gradcheck(fn, (input, 0, idx, src, "prod"), check_batched_grad=False)
        with pytest.raises(RuntimeError, match="Double backward is unsupported for"):
            await ag.gradgradcheck(fn, (input, 0, idx, src, "prod"))


async def test_parameter_resize():
    """Port of TestAutogradDeviceType.test_parameter_resize."""
    asd = ag.nn.Parameter(ag.ones(16, dtype=ag.double))
    for _ in range(2):
        with ag.no_grad():
            asd.set_(asd[1:])
            asd.grad = None
        m = ag.cat((asd, asd))
        await m.sum().backward()


async def test_pyscalar_conversions():
    """Port of TestAutogradDeviceType.test_pyscalar_conversions."""
    def integral_conv(x):
        return int(x)

    l = ag.zeros(1, 1, 1, dtype=ag.long)  # noqa: E741
    pyscalar = -12345
    l[0] = pyscalar
    assert integral_conv(l) == pyscalar

    f = ag.randn(1, 1, dtype=ag.double)
    pyscalar = -12345.1
    f[0] = pyscalar
    assert float(f) == pyscalar
    f[0] = nan
    assert math.isnan(float(f))
    f[0] = inf
    assert float(f) == inf
    f[0] = -inf
    assert float(f) == -inf

    pyscalar = 1234567890123456789
    assert pyscalar != integral_conv(float(pyscalar))
    l[0] = pyscalar
    assert float(l) == float(pyscalar)

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

    def check_nonzero(tensor, value, expected):
        tensor[0] = value
        assert expected == bool(tensor)
        assert expected == bool(tensor)

    check_nonzero(l, 0, False)
    check_nonzero(l, -2, True)
    check_nonzero(f, 0.0, False)
    check_nonzero(f, sys.float_info.min, True)
    check_nonzero(f, nan, bool(nan))
    check_nonzero(f, inf, bool(inf))
    check_nonzero(f, -inf, bool(-inf))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64"])
async def test_set_requires_grad_only_for_floats(dtype):
    """Port of TestAutogradDeviceType.test_set_requires_grad_only_for_floats (its cpu dtypes)."""
    dtype = getattr(ag, dtype)

    def f1():
        a = ag.ones(1, dtype=dtype)
        a.requires_grad_()

    def f2():
        a = ag.ones(1, dtype=dtype)
        a.requires_grad = True

    def f3():
        ag.ones(1, dtype=dtype, requires_grad=True)

    a = ag.ones(1, dtype=dtype)
    a.requires_grad = False
    a.requires_grad_(False)
    for f in [f1, f2, f3]:
        if dtype.is_floating_point:
            f()
        else:
            with pytest.raises(RuntimeError, match="floating point"):
                f()


async def test_advanced_indexing_backwards_memory_format():
    """Port of TestAutogradDeviceType.test_advanced_indexing_backwards_memory_format."""
    shape = (2, 8, 1, 2)
    i = ag.randint(1, shape).contiguous(memory_format=ag.channels_last)
    x = ag.randn(shape, requires_grad=True)
    await x[i].sum().backward()


async def test_where_functional():
    """Port of TestAutogradDeviceType.test_where_functional."""
    x = ag.randn(5, 5, dtype=ag.double, requires_grad=True)
    y = ag.randn(5, 5, dtype=ag.double, requires_grad=True)
    cond = mask_not_all_zeros((5, 5))

    def where(cond, x, y):
        return ag.where(cond, x, y)

    assert await ag.gradcheck(where, [cond, x, y], raise_exception=True)
    assert await ag.gradgradcheck(where, [cond, x, y], [ag.randn(5, 5)])

    x = ag.randn(5, 1, 5, dtype=ag.double, requires_grad=True)
    y = ag.randn(5, 5, 1, dtype=ag.double, requires_grad=True)
    assert await ag.gradcheck(where, [cond, x, y], raise_exception=True)
    assert await ag.gradgradcheck(where, [cond, x, y], [ag.randn(5, 5, 5)])


async def test_where_scalar():
    """Port of TestAutogradDeviceType.test_where_scalar."""
    x = ag.randn(5, 5, dtype=ag.double, requires_grad=True)
    scalar = 4.0
    cond = mask_not_all_zeros((5, 5))

    def where_scalar_first(cond, x):
        return ag.where(cond, scalar, x)

    def where_scalar_second(cond, x):
        return ag.where(cond, x, scalar)

    assert await ag.gradcheck(where_scalar_first, (cond, x))
    assert await ag.gradgradcheck(where_scalar_first, (cond, x))
    assert await ag.gradcheck(where_scalar_second, (cond, x))
    assert await ag.gradgradcheck(where_scalar_second, (cond, x))


async def test_grad_assignment():
    """Port of TestAutogradDeviceType.test_grad_assignment (devices: cpu)."""
    x = ag.randn(5, 5)
    with pytest.raises(TypeError, match="expected to be a Tensor or None"):
        x.grad = 0
    with pytest.raises(RuntimeError):
        x.grad = ag.randn(2, 2)
    with pytest.raises(RuntimeError):
        x.grad = ag.randn(5, 5, dtype=ag.long)
    with pytest.raises(RuntimeError):
        x.grad = x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
async def test_requires_grad_factory(dtype):
    """Port of TestAutogradDeviceType.test_requires_grad_factory (devices: cpu)."""
    dtype = getattr(ag, dtype)
    fns = [ag.ones_like, ag.randn_like]
    x = ag.randn(2, 3, dtype=dtype)
    for fn in fns:
        for requires_grad in [True, False]:
            output = fn(x, dtype=dtype, device="cpu", requires_grad=requires_grad)
            assert requires_grad == output.requires_grad
            assert output.dtype is dtype
            assert str(x.device) == "cpu"


@_xfail("asyncgrad has no bfloat16 dtype: numpy has none (ml_dtypes, which adds one to numpy, is no "
        "dependency), and neither array_api_strict (sim:N) nor CuPy (cuda:N) would hold it")
async def test_copy_():
    """Port of TestAutogradDeviceType.test_copy_ (torch's floating types and half and bfloat16)."""
    x = ag.randn(10, requires_grad=True)
    for dt in (ag.float32, ag.float64, ag.half, ag.bfloat16):
        y = ag.empty(10, dtype=dt)
        y.copy_(x)
        assert y.requires_grad
        z = x.to(ag.bfloat16)
        assert z.requires_grad


async def test_inplace_on_view_backprop_base():
    """Port of TestAutogradDeviceType.test_inplace_on_view_backprop_base."""
    root = ag.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v1.mul_(2)
    await x.sum().backward()
    assert root.grad.tolist() == [[2, 2], [1, 1]]


async def test_inplace_on_view_backprop_view_of_view():
    """Port of TestAutogradDeviceType.test_inplace_on_view_backprop_view_of_view."""
    root = ag.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = x.narrow(0, 0, 1)
    v1.mul_(2)
    await v2.sum().backward()
    assert root.grad.tolist() == [[2, 2], [0, 0]]


async def test_inplace_on_view_of_view():
    """Port of TestAutogradDeviceType.test_inplace_on_view_of_view."""
    root = ag.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = v1.narrow(1, 1, 1)
    v2.mul_(2)
    await x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1]]


async def test_inplace_on_view_then_no_grad():
    """Port of TestAutogradDeviceType.test_inplace_on_view_then_no_grad."""
    a = ag.ones(3, 1, dtype=ag.double, requires_grad=True)
    b = a * 2
    c = b.view_as(b)
    c[0][0] = 3
    with ag.no_grad():
        c.grad_fn  # noqa: B018  (a graph update with grad disabled)
    await c.sum().backward()


async def test_inplace_on_view_gradcheck():
    """Port of TestAutogradDeviceType.test_inplace_on_view_gradcheck."""
    a = ag.randn(4, 4, dtype=ag.double, requires_grad=True)
    b = ag.randn(2, 2, dtype=ag.double, requires_grad=True)

    def func(root, b):
        x = root.clone()
        x.narrow(1, 2, 2).narrow(0, 1, 2).mul_(b)
        x.narrow(1, 0, 2).narrow(0, 1, 2).mul_(b)
        return x

    assert await ag.gradcheck(func, [a, b], raise_exception=True)
    go = ag.randn(a.size(), dtype=ag.double, requires_grad=True)
    assert await ag.gradgradcheck(func, (a, b), (go,))


async def test_inplace_on_view_multiple_outputs():
    """Port of TestAutogradDeviceType.test_inplace_on_view_multiple_outputs."""
    root = ag.arange(9.0, dtype=ag.double).reshape(3, 3).requires_grad_()
    x = root.clone()
    v1 = x.unbind()
    with pytest.raises(RuntimeError):
        v1[0].mul_(2)


async def test_inplace_on_view_of_multiple_output_view():
    """Port of TestAutogradDeviceType.test_inplace_on_view_of_multiple_output_view."""
    a = ag.rand(10, dtype=ag.double, requires_grad=True).clone()
    b = a.unbind(0)
    c = b[0].view_as(b[0])
    with pytest.raises(RuntimeError):
        c.mul_(2)


async def test_inplace_multiple_output_view_of_view():
    """Port of TestAutogradDeviceType.test_inplace_multiple_output_view_of_view."""
    a = ag.rand(10, dtype=ag.double, requires_grad=True).clone()
    b = a.view_as(a)
    c = b.unbind(0)
    with pytest.raises(RuntimeError):
        c[0].mul_(2)


async def test_inplace_on_view_makes_base_require_grad():
    """Port of TestAutogradDeviceType.test_inplace_on_view_makes_base_require_grad."""
    a = ag.randn(4, 4, dtype=ag.double, requires_grad=False)
    b = ag.randn(4, 2, dtype=ag.double, requires_grad=True)

    def func(root, b):
        x = root.clone()
        assert not x.requires_grad
        x.narrow(1, 2, 2).mul_(b)
        assert x.requires_grad
        return x

    assert await ag.gradcheck(func, [a, b], raise_exception=True)
    go = ag.randn(a.size(), dtype=ag.double, requires_grad=True)
    assert await ag.gradgradcheck(func, (a, b), (go,))


async def test_inplace_on_view_backprop_view():
    """Port of TestAutogradDeviceType.test_inplace_on_view_backprop_view."""
    a = ag.tensor([2.0, 5.0], requires_grad=False)
    b = ag.tensor([3.0], requires_grad=True)
    res = a.narrow(0, 1, 1).mul_(b)
    await res.sum().backward()
    assert b.grad.tolist() == [5]
    assert a.grad is None


async def test_inplace_on_view_modify_base():
    """Port of TestAutogradDeviceType.test_inplace_on_view_modify_base."""
    r = ag.ones(1, dtype=ag.double, requires_grad=True)

    def fn(r):
        x = ag.ones(5, dtype=ag.double)
        v = x.select(0, 1)
        assert not v.requires_grad
        assert v.grad_fn is None
        x.add_(r)  # v now depends on r through the in-place op on x
        assert v.requires_grad
        return v

    assert await ag.gradcheck(fn, [r])
    assert await ag.gradgradcheck(fn, [r])


async def test_inplace_on_view_python():
    """Port of TestAutogradDeviceType.test_inplace_on_view_python."""
    a = ag.randn(4, 4, dtype=ag.double, requires_grad=True)
    b = ag.randn(2, 2, dtype=ag.double, requires_grad=True)

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
    go = ag.randn(a.size(), dtype=ag.double, requires_grad=True)
    assert await ag.gradgradcheck(func, (a, b), (go,))

    # a Function that multiplies a whole view in place and saves what it read: the base comes out of
    # CopySlices over the Function (torch 2.13's nodes), both gradients through the custom backward
    class PyMul(Function):
        @staticmethod
        def forward(ctx, x, y):
            old = x.clone()
            x.mul_(y)
            ctx.mark_dirty(x)
            ctx.save_for_backward(y, old)
            return x

        @staticmethod
        def backward(ctx, grad):
            y, old = ctx.saved_tensors
            return grad * y, grad * old

    def func2(root, c):
        base = root * 1
        r = PyMul.apply(base.view_as(base), c)
        assert base.grad_fn.name() == "CopySlices" and r.grad_fn.name() == "AsStridedBackward0"
        return (base * base).sum() + 3 * r.sum()

    c = ag.randn(4, 4, dtype=ag.double, requires_grad=True)
    assert await ag.gradcheck(func2, [a, c], raise_exception=True)  # first order: ``old`` carries no graph


async def test_inplace_on_view_non_contig():
    """Port of TestAutogradDeviceType.test_inplace_on_view_non_contig."""
    root = ag.ones(2, 3, 2).select(2, 1).t().requires_grad_(True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = v1.narrow(1, 1, 1)
    v2.mul_(2)
    await x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1], [1, 1]]


async def test_inplace_on_view_multi_output_unsafe():
    """Port of TestAutogradDeviceType.test_inplace_on_view_multi_output_unsafe."""
    for f in [lambda t: t.unsafe_split(1), lambda t: t.unsafe_split_with_sizes((1, 1, 1)),
              lambda t: t.unsafe_chunk(3)]:
        a = ag.randn(3, 3, requires_grad=True)
        b = a + a
        s1, s2, s3 = f(b)
        s1.mul_(s2)
        await s1.sum().backward()


async def test_inplace_on_view_multi_output_safe():
    """Port of TestAutogradDeviceType.test_inplace_on_view_multi_output_safe."""
    for f in [lambda t: t.split(1), lambda t: t.split_with_sizes((1, 1, 1)), lambda t: t.chunk(3)]:
        a = ag.randn(3, 3, requires_grad=True)
        b = a + a
        s1, s2, s3 = f(b)
        with pytest.raises(RuntimeError, match="This view is the output of a function that returns multiple views."):
            s1.mul_(s2)


async def test_inplace_on_view_undefined_grad_output():
    """Port of TestAutogradDeviceType.test_inplace_on_view_undefined_grad_output."""
    a = ag.tensor([1.0], requires_grad=True)
    c = a.clone()
    v = c[:]
    b = ag.tensor(1.0, requires_grad=True)

    class InplaceFunc(Function):
        @staticmethod
        def forward(ctx, x, other):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, None

    out = InplaceFunc.apply(v, b)
    await out.backward()
    assert b.grad is None
    assert a.grad.item() == 2


async def test_mv_grad_stride_0():
    """Port of TestAutogradDeviceType.test_mv_grad_stride_0."""
    mat = ag.randn(2, 2, dtype=ag.double)
    vec = ag.randn(1, dtype=ag.double).requires_grad_(True)

    def fn(vec):
        vec = vec.expand(2)  # inside, so that gradcheck's input does not overlap itself
        return (mat @ vec).sum()

    assert await ag.gradcheck(fn, (vec))
    assert await ag.gradgradcheck(fn, (vec))


async def test_strided_leaf_grad_layout():
    """Port of TestAutogradDeviceType.test_strided_leaf_grad_layout."""
    for fmt_a in (ag.contiguous_format, ag.channels_last):
        for fmt_b in (ag.contiguous_format, ag.channels_last):
            a = ag.rand((2, 3, 4, 5)).to(memory_format=fmt_a)
            b = ag.rand((2, 3, 4, 5)).to(memory_format=fmt_b)
            a.requires_grad_()
            b.requires_grad_()
            await a.sum().backward()
            assert a.grad.stride() == a.stride()
            await b.sum().backward()
            assert b.grad.stride() == b.stride()
            a.grad = None
            b.grad = None
            await (a * b).sum().backward()
            assert a.grad.stride() == a.stride()
            assert b.grad.stride() == b.stride()

    c = ag.empty_strided((2, 2), (4, 2)).copy_(ag.rand((2, 2)))
    c.requires_grad_()
    d = ag.rand((2, 2))
    await c.sum().backward()
    assert c.grad.stride() == (2, 1)
    c.grad = None
    await (c * d).sum().backward()
    assert c.grad.stride() == (2, 1)


async def test_non_differentiable_ops():
    """Port of TestAutogradDeviceType.test_non_differentiable_ops."""
    x = ag.tensor([[1, 2], [3, 4.0]], requires_grad=True)
    out = ag.isin(x, ag.tensor([2, 3]))
    assert not out.requires_grad
    x = ag.randn(3, 3, requires_grad=True)
    out = ag.signbit(x)
    assert not out.requires_grad


async def test_grad_unused_input_error_message():
    """Port of TestAutogradDeviceType.test_grad_unused_input_error_message."""
    for unused_idx in [0, 1]:
        x = ag.randn(10, requires_grad=True)
        y = ag.randn(10, requires_grad=True)
        inputs = (x, y)
        out = inputs[1 - unused_idx].sum()
        with pytest.raises(RuntimeError, match=f"The differentiated Tensor at index {unused_idx} appears"):
            await ag.autograd.grad(out, inputs)


async def test_resize_version_bump():
    """Port of TestAutogradDeviceType.test_resize_version_bump."""
    x = ag.rand((1,))
    y = ag.randn((3,))
    x.resize_((1, 2))
    assert x._version == 1
    x.resize_as_(y)
    assert x._version == 2
    x.resize_((3,))  # a no-op: no bump
    assert x._version == 2
    x.resize_as_(y)
    assert x._version == 2


CDIST_SHAPES = [((4, 3), (5, 3)), ((2, 4, 3), (2, 5, 3)), ((1, 4, 3), (2, 5, 3))]


async def test_cdist_gradgrad():
    """Port of TestAutogradDeviceType.test_cdist_gradgrad (dtype double; the second-order check on the
    unbatched shapes only, the batched ones get the first-order check, to keep the test short)."""
    for p in [1.0, 1.5, 2.0, 2.5, 3.0, inf]:
        modes = ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"] if p == 2.0 else [
            "donot_use_mm_for_euclid_dist"]
        for s1, s2 in CDIST_SHAPES:
            for mode in modes:
                x1, x2 = make_tensor(s1, requires_grad=True), make_tensor(s2, requires_grad=True)

                def fn(a, b, p=p, mode=mode):
                    return ag.cdist(a, b, p, compute_mode=mode)

                assert await ag.gradcheck(fn, (x1, x2))
                if len(s1) == 2:
                    assert await ag.gradgradcheck(fn, (x1, x2))


async def test_pdist_gradgrad():
    """Port of TestAutogradDeviceType.test_pdist_gradgrad (dtype double)."""
    for p in [1.0, 1.5, 2.0, 2.5, 3.0, inf]:
        for shape in [(4, 3), (5, 2)]:
            x = make_tensor(shape, requires_grad=True)

            def fn(a, p=p):
                return ag.nn.functional.pdist(a, p)

            assert await ag.gradcheck(fn, (x,))
            assert await ag.gradgradcheck(fn, (x,))


async def test_cdist_gradgrad_small_p():
    """Port of TestAutogradDeviceType.test_cdist_gradgrad_small_p (dtype double)."""
    def ref_cdist(a, b, p):
        return (a.unsqueeze(-2) - b.unsqueeze(-3)).abs().pow(p).sum(-1).pow(1.0 / p)

    async def second_order(fn, x1, x2, v, p):
        d = fn(x1, x2, p)
        g1 = (await ag.autograd.grad(d, x1, grad_outputs=v, create_graph=True))[0]
        return await ag.autograd.grad(g1.sum(), (x1, x2, v))

    for p in [0.5, 0.75]:
        x1 = make_tensor((4, 3), requires_grad=True)
        x2 = (make_tensor((5, 3)).abs() + 20).detach().requires_grad_()
        v = make_tensor((4, 5), requires_grad=True)
        assert_equal(await second_order(ag.cdist, x1, x2, v, p), await second_order(ref_cdist, x1, x2, v, p))


async def test_pdist_gradgrad_small_p():
    """Port of TestAutogradDeviceType.test_pdist_gradgrad_small_p (dtype double)."""
    def ref_pdist(a, p):
        i, j = ag.triu_indices(a.size(0), a.size(0), 1).unbind()
        return (a[i] - a[j]).abs().pow(p).sum(-1).pow(1.0 / p)

    async def second_order(fn, x, v, p):
        d = fn(x, p)
        g = (await ag.autograd.grad(d, x, grad_outputs=v, create_graph=True))[0]
        return await ag.autograd.grad(g.sum(), (x, v))

    for p in [0.5, 0.75]:
        n, m = 4, 3
        sep = ag.arange(n, dtype=ag.double).view(n, 1) * 50
        x = (make_tensor((n, m)) + sep).detach().requires_grad_()
        v = make_tensor((n * (n - 1) // 2,), requires_grad=True)
        assert_equal(await second_order(ag.nn.functional.pdist, x, v, p), await second_order(ref_pdist, x, v, p))

