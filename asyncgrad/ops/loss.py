"""Binary cross-entropy, on probabilities and on logits, as torch's fused nodes.

Both formulas are written against ``F`` and differentiable in the input and in the target (torch
differentiates both); a weight and ``pos_weight`` are constants, as torch's backward leaves them.
"""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import ArrayMath, OpNode, record, same_device
from asyncgrad.ops.activation import _sigmoid, _softplus
from asyncgrad.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")
_BCE_EPS = 1e-12  # torch's floor on x (1 - x) in the gradient


def check_reduction(reduction: str, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def reduce_array(xp: Any, loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return xp.mean(loss)
    return xp.sum(loss) if reduction == "sum" else loss


def _spread(F: Any, g: Any, node: Any) -> Any:
    """The incoming gradient as one per element: a reduced loss's scalar, 1/N of it for a mean."""
    if node.reduction == "mean":
        return g * (1.0 / node.count)
    return g


def _size(shape: tuple[int, ...]) -> str:
    return f"asyncgrad.Size({list(shape)})"


def _weights(weight: Tensor | None, input: Tensor) -> Any:
    if weight is None:
        return None
    tensor_arg(weight, "binary_cross_entropy", "weight", 3)
    same_device(input, weight)
    return weight


class BinaryCrossEntropyBackward0(OpNode):
    """-w (t log x + (1 - t) log(1 - x)), each log floored at -100 as torch's: d/dx = w (x - t) /
    max(x (1 - x), 1e-12), d/dt = w (log(1 - x) - log x) (floored logs)."""

    __slots__ = ("reduction", "count")
    work_per_element = 12

    def backward(self, F, g):
        x, t, w = F.unpack(self)
        g = _spread(F, g, self)
        if w is not None:
            g = g * w
        gx = gt = None
        if self.needs(0):
            d = x * (1 - x)
            gx = g * (x - t) / F.where(d < _BCE_EPS, d * 0 + _BCE_EPS, d)
        if self.needs(1):
            gt = g * (_floored_log(F, 1 - x) - _floored_log(F, x))
        return gx, gt


def _floored_log(F: Any, x: Any) -> Any:
    """log(x), at least -100 (torch's floor, so that x = 0 or 1 gives a finite loss)."""
    small = x <= math.exp(-100)
    return F.where(small, x * 0 - 100.0, F.log(F.where(small, x * 0 + 1, x)))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy between probabilities ``input`` and ``target``, optionally weighted (torch's
    ``F.binary_cross_entropy``, log clamped at -100 as torch's)."""
    tensor_arg(input, "binary_cross_entropy", "input", 1)
    tensor_arg(target, "binary_cross_entropy", "target", 2)
    check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({_size(target.shape)}) that is different to the input size "
                         f"({_size(input.shape)}) is deprecated. Please ensure they have the same size.")
    dev = same_device(input, target)
    xp = dev.xp
    x, t = input.data, target.data
    if bool(xp.any(xp.logical_or(x < 0, x > 1))):
        raise RuntimeError("all elements of input should be between 0 and 1")
    w = _weights(weight, input)
    loss = -(t * _floored_log(ArrayMath, x) + (1 - t) * _floored_log(ArrayMath, 1 - x))
    if w is not None:
        loss = loss * w.data
    return record(BinaryCrossEntropyBackward0, (input, target), reduce_array(xp, loss, reduction), dev, reduction,
                  math.prod(loss.shape), saved=(input, target, w))


class BinaryCrossEntropyWithLogitsBackward0(OpNode):
    """(1 - t) x + l softplus(-x), with l = (p - 1) t + 1 (p the pos_weight, 1 without), times w:
    d/dx = w (l sigmoid(x) - p t) (= w (sigmoid(x) - t) without p), d/dt = w (-x + (p - 1) softplus(-x))."""

    __slots__ = ("reduction", "count")
    work_per_element = 14

    def backward(self, F, g):
        x, t, w, p = F.unpack(self)
        g = _spread(F, g, self)
        if w is not None:
            g = g * w
        gx = gt = None
        if self.needs(0):
            s = _sigmoid(F, x)
            gx = g * (s - t) if p is None else g * (((p - 1) * t + 1) * s - p * t)
        if self.needs(1):
            gt = g * -x if p is None else g * ((p - 1) * _softplus(F, -x) - x)
        return gx, gt


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy on logits, computed stably, with ``weight`` and ``pos_weight`` (torch's
    ``F.binary_cross_entropy_with_logits``)."""
    tensor_arg(input, "binary_cross_entropy_with_logits", "input", 1)
    tensor_arg(target, "binary_cross_entropy_with_logits", "target", 2)
    check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({_size(target.shape)}) must be the same as input size ({_size(input.shape)})")
    dev = same_device(input, target)
    xp = dev.xp
    x, t = input.data, target.data
    w = _weights(weight, input)
    if pos_weight is not None:
        same_device(input, pos_weight)
    sp = _softplus(ArrayMath, -x)
    if pos_weight is None:
        loss = (1 - t) * x + sp
    else:
        loss = (1 - t) * x + ((pos_weight.data - 1) * t + 1) * sp
    if w is not None:
        loss = loss * w.data
    return record(BinaryCrossEntropyWithLogitsBackward0, (input, target), reduce_array(xp, loss, reduction), dev,
                  reduction, math.prod(loss.shape), saved=(input, target, w, pos_weight))
