"""The two-operand rows of the binary table that came with torch's OpInfo database: true_divide,
floor_divide (and ``//``), rsub, fmax, fmin, ldexp, logaddexp, logaddexp2, nextafter, xlogy, and div's
``rounding_mode``; values and gradients against torch and finite differences, first and second order,
broadcasting and 0-d operands, number operands, in-place forms and torch's refusals (an op module:
cpu and sim:0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises, torch_defaults

import asyncgrad as ag

# name: (function, torch's node name, input range)
BINARY = {
    "true_divide": (lambda lib, a, b: lib.true_divide(a, b), "DivBackward0", (0.5, 3.0)),
    "true_divide method": (lambda a, b: a.true_divide(b), "DivBackward0", (0.5, 3.0)),
    "rsub": (lambda lib, a, b: lib.rsub(a, b), "RsubBackward0", (-2.0, 2.0)),
    "rsub alpha": (lambda lib, a, b: lib.rsub(a, b, alpha=2.5), "RsubBackward0", (-2.0, 2.0)),
    "fmax": (lambda lib, a, b: lib.fmax(a, b), "FmaxBackward0", (-2.0, 2.0)),
    "fmin": (lambda a, b: a.fmin(b), "FminBackward0", (-2.0, 2.0)),
    "ldexp": (lambda lib, a, b: lib.ldexp(a, b), "LdexpBackward0", (-2.0, 2.0)),
    "logaddexp": (lambda lib, a, b: lib.logaddexp(a, b), "LogaddexpBackward0", (-3.0, 3.0)),
    "logaddexp2": (lambda a, b: a.logaddexp2(b), "Logaddexp2Backward0", (-3.0, 3.0)),
    "nextafter": (lambda lib, a, b: lib.nextafter(a, b), "NextafterBackward0", (-2.0, 2.0)),
    "xlogy": (lambda lib, a, b: lib.xlogy(a, b), "XlogyBackward0", (0.2, 3.0)),
    "xlogy method": (lambda a, b: a.xlogy(b), "XlogyBackward0", (0.2, 3.0)),
}


@pytest.mark.parametrize("op", list(BINARY))
async def test_values_and_gradients_broadcast_and_0d(op):
    fn, name, (low, high) = BINARY[op]
    await check_op(fn, (3, 4), (4,), name=name, low=low, high=high)
    await check_op(fn, (2, 1), (3,), name=name, low=low, high=high)
    await check_op(fn, (), (3,), name=name, low=low, high=high)


@pytest.mark.parametrize("op", ["true_divide", "rsub alpha", "fmax", "ldexp", "logaddexp", "logaddexp2", "xlogy"])
async def test_second_order(op):
    fn, _, (low, high) = BINARY[op]
    await check_gradgrad(fn, (2, 3), (3,), low=low, high=high, fd_rtol=1e-4)


async def test_ldexp_of_an_integer_exponent():
    exponents = np.array([[1, 0, 3]], dtype=np.int64)
    await check_op(lambda lib, a, b: lib.ldexp(a, b), (2, 3), exponents, name="LdexpBackward0")
    await check_gradgrad(lambda lib, a, b: lib.ldexp(a, b), (2, 3), exponents)
    # torch's formula takes pow(2, other) in the exponent's integer dtype, which is 0 for a negative
    # exponent; asyncgrad's gradient is the derivative of its forward, 2.0 ** other
    await check_op(lambda lib, a, b: lib.ldexp(a, b), (2, 3), np.array([-2, 0, -1]), torch_check=False)


async def test_xlogy_with_a_number_side():
    await check_op(lambda lib, y: lib.xlogy(2.5, y), (3, 2), name="XlogyBackward1", low=0.2, high=3.0)
    await check_op(lambda lib, x: lib.xlogy(x, 1.5), (3, 2), name="XlogyBackward2", low=-2.0, high=2.0)
    await check_op(lambda lib, x: lib.special.xlogy(x, 0.5), (4,), name="XlogyBackward2", low=-2.0, high=2.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # y = 0: y's gradient x / y is inf or NaN, as torch's
async def test_xlogy_at_zero_and_nan(torch):
    """torch's convention: 0 where x is 0 unless y is NaN, and x's gradient 0 where x is 0 and y <= 0."""
    x = np.array([0.0, 0.0, 0.0, 2.0, 0.0, -1.0])
    y = np.array([0.0, -1.0, math.nan, 0.0, 3.0, -2.0])
    a, b = ag_tensor(x, requires_grad=True), ag_tensor(y, requires_grad=True)
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    out, tout = ag.xlogy(a, b), torch.xlogy(ta, tb)
    assert_close(out, tout, 0, 0, "xlogy")
    v = np.arange(1.0, 7.0)
    got = await ag.grad(out, [a, b], ag_tensor(v))
    expected = torch.autograd.grad(tout, [ta, tb], torch.tensor(v))
    for g, t, what in zip(got, expected, ("x", "y")):
        assert_close(g, t, 1e-12, 0, f"xlogy's gradient for {what}")


async def test_fmax_and_fmin_with_nan_and_ties(torch):
    """NaN gives way to the other side (NaN only where both are), and a tie's gradient goes to the first."""
    x = np.array([1.0, math.nan, 2.0, math.nan, 3.0, -1.0])
    y = np.array([1.0, 2.0, math.nan, math.nan, -3.0, 4.0])
    for name in ("fmax", "fmin"):
        a, b = ag_tensor(x, requires_grad=True), ag_tensor(y, requires_grad=True)
        ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
        out, tout = getattr(ag, name)(a, b), getattr(torch, name)(ta, tb)
        assert_close(out, tout, 0, 0, name)
        v = np.arange(1.0, 7.0)
        got = await ag.grad(out, [a, b], ag_tensor(v))
        expected = torch.autograd.grad(tout, [ta, tb], torch.tensor(v))
        for g, t in zip(got, expected):
            assert_close(g, t, 0, 0, f"{name}'s gradient")


