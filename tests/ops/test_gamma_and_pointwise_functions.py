"""The rest of torch's pointwise math: inverse hyperbolics, angle conversions, frac, sinc, sgn, the
gamma family (lgamma, digamma, polygamma, mvlgamma), i0 and nan_to_num; values and gradients
against torch and finite differences, first and second order, on cpu and sim:0 (an op module)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import AG, ag_tensor, assert_close, check_gradgrad, check_op, check_raises

import asyncgrad as ag

# name: (function, torch's node name, input range)
UNARY = {
    "acosh": (lambda lib, x: lib.acosh(x), "AcoshBackward0", (1.2, 4.0)),
    "asinh": (lambda lib, x: lib.asinh(x), "AsinhBackward0", (-3.0, 3.0)),
    "atanh": (lambda lib, x: lib.atanh(x), "AtanhBackward0", (-0.9, 0.9)),
    "deg2rad": (lambda lib, x: lib.deg2rad(x), "Deg2RadBackward0", (-200.0, 200.0)),
    "rad2deg": (lambda lib, x: lib.rad2deg(x), "Rad2DegBackward0", (-4.0, 4.0)),
    "frac": (lambda x: x.frac(), "FracBackward0", (-3.3, 3.3)),
    "sinc": (lambda lib, x: lib.sinc(x), "SincBackward0", (-3.0, 3.0)),
    "lgamma": (lambda lib, x: lib.lgamma(x), "LgammaBackward0", (0.1, 9.0)),
    "lgamma negative": (lambda x: x.lgamma(), "LgammaBackward0", (-2.9, -2.1)),
    "digamma": (lambda lib, x: lib.digamma(x), "DigammaBackward0", (0.2, 12.0)),
    "digamma negative": (lambda x: x.digamma(), "DigammaBackward0", (-1.8, -1.2)),
    "i0": (lambda lib, x: lib.i0(x), "I0Backward0", (-12.0, 12.0)),
    "polygamma 1": (lambda lib, x: lib.polygamma(1, x), "PolygammaBackward0", (0.3, 12.0)),
    "polygamma 3": (lambda x: x.polygamma(3), "PolygammaBackward0", (0.3, 5.0)),
    "polygamma 2 negative": (lambda lib, x: lib.polygamma(2, x), "PolygammaBackward0", (-3.8, -3.2)),
    "mvlgamma": (lambda lib, x: lib.mvlgamma(x, 3), "MvlgammaBackward0", (1.2, 6.0)),
    "nan_to_num": (lambda lib, x: lib.nan_to_num(x), "NanToNumBackward0", (-2.0, 2.0)),
}


@pytest.mark.parametrize("op", list(UNARY))
async def test_unary_values_and_gradients(op):
    fn, name, (low, high) = UNARY[op]
    await check_op(fn, (3, 4), name=name, low=low, high=high)
    await check_op(fn, (), name=name, low=low, high=high)  # 0-d


@pytest.mark.parametrize("op", ["acosh", "atanh", "sinc", "lgamma", "digamma", "i0", "polygamma 1", "mvlgamma"])
async def test_unary_second_order(op):
    fn, _, (low, high) = UNARY[op]
    await check_gradgrad(fn, (2, 3), low=low, high=high, fd_rtol=1e-4)


async def test_empty_tensors():
    for fn, name, _ in UNARY.values():
        x = ag_tensor(np.zeros((0, 3)), requires_grad=True)
        out = fn(ag, x) if fn.__code__.co_varnames[0] == "lib" else fn(x)
        assert out.shape == (0, 3) and out.grad_fn.name() == name
        (g,) = await ag.grad(out.sum(), [x])
        assert g.shape == (0, 3)


def test_sinc_and_sgn_at_zero(torch):
    x = np.array([-2.0, 0.0, 0.5])
    for name in ("sinc", "sgn"):
        a = ag_tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        ya, yt = getattr(ag, name)(a), getattr(torch, name)(t)
        assert_close(ya, yt, 0, 1e-15, name)
        v = np.array([1.0, 2.0, 3.0])
        (ga,) = ag.grad_sync(ya, [a], ag_tensor(v))
        (gt,) = torch.autograd.grad(yt, [t], torch.tensor(v))
        gt = torch.zeros_like(t) if gt._is_zerotensor() else gt  # sgn's formula gives torch's lazy zeros
        assert_close(ga, gt, 1e-12, 1e-15, f"{name}'s gradient")
        assert ya.grad_fn.name() == yt.grad_fn.name()


def test_gamma_functions_at_their_poles(torch):
    """torch's values where the functions blow up: lgamma +inf at 0 and the negative integers (and
    exactly 0 at 1 and 2), digamma -inf at +0, +inf at -0 and NaN at the negative integers,
    polygamma(1) +inf at 0 (torch's trigamma gives a rounding error's finite value at the negative
    integers, asyncgrad the pole's inf)."""
    x = np.array([0.0, -0.0, -1.0, -3.0, 1.0, 2.0])
    for fn in (lambda lib, t: lib.lgamma(t), lambda lib, t: lib.digamma(t)):
        assert_close(fn(AG, ag_tensor(x)), fn(torch, torch.tensor(x)), 1e-13, 0, "pole values")
    x = np.array([0.0, 1.0, 2.0])
    # torch's trigamma series is good to about 1e-9 (π²/6 at 1: 1.64493406765 for 1.64493406685)
    assert_close(ag.polygamma(1, ag_tensor(x)), torch.polygamma(1, torch.tensor(x)), 1e-8, 0, "trigamma")
    assert_close(ag.polygamma(1, ag_tensor(x[1:])), np.array([math.pi ** 2 / 6, math.pi ** 2 / 6 - 1]), 1e-15, 0,
                 "trigamma's exact values")
    assert ag.polygamma(1, ag_tensor([-1.0, -3.0])).tolist() == [math.inf, math.inf]


def test_integer_inputs_compute_in_the_default_float_dtype(torch):
    for name in ("acosh", "asinh", "deg2rad", "rad2deg", "sinc", "lgamma", "digamma", "i0"):
        assert getattr(ag, name)(ag.tensor([1, 2])).dtype == ag.float32
        assert getattr(ag, name)(ag.tensor([True])).dtype == ag.float32
    assert ag.polygamma(1, ag.tensor([1, 2])).dtype == ag.float32
    assert ag.sgn(ag.tensor([-2, 0, 3])).tolist() == [-1, 0, 1]
    assert ag.nan_to_num(ag.tensor([1, 2])).dtype == ag.int64


def test_float32_keeps_its_dtype_and_precision(torch):
    x = np.linspace(0.5, 6.0, 7, dtype=np.float32)
    for name in ("lgamma", "digamma", "i0"):
        out = getattr(ag, name)(ag.tensor(x))
        assert out.dtype == ag.float32
        assert_close(out, getattr(torch, name)(torch.tensor(x)), 1e-6, 1e-6, name)


def test_nan_to_num_arguments(torch):
    x = np.array([math.nan, math.inf, -math.inf, 1.5])
    for kwargs in ({}, {"nan": 2.0}, {"posinf": 9.0, "neginf": -9.0}, {"nan": -1.0, "posinf": 3.0}):
        a = ag_tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        ya, yt = ag.nan_to_num(a, **kwargs), torch.nan_to_num(t, **kwargs)
        assert_close(ya, yt, 0, 0, str(kwargs))
        assert_close(ag.grad_sync(ya.sum(), [a])[0], torch.autograd.grad(yt.sum(), [t])[0], 0, 0, "gradient")
    assert_close(ag_tensor(x).nan_to_num(0.5), torch.tensor(x).nan_to_num(0.5), 0, 0, "method")


def test_positive_is_its_input_and_refuses_bool():
    x = ag.tensor([1.0, -2.0], requires_grad=True)
    assert ag.positive(x) is x and x.positive() is x
    check_raises(lambda lib: lib.positive(lib.tensor([True])), RuntimeError,
                 "The `\\+` operator, on a bool tensor is not supported.")


def test_errors_in_torchs_words():
    check_raises(lambda lib: lib.frac(lib.tensor([1, 2])), NotImplementedError,
                 "\"frac_cpu\" not implemented for 'Long'")
    check_raises(lambda lib: lib.polygamma(-1, lib.tensor([1.0])), RuntimeError,
                 r"polygamma\(n, x\) does not support negative n.")
    check_raises(lambda lib: lib.mvlgamma(lib.tensor([2.0]), 0), RuntimeError,
                 "p has to be greater than or equal to 1")


def test_inplace_forms(torch):
    x = np.array([1.5, 2.5, 3.5])
    for name in ("acosh", "lgamma", "digamma", "sinc", "i0", "deg2rad"):
        a = ag_tensor(x)
        getattr(a, name + "_")()
        assert_close(a, getattr(torch.tensor(x), name)(), 1e-14, 0, name + "_")
    a = ag_tensor(x)
    a.polygamma_(2)
    assert_close(a, torch.tensor(x).polygamma(2), 1e-14, 0, "polygamma_")
