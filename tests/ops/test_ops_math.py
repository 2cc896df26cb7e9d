"""ops-math: torch's pointwise math, the matmul family, einsum, cdist, norms, ``ag.linalg`` and the
``new_*`` constructors, against finite differences and PyTorch, first and second order, on ``cpu``
and on ``sim:0`` (array_api_strict), plus torch's wording for bad input."""

from __future__ import annotations

import math

import helpers
import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op, check_raises, has_torch

import asyncgrad as ag


@pytest.fixture(params=["cpu", "sim:0"], autouse=True)
def op_device(request):
    """Every test here on ``cpu`` and on ``sim:0`` (conftest's op_device, for this module)."""
    helpers.DEVICE[0] = request.param
    yield request.param
    helpers.DEVICE[0] = "cpu"


# --------------------------------------------------------------------------- pointwise: one input
UNIT = {"low": -0.9, "high": 0.9}
POSITIVE = {"low": 0.5, "high": 3.0}
UNARY_MATH = {
    "expm1": (lambda x: x.expm1(), "Expm1Backward0", {}),
    "rsqrt": (lambda x: x.rsqrt(), "RsqrtBackward0", POSITIVE),
    "reciprocal": (lambda x: x.reciprocal(), "ReciprocalBackward0", POSITIVE),
    "lib.reciprocal": (lambda lib, x: lib.reciprocal(x), "ReciprocalBackward0", POSITIVE),
    "square": (lambda x: x.square(), "PowBackward0", {}),
    "lib.square": (lambda lib, x: lib.square(x), "PowBackward0", {}),
    "floor": (lambda x: x.floor(), "FloorBackward0", {}),
    "ceil": (lambda x: x.ceil(), "CeilBackward0", {}),
    "round": (lambda x: x.round(), "RoundBackward0", {}),
    "round(decimals=2)": (lambda x: x.round(decimals=2), "RoundBackward1", {}),
    "round(decimals=-1)": (lambda lib, x: lib.round(x * 100, decimals=-1), "RoundBackward1", {}),
    "trunc": (lambda x: x.trunc(), "TruncBackward0", {}),
    "tan": (lambda x: x.tan(), "TanBackward0", UNIT),
    "atan": (lambda x: x.atan(), "AtanBackward0", {}),
    "asin": (lambda x: x.asin(), "AsinBackward0", UNIT),
    "acos": (lambda x: x.acos(), "AcosBackward0", UNIT),
    "sinh": (lambda x: x.sinh(), "SinhBackward0", {}),
    "cosh": (lambda x: x.cosh(), "CoshBackward0", {}),
    "erf": (lambda x: x.erf(), "ErfBackward0", {}),
    "lib.erf": (lambda lib, x: lib.erf(x * 3), "ErfBackward0", {}),
    "erfc": (lambda x: x.erfc(), "ErfcBackward0", {}),
    "erfinv": (lambda x: x.erfinv(), "ErfinvBackward0", UNIT),
    "log2": (lambda x: x.log2(), "Log2Backward0", POSITIVE),
    "log10": (lambda lib, x: lib.log10(x), "Log10Backward0", POSITIVE),
    "exp2": (lambda x: x.exp2(), "Exp2Backward0", {}),
    "sign": (lambda x: x.sign(), "SignBackward0", {}),
    "logit": (lambda x: x.logit(), "LogitBackward0", {"low": 0.05, "high": 0.95}),
    "logit(eps)": (lambda x: x.logit(eps=0.2), "LogitBackward0", {"low": 0.05, "high": 0.95}),
}


ZERO_DERIVATIVE = {"floor", "ceil", "round", "round(decimals=2)", "round(decimals=-1)", "trunc", "sign"}


async def check_constant_gradient(fn, *inputs, torch_check=True, **kw):
    """Note [Zero derivatives are constants] (ops/elementwise.py): under create_graph the zero
    gradient belongs to no graph, as torch's ``zeros_like(grad)``."""
    arrays = helpers.make_inputs(inputs, 0, kw.get("low"), kw.get("high"))
    xs = [ag_tensor(a, requires_grad=True) for a in arrays]
    out = helpers.call(fn, helpers.AG, xs)
    v = ag_tensor(np.ones(out.shape), requires_grad=True)
    grads = await ag.grad(out, xs, grad_outputs=v, create_graph=True)
    assert all(not g.requires_grad and not g.cpu().numpy().any() for g in grads)
    if torch_check and has_torch():
        import torch

        txs = [torch.tensor(a, requires_grad=True) for a in arrays]
        tout = helpers.run_torch(fn, txs)
        tgrads = torch.autograd.grad(tout, txs, torch.ones(tout.shape, dtype=tout.dtype, requires_grad=True),
                                     create_graph=True)
        assert not any(g.requires_grad for g in tgrads)


