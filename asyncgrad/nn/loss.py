"""Losses as torch.nn's: the functions (composed from ops, or the fused ones in ``ops/loss.py``,
``ops/nn.py``) and their Modules. A loss's class weights are buffers, as in torch, so they are
in its state_dict.
"""

from __future__ import annotations

import warnings
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.nn.module import Module
from asyncgrad.ops.ctc import ctc_loss
from asyncgrad.ops.elementwise import clamp, where
from asyncgrad.ops.loss import binary_cross_entropy, binary_cross_entropy_with_logits, check_reduction
from asyncgrad.ops.nn import cross_entropy, nll_loss
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
    """input / max(||input||_p, eps) along ``dim``."""
    return input / clamp(_norm(input, p, dim), min=eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along ``dim``, each normalised first
    as torch does (the result stays in [-1, 1])."""
    return ((x1 / clamp(_norm(x1, 2, dim), min=eps)) * (x2 / clamp(_norm(x2, 2, dim), min=eps))).sum(dim)


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
