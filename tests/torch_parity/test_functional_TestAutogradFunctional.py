"""Port of torch's current ``test/autograd/test_functional.py``, class TestAutogradFunctional.

Source: pytorch/pytorch main, test/autograd/test_functional.py (the copy at commit 08151c60, read
through the code index; its CPU tests are the ones below). Each test is named after the torch test it
ports and says so in its docstring; torch's order is kept. torch's ``@base_and_logging_tensor`` runs
each test with plain tensors and with LoggingTensor: the plain-tensor case is ported. ``vectorize``
and ``strategy`` parametrizations are kept as pytest parameters. The functional API is a coroutine
in asyncgrad (``await F.vjp(...)``); a function gradcheck differentiates that calls it is ``async``.

Left out (not ported), one line per family:
- the ``logging_tensor`` half of every parametrized test: LoggingTensor is a __torch_dispatch__
  subclass, torch-internal;
- ``test_construct_standard_basis_for`` (and ``_cuda``): tests the private helper
  ``_construct_standard_basis_for`` that feeds torch's vmap; asyncgrad has no such helper;
- ``test_*_vectorize_correctness_different_devices``, TestAutogradFunctionalDeviceType: CUDA only.
"""

import warnings

import pytest
from autograd_port import (  # noqa: F401  (double_default: an autouse fixture)
    assert_equal,
    assert_interleaved_struct,
    assert_not_equal,
    assert_same_struct,
    double_default,
)

import asyncgrad as ag

autogradF = ag.autograd.functional

gradcheck = ag.gradcheck
gradgradcheck = ag.gradgradcheck

VECTORIZE = pytest.mark.parametrize("vectorize", [True, False])
STRATEGIES = pytest.mark.parametrize("test_forward_ad", [False, True], ids=["reverse", "forward"])


async def test_vjp_err_check():
    """Port of TestAutogradFunctional.test_vjp_err_check."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3)

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    inp = ag.rand(4)
    v = ag.ones(3)
    with pytest.raises(TypeError, match="The inputs given to vjp must be either a Tensor"):
        await autogradF.vjp(foo, (inp, 2), v)
    with pytest.raises(TypeError, match="The outputs of the user-provided function given to vjp must"):
        await autogradF.vjp(bar, inp, v)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided function returns"):
        await autogradF.vjp(foo, inp)
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
        await autogradF.vjp(foo, inp, (ag.ones_like(inp), ag.ones_like(inp)))
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be asyncgrad.Size"):
        await autogradF.vjp(foo, inp, v[:2])
    res = (await autogradF.vjp(foo, inp, v))[1]
    assert_same_struct(res, inp)


async def test_vjp_err_check_strict():
    """Port of TestAutogradFunctional.test_vjp_err_check_strict."""
    def foo(a):
        return a.detach()

    def bar(a):
        # a non-leaf Tensor that requires grad but is not connected to the input
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.vjp(foo, inp, v, strict=True)
    res = await autogradF.vjp(foo, inp, v, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await autogradF.vjp(bar, inp, v, strict=True)
    res = await autogradF.vjp(bar, inp, v, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.0)

    def foo(a):  # noqa: F811  (torch redefines it: the Jacobian does not depend on the input)
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await autogradF.vjp(foo, inp, v, create_graph=True, strict=True)
    res = await autogradF.vjp(foo, inp, v, create_graph=True, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1], v)


async def test_vjp_no_grad():
    """Port of TestAutogradFunctional.test_vjp_no_grad."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(4, 4)
    v = ag.ones(4)
    with ag.no_grad():
        res = await autogradF.vjp(reducer, inputs, v)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None
    assert_not_equal(res[1], ag.zeros(4, 4))

    inputs.requires_grad_()
    v.requires_grad_()
    with ag.no_grad():
        res = await autogradF.vjp(reducer, inputs, v, create_graph=True)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None
    assert_not_equal(res[1], ag.zeros(4, 4))