def test_logaddexp_of_infinities_and_large_gaps(torch):
    x = np.array([math.inf, -math.inf, -math.inf, 800.0, -800.0, 0.0])
    y = np.array([math.inf, -math.inf, 1.0, -800.0, -801.0, 1e-300])
    for name in ("logaddexp", "logaddexp2"):
        got = getattr(ag, name)(ag_tensor(x), ag_tensor(y))
        assert_close(got, getattr(torch, name)(torch.tensor(x), torch.tensor(y)), 1e-15, 0, name)


def test_integer_and_bool_operands(torch):
    """Dtypes as torch's: fmax/fmin keep integers and bools, ldexp and xlogy compute integers in the
    default float dtype, rsub and true_divide promote as sub and div."""
    i = np.array([3, -1, 4])
    f = np.array([0.5, 2.0, 1.5], dtype=np.float32)
    bools = np.array([True, False, True])
    cases = [
        lambda lib, t: lib.fmax(t(i), t(i[::-1].copy())),
        lambda lib, t: lib.fmin(t(bools), t(~bools)),
        lambda lib, t: lib.fmax(t(f), t(i)),
        lambda lib, t: lib.ldexp(t(i), t(i)),
        lambda lib, t: lib.ldexp(t(bools), t(bools)),
        lambda lib, t: lib.xlogy(t(i), t(np.abs(i))),
        lambda lib, t: lib.xlogy(2, t(np.abs(i))),
        lambda lib, t: lib.xlogy(t(bools), t(bools)),
        lambda lib, t: lib.rsub(t(i), t(i * 2)),
        lambda lib, t: lib.rsub(t(f), 2, alpha=3),
        lambda lib, t: lib.true_divide(t(i), t(np.array([2, 4, -3]))),
        lambda lib, t: lib.nextafter(t(f), t(np.float64(1.0) * f)),
    ]
    for case in cases:
        got = case(ag, lambda a: ag_tensor(a))
        with torch_defaults():
            expected = case(torch, torch.tensor)
        assert got.dtype.name == str(expected.dtype).removeprefix("torch."), (got.dtype, expected.dtype)
        assert_close(got, expected, 1e-6, 0, "value")


