"""Normalisation ops as torch's fused nodes: batch_norm, layer_norm, group_norm.

Note [Normalisation backward from the input]: the three nodes save the input (and the weight),
not the statistics, and their formulas recompute mean and 1/std from the input through ``F``
(``_normalized_grad``). The first-order pass pays two reductions for it; in exchange the formula
is a differentiable function of the input, so ``create_graph=True`` gives exact second and higher
orders (saved statistics would be constants there, and their dependence on the input lost).
Evaluation-mode batch norm normalises by the running statistics, constants for the graph: its
node saves them, copied, so a later update of the buffers does not move the gradient.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from asyncgrad._validate import tensor_arg
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.ops import elementwise
from asyncgrad.ops._node import OpNode, plain, record, same_device
from asyncgrad.ops.shape import clone
from asyncgrad.ops.views import select
from asyncgrad.tensor import Tensor

_SIZE = "asyncgrad.Size"


def _stats(xp: Any, x: Any, axes: tuple[int, ...], count: int, eps: float) -> tuple[Any, Any, Any]:
    """Mean, biased variance and 1/sqrt(var + eps) over ``axes``, kept as broadcastable dims."""
    mean = xp.sum(x, axis=axes, keepdims=True) / count
    xc = x - mean
    var = xp.sum(xc * xc, axis=axes, keepdims=True) / count
    return mean, var, 1 / xp.sqrt(var + eps)


def _normalized_grad(F: Any, gxhat: Any, x: Any, axes: tuple[int, ...], count: int, eps: float) -> tuple[Any, Any]:
    """The gradient w.r.t. ``x`` of xhat = (x - mean) / sqrt(var + eps) (statistics over ``axes``),
    given ``gxhat``, and xhat itself; recomputed from ``x`` (Note [Normalisation backward from the input])."""
    inv = 1.0 / count
    xc = x - F.sum(x, axes, True) * inv
    invstd = (F.sum(xc * xc, axes, True) * inv + eps) ** -0.5
    xhat = xc * invstd
    gx = invstd * (gxhat - F.sum(gxhat, axes, True) * inv - xhat * (F.sum(gxhat * xhat, axes, True) * inv))
    return gx, xhat


# --------------------------------------------------------------------------- batch norm
class NativeBatchNormBackward0(OpNode):
    """Inputs (input, weight, bias); statistics over every dim but 1. ``training``: normalised by the
    batch's statistics (recomputed, Note [Normalisation backward from the input]), else by the saved
    running ones."""

    __slots__ = ("axes", "count", "eps", "training", "stat_shape")
    work_per_element = 12

    def backward(self, F, g):
        x, w, mean, invstd = F.unpack(self)
        gxhat = g if w is None else g * F.reshape(w, self.stat_shape)
        if self.training:
            gx, xhat = _normalized_grad(F, gxhat, x, self.axes, self.count, self.eps)
            gx = gx if self.needs(0) else None
        else:
            xhat = (x - mean) * invstd
            gx = gxhat * invstd if self.needs(0) else None
        gw = F.sum(g * xhat, self.axes) if self.needs(1) else None
        gb = F.sum(g, self.axes) if self.needs(2) else None
        return gx, gw, gb


def _size(shape: tuple[int, ...]) -> str:
    return f"{_SIZE}({list(shape)})"


def _check_stat(t: Tensor | None, name: str, channels: int) -> None:
    if t is not None and t.numel() != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """torch's ``F.batch_norm``: over every dim but 1. Training normalises by the batch's mean and
    biased variance and, where given, moves the running statistics towards them in place
    (``running = (1 - momentum) running + momentum batch``, the variance unbiased as torch's);
    evaluation normalises by the running statistics. An empty input is torch's special case: its
    clone, times ``weight[0]`` and plus ``bias[0]`` where given, no statistic read or moved."""
    tensor_arg(input, "batch_norm")
    if training and input.ndim and input.shape[0] * math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{_size(input.shape)}")
    if input.numel() == 0:  # torch's words: "don't return view of input, don't return empty tensor"
        out = clone(input)
        if weight is not None:
            out = elementwise.mul(out, select(weight, 0, 0))
        if bias is not None:
            out = elementwise.add(out, select(bias, 0, 0))
        return out
    if input.ndim < 2:  # torch reads the channel count as size(1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.ndim, 1)}, "
                         f"{max(input.ndim, 1) - 1}], but got 1)")
    channels = input.shape[1]
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"running_{'mean' if running_mean is None else 'var'} must be defined in evaluation mode")
    _check_stat(running_mean, "running_mean", channels)
    _check_stat(running_var, "running_var", channels)
    _check_stat(weight, "weight", channels)
    _check_stat(bias, "bias", channels)
    for t in (weight, bias, running_mean, running_var):
        if t is not None:
            same_device(input, t)
    dev = input.device
    xp = dev.xp
    x = input.data
    axes = (0,) + tuple(range(2, input.ndim))
    stat_shape = (1, channels) + (1,) * (input.ndim - 2)
    count = input.shape[0] * math.prod(input.shape[2:])
    if training:
        mean, var, invstd = _stats(xp, x, axes, count, eps)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, count, momentum, dev)
        saved_mean = saved_invstd = None
    else:
        assert running_mean is not None and running_var is not None
        mean = xp.reshape(dev.backend.astype(running_mean.data, input.dtype, copy=True), stat_shape)
        invstd = 1 / xp.sqrt(xp.reshape(dev.backend.astype(running_var.data, input.dtype), stat_shape) + eps)
        saved_mean, saved_invstd = plain(mean, dev), plain(invstd, dev)
    out = (x - mean) * invstd
    if weight is not None:
        out = out * xp.reshape(weight.data, stat_shape)
    if bias is not None:
        out = out + xp.reshape(bias.data, stat_shape)
    return record(NativeBatchNormBackward0, (input, weight, bias), out, dev, axes, count, eps, bool(training),
                  stat_shape, saved=(input, weight, saved_mean, saved_invstd))


def _update_running(running_mean: Tensor | None, running_var: Tensor | None, mean: Any, var: Any, count: int,
                    momentum: float, dev: Any) -> None:
    """The running statistics, updated in place (their version counters move, as torch's do)."""
    xp = dev.xp
    with no_grad():
        if running_mean is not None:
            new = (1 - momentum) * running_mean.data + momentum * xp.reshape(mean, (-1,))
            running_mean.copy_(plain(dev.backend.astype(new, running_mean.dtype), dev))
        if running_var is not None:
            unbiased = xp.reshape(var, (-1,)) * (count / (count - 1))
            new = (1 - momentum) * running_var.data + momentum * unbiased
            running_var.copy_(plain(dev.backend.astype(new, running_var.dtype), dev))


# --------------------------------------------------------------------------- layer norm
class NativeLayerNormBackward0(OpNode):
    """Inputs (input, weight, bias); statistics over the last ``len(normalized_shape)`` dims."""

    __slots__ = ("axes", "lead", "count", "eps")
    work_per_element = 12

    def backward(self, F, g):
        x, w = F.unpack(self)
        gxhat = g if w is None else g * w
        gx, xhat = _normalized_grad(F, gxhat, x, self.axes, self.count, self.eps)
        return (gx if self.needs(0) else None,
                F.sum(g * xhat, self.lead) if self.needs(1) else None,
                F.sum(g, self.lead) if self.needs(2) else None)


def layer_norm(input: Tensor, normalized_shape: Sequence[int] | int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the trailing ``normalized_shape`` dimensions, with optional affine
    ``weight`` and ``bias``; one fused node, as torch's ``NativeLayerNormBackward0``."""
    tensor_arg(input, "layer_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(n) for n in normalized_shape)
    k = len(shape)
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = []")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(t.shape)} and normalized_shape = {list(shape)}")
    if input.ndim < k or input.shape[input.ndim - k:] != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(str(n) for n in shape)}], but got input of size{list(input.shape)}")
    for t in (weight, bias):
        if t is not None:
            same_device(input, t)
    dev = input.device
    xp = dev.xp
    axes = tuple(range(input.ndim - k, input.ndim))
    count = math.prod(shape)
    x = input.data
    out = x - xp.sum(x, axis=axes, keepdims=True) / count  # _stats' steps, the centred input kept as the result
    out *= 1 / xp.sqrt(xp.sum(out * out, axis=axes, keepdims=True) / count + eps)
    for t, add in ((weight, False), (bias, True)):  # in place where the dtypes agree, else promoted
        if t is not None:
            if t.dtype == input.dtype:
                if add:
                    out += t.data
                else:
                    out *= t.data
            else:
                out = out + t.data if add else out * t.data
    return record(NativeLayerNormBackward0, (input, weight, bias), out, dev, axes, tuple(range(input.ndim - k)),
                  count, eps, saved=(input, weight))


# --------------------------------------------------------------------------- group norm
class NativeGroupNormBackward0(OpNode):
    """Inputs (input, weight, bias); statistics per sample and group of channels (the input viewed
    as ``grouped``: (N, groups, rest)), the affine per channel."""

    __slots__ = ("grouped", "count", "eps", "stat_shape", "axes")
    work_per_element = 14

    def backward(self, F, g):
        x, w = F.unpack(self)
        gxhat = g if w is None else g * F.reshape(w, self.stat_shape)
        gx, xhat = _normalized_grad(F, F.reshape(gxhat, self.grouped), F.reshape(x, self.grouped), (2,), self.count,
                                    self.eps)
        shape = g.shape
        xhat = F.reshape(xhat, shape)
        return (F.reshape(gx, shape) if self.needs(0) else None,
                F.sum(g * xhat, self.axes) if self.needs(1) else None,
                F.sum(g, self.axes) if self.needs(2) else None)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Group normalisation of ``input`` (N, C, ...) in ``num_groups`` groups of channels, with optional
    per-channel ``weight`` and ``bias``; one fused node, as torch's ``NativeGroupNormBackward0``."""
    tensor_arg(input, "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, channels = input.shape[0], input.shape[1]
    if channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != channels):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
        if t is not None:
            same_device(input, t)
    dev = input.device
    xp = dev.xp
    count = channels // num_groups * math.prod(input.shape[2:])
    grouped = (n, num_groups, count)  # spelled out: an empty batch has no -1 to infer
    xg = xp.reshape(input.data, grouped)
    mean, _, invstd = _stats(xp, xg, (2,), count, eps)
    out = xp.reshape((xg - mean) * invstd, input.shape)
    stat_shape = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * xp.reshape(weight.data, stat_shape)
    if bias is not None:
        out = out + xp.reshape(bias.data, stat_shape)
    axes = (0,) + tuple(range(2, input.ndim))
    return record(NativeGroupNormBackward0, (input, weight, bias), out, dev, grouped, count, eps, stat_shape, axes,
                  saved=(input, weight))


# --------------------------------------------------------------------------- ops-misc: instance_norm
def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """torch's instance_norm, built as torch builds it: the input seen as one sample of ``N * C``
    channels (a view), batch_norm over it with the statistics and affine parameters repeated ``N``
    times, the view back; the running statistics become the mean over the batch of the repeated ones."""
    tensor_arg(input, "instance_norm")
    if use_input_stats:
        spatial = math.prod(input.shape[2:]) if input.ndim > 2 else 1
        if spatial == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {_size(input.shape)}")
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.ndim, 1)}, "
                         f"{max(input.ndim, 1) - 1}], but got 1)")
    b, c = input.shape[0], input.shape[1]
    repeated_mean = running_mean.repeat(b) if running_mean is not None else None
    repeated_var = running_var.repeat(b) if running_var is not None else None
    out = batch_norm(input.contiguous().view(1, b * c, *input.shape[2:]), repeated_mean, repeated_var,
                     weight.repeat(b) if weight is not None else None, bias.repeat(b) if bias is not None else None,
                     use_input_stats, momentum, eps)
    with no_grad():
        if running_mean is not None and repeated_mean is not None:
            running_mean.copy_(repeated_mean.view(b, c).mean(0))
        if running_var is not None and repeated_var is not None:
            running_var.copy_(repeated_var.view(b, c).mean(0))
    return out.view_as(input)
