"""Activation functions with torch's fused nodes: gelu, silu, elu, softplus, leaky_relu, mish, hardtanh.

Each forward computes on the device's arrays and records one node named as torch names it; each
backward is written once against ``F`` (Note [Two namespaces for one formula] in ``_node.py``), so
second and higher orders come from the formulas themselves. GELU's exact form needs erf (the
backend's ``erf``: the Array API standard has none): its backward goes through ``gelu_backward``,
an op of its own (torch's ``GeluBackwardBackward0``) whose derivative needs only ``exp`` and ``tanh``.
"""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.devices.backend import backend_of
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record
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


# --------------------------------------------------------------------------- gelu
def _gelu_cdf(xp: Any, x: Any, approximate: str) -> Any:
    """gelu(x) = x * cdf(x): Phi(x) (erf), or 0.5 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    if approximate == "tanh":
        return 0.5 * (1 + xp.tanh(_TANH_BETA * (x + _TANH_KAPPA * x * x * x)))
    return 0.5 * (1 + backend_of(x).erf(x * _SQRT1_2))


def _gelu_derivative_array(x: Any, approximate: str, cdf: Any = None) -> Any:
    """gelu'(x) on arrays: Phi(x) + x phi(x), or torch's formula for the tanh form; ``cdf``: the
    forward's, where it kept it (erf is the costly part)."""
    xp = backend_of(x).xp
    if cdf is None:
        cdf = _gelu_cdf(xp, x, approximate)
    if approximate == "tanh":
        t = 2 * cdf - 1
        return cdf + 0.5 * x * (1 - t * t) * _TANH_BETA * (1 + 3 * _TANH_KAPPA * x * x)
    return cdf + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _gelu_second(F: Any, x: Any, approximate: str) -> Any:
    """gelu''(x), from exp and tanh only (so it differentiates again through ``F``)."""
    if approximate == "tanh":
        t = F.tanh(_TANH_BETA * (x + _TANH_KAPPA * x * x * x))
        du = _TANH_BETA * (1 + 3 * _TANH_KAPPA * x * x)
        return (1 - t * t) * (du - x * t * du * du + 3 * _TANH_BETA * _TANH_KAPPA * x * x)
    return F.exp(-0.5 * x * x) * _INV_SQRT_2PI * (2 - x * x)


def _gelu_grad(F: Any, g: Any, x: Any, approximate: str, cdf: Any = None) -> Any:
    """g * gelu'(x): on arrays directly (from the forward's ``cdf`` where given), on tensors as
    the recorded op ``gelu_backward``, whose own derivative needs no erf."""
    if F is ArrayMath:
        return g * _gelu_derivative_array(x, approximate, cdf)
    return gelu_backward(g, x, approximate)


class GeluBackward0(OpNode):
    """Saves the input and, beside it, the forward's cdf (a constant: the first-order formula
    reuses it instead of a second erf; the recorded backward recomputes from the input)."""

    __slots__ = ("approximate",)
    work_per_element = 12

    def backward(self, F, g):
        x, cdf = F.unpack(self)
        return (_gelu_grad(F, g, x, self.approximate, cdf),)


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
    dev = input.device
    cdf = _gelu_cdf(dev.xp, input.data, approximate)
    return record(GeluBackward0, (input,), input.data * cdf, dev, approximate, saved=(input, plain(cdf, dev)))


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


# --------------------------------------------------------------------------- hardsigmoid, hardswish, logsigmoid, prelu
class HardsigmoidBackward0(OpNode):
    """1/6 strictly inside (-3, 3), else 0 (torch's hardsigmoid_backward)."""

    __slots__ = ()
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        zero = g * 0
        return (F.where(x <= -3, zero, F.where(x >= 3, zero, g * (1 / 6))),)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    _floating(input, "hardsigmoid", "hardsigmoid_cpu")
    if inplace:
        return _inplace(input, hardsigmoid)
    out = input.device.xp.clip(input.data + 3, 0.0, 6.0) / 6
    return record(HardsigmoidBackward0, (input,), out, input.device, saved=(input,))


class HardswishBackward0(OpNode):
    """0 below -3, x / 3 + 1/2 up to 3, 1 above (torch's hardswish_backward)."""

    __slots__ = ()
    work_per_element = 4

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(x < -3, g * 0, F.where(x <= 3, g * (x * (1 / 3) + 0.5), g)),)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    _floating(input, "hardswish", "hardswish_cpu")
    if inplace:
        return _inplace(input, hardswish)
    x = input.data
    out = x * input.device.xp.clip(x + 3, 0.0, 6.0) / 6
    return record(HardswishBackward0, (input,), out, input.device, saved=(input,))


class LogSigmoidBackward0(OpNode):
    """log(sigmoid(x)) = -softplus(-x): d/dx = sigmoid(-x)."""

    __slots__ = ()
    work_per_element = 6

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * _sigmoid(F, -x),)


def logsigmoid(input: Tensor) -> Tensor:
    _floating(input, "log_sigmoid_forward", "log_sigmoid_forward_cpu")
    out = -_softplus(ArrayMath, -input.data)
    return record(LogSigmoidBackward0, (input,), out, input.device, saved=(input,))


class PreluKernelBackward0(OpNode):
    """prelu(x, w) = x where x > 0, else w x (w per channel, dim 1): d/dx = 1 or w, d/dw = the sum of
    x g over the non-positive x of each channel."""

    __slots__ = ("w_view", "w_shape")
    work_per_element = 4

    def backward(self, F, g):
        x, w = F.unpack(self)
        wb = F.reshape(w, self.w_view)
        positive = x > 0
        gx = F.where(positive, g, g * wb) if self.needs(0) else None
        gw = None
        if self.needs(1):
            gw = F.reshape(F.sum_to(F.where(positive, g * 0, g * x), self.w_view), self.w_shape)
        return gx, gw


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """torch's prelu: ``weight`` holds one slope, or one per channel (dim 1 of the input)."""
    tensor_arg(input, "prelu", "input", 1)
    tensor_arg(weight, "prelu", "weight", 2)
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {channels}.")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {scalar_type_name(input.dtype)} and "
                           f"{scalar_type_name(weight.dtype)}")
    dev = input.device
    if weight.device is not dev:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           f"{dev} and {weight.device}!")
    view = (1, weight.numel()) + (1,) * (input.ndim - 2) if input.ndim >= 2 and weight.numel() > 1 else (1,) * max(
        input.ndim, 1)
    if input.ndim == 0:
        view = ()
    x = input.data
    w = dev.xp.reshape(weight.data, view)
    out = dev.xp.where(x > 0, x, x * w)
    return record(PreluKernelBackward0, (input, weight), out, dev, view, tuple(weight.shape), saved=(input, weight))