def test_refusals_are_torchs():
    for name in ("fmax", "fmin", "logaddexp", "logaddexp2", "nextafter"):
        check_raises(lambda lib, name=name: getattr(lib, name)(lib.ones(2), 2.0), TypeError,
                     rf"{name}\(\): argument 'other' \(position 2\) must be Tensor, not float")
    check_raises(lambda lib: lib.ldexp(2.0, lib.ones(2)), TypeError,
                 r"ldexp\(\): argument 'input' \(position 1\) must be Tensor, not float")
    check_raises(lambda lib: lib.logaddexp(lib.ones(2, dtype=lib.int64), lib.ones(2, dtype=lib.int64)),
                 NotImplementedError, "\"logaddexp_cpu\" not implemented for 'Long'")
    check_raises(lambda lib: lib.nextafter(lib.ones(2, dtype=lib.bool), lib.ones(2, dtype=lib.bool)),
                 NotImplementedError, "\"nextafter_cpu\" not implemented for 'Bool'")
    check_raises(lambda lib: lib.rsub(lib.ones(2, dtype=lib.bool), lib.ones(2, dtype=lib.bool)), RuntimeError,
                 "Subtraction, the `-` operator, with two bool tensors is not supported")
    check_raises(lambda lib: lib.fmax(lib.ones(2), lib.ones(3)), RuntimeError,
                 r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0")
    assert not hasattr(ag.Tensor, "rsub")  # torch.rsub only


async def test_rsub_of_a_number_and_the_reflected_operator():
    await check_op(lambda lib, x: lib.rsub(x, 2.0, alpha=3), (3,), name="RsubBackward1")
    await check_op(lambda x: 2.0 - x, (3,), name="RsubBackward1")
    await check_op(lambda x, y: x.__rsub__(y), (3,), (2, 3), name="RsubBackward0")


DIVIDENDS = np.array([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 6.0, 1.0, -1.0, math.inf])
DIVISORS = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 0.0, -0.0, 0.0, 2.0])


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_modes_values(torch, mode):
    """Floats round the true quotient (a zero divisor gives inf/NaN, signed zeros as torch's);
    integers stay integers, and an integer division by zero is refused."""
    for a, b in ((DIVIDENDS, DIVISORS), (DIVIDENDS[:6].astype(np.int64), DIVISORS[:6].astype(np.int64))):
        got = ag.div(ag_tensor(a), ag_tensor(b), rounding_mode=mode)
        expected = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode)
        assert got.dtype.name == str(expected.dtype).removeprefix("torch.")
        assert np.array_equal(got.cpu().numpy(), expected.cpu().numpy(), equal_nan=True)
        assert np.array_equal(np.signbit(got.cpu().numpy()), np.signbit(expected.cpu().numpy()))
    for number in (2, -3, 2.5):
        got = ag_tensor(DIVIDENDS[:6]).div(number, rounding_mode=mode)
        expected = torch.tensor(DIVIDENDS[:6]).div(number, rounding_mode=mode)
        assert np.array_equal(got.cpu().numpy(), expected.cpu().numpy())
    check_raises(lambda lib: lib.div(lib.tensor([3, 4]), 0, rounding_mode=mode), RuntimeError, "ZeroDivisionError")
    check_raises(lambda lib: lib.div(lib.tensor([True]), lib.tensor([True]), rounding_mode=mode),
                 NotImplementedError, f"\"div_{mode}_cpu\" not implemented for 'Bool'")


