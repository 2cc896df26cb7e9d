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

import numpy as np

from asyncgrad._validate import normalize_dim, tensor_arg
from asyncgrad.devices.backend import backend_of
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record
from asyncgrad.ops.inplace import apply_inplace
from asyncgrad.ops.reduction import softmax
from asyncgrad.random import numpy_generator
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
    cdf = backend_of(x).erf(x * _SQRT1_2)  # a new array: updated in place (Note [Gelu in place])
    cdf += 1.0
    cdf *= 0.5
    return cdf


def _gelu_derivative_array(x: Any, approximate: str, cdf: Any = None) -> Any:
    """gelu'(x) on arrays: Phi(x) + x phi(x), or torch's formula for the tanh form; ``cdf``: the
    forward's, where it kept it (erf is the costly part)."""
    xp = backend_of(x).xp
    if cdf is None:
        cdf = _gelu_cdf(xp, x, approximate)
    if approximate == "tanh":
        t = 2 * cdf - 1
        return cdf + 0.5 * x * (1 - t * t) * _TANH_BETA * (1 + 3 * _TANH_KAPPA * x * x)
    # Note [Gelu in place]: an activation-sized temporary is fresh memory, page-faulted in (Note
    # [Special functions in chunks] in devices/backend.py): one array, updated in place
    pdf = x * x
    pdf *= -0.5
    pdf = xp.exp(pdf)
    pdf *= x
    pdf *= _INV_SQRT_2PI
    pdf += cdf
    return pdf


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
        out = _gelu_derivative_array(x, approximate, cdf)
        out *= g
        return out
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
    """``x * sigmoid(x)``, elementwise (torch's ``F.silu``)."""
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
    """``x * tanh(softplus(x))``, elementwise (torch's ``F.mish``)."""
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
    if inplace:  # torch's elu_/selu_/celu_ save their result: EluBackward1, CeluBackward1
        return apply_inplace(input, _elu_result, alpha, scale, input_scale,
                             CeluBackward1 if node is CeluBackward0 else EluBackward1)
    xp = input.device.xp
    x = input.data
    neg = (xp.exp(xp.minimum(x, 0.0) * input_scale) - 1) * (scale * alpha)
    out = xp.where(x > 0, x * scale, neg)
    return record(node, (input,), out, input.device, float(alpha), float(scale), float(input_scale), saved=(input,))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)`` (torch's ``F.elu``)."""
    return _elu(input, alpha, 1.0, 1.0, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """elu with torch's fixed alpha and scale (its node is EluBackward0 too)."""
    return _elu(input, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (torch's ``F.celu``)."""
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
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold`` (torch's ``F.softplus``)."""
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
    """``x`` where positive, else ``negative_slope * x`` (torch's ``F.leaky_relu``)."""
    _floating(input, "leaky_relu", "leaky_relu_cpu")
    if inplace:
        return leaky_relu_(input, negative_slope)
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
    """``x`` clamped to ``[min_val, max_val]`` (torch's ``F.hardtanh``)."""
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
    """``min(max(0, x), 6)`` (torch's ``F.relu6``)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def _inplace(input: Tensor, fn: Any, *args: Any) -> Tensor:
    """``inplace=True``: the activation written into ``input`` by ``apply_inplace`` (torch's refusals
    of a leaf that requires grad and of a multi-output view), its node torch's (HardtanhBackward0,
    SiluBackward0, ...); a node that saved ``input`` gets a snapshot of the old value."""
    return apply_inplace(input, fn, *args)


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
    """``log(sigmoid(x))``, computed stably (torch's ``F.logsigmoid``)."""
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


# --------------------------------------------------------------------------- ops-misc: in-place forms, threshold,
# glu, softmin, softsign, tanhshrink, hardshrink, softshrink, rrelu
def _negative_slope_error(op: str) -> RuntimeError:
    """torch's refusal, in backward, of an in-place activation whose slope below zero makes its
    result no longer tell which side of zero the input was on."""
    tail = (" File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
            "backward calculation with negative slope") if op == "leakyReLu" else ""
    return RuntimeError(f"In-place {op} backward calculation is triggered with a negative slope which is not "
                        "supported. This is caused by calling in-place forward function with a negative slope, please "
                        f"call out-of-place version instead.{tail}")


class LeakyReluBackward1(OpNode):
    """leaky_relu_'s node: the formula reads the result (the input is overwritten), which with a
    negative slope no longer tells the sides apart: torch refuses then, in backward."""

    __slots__ = ("negative_slope",)
    work_per_element = 3
    saves_result = True

    def backward(self, F, g):
        (y,) = F.unpack(self)
        if self.negative_slope < 0:
            raise _negative_slope_error("leakyReLu")
        return (F.where(y > 0, g, g * self.negative_slope),)


def _leaky_relu_result(input: Tensor, negative_slope: float) -> Tensor:
    x = input.data
    out = input.device.xp.where(x > 0, x, x * negative_slope)
    return record(LeakyReluBackward1, (input,), out, input.device, float(negative_slope))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """torch's in-place leaky_relu: LeakyReluBackward1, saving the result."""
    _floating(input, "leaky_relu_", "leaky_relu_cpu")
    return apply_inplace(input, _leaky_relu_result, negative_slope)


class EluBackward1(OpNode):
    """elu_'s node, from the result: scale where it is > 0, else input_scale * (result + alpha * scale)."""

    __slots__ = ("alpha", "scale", "input_scale")
    work_per_element = 3
    saves_result = True

    def backward(self, F, g):
        (y,) = F.unpack(self)
        if self.alpha < 0:
            raise _negative_slope_error("elu")
        return (F.where(y > 0, g * self.scale, g * (self.input_scale * (y + self.alpha * self.scale))),)


class CeluBackward1(EluBackward1):
    __slots__ = ()


def _elu_result(input: Tensor, alpha: float, scale: float, input_scale: float, node: type[EluBackward1]) -> Tensor:
    xp = input.device.xp
    x = input.data
    out = xp.where(x > 0, x * scale, (xp.exp(xp.minimum(x, 0.0) * input_scale) - 1) * (scale * alpha))
    return record(node, (input,), out, input.device, float(alpha), float(scale), float(input_scale))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``elu`` (torch's ``F.elu_``)."""
    return elu(input, alpha, True)


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu`` (torch's ``F.relu_``)."""
    return input.relu_()


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place ``hardtanh`` (torch's ``F.hardtanh_``)."""
    return hardtanh(input, min_val, max_val, True)


class ThresholdBackward0(OpNode):
    """The gradient passes where the input is above the threshold: torch's threshold_backward, an op
    of its own (ThresholdBackwardBackward0) when the backward is recorded."""

    __slots__ = ("threshold",)
    work_per_element = 2

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.threshold_backward(g, x, self.threshold),)


class ThresholdBackward1(ThresholdBackward0):
    """threshold_'s node: torch's formula reads the result where the input is gone."""

    __slots__ = ()
    saves_result = True


def _threshold(input: Tensor, threshold: float, value: float, node: type[ThresholdBackward0]) -> Tensor:
    x = input.data
    xp = input.device.xp
    out = xp.where(x > threshold, x, input.device.backend.full(tuple(input.shape), value, input.dtype))
    saved = () if node.saves_result else (input,)
    return record(node, (input,), out, input.device, threshold, saved=saved)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``input`` where it is above ``threshold``, else ``value`` (torch's nn.functional.threshold)."""
    tensor_arg(input, "threshold")
    if inplace:
        return threshold_(input, threshold, value)
    return _threshold(input, threshold, value, ThresholdBackward0)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place ``threshold``: ``x`` where above ``threshold``, else ``value`` (torch's ``F.threshold_``)."""
    tensor_arg(input, "threshold_")
    return apply_inplace(input, _threshold, threshold, value, ThresholdBackward1)


class GluBackward0(OpNode):
    """glu(x) = a * sigmoid(b), a and b the halves of ``dim``: d/da = sigmoid(b), d/db = a s (1 - s)."""

    __slots__ = ("dim", "half")
    work_per_element = 8

    def backward(self, F, g):
        (x,) = F.unpack(self)
        lead = (slice(None),) * self.dim
        a = F.index(x, lead + (slice(0, self.half),))
        s = _sigmoid(F, F.index(x, lead + (slice(self.half, None),)))
        return (F.cat([g * s, g * a * s * (1 - s)], self.dim),)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves of ``input`` along ``dim`` (torch's ``F.glu``)."""
    tensor_arg(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    _floating(input, "glu", "glu_cpu")
    axis = normalize_dim(dim, input.ndim, "glu")
    size = input.shape[axis]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {axis} is size {size}")
    xp = input.device.xp
    backend = input.device.backend
    lead = (slice(None),) * axis
    a = backend.getitem(input.data, lead + (slice(0, size // 2),))
    b = backend.getitem(input.data, lead + (slice(size // 2, None),))
    out = a * (1 / (1 + xp.exp(-b)))
    return record(GluBackward0, (input,), out, input.device, axis, size // 2, saved=(input,))


def softmin(input: Tensor, dim: int | None = None, dtype: Any = None) -> Tensor:
    """softmax(-input): NegBackward0 under SoftmaxBackward0, as torch records it."""
    tensor_arg(input, "softmin")
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1  # torch's legacy implicit dim
    return softmax(-(input if dtype is None else input.to(dtype)), dim)


def softsign(input: Tensor) -> Tensor:
    """input / (1 + |input|), composed as torch composes it (DivBackward0)."""
    tensor_arg(input, "softsign")
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """input - tanh(input), composed as torch composes it (SubBackward0)."""
    tensor_arg(input, "tanhshrink")
    return input - input.tanh()


class HardshrinkBackward0(OpNode):
    """The gradient passes where |x| > lambd (torch: 0 for -lambd <= x <= lambd)."""

    __slots__ = ("lambd",)
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(x < -self.lambd, g, F.where(x > self.lambd, g, F.zeros_like(g))),)


class SoftshrinkBackward0(HardshrinkBackward0):
    __slots__ = ()


def _shrink_lambda(input: Tensor, lambd: float) -> None:
    if lambd < 0:
        top = float(np.finfo(input.dtype).max) if input.dtype.kind == "f" else float("inf")
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {scalar_type_name(input.dtype)}, "
                           f"but found {lambd:g}")


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (torch's ``F.hardshrink``)."""
    tensor_arg(input, "hardshrink")
    x = input.data
    xp = input.device.xp
    out = xp.where((x >= -lambd) & (x <= lambd), xp.zeros_like(x), x)
    return record(HardshrinkBackward0, (input,), out, input.device, float(lambd), saved=(input,))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0 (torch's ``F.softshrink``)."""
    tensor_arg(input, "softshrink")
    _shrink_lambda(input, lambd)
    x = input.data
    xp = input.device.xp
    out = xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, xp.zeros_like(x)))
    return record(SoftshrinkBackward0, (input,), out, input.device, float(lambd), saved=(input,))


class RreluWithNoiseBackward0(OpNode):
    """rrelu: the gradient times the noise (the slope drawn per element while training, the mean
    slope (lower + upper) / 2 in eval, 1 where the input is positive)."""

    __slots__ = ("slope",)
    work_per_element = 1

    def backward(self, F, g):
        (noise,) = F.unpack(self)
        return (g * noise,)


class RreluWithNoiseBackward1(RreluWithNoiseBackward0):
    """rrelu_'s node: in eval its formula is leaky_relu_'s on the result, refused for a negative slope."""

    __slots__ = ()

    def backward(self, F, g):
        if self.slope is not None and self.slope < 0:
            raise _negative_slope_error("leakyReLu")
        return super().backward(F, g)


def _rrelu_result(input: Tensor, lower: float, upper: float, training: bool, generator: Any,
                  node: type[RreluWithNoiseBackward0]) -> Tensor:
    dev = input.device
    xp = dev.xp
    x = input.data
    if training and upper - lower > 1e-6:
        draw = numpy_generator(generator, "rrelu").uniform(lower, upper, tuple(input.shape))
        slopes, slope = dev.asarray(draw, dtype=input.dtype), None
    else:
        slope = (lower + upper) / 2
        slopes = dev.backend.full(tuple(input.shape), slope, input.dtype)
    noise = xp.where(x > 0, dev.backend.ones(tuple(input.shape), input.dtype), slopes)
    return record(node, (input,), x * noise, dev, slope, saved=(plain(noise, dev),))


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, generator: Any = None) -> Tensor:
    """Randomized leaky relu: while training each non-positive element gets its own slope drawn from
    U(lower, upper) (asyncgrad's generator, or ``generator``: torch.rrelu's keyword), in eval the mean
    slope; torch's RreluWithNoiseBackward0 (its noise is saved)."""
    _floating(input, "rrelu", "rrelu_with_noise_out_cpu")
    if inplace:
        return rrelu_(input, lower, upper, training, generator)
    return _rrelu_result(input, lower, upper, training, generator, RreluWithNoiseBackward0)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           generator: Any = None) -> Tensor:
    """In-place ``rrelu`` (torch's ``F.rrelu_``)."""
    _floating(input, "rrelu_", "rrelu_with_noise_out_cpu")
    return apply_inplace(input, _rrelu_result, lower, upper, training, generator, RreluWithNoiseBackward1)
