"""Losses as torch.nn's: the functions (composed from ops, or the fused ones in ``ops/loss.py``,
``ops/nn.py``) and their Modules. A loss's class weights are buffers, as in torch, so they are
in its state_dict.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.factories import arange
from asyncgrad.factories import tensor as make
from asyncgrad.graph.grad_mode import is_grad_enabled, no_grad
from asyncgrad.nn.module import Module
from asyncgrad.ops.activation import logsigmoid
from asyncgrad.ops.ctc import ctc_loss
from asyncgrad.ops.elementwise import clamp, minimum, where
from asyncgrad.ops.linalg import vector_norm
from asyncgrad.ops.loss import binary_cross_entropy, binary_cross_entropy_with_logits, check_reduction
from asyncgrad.ops.misc import broadcast_tensors
from asyncgrad.ops.nn import cross_entropy, linear, nll_loss
from asyncgrad.tensor import Tensor

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "NLLLoss",
           "SmoothL1Loss", "cosine_similarity", "huber_loss", "kl_div", "l1_loss", "normalize",
           "smooth_l1_loss"]


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _pair(input: Tensor, target: Tensor, fn: str) -> None:
    """torch's warning for a target that broadcasts against a differently shaped input."""
    tensor_arg(input, fn, "input", 1)
    tensor_arg(target, fn, "target", 2)
    if input.shape != target.shape:
        warnings.warn(f"Using a target size ({_size(target.shape)}) that is different to the input size "
                      f"({_size(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def _size(shape: tuple[int, ...]) -> str:
    return f"asyncgrad.Size({list(shape)})"


def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean") -> Tensor:
    """Mean (or ``reduction="sum"``/``"none"``) absolute difference of ``input`` and ``target``, as torch's."""
    _pair(input, target, "l1_loss")
    check_reduction(reduction)
    return _reduce((input - target).abs(), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _pair(input, target, "huber_loss")
    check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = input - target
    ad = d.abs()
    loss = where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
    return _reduce(loss if weight is None else loss * weight, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (the L1 loss for beta = 0)."""
    _pair(input, target, "smooth_l1_loss")
    check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = input - target
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta), reduction)


def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """target (log target - input), input holding log-probabilities; 0 where the target is 0
    (xlogy's convention, the log taken on a safe stand-in so that no NaN reaches the gradient)."""
    check_reduction(reduction, ("mean", "sum", "none", "batchmean"))
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        safe = where(positive, target, 1.0)
        loss = where(positive, target * safe.log(), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def _norm(x: Tensor, p: float, dim: int) -> Tensor:
    """||x||_p along ``dim`` (kept), its gradient 0 at a zero vector as torch's vector norm."""
    powered = x * x if p == 2 else x.abs() ** p
    total = powered.sum(dim, keepdim=True)
    nonzero = total > 0
    safe = where(nonzero, total, 1.0)
    return where(nonzero, safe.sqrt() if p == 2 else safe ** (1.0 / p), 0.0)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Tensor:
    """input / max(||input||_p, eps) along ``dim`` (p = 0, inf, -inf: the vector norm's counts and extremes)."""
    if p == 0 or p in (math.inf, -math.inf):
        return input / clamp(vector_norm(input, p, dim, True), min=eps)
    return input / clamp(_norm(input, p, dim), min=eps)


def _clamped_norm(x: Tensor, dim: int, eps: float) -> Tensor:
    """||x|| along ``dim`` (kept), raised to ``eps`` as torch's ``clamp_min_`` under no_grad raises
    it: the value is clamped, the gradient is the norm's own."""
    norm = _norm(x, 2, dim)
    plain = norm.detach()
    return norm + (clamp(plain, min=eps) - plain)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along ``dim``, each normalised first
    as torch does (the result stays in [-1, 1]). The inputs are broadcast to one shape first, so a
    norm is taken over the broadcast ``dim`` (as torch's ``expand_outplace``), never over a size-1 one."""
    tensor_arg(x1, "cosine_similarity", "x1", 1)
    tensor_arg(x2, "cosine_similarity", "x2", 2)
    x1, x2 = broadcast_tensors(x1, x2)
    return ((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps))).sum(dim)


# --------------------------------------------------------------------------- modules
class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Logits and class indices (or class probabilities) in, log_softmax + nll_loss as one loss."""

    def __init__(self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                pos_weight=self.pos_weight)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class KLDivLoss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


# ops-misc: CTCLoss
class CTCLoss(_Loss):
    """The connectionist temporal classification loss (``ctc_loss``), ``blank`` the blank's class."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any) -> Tensor:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)


__all__ += ["CTCLoss"]


# --------------------------------------------------------------------------- margin, embedding and likelihood losses
# torch composes these from other ops (ATen's Loss.cpp, torch.nn.functional); so do they here,
# and their gradients are the compositions' (the same formulas torch's autograd runs through).
def _legacy(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's ``size_average``/``reduce`` pair, where given, turned into a reduction (its rule)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def soft_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), averaged or summed."""
    _pair(input, target, "soft_margin_loss")
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    return _reduce((-input * target).exp().log1p(), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    for i, (t, name) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        tensor_arg(t, "margin_ranking_loss", name, i + 1)
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_size(input1.shape)}, input2: {_size(input2.shape)}, "
                           f"target: {_size(target.shape)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1 (ATen's two ``where``s)."""
    tensor_arg(input, "hinge_embedding_loss", "input", 1)
    tensor_arg(target, "hinge_embedding_loss", "target", 2)
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    margin_part = where(target != 1, (margin - input).clamp_min(0), 0.0)
    self_part = where(target != -1, input, 0.0)
    return _reduce(margin_part + self_part, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; the cosine
    along the last dim with ATen's 1e-12 added to each squared magnitude."""
    for i, (t, name) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        tensor_arg(t, "cosine_embedding_loss", name, i + 1)
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"cosine_embedding_loss : input1 and input2 should have the same dimension, but got "
                           f"{input1.ndim} and {input2.ndim}")
    if target.ndim + 1 != input1.ndim or input1.ndim > 2:
        raise RuntimeError(f"{input1.ndim}D target tensor expects {input1.ndim - 1}D input tensors, but found "
                           f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}."
                           if input1.ndim <= 2 else
                           f"{target.ndim}D target tensor expects {target.ndim + 1}D input tensors, but found "
                           f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    dim = input1.ndim - 1
    eps = 1e-12
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + eps
    mag2 = (input2 * input2).sum(dim) + eps
    cos = prod / (mag1 * mag2).sqrt()
    pos = where(target == 1, 1 - cos, 0.0)
    neg = where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(pos + neg, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """exp(input) - target * input (``log_input``), else input - target * log(input + eps); ``full``
    adds Stirling's term where target > 1."""
    tensor_arg(input, "poisson_nll_loss", "input", 1)
    tensor_arg(target, "poisson_nll_loss", "target", 2)
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        big = target > 1
        safe = where(big, target, 2.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Any, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """0.5 (log(var) + (input - target)^2 / var), var clamped below at eps outside the graph (torch's
    rule: the clamp passes the gradient through unchanged); torch's checks of var's shape."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.detach() * 0 + float(var)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p along the last dim of the broadcast shape (ATen's composition)."""
    tensor_arg(x1, "pairwise_distance", "x1", 1)
    tensor_arg(x2, "pairwise_distance", "x2", 2)
    dim = max(x1.ndim, x2.ndim) - 1
    diff = x1 - x2 + eps
    if diff.ndim == 0:
        return diff.abs() if p != 0 else (diff != 0).to(diff.dtype)
    return vector_norm(diff, p, dim, keepdim)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the pairwise distance."""
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    a, q, n = anchor.ndim, positive.ndim, negative.ndim
    if not (a == q == n):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {q}D, and negative {n}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """triplet_margin_loss with any distance (``pairwise_distance`` by default)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, q, n = anchor.ndim, positive.ndim, negative.ndim
    if not (a == q == n):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {q}D, and negative {n}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """-(target log sigmoid(input) + (1 - target) log sigmoid(-input)), averaged over the classes."""
    tensor_arg(input, "multilabel_soft_margin_loss", "input", 1)
    reduction = _legacy(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    dim = input.ndim - 1
    loss = loss.sum(dim) / input.shape[dim]
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _class_targets(input: Tensor, target: Tensor, fn: str) -> tuple[int, int]:
    """The (samples, classes) of a margin loss's 0-, 1- or 2-D input, checked against its target."""
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim <= 1 and input.numel() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    classes = 1 if input.ndim == 0 else input.shape[-1]
    samples = 1 if input.ndim <= 1 else input.shape[0]
    return samples, classes


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """sum over i != y of max(0, margin - x[y] + x[i])^p (times weight[y]), over the classes."""
    tensor_arg(input, "multi_margin_loss", "input", 1)
    tensor_arg(target, "multi_margin_loss", "target", 2)
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None:
        if weight.ndim != 1:
            raise ValueError("weight must be one-dimensional")
        if weight.requires_grad and is_grad_enabled():
            raise RuntimeError("The function 'multi_margin_loss' is not differentiable with respect to argument "
                               "'weight'. This input cannot have requires_grad True.")
    samples, classes = _class_targets(input, target, "multi_margin_loss")
    if target.numel() != samples or target.ndim > 1:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{samples}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None and (weight.ndim > 1 or weight.numel() != classes):
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got {list(weight.shape)}")
    x = input.reshape(samples, classes)
    y = target.reshape(samples, 1)
    picked = x.gather(1, y)
    z = (margin - picked + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.reshape(-1)[target.reshape(-1)].reshape(samples, 1)
    others = arange(classes, device=input.device).reshape(1, classes) != y
    loss = where(others, z, 0.0).sum(1) / classes
    if reduction == "none":
        return loss.reshape(target.shape) if input.ndim == 2 else loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean") -> Tensor:
    """For each target class j (the target's entries up to its first -1) and each other class i,
    max(0, 1 - (x[j] - x[i])), summed and divided by the classes (ATen's rule: a repeated target
    class counts once per entry)."""
    tensor_arg(input, "multilabel_margin_loss", "input", 1)
    tensor_arg(target, "multilabel_margin_loss", "target", 2)
    reduction = _legacy(size_average, reduce, reduction)
    check_reduction(reduction)
    samples, classes = _class_targets(input, target, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    rows = np.asarray(target.detach().cpu().tolist(), dtype=np.int64).reshape(samples, classes)
    counts = np.zeros((samples, classes))
    for r, row in enumerate(rows):
        for c in row:
            if c < 0:
                break
            if c >= classes:
                raise RuntimeError(f"multilabel_margin_loss: target index {c} is out of bounds for {classes} "
                                   "classes")
            counts[r, c] += 1
    is_target = (counts > 0).astype(np.float64)
    mask = counts[:, :, None] * (1 - is_target)[:, None, :]
    pairs = make(mask, dtype=input.dtype, device=input.device)
    x = input.reshape(samples, classes)
    z = (1 - x.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)
    loss = (z * pairs).sum((1, 2)) / classes
    if reduction == "none":
        return loss if input.ndim == 2 else loss.reshape(())
    return _reduce(loss, reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return soft_margin_loss(input, target, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy(size_average, reduce, reduction))
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin: float = 1.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy(size_average, reduce, reduction))
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy(size_average, reduce, reduction))
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input: bool = True, full: bool = False, size_average: Any = None, eps: float = 1e-8,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(_legacy(size_average, reduce, reduction))
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Any) -> Tensor:
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(_legacy(size_average, reduce, reduction))
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                   swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                 margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, _legacy(size_average, reduce, reduction))

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None, size_average: Any = None,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(weight, _legacy(size_average, reduce, reduction))
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D "
                             "instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                 reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_margin_loss(input, target, reduction=self.reduction)


__all__ += ["CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
            "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss",
            "SoftMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "cosine_embedding_loss",
            "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
            "multilabel_margin_loss", "multilabel_soft_margin_loss", "pairwise_distance", "poisson_nll_loss",
            "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options: Any = None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target)`` (torch's composition);
    a ``linear_weight`` of more than two dims gives K-dimensional logits. ``options`` selects torch's
    chunked evaluation, which saves memory and gives the same values: here it changes nothing."""
    tensor_arg(input, "linear_cross_entropy", "input", 1)
    tensor_arg(linear_weight, "linear_cross_entropy", "linear_weight", 2)
    if input.ndim < 1 or input.ndim > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}")
    batches = tuple(input.shape[:-1])
    features = input.shape[-1]
    if features != linear_weight.shape[-1]:
        raise RuntimeError(f"expected equal input and linear_weight last dimensions (in_features), got "
                           f"{input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    classes = linear_weight.shape[0]
    extra = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *extra):
        raise RuntimeError(f"expected linear_bias shape {(classes, *extra)}, got {tuple(linear_bias.shape)}")
    if extra and not batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires "
                           f"batched input, (N, {features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*batches, classes, *extra)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    if extra:
        rows = classes * math.prod(extra)
        linear_weight = linear_weight.reshape(rows, features)
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(rows)
    logits = linear(input, linear_weight, linear_bias).reshape(*logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index, label_smoothing=label_smoothing)


__all__ += ["linear_cross_entropy"]