async def check_undefined_gradient(fn, shape):
    """torch leaves some gradients undefined (the 0-norm's): the input was "not used", as in torch."""
    x = ag_tensor(np.ones(shape), requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        await ag.grad(helpers.call(fn, helpers.AG, [x]).sum(), [x])
    assert (await ag.grad(helpers.call(fn, helpers.AG, [x]).sum(), [x], allow_unused=True)) == (None,)
    if has_torch():
        import torch

        tx = torch.ones(shape, dtype=torch.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            torch.autograd.grad(helpers.run_torch(fn, [tx]).sum(), [tx])


@pytest.mark.parametrize("op", list(UNARY_MATH))
async def test_unary_math(op):
    fn, name, kw = UNARY_MATH[op]
    await check_op(fn, (2, 3), name=name, **kw)
    if op in ZERO_DERIVATIVE:
        await check_constant_gradient(fn, (2, 3), **kw)
    else:
        await check_gradgrad(fn, (2, 3), **kw)


INTEGER_RESULTS = {
    # torch's dtype for an int64 input: float functions compute in the default dtype, roundings keep it
    "floor": "int64", "ceil": "int64", "trunc": "int64", "sign": "int64", "square": "int64",
    "erf": "float32", "expm1": "float32", "atan": "float32", "exp2": "float32", "log2": "float32",
    "reciprocal": "float32", "rsqrt": "float32",
}


@pytest.mark.parametrize("op", list(INTEGER_RESULTS))
def test_unary_integer_input(op, torch):
    out = getattr(ag_tensor([1, 2, 3]), op)()
    expected = helpers.run_torch(lambda lib: getattr(lib.tensor([1, 2, 3]), op)())
    assert out.dtype == np.dtype(INTEGER_RESULTS[op]) == np.dtype(str(expected.dtype).replace("torch.", ""))
    assert_close(out, expected, 1e-6, 0, op)


def test_unary_refusals():
    for op in ("floor", "ceil", "trunc", "round"):
        kernel = "round_vml_cpu" if op == "round" else f"{op}_vml_cpu"
        check_raises(lambda lib, op=op: getattr(lib.tensor([True]), op)(), NotImplementedError,
                     f"\"{kernel}\" not implemented for 'Bool'")
    check_raises(lambda lib: lib.tensor([1, 2]).round(decimals=1), NotImplementedError,
                 "\"round_cpu\" not implemented for 'Long'")


def test_erf_to_double_precision():
    """Note [erf to double precision]: within 1e-15 of torch's erf, erfc and erfinv everywhere."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-10, 10, 2000), rng.uniform(-1, 1, 1000), np.linspace(-27, 27, 1081),
                        [0.0, -0.0, 0.5, -0.5, 2.0, 4.0, 8.0, 26.5, 40.0, 1e-300, np.inf, -np.inf, np.nan]])
    for op in ("erf", "erfc"):
        ours = getattr(ag_tensor(x), op)().cpu().numpy()
        theirs = getattr(torch.tensor(x), op)().numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-15, atol=1e-300, equal_nan=True, err_msg=op)
    y = np.concatenate([rng.uniform(-1, 1, 2000), 1 - np.logspace(-16, -1, 100), -1 + np.logspace(-16, -1, 100),
                        [0.0, 1.0, -1.0, 1.5, -2.0, np.nan, 1e-300]])
    np.testing.assert_allclose(ag_tensor(y).erfinv().cpu().numpy(), torch.tensor(y).erfinv().numpy(), rtol=1e-15,
                               atol=1e-300, equal_nan=True, err_msg="erfinv")
    # float32 rounds the float64 result
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(ag_tensor(x32).erf().cpu().numpy(), torch.tensor(x32).erf().numpy(), rtol=2e-7,
                               atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite"])
def test_predicates(op, torch):
    values = [1.0, math.nan, math.inf, -math.inf, -0.0]
    x = ag_tensor(values, requires_grad=True)
    out = getattr(x, op)()
    assert out.dtype == np.bool_ and not out.requires_grad and out.grad_fn is None
    assert out.tolist() == getattr(torch.tensor(values), op)().tolist()
    assert getattr(ag, op)(ag_tensor([1, 2])).tolist() == getattr(torch.tensor([1, 2]), op)().tolist()


def test_round_half_to_even_and_decimals(torch):
    values = [0.5, 1.5, 2.5, -0.5, -2.5, 1.2345, 1234.5678, -0.125]
    for decimals in (0, 1, 2, 3, -1, -2):
        assert_close(ag_tensor(values, dtype=ag.float64).round(decimals=decimals),
                     torch.tensor(values, dtype=torch.float64).round(decimals=decimals),
                     0, 0, f"round(decimals={decimals})")


# --------------------------------------------------------------------------- pointwise: two inputs
BROADCASTS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3))]


@pytest.mark.parametrize("shapes", BROADCASTS)
async def test_atan2(shapes):
    await check_op(lambda lib, a, b: lib.atan2(a, b), *shapes, name="Atan2Backward0")
    await check_op(lambda a, b: a.atan2(b), *shapes, requires_grad=[False, True], name="Atan2Backward0")
    await check_gradgrad(lambda lib, a, b: lib.atan2(a, b), *shapes)


CLAMP_SIDES = {
    "clamp_min(number)": (lambda x, y: x.clamp_min(0.2), "ClampMinBackward0", [True, False]),
    "clamp_max(number)": (lambda x, y: x.clamp_max(-0.1), "ClampMaxBackward0", [True, False]),
    "clamp_min(tensor)": (lambda x, y: x.clamp_min(y), "ClampMinBackward1", None),
    "clamp_max(tensor)": (lambda lib, x, y: lib.clamp_max(x, y), "ClampMaxBackward1", None),
}


@pytest.mark.parametrize("case", list(CLAMP_SIDES))
@pytest.mark.parametrize("shapes", BROADCASTS[:2])
async def test_clamp_min_max(case, shapes):
    fn, name, requires = CLAMP_SIDES[case]
    await check_op(fn, *shapes, requires_grad=requires, name=name)
    await check_gradgrad(fn, *shapes, requires_grad=requires)


def test_clamp_min_promotes_as_torch(torch):
    for fn in (lambda lib: lib.tensor([1, 2, 3]).clamp_min(1.5), lambda lib: lib.tensor([1, 2, 3]).clamp_max(2)):
        ours, theirs = fn(helpers.AG), helpers.run_torch(fn)
        assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))
        assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("weight", [0.3, 0.8, "tensor"])
async def test_lerp(weight):
    if weight == "tensor":
        await check_op(lambda lib, a, b, w: lib.lerp(a, b, w), (2, 3), (3,), (2, 1), name="LerpBackward1")
        await check_gradgrad(lambda lib, a, b, w: lib.lerp(a, b, w), (2, 3), (3,), (2, 1))
    else:
        await check_op(lambda a, b: a.lerp(b, weight), (2, 3), (2, 3), name="LerpBackward0")
        await check_gradgrad(lambda a, b: a.lerp(b, weight), (2, 3), (2, 3))


def test_lerp_refusals():
    check_raises(lambda lib: lib.lerp(lib.tensor([1.0], dtype=lib.float64), lib.tensor([2.0]), 0.5), RuntimeError,
                 "expected dtype double for `end` but got dtype float")
    check_raises(lambda lib: lib.lerp(lib.tensor([1]), lib.tensor([2]), 0.5), NotImplementedError,
                 "\"lerp_kernel_scalar\" not implemented for 'Long'")
    check_raises(lambda lib: lib.lerp(lib.tensor([1.0]), lib.tensor([2.0]), lib.tensor([1])), RuntimeError,
                 "expected dtype float for `weight` but got dtype long int")


# fmod and remainder jump where a / b crosses an integer: these values stay 0.1 away from one
MOD_A = np.array([[2.3, -2.3, 0.7], [-4.1, 5.3, -0.4]])
MOD_B = np.array([0.9, 1.3, -0.6])


@pytest.mark.parametrize("op", ["fmod", "remainder"])
async def test_fmod_remainder(op):
    node = "FmodBackward" if op == "fmod" else "RemainderBackward"
    await check_op(lambda a, b: getattr(a, op)(b), MOD_A, MOD_B, name=node + "1")
    await check_op(lambda lib, a: getattr(lib, op)(a, 0.9), MOD_A, name=node + "0")
    await check_gradgrad(lambda a, b: getattr(a, op)(b), MOD_A, MOD_B)


def test_bool_refusals_and_bool_bounds(torch):
    check_raises(lambda lib: lib.fmod(lib.tensor([True]), lib.tensor([True])), NotImplementedError,
                 "\"fmod_cpu\" not implemented for 'Bool'")
    check_raises(lambda lib: lib.tensor([True]).remainder(True), NotImplementedError,
                 "\"remainder_cpu\" not implemented for 'Bool'")
    check_raises(lambda lib: lib.tensor([True]).clamp_max(True), NotImplementedError,
                 "\"clamp_max_scalar_cpu\" not implemented for 'Bool'")
    mask = [True, False, True]
    assert ag_tensor(mask).clamp_min(ag_tensor([False, True, False])).tolist() == torch.tensor(mask).clamp_min(
        torch.tensor([False, True, False])).tolist()


def test_fmod_remainder_values_and_refusals(torch):
    a, b = [5, -5, 7, -7], [3, 3, -2, -2]
    for op in ("fmod", "remainder"):
        assert getattr(ag, op)(ag_tensor(a), ag_tensor(b)).tolist() == getattr(torch, op)(
            torch.tensor(a), torch.tensor(b)).tolist()
        check_raises(lambda lib, op=op: getattr(lib, op)(lib.tensor([1, 2]), 0), RuntimeError, "ZeroDivisionError")
    assert (ag_tensor([5.5, -5.5]) % 2).tolist() == (torch.tensor([5.5, -5.5]) % 2).tolist()
    check_raises(lambda lib: lib.fmod(2.0, lib.tensor([1.0])), TypeError, "argument 'input' .*must be Tensor",
                 torch_same=False)


async def test_copysign():
    b = np.array([[1.0, -2.0, 0.5], [-0.7, 3.0, -1.0]])
    await check_op(lambda a, b: a.copysign(b), (2, 3), b, requires_grad=[True, True], name="CopysignBackward0")
    await check_op(lambda lib, a: lib.copysign(a, -1.0), (2, 3), name="CopysignBackward1")
    await check_gradgrad(lambda a, b: a.copysign(b), (2, 3), b)


async def test_copysign_at_zero_has_no_gradient():
    _, (g,) = await check_op(lambda a: a.copysign(-1.0), np.array([0.0, 1.0, -2.0]), name="CopysignBackward1",
                             fd=False)
    assert g.tolist()[0] == 0.0


COMPARISONS = ["gt", "lt", "ge", "le", "eq", "ne", "greater", "less", "greater_equal", "less_equal", "not_equal"]


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_as_methods_and_functions(op, torch):
    a, b = [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], [2.0, 2.0, 2.0]
    expected = getattr(torch.tensor(a), op)(torch.tensor(b)).tolist()
    assert getattr(ag_tensor(a), op)(ag_tensor(b)).tolist() == expected
    assert getattr(ag, op)(ag_tensor(a), ag_tensor(b)).tolist() == expected
    assert getattr(ag_tensor(a), op)(2).tolist() == getattr(torch.tensor(a), op)(2).tolist()


def test_isclose_allclose_equal(torch):
    a = [1.0, math.nan, math.inf, 1e-9, 100.0]
    b = [1.0 + 1e-6, math.nan, math.inf, 0.0, 100.001]
    for kwargs in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 1e-5}, {"rtol": 1e-4}):
        assert ag.isclose(ag_tensor(a), ag_tensor(b), **kwargs).tolist() == torch.isclose(
            torch.tensor(a), torch.tensor(b), **kwargs).tolist()
        assert ag.allclose(ag_tensor(a), ag_tensor(b), **kwargs) == torch.allclose(
            torch.tensor(a), torch.tensor(b), **kwargs)
    assert ag_tensor([1, 2]).allclose(ag_tensor([1, 2]))
    assert ag.equal(ag_tensor([1.0, 2.0]), ag_tensor([1.0, 2.0])) and not ag.equal(ag_tensor([1.0]), ag_tensor([2.0]))
    assert not ag.equal(ag_tensor([1.0, 2.0]), ag_tensor([[1.0, 2.0]]))
    assert not ag.equal(ag_tensor([math.nan]), ag_tensor([math.nan]))
    assert ag.equal(ag_tensor([1, 2]), ag_tensor([1.0, 2.0])) == torch.equal(torch.tensor([1, 2]),
                                                                          torch.tensor([1.0, 2.0]))
    check_raises(lambda lib: lib.isclose(lib.tensor([1.0], dtype=lib.float64), lib.tensor([1.0])), RuntimeError,
                 "Double did not match Float")


# --------------------------------------------------------------------------- the matmul family
MATMULS = {
    "mm": (lambda a, b: a.mm(b), ((2, 3), (3, 4)), "MmBackward0"),
    "bmm": (lambda lib, a, b: lib.bmm(a, b), ((2, 2, 3), (2, 3, 4)), "BmmBackward0"),
    "dot": (lambda a, b: a.dot(b), ((3,), (3,)), "DotBackward0"),
    "mv": (lambda lib, a, b: lib.mv(a, b), ((2, 3), (3,)), "MvBackward0"),
    "outer": (lambda lib, a, b: lib.outer(a, b), ((2,), (3,)), "MulBackward0"),
}


@pytest.mark.parametrize("op", list(MATMULS))
async def test_matmul_family(op):
    fn, shapes, name = MATMULS[op]
    await check_op(fn, *shapes, name=name)
    await check_gradgrad(fn, *shapes)


ADDMMS = {
    "addmm": (lambda lib, c, a, b: lib.addmm(c, a, b), ((2, 4), (2, 3), (3, 4))),
    "addmm(row, beta, alpha)": (lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=-2.0), ((4,), (2, 3), (3, 4))),
    "Tensor.addmm(beta=0)": (lambda c, a, b: c.addmm(a, b, beta=0), ((1, 4), (2, 3), (3, 4))),
    "baddbmm": (lambda lib, c, a, b: lib.baddbmm(c, a, b, alpha=3.0), ((2, 2, 4), (2, 2, 3), (2, 3, 4))),
    "baddbmm(broadcast)": (lambda c, a, b: c.baddbmm(a, b, beta=2.0), ((2, 4), (2, 2, 3), (2, 3, 4))),
}


@pytest.mark.parametrize("op", list(ADDMMS))
async def test_addmm_baddbmm(op):
    fn, shapes = ADDMMS[op]
    name = "BaddbmmBackward0" if "baddbmm" in op else "AddmmBackward0"
    await check_op(fn, *shapes, name=name)
    await check_gradgrad(fn, *shapes)


def test_addmm_ignores_the_input_when_beta_is_zero(torch):
    c = [[math.nan, math.inf]]

    def fn(lib):
        return lib.addmm(lib.tensor(c), lib.tensor([[1.0], [2.0]]), lib.tensor([[3.0, 4.0]]), beta=0)

    assert fn(helpers.AG).tolist() == helpers.run_torch(fn).tolist()


MATMUL_ERRORS = [
    (lambda lib: lib.mm(lib.ones(3, 3), lib.ones(3)), RuntimeError, "mat2 must be a matrix"),
    (lambda lib: lib.mm(lib.ones(3), lib.ones(3, 3)), RuntimeError, "self must be a matrix"),
    (lambda lib: lib.mm(lib.ones(3, 3), lib.ones(4, 2)), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(3x3 and 4x2\)"),
    (lambda lib: lib.bmm(lib.ones(3, 3), lib.ones(3, 3)), RuntimeError, "batch1 must be a 3D tensor"),
    (lambda lib: lib.bmm(lib.ones(2, 3, 3), lib.ones(3, 3, 3)), RuntimeError,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[3, 3\]."),
    (lambda lib: lib.dot(lib.ones(3, 3), lib.ones(3, 3)), RuntimeError, "1D tensors expected, but got 2D and 2D"),
    (lambda lib: lib.dot(lib.ones(3), lib.ones(4)), RuntimeError, r"inconsistent tensor size, expected tensor \[3\]"),
    (lambda lib: lib.mv(lib.ones(3), lib.ones(3)), RuntimeError, "vector \\+ matrix @ vector expected, got 1, 1, 1"),
    (lambda lib: lib.outer(lib.ones(3, 3), lib.ones(3)), RuntimeError,
     "outer: Expected 1-D argument self, but got 2-D"),
    (lambda lib: lib.addmm(lib.ones(3), lib.ones(3, 3), lib.ones(4, 2)), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(3x3 and 4x2\)"),
    (lambda lib: lib.addmm(lib.ones(3), lib.ones(3), lib.ones(3, 3)), RuntimeError,
     "mat1 must be a matrix, got 1-D tensor"),
    (lambda lib: lib.addmm(lib.ones(4), lib.ones(3, 3), lib.ones(3, 3)), RuntimeError,
     r"The expanded size of the tensor \(3\) must match the existing size \(4\) at non-singleton dimension 1"),
    (lambda lib: lib.addmm(lib.ones(3, dtype=lib.float64), lib.ones(3, 3), lib.ones(3, 3)), RuntimeError,
     "self and mat2 must have the same dtype, but got Double and Float"),
]


@pytest.mark.parametrize("case", range(len(MATMUL_ERRORS)))
def test_matmul_family_errors(case):
    check_raises(*MATMUL_ERRORS[case])


# --------------------------------------------------------------------------- einsum
EINSUMS = {
    "ij,jk->ik": ((2, 3), (3, 4)),
    "ij,jk": ((2, 3), (3, 4)),
    "ii->i": ((3, 3),),
    "ii": ((3, 3),),
    "iij->j": ((3, 3, 2),),
    "ij->": ((2, 3),),
    "ijk->kji": ((2, 3, 4),),
    "ij,ij->ij": ((2, 3), (2, 3)),
    "i,i": ((3,), (3,)),
    "i,j->ij": ((2,), (3,)),
    "ij,k->ik": ((2, 3), (4,)),
    "bij,bjk->bik": ((2, 2, 3), (2, 3, 4)),
    "bij,bjk->bik (broadcast)": ((1, 2, 3), (2, 3, 4)),
    "...ij,...jk": ((2, 2, 3), (3, 4)),
    "i...->...": ((2, 3, 4),),
    "ij,jk,kl->il": ((2, 3), (3, 4), (4, 2)),
    "ii,ij->j": ((3, 3), (3, 2)),
}


@pytest.mark.parametrize("equation", list(EINSUMS))
async def test_einsum(equation):
    """torch's einsum decomposes into views and bmm (grad_fn ViewBackward0, PermuteBackward0...);
    asyncgrad records one EinsumBackward0 (Note [einsum differentiates through einsum])."""
    shapes = EINSUMS[equation]
    eq = equation.split(" ")[0]
    await check_op(lambda lib, *ops: lib.einsum(eq, *ops), *shapes, name="EinsumBackward0", torch_name=False)
    await check_gradgrad(lambda lib, *ops: lib.einsum(eq, *ops), *shapes)


async def test_einsum_takes_a_list():
    await check_op(lambda lib, a, b: lib.einsum("ij,j->i", [a, b]), (2, 3), (3,), name="EinsumBackward0",
                   torch_name=False)


EINSUM_ERRORS = [
    (lambda lib: lib.einsum("ij,jk", lib.ones(2, 3), lib.ones(4, 5)), RuntimeError,
     "einsum\\(\\): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"),
    (lambda lib: lib.einsum("ij,jk", lib.ones(2, 3, 3), lib.ones(3, 5)), RuntimeError,
     r"einsum\(\): the number of subscripts in the equation \(2\) does not match the number of dimensions \(3\) "
     "for operand 0 and no ellipsis was given"),
    (lambda lib: lib.einsum("ij,jk,k", lib.ones(3, 3), lib.ones(3, 5)), RuntimeError,
     "einsum\\(\\): fewer operands were provided than specified in the equation"),
    (lambda lib: lib.einsum("ij", lib.ones(3, 3), lib.ones(3, 5)), RuntimeError,
     "einsum\\(\\): more operands were provided than specified in the equation"),
    (lambda lib: lib.einsum("i1", lib.ones(3, 3)), RuntimeError,
     r"einsum\(\): invalid subscript given at index 1 in the equation string, subscripts must be in \[a-zA-Z\]"),
    (lambda lib: lib.einsum("ij->k", lib.ones(3, 3)), RuntimeError,
     "einsum\\(\\): output subscript k does not appear in the equation for any input operand"),
    (lambda lib: lib.einsum("ij->ii", lib.ones(3, 3)), RuntimeError,
     "einsum\\(\\): output subscript i appears more than once in the output"),
    (lambda lib: lib.einsum("ij,jk", lib.ones(3, 3, dtype=lib.float64), lib.ones(3, 3)), RuntimeError,
     "expected scalar type Double but found Float"),
]


@pytest.mark.parametrize("case", range(len(EINSUM_ERRORS)))
def test_einsum_errors(case):
    check_raises(*EINSUM_ERRORS[case])


# --------------------------------------------------------------------------- cdist
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf, 0.0])
async def test_cdist(p):
    await check_op(lambda lib, a, b: lib.cdist(a, b, p=p), (3, 2), (4, 2), name="CdistBackward0")
    await check_op(lambda lib, a, b: lib.cdist(a, b, p=p), (2, 3, 2), (1, 4, 2), name="CdistBackward0")
    # torch has no derivative of _cdist_backward: second order against finite differences only
    if p == 0:
        # torch's gradient here requires grad, and its backward raises "not implemented"
        await check_constant_gradient(lambda lib, a, b: lib.cdist(a, b, p=p), (3, 2), (4, 2), torch_check=False)
    else:
        await check_gradgrad(lambda lib, a, b: lib.cdist(a, b, p=p), (3, 2), (4, 2), torch_check=False)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, math.inf])
async def test_cdist_gradient_at_zero_distance(p):
    """Rows that coincide: torch's gradient (0 where the distance is 0), not finite differences'."""
    x1 = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 3.0]])
    x2 = np.array([[1.0, 2.0], [0.0, 0.5]])
    _, grads = await check_op(lambda lib, a, b: lib.cdist(a, b, p=p), x1, x2, name="CdistBackward0", fd=False)
    assert all(np.isfinite(g.cpu().numpy()).all() for g in grads)


CDIST_ERRORS = [
    (lambda lib: lib.cdist(lib.ones(3), lib.ones(3, 3)), RuntimeError,
     "cdist only supports at least 2D tensors, X1 got: 1D"),
    (lambda lib: lib.cdist(lib.ones(3, 3), lib.ones(3, 4)), RuntimeError,
     "X1 and X2 must have the same number of columns. X1: 3 X2: 4"),
    (lambda lib: lib.cdist(lib.ones(3, 3, dtype=lib.long), lib.ones(3, 3, dtype=lib.long)), RuntimeError,
     "cdist only supports floating-point dtypes, X1 got: Long"),
    (lambda lib: lib.cdist(lib.ones(3, 3), lib.ones(3, 3), p=-1), RuntimeError,
     "cdist only supports non-negative p values"),
]


@pytest.mark.parametrize("case", range(len(CDIST_ERRORS)))
def test_cdist_errors(case):
    check_raises(*CDIST_ERRORS[case])


# --------------------------------------------------------------------------- norms
NORMS = {
    "norm()": (lambda x: x.norm(), "LinalgVectorNormBackward0"),
    "norm(p=1)": (lambda x: x.norm(p=1), "LinalgVectorNormBackward0"),
    "norm(p=3, dim=1)": (lambda x: x.norm(p=3, dim=1), "LinalgVectorNormBackward0"),
    "norm(p=0.5, dim=0, keepdim)": (lambda x: x.norm(p=0.5, dim=0, keepdim=True), "LinalgVectorNormBackward0"),
    "norm(p=1.5)": (lambda x: x.norm(p=1.5), "LinalgVectorNormBackward0"),
    "norm('fro', dim=(0, 1))": (lambda x: x.norm(p="fro", dim=(0, 1)), "LinalgVectorNormBackward0"),
    "lib.norm(inf)": (lambda lib, x: lib.norm(x, p=math.inf, dim=-1), "LinalgVectorNormBackward0"),
    "vector_norm()": (lambda lib, x: lib.linalg.vector_norm(x), "LinalgVectorNormBackward0"),
    "vector_norm(inf)": (lambda lib, x: lib.linalg.vector_norm(x, math.inf), "LinalgVectorNormBackward0"),
    "vector_norm(-inf, dim)": (lambda lib, x: lib.linalg.vector_norm(x, -math.inf, dim=1), "LinalgVectorNormBackward0"),
    "vector_norm(4, keepdim)": (lambda lib, x: lib.linalg.vector_norm(x, 4, dim=1, keepdim=True),
                                "LinalgVectorNormBackward0"),
    "matrix_norm()": (lambda lib, x: lib.linalg.matrix_norm(x), "LinalgVectorNormBackward0"),
    "matrix_norm(1)": (lambda lib, x: lib.linalg.matrix_norm(x, 1), "AmaxBackward0"),
    "matrix_norm(-1)": (lambda lib, x: lib.linalg.matrix_norm(x, -1), "AminBackward0"),
    "matrix_norm(inf, keepdim)": (lambda lib, x: lib.linalg.matrix_norm(x, math.inf, keepdim=True), "AmaxBackward0"),
    "matrix_norm(-inf)": (lambda lib, x: lib.linalg.matrix_norm(x, -math.inf), "AminBackward0"),
    "linalg.norm()": (lambda lib, x: lib.linalg.norm(x), "LinalgVectorNormBackward0"),
    "linalg.norm(dim=1)": (lambda lib, x: lib.linalg.norm(x, 3, dim=1), "LinalgVectorNormBackward0"),
    "linalg.norm(inf)": (lambda lib, x: lib.linalg.norm(x, math.inf), "AmaxBackward0"),
    "linalg.norm(fro, dim)": (lambda lib, x: lib.linalg.norm(x, "fro", dim=(1, 0)), "LinalgVectorNormBackward0"),
}


PIECEWISE_LINEAR = {"norm(p=1)", "lib.norm(inf)", "vector_norm(inf)", "vector_norm(-inf, dim)", "matrix_norm(1)",
                    "matrix_norm(-1)", "matrix_norm(inf, keepdim)", "matrix_norm(-inf)", "linalg.norm(inf)"}
"""Norms whose second derivative torch returns as a ZeroTensor (which the helpers cannot read):
second order against finite differences only (which the zero must match)."""


@pytest.mark.parametrize("case", list(NORMS))
async def test_norms(case):
    fn, name = NORMS[case]
    await check_op(fn, (3, 4), name=name)
    await check_gradgrad(fn, (3, 4), torch_check=case not in PIECEWISE_LINEAR)


async def test_zero_norm_counts_and_has_no_gradient(torch):
    """torch's norm_backward leaves the 0-norm's gradient undefined: the input counts as unused."""
    values = [[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]]
    for dim in (None, 0, 1):
        expected = torch.linalg.vector_norm(torch.tensor(values), 0, dim=dim)
        assert ag.linalg.vector_norm(ag_tensor(values), 0, dim=dim).tolist() == expected.tolist()

    def fn(lib, x):
        return lib.linalg.vector_norm(x, 0, dim=(0,))

    out = fn(helpers.AG, ag_tensor(values, requires_grad=True))
    assert out.grad_fn.name() == "LinalgVectorNormBackward0"
    await check_undefined_gradient(fn, (3, 4))


async def test_vector_norm_of_a_batch_and_ties():
    await check_op(lambda lib, x: lib.linalg.matrix_norm(x, 1), (2, 3, 3), name="AmaxBackward0")
    ties = np.array([[1.0, -3.0, 3.0], [2.0, 2.0, -1.0]])
    await check_op(lambda lib, x: lib.linalg.vector_norm(x, math.inf), ties, name="LinalgVectorNormBackward0",
                   fd=False)
    await check_op(lambda lib, x: lib.linalg.vector_norm(x, math.inf, dim=1), ties,
                   name="LinalgVectorNormBackward0", fd=False)


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 1.5, math.inf])
async def test_norm_gradient_at_zero(p):
    """Note [Norm gradients at zero]: 0, as torch, where finite differences see a kink."""
    x = np.array([[0.0, 0.0, 0.0], [0.0, 1.5, -2.0]])
    _, (g,) = await check_op(lambda lib, x: lib.linalg.vector_norm(x, p, dim=1), x, name="LinalgVectorNormBackward0",
                             fd=False)
    assert np.isfinite(g.cpu().numpy()).all()


NORM_ERRORS = [
    (lambda lib: lib.linalg.vector_norm(lib.ones(3, dtype=lib.long)), RuntimeError,
     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"),
    (lambda lib: lib.linalg.vector_norm(lib.ones(0, 3), math.inf), RuntimeError,
     "linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation does not have an "
     "identity"),
    (lambda lib: lib.linalg.matrix_norm(lib.ones(3)), RuntimeError,
     "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."),
    (lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3), 3), RuntimeError, "linalg.matrix_norm: Order 3 not supported."),
    (lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3), "abc"), RuntimeError,
     "linalg.matrix_norm: Order abc not supported."),
    (lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3), dim=(0, 0)), RuntimeError,
     r"linalg.matrix_norm: dims must be different. Got \(0, 0\)"),
    (lambda lib: lib.linalg.norm(lib.ones(3, 3, 3), 2), RuntimeError,
     "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."),
    (lambda lib: lib.linalg.norm(lib.ones(3, 3), "fro", dim=0), RuntimeError,
     "linalg.matrix_norm: dim must be a 2-tuple. Got 0"),
]


@pytest.mark.parametrize("case", range(len(NORM_ERRORS)))
def test_norm_errors(case):
    check_raises(*NORM_ERRORS[case])


SINGULAR_VALUE_NORMS = {
    "matrix_norm(nuc)": (lambda lib, x: lib.linalg.matrix_norm(x, "nuc"), "SumBackward1"),
    "matrix_norm(2)": (lambda lib, x: lib.linalg.matrix_norm(x, 2), "AmaxBackward0"),
    "matrix_norm(-2, dim=(2, 0))": (lambda lib, x: lib.linalg.matrix_norm(x, -2, dim=(2, 0)), "AminBackward0"),
    "matrix_norm(nuc, keepdim)": (lambda lib, x: lib.linalg.matrix_norm(x, "nuc", dim=(0, 2), keepdim=True),
                                  "PermuteBackward0"),
    "norm(nuc)": (lambda x: x[0].norm(p="nuc"), "SumBackward1"),
    "svdvals": (lambda lib, x: lib.linalg.svdvals(x), "LinalgSvdBackward0"),
}


@pytest.mark.parametrize("case", list(SINGULAR_VALUE_NORMS))
async def test_singular_value_norms(case):
    """First order here; second order below."""
    fn, name = SINGULAR_VALUE_NORMS[case]
    await check_op(fn, (2, 3, 4), name=name)


async def test_second_order_through_singular_values():
    """svdvals' node keeps U and Vh as outputs (ops/linalg.py), so its second derivative is right."""
    await check_gradgrad(lambda lib, x: lib.linalg.matrix_norm(x, "nuc"), (3, 3))
    await check_gradgrad(lambda lib, x: lib.linalg.matrix_norm(x, 2), (2, 3, 4))


# --------------------------------------------------------------------------- inv, det, slogdet, solve
def _well_conditioned(n: int, batch: tuple[int, ...] = (), seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(batch + (n, n)) * 0.3 + np.eye(n) * 2


LINALG = {
    "inv": (lambda lib, a: lib.linalg.inv(a), (_well_conditioned(3),), "LinalgInvExBackward0"),
    "inv(batch)": (lambda lib, a: lib.linalg.inv(a), (_well_conditioned(2, (2,)),), "LinalgInvExBackward0"),
    "Tensor.inverse": (lambda a: a.inverse(), (_well_conditioned(3),), "LinalgInvExBackward0"),
    "det": (lambda lib, a: lib.linalg.det(a), (_well_conditioned(3),), "LinalgDetBackward0"),
    "det(batch)": (lambda lib, a: lib.linalg.det(a), (_well_conditioned(3, (2,)),), "LinalgDetBackward0"),
    "Tensor.det": (lambda a: a.det(), (_well_conditioned(2) - 2 * np.eye(2),), "LinalgDetBackward0"),
    "slogdet": (lambda lib, a: lib.linalg.slogdet(a).logabsdet, (_well_conditioned(3),), "LinalgSlogdetBackward0"),
    "slogdet(negative)": (lambda lib, a: lib.linalg.slogdet(a)[1], (-_well_conditioned(3),), "LinalgSlogdetBackward0"),
    "solve(vector)": (lambda lib, a, b: lib.linalg.solve(a, b), (_well_conditioned(3), (3,)),
                      "LinalgSolveExBackward0"),
    "solve(matrix)": (lambda lib, a, b: lib.linalg.solve(a, b), (_well_conditioned(3), (3, 2)),
                      "LinalgSolveExBackward0"),
    "solve(batch of vectors)": (lambda lib, a, b: lib.linalg.solve(a, b), (_well_conditioned(3, (2,)), (2, 3)),
                                "LinalgSolveExBackward0"),
    "solve(broadcast)": (lambda lib, a, b: lib.linalg.solve(a, b), (_well_conditioned(3), (2, 3, 2)),
                         "LinalgSolveExBackward0"),
}


@pytest.mark.parametrize("case", list(LINALG))
async def test_linalg(case):
    fn, inputs, name = LINALG[case]
    await check_op(fn, *inputs, name=name)
    await check_gradgrad(fn, *inputs)


async def test_slogdet_sign():
    a = -_well_conditioned(3)
    x = ag_tensor(a, requires_grad=True)
    sign, logabs = ag.linalg.slogdet(x)
    expected_sign, expected_log = np.linalg.slogdet(a)
    assert sign.item() == expected_sign and sign.grad_fn is logabs.grad_fn  # one node, as torch's
    assert (await ag.grad(sign, [x], allow_unused=True)) == (None,)  # torch's: its gradient is undefined
    assert_close(logabs, np.asarray(expected_log), 1e-12, 0, "logabsdet")


@pytest.mark.parametrize("rank", [2, 1, 0])
async def test_det_gradient_of_singular_matrices(rank):
    """The cofactor matrix, as torch's SVD form: nonzero at rank n - 1, zero below it."""
    rng = np.random.default_rng(rank)
    a = (rng.standard_normal((3, rank)) @ rng.standard_normal((rank, 3))) if rank else np.zeros((3, 3))
    _, (g,) = await check_op(lambda lib, a: lib.linalg.det(a), a, name="LinalgDetBackward0", atol=1e-9)
    assert (np.abs(g.cpu().numpy()).max() > 1e-3) == (rank == 2)


async def test_det_second_order_at_a_singular_matrix_is_refused():
    a = ag_tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    (g,) = await ag.grad(ag.linalg.det(a), [a])
    assert_close(g, np.array([[4.0, -2.0], [-2.0, 1.0]]), 0, 1e-12, "cofactors")
    with pytest.raises(NotImplementedError, match="second derivative of det at a singular matrix"):
        await ag.grad(ag.linalg.det(a), [a], create_graph=True)


SINGULAR = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]
LINALG_ERRORS = [
    (lambda lib: lib.linalg.inv(lib.ones(3)), RuntimeError,
     "linalg.inv: The input tensor A must have at least 2 dimensions."),
    (lambda lib: lib.linalg.inv(lib.ones(3, 2)), RuntimeError,
     "linalg.inv: A must be batches of square matrices, but they are 3 by 2 matrices"),
    (lambda lib: lib.linalg.inv(lib.ones(3, 3, dtype=lib.long)), RuntimeError,
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (lambda lib: lib.linalg.inv(lib.tensor(SINGULAR)), RuntimeError,
     "^linalg.inv: The diagonal element 3 is zero, the inversion could not be completed because the input matrix "
     "is singular.$"),
    (lambda lib: lib.linalg.inv(lib.tensor([[0.0, 0.0], [0.0, 1.0]])), RuntimeError,
     "^linalg.inv: The diagonal element 1 is zero"),
    (lambda lib: lib.linalg.inv(lib.tensor([np.eye(3).tolist(), SINGULAR])), RuntimeError,
     r"^linalg.inv: \(Batch element 1\): The diagonal element 3 is zero"),
    (lambda lib: lib.linalg.det(lib.ones(3, 2)), RuntimeError,
     "linalg.det: A must be batches of square matrices, but they are 3 by 2 matrices"),
    (lambda lib: lib.linalg.det(lib.ones(3, 3, dtype=lib.long)), RuntimeError,
     "linalg.det: Expected a floating point or complex tensor as input. Got Long"),
    (lambda lib: lib.linalg.solve(lib.ones(3, 3), lib.ones(4)), RuntimeError,
     r"linalg.solve: Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)"),
    (lambda lib: lib.linalg.solve(lib.ones(3, 3), lib.ones(3, dtype=lib.float64)), RuntimeError,
     "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead"),
    (lambda lib: lib.linalg.solve(lib.ones(3, 3), lib.ones(3)), RuntimeError,
     "torch.linalg.solve: The solver failed because the input matrix is singular."),
    (lambda lib: lib.linalg.solve(lib.ones(3, 2), lib.ones(3)), RuntimeError,
     "linalg.solve: A must be batches of square matrices, but they are 3 by 2 matrices"),
]


@pytest.mark.parametrize("case", range(len(LINALG_ERRORS)))
def test_linalg_errors(case):
    check_raises(*LINALG_ERRORS[case])


def test_singular_matrices_raise_linalg_error(torch):
    with pytest.raises(ag.linalg.LinAlgError):
        ag.linalg.inv(ag_tensor(SINGULAR))
    assert issubclass(ag.linalg.LinAlgError, RuntimeError) and issubclass(torch.linalg.LinAlgError, RuntimeError)


# --------------------------------------------------------------------------- constructors
def test_new_constructors_take_self_dtype_and_device(torch):
    x = ag_tensor([1.0], dtype=ag.float64)
    tx = torch.tensor([1.0], dtype=torch.float64)
    cases = [
        (lambda t: t.new_zeros(2, 3), None), (lambda t: t.new_ones((2,)), None), (lambda t: t.new_empty(4), None),
        (lambda t: t.new_full((2, 2), 7), None), (lambda t: t.new_tensor([1, 2]), None),
        (lambda t: t.new_zeros((2,), dtype=ag.int64), lambda t: t.new_zeros((2,), dtype=torch.int64)),
    ]
    for fn, tfn in cases:
        ours, theirs = fn(x), (tfn or fn)(tx)
        assert ours.device is x.device and ours.shape == tuple(theirs.shape)
        assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))
        if fn is not cases[2][0]:
            assert ours.tolist() == theirs.tolist()
    ones = x.new_ones(2, requires_grad=True)
    assert ones.requires_grad and ones.is_leaf
    assert ag_tensor([1]).new_tensor([1.5, 2]).dtype == ag.int64  # self's dtype, as torch's new_tensor


def test_new_tensor_copies(op_device):
    source = ag_tensor([1.0, 2.0], requires_grad=True)
    copy = source.new_tensor(source)
    assert copy.is_leaf and not copy.requires_grad
    copy.add_(1.0)
    assert source.tolist() == [1.0, 2.0]


def test_as_tensor_shares_memory_where_it_can(op_device):
    x = ag_tensor([1.0, 2.0])
    assert ag.as_tensor(x) is x
    host = np.array([1.0, 2.0])
    shared = ag.as_tensor(host)
    host[0] = 5.0
    assert shared.tolist() == [5.0, 2.0]  # a numpy array on the cpu: no copy
    copied = ag.as_tensor(host, dtype=ag.float32)
    host[0] = 6.0
    assert copied.tolist() == [5.0, 2.0] and copied.dtype == ag.float32
    on_device = ag.as_tensor([1, 2], device=op_device)
    assert on_device.device is ag.device(op_device) and on_device.dtype == ag.int64
    converted = ag.as_tensor(ag_tensor([1.0, 2.0], requires_grad=True), dtype=ag.float64)
    assert converted.dtype == ag.float64 and converted.requires_grad


def test_is_tensor():
    assert ag.is_tensor(ag_tensor([1.0])) and not ag.is_tensor(np.ones(2)) and not ag.is_tensor([1.0])


@pytest.mark.skipif(not has_torch(), reason="compares with torch")
def test_functions_exist_under_torch_names():
    import torch

    for name in ("erf", "erfc", "erfinv", "expm1", "rsqrt", "square", "atan2", "arctan2", "lerp", "fmod", "remainder",
                 "copysign", "clamp_min", "clamp_max", "mm", "bmm", "dot", "mv", "outer", "addmm", "baddbmm", "einsum",
                 "cdist", "norm", "inverse", "det", "slogdet", "isclose", "allclose", "equal", "as_tensor",
                 "is_tensor", "isnan", "isinf", "isfinite", "logit", "greater", "less_equal", "not_equal"):
        assert callable(getattr(ag, name)) and callable(getattr(torch, name)), name
    for name in ("norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve"):
        assert callable(getattr(ag.linalg, name)) and callable(getattr(torch.linalg, name)), name
