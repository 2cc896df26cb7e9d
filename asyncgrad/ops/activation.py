"""Activation functions with torch's fused nodes: gelu, silu, elu, softplus, leaky_relu, mish, hardtanh.

Each forward computes on the device's arrays and records one node named as torch names it; each
backward is written once against ``F`` (Note [Two namespaces for one formula] in ``_node.py``), so
second and higher orders come from the formulas themselves. GELU's exact form needs erf, which
neither the Array API standard nor ``F`` has: its backward goes through ``gelu_backward``, an op
of its own (torch's ``GeluBackwardBackward0``) whose derivative needs only ``exp`` and ``tanh``.
"""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.devices.backend import backend_of
from asyncgrad.ops._node import ArrayMath, OpNode, record
from asyncgrad.tensor import Tensor, scalar_type_name

_SQRT1_2 = 1 / math.sqrt(2.0)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_BETA = math.sqrt(2.0) * (2 / math.sqrt(math.pi)) * 0.5  # sqrt(2 / pi), as torch spells it
_TANH_KAPPA = 0.044715


def _floating(x: Tensor, fn: str, kernel: str) -> None:
    """torch's refusal of an integer or bool input to a float-only activation kernel."""
    tensor_arg(x, fn)
    if x.dtype.kind not in "fc":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(x.dtype)}\'')


def erf_array(xp: Any, x: Any) -> Any:
    """erf on a device array, from the Array API alone (the standard has no erf).

    Note [erf by its positive series]: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)).
    Every term is positive, so the sum has no cancellation and is accurate to a few ulps in
    float64; |x| is capped at 6, beyond which erf is +-1 to double precision, and the number of
    terms (2 x^2 + 40 at the largest |x|) makes the last one negligible against the sum.
    """
    ax = xp.minimum(xp.abs(x), 6.0)
    ax = xp.where(ax == ax, ax, 0.0)  # NaN: its own result is restored below
    x2 = ax * ax
    n_terms = int(2 * float(xp.max(x2)) + 40) if math.prod(x.shape) else 0
    term = ax
    total = ax
    for n in range(1, n_terms):
        term = term * (x2 * (2.0 / (2 * n + 1)))
        total = total + term
    r = xp.minimum(total * xp.exp(-x2) * (2 / math.sqrt(math.pi)), 1.0)
    r = xp.where(x < 0, -r, r)
    return xp.where(x == x, r, x)


# --------------------------------------------------------------------------- gelu
def _gelu_forward(xp: Any, x: Any, approximate: str) -> Any:
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(_TANH_BETA * (x + _TANH_KAPPA * x * x * x)))
    return 0.5 * x * (1 + erf_array(xp, x * _SQRT1_2))


def _gelu_derivative_array(x: Any, approximate: str) -> Any:
    """gelu'(x) on arrays: Phi(x) + x phi(x), or torch's formula for the tanh form."""
    xp = backend_of(x).xp
    if approximate == "tanh":
        inner = _TANH_BETA * (x + _TANH_KAPPA * x * x * x)
        t = xp.tanh(inner)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_BETA * (1 + 3 * _TANH_KAPPA * x * x)
    return 0.5 * (1 + erf_array(xp, x * _SQRT1_2)) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _gelu_second(F: Any, x: Any, approximate: str) -> Any:
    """gelu''(x), from exp and tanh only (so it differentiates again through ``F``)."""
    if approximate == "tanh":
        t = F.tanh(_TANH_BETA * (x + _TANH_KAPPA * x * x * x))
        du = _TANH_BETA * (1 + 3 * _TANH_KAPPA * x * x)
        return (1 - t * t) * (du - x * t * du * du + 3 * _TANH_BETA * _TANH_KAPPA * x * x)
    return F.exp(-0.5 * x * x) * _INV_SQRT_2PI * (2 - x * x)


def _gelu_grad(F: Any, g: Any, x: Any, approximate: str) -> Any:
    """g * gelu'(x): on arrays directly, on tensors as the recorded op ``gelu_backward``."""
    if F is ArrayMath:
        return g * _gelu_derivative_array(x, approximate)
    return gelu_backward(g, x, approximate)


class GeluBackward0(OpNode):
    __slots__ = ("approximate",)
    work_per_element = 40

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (_gelu_grad(F, g, x, self.approximate),)


class GeluBackwardBackward0(OpNode):
    """gelu_backward(g, x) = g * gelu'(x): d/dg = gelu'(x), d/dx = g * gelu''(x)."""

    __slots__ = ("approximate",)
    work_per_element = 40

    def backward(self, F, gg):
        g, x = F.unpack(self)
        return (_gelu_grad(F, gg, x, self.approximate) if self.needs(0) else None,
                gg * g * _gelu_second(F, x, self.approximate) if self.needs(1) else None)