async def test_vjp_output():
    """Port of TestAutogradFunctional.test_vjp_output."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(4, 4)
    v = ag.ones(4)
    res = await autogradF.vjp(reducer, inputs, v)
    assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def adder(x, y):
        return 2 * x + 3 * y

    inputs = (ag.rand(2), ag.rand(2))
    v = ag.ones(2)
    out, vjp_val = await autogradF.vjp(adder, inputs, v)
    assert_same_struct(vjp_val, inputs)
    assert out.grad_fn is None
    assert vjp_val[0].grad_fn is None
    assert vjp_val[1].grad_fn is None

    def adder(x, y):  # noqa: F811
        return 2 * x + 3 * y, x + y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.tensor([1.0, 0.0]), ag.tensor([1.0, 0.0]))
    out, vjp_val = await autogradF.vjp(adder, inputs, v)
    assert_same_struct(vjp_val, inputs)
    assert out[0].grad_fn is None
    assert out[1].grad_fn is None
    assert vjp_val[0].grad_fn is None
    assert vjp_val[1].grad_fn is None


async def test_vjp_scalar():
    """Port of TestAutogradFunctional.test_vjp_scalar."""
    def reducer(x):
        return x.sum()

    inputs = ag.rand(4, 4)
    v = ag.ones([])
    res = await autogradF.vjp(reducer, inputs, v)
    assert_same_struct(res[0], v)
    assert_same_struct(res[1], inputs)

    res = await autogradF.vjp(reducer, inputs)
    assert_same_struct(res[0], v)
    assert_same_struct(res[1], inputs)

    def expander(x):
        return x.unsqueeze(0).repeat(4)

    inputs = ag.rand([])
    v = ag.ones(4)
    res = await autogradF.vjp(expander, inputs, v)
    assert_same_struct(res[0], v)
    assert_same_struct(res[1], inputs)


async def test_vjp_create_graph():
    """Port of TestAutogradFunctional.test_vjp_create_graph."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(2, 2, dtype=ag.double)
    v = ag.ones(2, dtype=ag.double)
    inputs.requires_grad_()
    v.requires_grad_()
    res = await autogradF.vjp(reducer, inputs, v, create_graph=True)
    assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    async def f1(inp, v):
        return await autogradF.vjp(reducer, inputs, v, create_graph=True)

    assert await gradcheck(f1, (inputs, v))
    assert await gradgradcheck(f1, (inputs, v))

    def adder(x, y):
        return 2 * x + 3 * y, x * y

    inputs = (ag.rand(2, dtype=ag.double, requires_grad=True), ag.rand(2, dtype=ag.double, requires_grad=True))
    v = (ag.tensor([1.0, 0.0], dtype=ag.double, requires_grad=True),
         ag.tensor([1.0, 0.0], dtype=ag.double, requires_grad=True))

    async def f2(*args):
        return (await autogradF.vjp(adder, args[:2], args[2:], create_graph=True))[1]

    assert await gradcheck(f2, inputs + v)
    assert await gradgradcheck(f2, inputs + v)

    async def foo(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = await autogradF.vjp(adder, (x, y), v, create_graph=True)
        return val[0].exp() + val[1].exp() + grad[0].exp() + grad[1].exp() + x.exp() + y.exp()

    assert await gradcheck(foo, inputs + v)
    assert await gradgradcheck(foo, inputs + v)


async def test_jvp_err_check():
    """Port of TestAutogradFunctional.test_jvp_err_check."""
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
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be asyncgrad.Size"):
        await autogradF.jvp(foo, inp, v[:2])
    res = (await autogradF.jvp(foo, inp, v))[1]
    assert_same_struct(res, foo(inp))


async def test_jvp_err_check_strict():
    """Port of TestAutogradFunctional.test_jvp_err_check_strict."""
    def foo(a):
        return a.detach()

    def bar(a):
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.jvp(foo, inp, v, strict=True)
    res = await autogradF.jvp(foo, inp, v, strict=False)
    assert_same_struct(res[1], res[0])
    assert_equal(res[1].abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await autogradF.jvp(bar, inp, v, strict=True)
    res = await autogradF.jvp(bar, inp, v, strict=False)
    assert_same_struct(res[1], res[0])
    assert_equal(res[1].abs().sum(), 0.0)

    def foo(a):  # noqa: F811
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await autogradF.jvp(foo, inp, v, create_graph=True, strict=True)
    res = await autogradF.jvp(foo, inp, v, create_graph=True, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1], v)


async def test_jvp_no_grad():
    """Port of TestAutogradFunctional.test_jvp_no_grad."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    with ag.no_grad():
        res = await autogradF.jvp(reducer, inputs, v)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None
    assert_not_equal(res[1], ag.zeros(4, 4))

    inputs.requires_grad_()
    v.requires_grad_()
    with ag.no_grad():
        res = await autogradF.jvp(reducer, inputs, v, create_graph=True)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None
    assert_not_equal(res[1], ag.zeros(4, 4))


async def test_jvp_output():
    """Port of TestAutogradFunctional.test_jvp_output."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await autogradF.jvp(reducer, inputs, v)
    assert_same_struct(res[1], res[0])
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def adder(x, y):
        return 2 * x + 3 * y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.ones(2), ag.ones(2))
    out, jvp_val = await autogradF.jvp(adder, inputs, v)
    assert_same_struct(jvp_val, out)
    assert out.grad_fn is None
    assert jvp_val[0].grad_fn is None
    assert jvp_val[1].grad_fn is None

    def adder(x, y):  # noqa: F811
        return 2 * x + 3 * y, x + y

    inputs = (ag.rand(2), ag.rand(2))
    v = (ag.tensor([1.0, 0.0]), ag.tensor([1.0, 0.0]))
    out, jvp_val = await autogradF.jvp(adder, inputs, v)
    assert_same_struct(jvp_val, out)
    assert out[0].grad_fn is None
    assert out[1].grad_fn is None
    assert jvp_val[0].grad_fn is None
    assert jvp_val[1].grad_fn is None