EDGES = [7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 0.5, 3.0, -3.0]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_floor_division_of_floats_is_torchs_on_every_pair(torch, dtype):
    """Every pair of edge values (signed zeros, infinities, NaN, huge and tiny), tensor by tensor and
    with a number on either side: torch's values and zero signs, on every device (CuPy's own
    floor_divide gives inf for inf // 2, where torch gives NaN)."""
    info = np.finfo(dtype)
    edges = np.array(EDGES + [float(info.max), -float(info.tiny), float(info.smallest_subnormal)], dtype=dtype)
    a, b = np.meshgrid(edges, edges)
    pairs = [(ag.div(ag_tensor(a), ag_tensor(b), rounding_mode="floor"),
              torch.div(torch.tensor(a), torch.tensor(b), rounding_mode="floor"))]
    for number in (2.0, -3.0, 0.0, -0.0, 7):
        pairs.append((ag_tensor(a).div(number, rounding_mode="floor"),
                      torch.tensor(a).div(number, rounding_mode="floor")))
        pairs.append((number // ag_tensor(b), number // torch.tensor(b)))
    for got, expected in pairs:
        got, expected = got.cpu().numpy(), expected.numpy()
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected, equal_nan=True)
        numbers = ~np.isnan(expected)
        assert np.array_equal(np.signbit(got)[numbers], np.signbit(expected)[numbers])


def test_div_refuses_another_rounding_mode():
    check_raises(lambda lib: lib.div(lib.ones(2), 2, rounding_mode="round"), RuntimeError,
                 "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
async def test_div_rounding_modes_gradient_is_zero(mode):
    await check_op(lambda lib, a, b: lib.div(a, b, rounding_mode=mode), (3, 4), (4,), name="DivBackward2",
                   low=0.5, high=3.0, fd=False)
    x = ag_tensor(np.array([1.5, -2.5]), requires_grad=True)
    (g,) = await ag.grad(x.div(2.0, rounding_mode=mode).sum(), [x])
    assert np.array_equal(g.cpu().numpy(), [0.0, 0.0])


async def test_floor_divide_is_recorded_without_a_derivative(torch):
    a = np.array([7.0, -7.0, 7.5, 0.5])
    x = ag_tensor(a, requires_grad=True)
    for got, expected in ((ag.floor_divide(x, 2), torch.floor_divide(torch.tensor(a), 2)),
                          (x // -2.0, torch.tensor(a) // -2.0), (9 // x, 9 // torch.tensor(a))):
        assert np.array_equal(got.detach().cpu().numpy(), expected.cpu().numpy())
        assert got.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="the derivative for 'floor_divide' is not implemented"):
        await ag.grad((x // 2).sum(), [x])
    ints = ag.tensor([7, -7, 5])
    assert (ints // 2).tolist() == [3, -4, 2] and (ints // ag.tensor([2, 2, -2])).tolist() == [3, -4, -3]


@pytest.mark.parametrize("case", [
    ("true_divide_", (ag_tensor, np.array([2.0, 4.0, -0.5]))),
    ("floor_divide_", (ag_tensor, np.array([2.0, -4.0, 0.5]))),
    ("ldexp_", (ag_tensor, np.array([1, -2, 3]))),
    ("nextafter_", (ag_tensor, np.array([0.0, 9.0, 1.0]))),
    ("xlogy_", (ag_tensor, np.array([0.5, 2.0, 1.0]))),
])
def test_in_place_forms(torch, case):
    name, (make, other) = case
    a = np.array([1.5, -3.0, 0.0])
    x = ag_tensor(a)
    t = torch.tensor(a)
    assert getattr(x, name)(make(other)) is x
    getattr(t, name)(torch.tensor(other))
    assert_close(x, t, 1e-15, 0, name)
    assert x._version == 1


def test_augmented_floor_division_and_div_with_a_mode_in_place(torch):
    x = ag_tensor(np.array([7.0, -7.0]))
    x //= 2
    x.div_(2, rounding_mode="trunc")
    t = torch.tensor([7.0, -7.0])
    t //= 2
    t.div_(2, rounding_mode="trunc")
    assert np.array_equal(x.cpu().numpy(), t.cpu().numpy())
    assert not hasattr(ag.Tensor, "fmax_") and not hasattr(ag.Tensor, "logaddexp_")  # none in torch either


def test_the_functions_are_the_tables_rows():
    assert AG.special.xlogy is ag.xlogy
    assert ag.true_divide.__name__ == "true_divide"