def _approximate(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return approximate


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (``approximate='none'``, erf) or its tanh approximation."""
    _floating(input, "gelu", "GeluKernelImpl")
    approximate = _approximate(approximate)
    out = _gelu_forward(input.device.xp, input.data, approximate)
    return record(GeluBackward0, (input,), out, input.device, approximate, saved=(input,))


def gelu_backward(grad: Tensor, input: Tensor, approximate: str = "none") -> Tensor:
    """torch's ``gelu_backward``: the gradient of gelu at ``input`` times ``grad``, differentiable in both."""
    out = grad.data * _gelu_derivative_array(input.data, _approximate(approximate))
    return record(GeluBackwardBackward0, (grad, input), out, grad.device, approximate, saved=(grad, input))


# --------------------------------------------------------------------------- silu, mish
def _sigmoid(F: Any, x: Any) -> Any:
    """sigmoid from e = exp(-|x|) <= 1: 1 / (1 + e) for x >= 0, e / (1 + e) below, so neither end
    overflows nor loses its relative precision (0.5 tanh(x / 2) + 0.5 would, far below 0)."""
    e = F.exp(-x * F.sign(x))
    return F.where(x >= 0, 1 / (1 + e), e / (1 + e))


class SiluBackward0(OpNode):
    """silu(x) = x sigmoid(x): d/dx = s (1 + x (1 - s))."""

    __slots__ = ()
    work_per_element = 8

    def backward(self, F, g):
        (x,) = F.unpack(self)
        s = _sigmoid(F, x)
        return (g * (s * (1 + x * (1 - s))),)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    _floating(input, "silu", "silu_cpu")
    if inplace:
        return _inplace(input, silu)
    x = input.data
    out = x * _sigmoid(ArrayMath, x)
    return record(SiluBackward0, (input,), out, input.device, saved=(input,))


def _softplus(F: Any, x: Any) -> Any:
    """log(1 + e^x) without overflow: x itself past 20 (where they agree to double precision)."""
    big = x > 20
    return F.where(big, x, F.log1p(F.exp(F.where(big, x * 0, x))))


class MishBackward0(OpNode):
    """mish(x) = x tanh(softplus(x)): d/dx = t + x sigmoid(x) (1 - t^2)."""

    __slots__ = ()
    work_per_element = 12

    def backward(self, F, g):
        (x,) = F.unpack(self)
        t = F.tanh(_softplus(F, x))
        return (g * (t + x * _sigmoid(F, x) * (1 - t * t)),)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    _floating(input, "mish", "mish_cpu")
    if inplace:
        return _inplace(input, mish)
    out = input.data * input.device.xp.tanh(_softplus(ArrayMath, input.data))
    return record(MishBackward0, (input,), out, input.device, saved=(input,))


# --------------------------------------------------------------------------- elu, softplus, leaky_relu, hardtanh
class EluBackward0(OpNode):
    """elu's gradient: ``scale`` where x > 0, else scale * alpha * input_scale * exp(x * input_scale)."""

    __slots__ = ("alpha", "scale", "input_scale")
    work_per_element = 4

    def backward(self, F, g):
        (x,) = F.unpack(self)
        neg = g * (self.scale * self.alpha * self.input_scale) * F.exp(x * self.input_scale)
        return (F.where(x > 0, g * self.scale, neg),)


class CeluBackward0(EluBackward0):
    """celu(x, alpha) = elu(x, alpha, 1, 1 / alpha): elu's formula, under torch's name for it."""

    __slots__ = ()


def _elu(input: Tensor, alpha: float, scale: float, input_scale: float, inplace: bool,
         node: type[EluBackward0] = EluBackward0) -> Tensor:
    _floating(input, "elu", "elu_cpu")
    if inplace:
        return _inplace(input, _elu, alpha, scale, input_scale, False, node)
    xp = input.device.xp
    x = input.data
    neg = (xp.exp(xp.minimum(x, 0.0) * input_scale) - 1) * (scale * alpha)
    out = xp.where(x > 0, x * scale, neg)
    return record(node, (input,), out, input.device, float(alpha), float(scale), float(input_scale), saved=(input,))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _elu(input, alpha, 1.0, 1.0, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """elu with torch's fixed alpha and scale (its node is EluBackward0 too)."""
    return _elu(input, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _elu(input, alpha, 1.0, 1.0 / alpha, inplace, CeluBackward0)


class SoftplusBackward0(OpNode):
    """1 where x * beta > threshold (the linear regime), else sigmoid(x * beta)."""

    __slots__ = ("beta", "threshold")
    work_per_element = 6

    def backward(self, F, g):
        (x,) = F.unpack(self)
        z = x * self.beta
        return (F.where(z > self.threshold, g, g * _sigmoid(F, z)),)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    _floating(input, "softplus", "softplus_cpu")
    xp = input.device.xp
    z = input.data * beta
    linear = z > threshold
    out = xp.where(linear, input.data, xp.log1p(xp.exp(xp.where(linear, 0.0, z))) / beta)
    return record(SoftplusBackward0, (input,), out, input.device, beta, threshold, saved=(input,))


class LeakyReluBackward0(OpNode):
    __slots__ = ("negative_slope",)
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(x > 0, g, g * self.negative_slope),)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    _floating(input, "leaky_relu", "leaky_relu_cpu")
    if inplace:
        return _inplace(input, leaky_relu, negative_slope)
    x = input.data
    out = input.device.xp.where(x > 0, x, x * negative_slope)
    return record(LeakyReluBackward0, (input,), out, input.device, negative_slope, saved=(input,))


class HardtanhBackward0(OpNode):
    """The gradient passes strictly inside (min_val, max_val) (torch's hardtanh_backward)."""

    __slots__ = ("min_val", "max_val")
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        zero = g * 0
        return (F.where(x <= self.min_val, zero, F.where(x >= self.max_val, zero, g)),)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    tensor_arg(input, "hardtanh")
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return _inplace(input, hardtanh, min_val, max_val)
    xp = input.device.xp
    out = xp.clip(input.data, min_val, max_val) if input.dtype.kind in "fc" else xp.clip(
        input.data, int(min_val), int(max_val))
    return record(HardtanhBackward0, (input,), out, input.device, min_val, max_val, saved=(input,))


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def _inplace(input: Tensor, fn: Any, *args: Any) -> Tensor:
    """``inplace=True``: the activation of a clone written back into ``input`` (a leaf that requires
    grad is refused by ``copy_``, as by torch). The node saves the clone, which nothing changes, so
    overwriting ``input`` leaves its backward valid, to any order."""
    return input.copy_(fn(input.clone(), *args))