async def test_jvp_scalar():
    """Port of TestAutogradFunctional.test_jvp_scalar."""
    def reducer(x):
        return x.sum()

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await autogradF.jvp(reducer, inputs, v)
    assert_same_struct(res[0], ag.zeros([]))
    assert_same_struct(res[1], res[0])

    def expander(x):
        return x.unsqueeze(0).repeat(4)

    inputs = ag.rand([])
    v = ag.ones([])
    res = await autogradF.jvp(expander, inputs, v)
    assert_same_struct(res[0], ag.zeros(4))
    assert_same_struct(res[1], res[0])

    res = await autogradF.jvp(expander, inputs)
    assert_same_struct(res[0], ag.zeros(4))
    assert_same_struct(res[1], res[0])


async def test_jvp_create_graph():
    """Port of TestAutogradFunctional.test_jvp_create_graph."""
    def reducer(x):
        return x.sum(dim=1)

    inputs = ag.rand(2, 2, dtype=ag.double)
    v = ag.ones(2, 2, dtype=ag.double)
    inputs.requires_grad_()
    v.requires_grad_()
    res = await autogradF.jvp(reducer, inputs, v, create_graph=True)
    assert_same_struct(res[1], res[0])
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    async def f1(inp, v):
        return await autogradF.jvp(reducer, inp, v, create_graph=True)

    assert await gradcheck(f1, (inputs, v))
    assert await gradgradcheck(f1, (inputs, v))

    def adder(x, y):
        return 2 * x + 3 * y, x * y

    inputs = (ag.rand(2, dtype=ag.double, requires_grad=True), ag.rand(2, dtype=ag.double, requires_grad=True))
    v = (ag.tensor([1.0, 0.0], dtype=ag.double, requires_grad=True),
         ag.tensor([1.0, 0.0], dtype=ag.double, requires_grad=True))

    async def f2(*args):
        return (await autogradF.jvp(adder, args[:2], args[2:], create_graph=True))[1]

    assert await gradcheck(f2, inputs + v)
    assert await gradgradcheck(f2, inputs + v)

    async def foo(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = await autogradF.jvp(adder, (x, y), v, create_graph=True)
        return val[0].exp() + val[1].exp() + grad[0].exp() + grad[1].exp() + x.exp() + y.exp()

    assert await gradcheck(foo, inputs + v)
    assert await gradgradcheck(foo, inputs + v)


async def _test_vectorize_raises_no_warnings(api):
    def foo(a):
        return (a**2).sum()

    x = ag.randn(3)
    with warnings.catch_warnings(record=True) as wa:
        warnings.simplefilter("always")
        await api(foo, x, vectorize=True)
    assert len(wa) == 0


async def test_jacobian_vectorize_raises_no_warnings():
    """Port of TestAutogradFunctional.test_jacobian_vectorize_raises_no_warnings."""
    await _test_vectorize_raises_no_warnings(autogradF.jacobian)


async def test_hessian_vectorize_raises_no_warnings():
    """Port of TestAutogradFunctional.test_hessian_vectorize_raises_no_warnings."""
    await _test_vectorize_raises_no_warnings(autogradF.hessian)


@VECTORIZE
async def test_jacobian_err_check(vectorize):
    """Port of TestAutogradFunctional.test_jacobian_err_check (vectorize True and False)."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3)

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    inp = ag.rand(4)
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor"):
        await autogradF.jacobian(foo, (inp, 2), vectorize=vectorize)
    with pytest.raises(TypeError, match="The outputs of the user-provided function given to jacobian must"):
        await autogradF.jacobian(bar, inp, vectorize=vectorize)
    res = await autogradF.jacobian(foo, inp, vectorize=vectorize)
    assert_interleaved_struct(res, foo(inp), inp)

    def foo(a, b):  # noqa: F811
        return b, 3 * a.narrow(0, 0, 3)

    inp = (ag.rand(4), ag.rand(5))
    res = await autogradF.jacobian(foo, inp, vectorize=vectorize)
    assert_interleaved_struct(res, foo(*inp), inp)


async def test_jacobian_err_check_strict():
    """Port of TestAutogradFunctional.test_jacobian_err_check_strict."""
    def foo(a):
        return a.detach()

    def bar(a):
        return a.long().float().requires_grad_().clone()

    inp = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.jacobian(foo, inp, strict=True)
    res = await autogradF.jacobian(foo, inp, strict=False)
    assert_interleaved_struct(res, foo(inp), inp)
    assert_equal(res.abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 0."):
        await autogradF.jacobian(bar, inp, strict=True)
    res = await autogradF.jacobian(bar, inp, strict=False)
    assert_interleaved_struct(res, foo(inp), inp)
    assert_equal(res.abs().sum(), 0.0)

    def foo(a):  # noqa: F811
        return a.clone()

    inp.requires_grad_()
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0."):
        await autogradF.jacobian(foo, inp, create_graph=True, strict=True)
    res = await autogradF.jacobian(foo, inp, create_graph=True, strict=False)
    assert_interleaved_struct(res, inp, inp)
    assert_equal(res, ag.eye(4))


async def test_jacobian_err_check_strict_vectorize():
    """Port of TestAutogradFunctional.test_jacobian_err_check_strict_vectorize."""
    def foo(x):
        return x

    inp = ag.rand(4)
    with pytest.raises(RuntimeError, match="not supported together"):
        await autogradF.jacobian(foo, inp, strict=True, vectorize=True)


async def test_jacobian_no_grad():
    """Port of TestAutogradFunctional.test_jacobian_no_grad."""
    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = ag.rand(4, 4)
    with ag.no_grad():
        res = await autogradF.jacobian(exp_reducer, inputs)
    assert res.grad_fn is None
    assert_not_equal(res, ag.zeros(4, 4))

    with ag.no_grad():
        res = await autogradF.jacobian(exp_reducer, inputs, create_graph=True)
    assert res.grad_fn is not None
    assert_not_equal(res, ag.zeros(4, 4))


@VECTORIZE
async def test_jacobian_output(vectorize):
    """Port of TestAutogradFunctional.test_jacobian_output (vectorized_base_tensor, base_tensor)."""
    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = ag.rand(4, 4)
    res = await autogradF.jacobian(exp_reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, exp_reducer(inputs), inputs)
    assert res.grad_fn is None

    def identity(x):
        return x.clone()

    inputs = ag.rand(4)
    res = await autogradF.jacobian(identity, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, identity(inputs), inputs)
    assert res.grad_fn is None
    assert_equal(res, ag.eye(4))

    def add_exp_reducer(x, y):
        return (x + y.exp()).sum(dim=1)

    inputs = (ag.rand(4, 4), ag.rand(4, 4))
    res = await autogradF.jacobian(add_exp_reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, add_exp_reducer(*inputs), inputs)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None


@VECTORIZE
async def test_jacobian_scalar(vectorize):
    """Port of TestAutogradFunctional.test_jacobian_scalar (vectorized_base_tensor, base_tensor)."""
    def reducer(x):
        return x.sum()

    inputs = ag.rand(4, 4)
    res = await autogradF.jacobian(reducer, inputs, vectorize=vectorize)
    assert_same_struct(res, inputs)

    def expander(x):
        return x.unsqueeze(0).repeat(4)

    inputs = ag.rand([])
    res = await autogradF.jacobian(expander, inputs, vectorize=vectorize)
    assert_same_struct(res, ag.zeros(4))


@VECTORIZE
async def test_jacobian_create_graph(vectorize):
    """Port of TestAutogradFunctional.test_jacobian_create_graph (vectorize True and False)."""
    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = ag.rand(4, 4, dtype=ag.double, requires_grad=True)
    res = await autogradF.jacobian(exp_reducer, inputs, create_graph=True, vectorize=vectorize)
    assert_interleaved_struct(res, exp_reducer(inputs), inputs)
    assert res.grad_fn is not None

    async def jac1(inp):
        return await autogradF.jacobian(exp_reducer, inp, create_graph=True, vectorize=vectorize)

    assert await gradcheck(jac1, inputs)
    assert await gradgradcheck(jac1, inputs)

    def add_exp_reducer(x, y):
        return (x + y).exp().sum(dim=1)

    inputs = (ag.rand(4, 4, dtype=ag.double, requires_grad=True),
              ag.rand(4, 4, dtype=ag.double, requires_grad=True))
    res = await autogradF.jacobian(add_exp_reducer, inputs, create_graph=True, vectorize=vectorize)
    assert_interleaved_struct(res, add_exp_reducer(*inputs), inputs)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    async def jac2(*inp):
        return await autogradF.jacobian(add_exp_reducer, inp, create_graph=True, vectorize=vectorize)

    assert await gradcheck(jac2, inputs)
    assert await gradgradcheck(jac2, inputs)

    async def foo(x, y):
        x = x.cos()
        val, jac = await autogradF.jacobian(add_exp_reducer, (x, y), create_graph=True, vectorize=vectorize)
        res = val[0].exp().sum() + val[1].exp().sum() + jac[0].exp().sum()
        return res + jac[1].exp().sum() + x.exp().sum() + y.exp().sum()

    assert await gradcheck(foo, inputs)
    assert await gradgradcheck(foo, inputs)


async def _check_jacobian_vectorize_correctness(f, inputs, test_forward_ad):
    expected = await autogradF.jacobian(f, inputs, vectorize=False)
    result_backward_mode = await autogradF.jacobian(f, inputs, vectorize=True)
    assert_equal(result_backward_mode, expected)
    if test_forward_ad:
        result_forward_mode = await autogradF.jacobian(f, inputs, strategy="forward-mode", vectorize=True)
        assert_equal(result_forward_mode, expected)


@STRATEGIES
async def test_jacobian_vectorize_correctness_simple(test_forward_ad):
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_simple (its reverse-mode
    and forward-mode halves as two cases)."""
    def f(x):
        return 3 * x**2

    x = ag.randn(2, 3, 5)
    await _check_jacobian_vectorize_correctness(f, x, test_forward_ad)


@STRATEGIES
async def test_jacobian_vectorize_correctness_multi_input(test_forward_ad):
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_multi_input."""
    def f(x, y):
        return (x.cos() * x) @ y.sin()

    x = ag.randn(2, 3)
    y = ag.randn(3, 5)
    await _check_jacobian_vectorize_correctness(f, (x, y), test_forward_ad)


@STRATEGIES
async def test_jacobian_vectorize_correctness_multi_input_multi_output(test_forward_ad):
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_multi_input_multi_output."""
    def f(x, y):
        return (x * x) @ y, x @ (x.sum(1) * y), y.sum()

    x = ag.randn(5, 3)
    y = ag.randn(3, 5)
    await _check_jacobian_vectorize_correctness(f, (x, y), test_forward_ad)


@STRATEGIES
async def test_jacobian_vectorize_correctness_unrelated_outputs(test_forward_ad):
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_unrelated_outputs."""
    def f(x, y):
        return x, y, x, y

    x = ag.randn(2)
    y = ag.randn(3)
    await _check_jacobian_vectorize_correctness(f, (x, y), test_forward_ad)


@STRATEGIES
async def test_jacobian_vectorize_correctness_zero_dim(test_forward_ad):
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_zero_dim."""
    def f(x, y):
        return x.sum(), y.sum(), x * y

    x = ag.randn(3)
    y = ag.randn(3)
    await _check_jacobian_vectorize_correctness(f, (x, y), test_forward_ad)

    def g(x):
        return ag.stack([x, x, x])

    x = ag.randn([])
    await _check_jacobian_vectorize_correctness(g, x, test_forward_ad)

    def h(x, y):
        return y.sum(), x * y

    x = ag.randn([])
    y = ag.randn(1)
    await _check_jacobian_vectorize_correctness(h, (x, y), test_forward_ad)


async def test_jacobian_vectorize_correctness_different_dtype():
    """Port of TestAutogradFunctional.test_jacobian_vectorize_correctness_different_dtype."""
    def f(x, y):
        return (x * y).float(), (x * y).double()

    x = ag.randn(3)
    y = ag.randn(3)
    # reverse mode: the Jacobian has the dtype of the input
    await _check_jacobian_vectorize_correctness(f, (x, y), test_forward_ad=False)


async def _check_hessian_vectorize_correctness(f, inputs, test_forward_ad):
    expected = await autogradF.hessian(f, inputs, vectorize=False)
    result = await autogradF.hessian(f, inputs, vectorize=True)
    assert_equal(result, expected)
    if test_forward_ad:
        result_forward_mode = await autogradF.hessian(f, inputs, outer_jacobian_strategy="forward-mode",
                                                      vectorize=True)
        assert_equal(result_forward_mode, expected)


@STRATEGIES
async def test_hessian_vectorize_correctness_simple(test_forward_ad):
    """Port of TestAutogradFunctional.test_hessian_vectorize_correctness_simple."""
    def f(x):
        return (3 * x**2).sum()

    x = ag.randn(2, 3, 5)
    await _check_hessian_vectorize_correctness(f, x, test_forward_ad)


@STRATEGIES
async def test_hessian_vectorize_correctness_multi_input(test_forward_ad):
    """Port of TestAutogradFunctional.test_hessian_vectorize_correctness_multi_input."""
    def f(x, y, z):
        return ((x.relu() * x) @ y.sin() @ z).sum()

    x = ag.randn(2, 3)
    y = ag.randn(3, 5)
    z = ag.randn(5, 5)
    await _check_hessian_vectorize_correctness(f, (x, y, z), test_forward_ad)


@STRATEGIES
async def test_hessian_vectorize_correctness_unrelated_outputs(test_forward_ad):
    """Port of TestAutogradFunctional.test_hessian_vectorize_correctness_unrelated_outputs."""
    def f(x, y):
        return (x**2).sum()

    x = ag.randn(2)
    y = ag.randn(3)
    await _check_hessian_vectorize_correctness(f, (x, y), test_forward_ad)

    def f(x, y):  # noqa: F811  (output unrelated to all inputs)
        return ag.ones([])

    x = ag.randn(2)
    y = ag.randn(3)
    await _check_hessian_vectorize_correctness(f, (x, y), test_forward_ad)


@VECTORIZE
async def test_hessian_err_check(vectorize):
    """Port of TestAutogradFunctional.test_hessian_err_check (vectorize True and False)."""
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
        await autogradF.hessian(foo, (inp, 2), vectorize=vectorize)
    with pytest.raises(TypeError, match="The outputs of the user-provided function given to hessian must"):
        await autogradF.hessian(bar, inp, vectorize=vectorize)
    with pytest.raises(RuntimeError,
                       match="The Tensor returned by the function given to hessian should contain a single element"):
        await autogradF.hessian(bar2, inp, vectorize=vectorize)
    with pytest.raises(RuntimeError, match="The function given to hessian should return a single Tensor"):
        await autogradF.hessian(bar3, inp, vectorize=vectorize)
    res = await autogradF.hessian(foo, inp, vectorize=vectorize)
    assert_interleaved_struct(res, inp, inp)

    def foo(a, b):  # noqa: F811
        return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

    inp = (ag.rand(4), ag.rand(5))
    res = await autogradF.hessian(foo, inp, vectorize=vectorize)
    assert_interleaved_struct(res, inp, inp)


async def test_hessian_err_check_strict():
    """Port of TestAutogradFunctional.test_hessian_err_check_strict."""
    def foo(a):
        return a.detach().sum()

    def bar(a):
        return a.long().float().requires_grad_().clone().sum()

    def bar2(a):
        return (3 * a).sum()  # linear: the jacobian is independent of the input

    inp = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await autogradF.hessian(foo, inp, strict=True)
    res = await autogradF.hessian(foo, inp, strict=False)
    assert_interleaved_struct(res, inp, inp)
    assert_equal(res.abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0"):
        await autogradF.hessian(bar, inp, strict=True)
    res = await autogradF.hessian(bar, inp, strict=False)
    assert_interleaved_struct(res, inp, inp)
    assert_equal(res.abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"):
        await autogradF.hessian(bar2, inp, strict=True)
    res = await autogradF.hessian(bar2, inp, strict=False)
    assert_interleaved_struct(res, inp, inp)
    assert_equal(res.abs().sum(), 0.0)


async def test_hessian_err_check_strict_vectorize():
    """Port of TestAutogradFunctional.test_hessian_err_check_strict_vectorize."""
    def foo(x):
        return (x**3).sum()

    inp = ag.rand(4)
    with pytest.raises(RuntimeError, match="not supported together"):
        await autogradF.hessian(foo, inp, strict=True, vectorize=True)


async def test_hessian_no_grad():
    """Port of TestAutogradFunctional.test_hessian_no_grad."""
    def pow_reducer(x):
        return x.pow(3).sum()

    inputs = ag.rand(2, 2)
    with ag.no_grad():
        res = await autogradF.hessian(pow_reducer, inputs)
    assert res[0][0].grad_fn is None
    assert res[0][1].grad_fn is None
    assert res[1][0].grad_fn is None
    assert res[1][1].grad_fn is None
    assert_not_equal(res, ag.zeros(2, 2, 2))

    with ag.no_grad():
        res = await autogradF.hessian(pow_reducer, inputs, create_graph=True)
    assert res[0][0].grad_fn is not None
    assert res[0][1].grad_fn is not None
    assert res[1][0].grad_fn is not None
    assert res[1][1].grad_fn is not None
    assert_not_equal(res, ag.zeros(2, 2, 2))


@VECTORIZE
async def test_hessian_output(vectorize):
    """Port of TestAutogradFunctional.test_hessian_output (vectorized_base_tensor, base_tensor)."""
    def pow_reducer(x):
        return x.pow(3).sum()

    inputs = ag.rand(2, 2)
    res = await autogradF.hessian(pow_reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)
    assert res.grad_fn is None

    def add_pow_reducer(x, y):
        return (x + y).pow(3).sum()

    inputs = (ag.rand(2, 2), ag.rand(2, 2))
    res = await autogradF.hessian(add_pow_reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)
    assert res[0][0].grad_fn is None
    assert res[0][1].grad_fn is None
    assert res[1][0].grad_fn is None
    assert res[1][1].grad_fn is None


@VECTORIZE
async def test_hessian_scalar(vectorize):
    """Port of TestAutogradFunctional.test_hessian_scalar (vectorize True and False)."""
    def reducer(x):
        return x.sum()

    inputs = ag.rand(4, 4)
    res = await autogradF.hessian(reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)

    inputs = ag.rand([])
    res = await autogradF.hessian(reducer, inputs, vectorize=vectorize)
    assert_same_struct(res, inputs)

    def bad_reducer(x):
        return x.sum().view(1, 1, 1)

    inputs = ag.rand(4, 4)
    res = await autogradF.hessian(bad_reducer, inputs, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)


@VECTORIZE
async def test_hessian_create_graph(vectorize):
    """Port of TestAutogradFunctional.test_hessian_create_graph (vectorize True and False)."""
    def pow_reducer(x):
        return x.pow(3).sum()

    inputs = ag.rand(2, 2, dtype=ag.double, requires_grad=True)
    res = await autogradF.hessian(pow_reducer, inputs, create_graph=True, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)
    assert res.grad_fn is not None

    async def h1(inp):
        return await autogradF.hessian(pow_reducer, inp, create_graph=True, vectorize=vectorize)

    assert await gradcheck(h1, inputs)
    assert await gradgradcheck(h1, inputs)

    def add_pow_reducer(x, y):
        return (x + y).pow(3).sum()

    inputs = (ag.rand(2, 2, dtype=ag.double, requires_grad=True),
              ag.rand(2, 2, dtype=ag.double, requires_grad=True))
    res = await autogradF.hessian(add_pow_reducer, inputs, create_graph=True, vectorize=vectorize)
    assert_interleaved_struct(res, inputs, inputs)
    assert res[0][0].grad_fn is not None
    assert res[0][1].grad_fn is not None
    assert res[1][0].grad_fn is not None
    assert res[1][1].grad_fn is not None

    def flatten(inp):
        return tuple(el_lvl2 for el_lvl1 in inp for el_lvl2 in el_lvl1)

    async def h2(*inp):
        return flatten(await autogradF.hessian(add_pow_reducer, inp, create_graph=True, vectorize=vectorize))

    assert await gradcheck(h2, inputs)
    assert await gradgradcheck(h2, inputs)

    async def foo(x, y):
        x = x.cos()
        val, hess = await autogradF.hessian(add_pow_reducer, (x, y), create_graph=True, vectorize=vectorize)
        res = val[0].cos().sum() + val[1].cos().sum() + hess[0].cos().sum()
        return res + hess[1].cos().sum() + x.cos().sum() + y.cos().sum()

    assert await gradcheck(foo, inputs)
    assert await gradgradcheck(foo, inputs)


async def _test_vhp_hvp_err_check(name):
    api = getattr(autogradF, name)

    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    def bar(a):
        return 3 * a.narrow(0, 0, 3), "bar"

    def bar2(a):
        return 3 * a.narrow(0, 0, 3)

    inp = ag.rand(4)
    v = ag.rand(4)
    if name == "hvp":
        await api(foo, inp, v)
    with pytest.raises(TypeError, match=f"The inputs given to {name} must be either a Tensor"):
        await api(foo, (inp, 2), v)
    with pytest.raises(TypeError, match=f"The outputs of the user-provided function given to {name} must"):
        await api(bar, inp, v)
    with pytest.raises(RuntimeError,
                       match=f"The Tensor returned by the function given to {name} should contain a single element"):
        await api(bar2, inp, v)
    with pytest.raises(RuntimeError, match="v has invalid size:"):
        await api(foo, inp, ag.rand(5))
    with pytest.raises(TypeError, match=f"The v given to {name} must be either a Tensor or a tuple of Tensors"):
        await api(foo, inp, (v, 2))
    res = await api(foo, inp, v)
    assert_same_struct(res[1], inp)

    def foo(a, b):  # noqa: F811
        return (3 * b.narrow(0, 0, 3) * a.narrow(0, 0, 3)).sum()

    inp = (ag.rand(4), ag.rand(5))
    v = (ag.rand(4), ag.rand(5))
    res = await api(foo, inp, v)
    assert_same_struct(res[1], inp)


async def _test_vhp_hvp_err_check_strict(name):
    api = getattr(autogradF, name)

    def foo(a):
        return a.detach().sum()

    def bar(a):
        return a.long().float().requires_grad_().clone().sum()

    def bar2(a):
        return (3 * a).sum()

    inp = ag.rand(4)
    v = ag.rand(4)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients."):
        await api(foo, inp, v, strict=True)
    res = await api(foo, inp, v, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 0"):
        await api(bar, inp, v, strict=True)
    res = await api(bar, inp, v, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.0)

    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"):
        await api(bar2, inp, v, strict=True)
    res = await api(bar2, inp, v, strict=False)
    assert_same_struct(res[1], inp)
    assert_equal(res[1].abs().sum(), 0.0)


async def _test_vhp_hvp_no_grad(name):
    api = getattr(autogradF, name)

    def reducer(x):
        return x.exp().sum()

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    with ag.no_grad():
        res = await api(reducer, inputs, v)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None
    assert_not_equal(res[1], ag.zeros(4, 4))

    with ag.no_grad():
        res = await api(reducer, inputs, v, create_graph=True)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None
    assert_not_equal(res[1], ag.zeros(4, 4))


async def _test_vhp_hvp_output(name):
    api = getattr(autogradF, name)

    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await api(foo, inputs, v)
    assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is None
    assert res[1].grad_fn is None

    def bar(a, b):
        return (a + 3 * b.narrow(0, 0, 3)).exp().sum()

    inputs = (ag.rand(3), ag.rand(4))
    v = (ag.ones(3), ag.ones(4))
    out, val = await api(bar, inputs, v)
    assert_same_struct(val, inputs)
    assert out.grad_fn is None
    assert val[0].grad_fn is None
    assert val[1].grad_fn is None


async def _test_vhp_hvp_scalar(name):
    api = getattr(autogradF, name)

    def reducer(x):
        return x.exp().sum() if name == "hvp" else x.sum()

    inputs = ag.rand(4, 4)
    v = ag.ones(4, 4)
    res = await api(reducer, inputs, v)
    assert_same_struct(res[1], inputs)

    inputs = ag.rand([])
    v = ag.rand([])
    res = await api(reducer, inputs, v)
    assert_same_struct(res[1], inputs)

    res = await api(reducer, inputs)
    assert_same_struct(res[1], inputs)

    def bad_reducer(x):
        return (x.exp().sum() if name == "hvp" else x.sum()).view(1, 1, 1)

    inputs = ag.rand(4, 4)
    v = ag.rand(4, 4)
    res = await api(bad_reducer, inputs, v)
    assert_same_struct(res[1], inputs)


async def _test_vhp_hvp_create_graph(name):
    api = getattr(autogradF, name)

    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4, 4, dtype=ag.double, requires_grad=True)
    v = ag.ones(4, 4, dtype=ag.double, requires_grad=True)
    res = await api(foo, inputs, v, create_graph=True)
    assert_same_struct(res[1], inputs)
    assert res[0].grad_fn is not None
    assert res[1].grad_fn is not None

    async def f1(inp, v):
        return await api(foo, inp, v, create_graph=True)

    assert await gradcheck(f1, (inputs, v))
    assert await gradgradcheck(f1, (inputs, v))

    def bar(a, b):
        return (a + 3 * b.narrow(0, 0, 3)).exp().sum()

    inputs = (ag.rand(3, dtype=ag.double, requires_grad=True), ag.rand(4, dtype=ag.double, requires_grad=True))
    v = (ag.ones(3, dtype=ag.double, requires_grad=True), ag.ones(4, dtype=ag.double, requires_grad=True))
    out, val = await api(bar, inputs, v, create_graph=True)
    assert_same_struct(val, inputs)
    assert out.grad_fn is not None
    assert val[0].grad_fn is not None
    assert val[1].grad_fn is not None

    async def f2(*args):
        return (await api(bar, args[:2], args[2:], create_graph=True))[1]

    assert await gradcheck(f2, inputs + v)
    assert await gradgradcheck(f2, inputs + v)

    async def foo2(*args):
        x, y = args[:2]
        v = args[2:]
        x = x.cos()
        val, grad = await api(bar, (x, y), v, create_graph=True)
        return val.cos() + grad[0].cos().sum() + grad[1].cos() + x.cos().sum() + y.cos()

    assert await gradcheck(foo2, inputs + v)
    assert await gradgradcheck(foo2, inputs + v)


async def test_vhp_err_check():
    """Port of TestAutogradFunctional.test_vhp_err_check."""
    await _test_vhp_hvp_err_check("vhp")


async def test_vhp_err_check_strict():
    """Port of TestAutogradFunctional.test_vhp_err_check_strict."""
    await _test_vhp_hvp_err_check_strict("vhp")


async def test_vhp_no_grad():
    """Port of TestAutogradFunctional.test_vhp_no_grad."""
    await _test_vhp_hvp_no_grad("vhp")


async def test_vhp_output():
    """Port of TestAutogradFunctional.test_vhp_output."""
    await _test_vhp_hvp_output("vhp")


async def test_vhp_scalar():
    """Port of TestAutogradFunctional.test_vhp_scalar."""
    await _test_vhp_hvp_scalar("vhp")


async def test_vhp_create_graph():
    """Port of TestAutogradFunctional.test_vhp_create_graph."""
    await _test_vhp_hvp_create_graph("vhp")


async def test_hvp_err_check():
    """Port of TestAutogradFunctional.test_hvp_err_check."""
    await _test_vhp_hvp_err_check("hvp")


async def test_hvp_err_check_strict():
    """Port of TestAutogradFunctional.test_hvp_err_check_strict."""
    await _test_vhp_hvp_err_check_strict("hvp")


async def test_hvp_no_grad():
    """Port of TestAutogradFunctional.test_hvp_no_grad."""
    await _test_vhp_hvp_no_grad("hvp")


async def test_hvp_output():
    """Port of TestAutogradFunctional.test_hvp_output."""
    await _test_vhp_hvp_output("hvp")


async def test_hvp_scalar():
    """Port of TestAutogradFunctional.test_hvp_scalar."""
    await _test_vhp_hvp_scalar("hvp")


async def test_hvp_create_graph():
    """Port of TestAutogradFunctional.test_hvp_create_graph."""
    await _test_vhp_hvp_create_graph("hvp")


async def test_jacobian_match_vjp_jvp():
    """Port of TestAutogradFunctional.test_jacobian_match_vjp_jvp."""
    def foo(x):
        return x**3 + x.sum()

    inputs = ag.rand(4)
    v = ag.rand(4)
    jac = await autogradF.jacobian(foo, inputs)
    jvp = (await autogradF.jvp(foo, inputs, v))[1]
    vjp = (await autogradF.vjp(foo, inputs, v))[1]
    assert_equal(jvp, ag.mm(jac, v.unsqueeze(1)).squeeze(1))
    assert_equal(vjp, ag.mm(v.unsqueeze(0), jac).squeeze(0))


async def test_hessian_match_vhp_hvp():
    """Port of TestAutogradFunctional.test_hessian_match_vhp_hvp."""
    def foo(a):
        return 3 * a.narrow(0, 0, 3).exp().sum()

    inputs = ag.rand(4)
    v = ag.rand(4)
    hes = await autogradF.hessian(foo, inputs)
    hvp = (await autogradF.hvp(foo, inputs, v))[1]
    vhp = (await autogradF.vhp(foo, inputs, v))[1]
    assert_equal(hvp, ag.mm(hes, v.unsqueeze(1)).squeeze(1))
    assert_equal(vhp, ag.mm(v.unsqueeze(0), hes).squeeze(0))
