"""Neural-network ops that are worth one fused node each: linear, mse_loss, nll_loss."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from asyncgrad._validate import int_arg, tensor_arg
from asyncgrad.graph.node import RELEASED, hooks_in_use, saved_hooks
from asyncgrad.ops._node import ArrayMath, OpNode, SavesVariables, plain, record, recording, same_device
from asyncgrad.ops.elementwise import broadcast_error, result_dtype
from asyncgrad.ops.linalg import MATMUL_WORK_PER_MAC, matmul
from asyncgrad.ops.reduction import LogSoftmaxBackward0, log_softmax, log_softmax_array
from asyncgrad.tensor import Tensor, scalar_type_name

_REDUCTIONS = ("mean", "sum", "none")


class _Linear(OpNode):
    """linear(x, w, b) = x @ w.T + b as one node (inputs x, w, b): AddmmBackward0 with a bias,
    MmBackward0 without. It saves ``x`` only if ``w`` needs a gradient and ``w`` only if ``x`` does."""

    __slots__ = ()
    aten = "aten::linear"  # its profiler event: torch's op (Note [Forward ops reach the profiler through record])

    def backward(self, F, g):
        x, w = F.unpack(self)
        g2 = F.reshape(g, (-1, self.w_shape[0])) if g.ndim != 2 else g
        gx = F.reshape(F.mm(g2, w), self.x_shape) if w is not None else None
        gw = None
        if x is not None:
            x2 = F.reshape(x, (-1, self.w_shape[1])) if len(self.x_shape) != 2 else x
            gw = F.mm(F.mT(g2), x2)
        gb = F.sum_to(g, self.b_shape) if self.needs(2) else None
        return gx, gw, gb


class AddmmBackward0(_Linear):
    __slots__ = ("x_shape", "w_shape", "b_shape")


class MmBackward0(_Linear):
    """linear without a bias."""

    __slots__ = ("x_shape", "w_shape", "b_shape")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` (torch's ``F.linear``): ``weight`` is (out_features, in_features)."""
    tensor_arg(input, "linear", "input", 1)
    tensor_arg(weight, "linear", "weight", 2)
    same_device(input, weight)
    if bias is not None:
        tensor_arg(bias, "linear", "bias", 3)
        same_device(input, bias)
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {input.ndim}D and "
                           f"{weight.ndim}D")
    if weight.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {weight.ndim}D")
    if input.dtype != weight.dtype and weight.ndim == 2:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {scalar_type_name(input.dtype)} and "
                           f"{scalar_type_name(weight.dtype)}")
    if input.shape[-1] != weight.shape[-1]:
        rows = math.prod(input.shape[:-1])
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and "
            f"{weight.shape[-1]}x{weight.shape[0]})"
        )
    if weight.ndim == 1:  # a single output feature: no fused node, matmul's nodes cover every rank
        out = matmul(input, weight)
        return out if bias is None else out + bias
    dev = input.device
    xp = dev.xp
    shape = tuple(input.shape[:-1]) + (weight.shape[0],)
    if bias is not None and (not _broadcasts(bias.shape, shape) or np.broadcast_shapes(bias.shape, shape) != shape):
        raise RuntimeError(
            f"The expanded size of the tensor ({shape[-1]}) must match the existing size ({bias.shape[-1]}) at "
            f"non-singleton dimension {len(shape) - 1}.  Target sizes: {list(shape)}.  Tensor sizes: "
            f"{list(bias.shape)}")
    # An input of more than two dims is one (rows, in) matrix for BLAS, as torch's linear folds
    # it (a stacked matmul runs one small product per leading index), and the bias is added into
    # the product's new array where the dtypes agree (``python -m benchmarks.transformer_step``).
    data = input.data
    if input.ndim > 2:
        data = xp.reshape(data, (math.prod(input.shape[:-1]), input.shape[-1]))
    out = xp.matmul(data, xp.matrix_transpose(weight.data))
    if input.ndim > 2:
        out = xp.reshape(out, shape)
    if bias is not None:
        if bias.dtype == input.dtype:
            out += bias.data
        else:
            out = out + bias.data
    size = math.prod(out.shape)
    return record(AddmmBackward0 if bias is not None else MmBackward0, (input, weight, bias), out, dev,
                  input.shape, weight.shape, bias.shape if bias is not None else (),
                  saved=(input if weight._requires_grad else None, weight if input._requires_grad else None),
                  work=int(size * weight.shape[-1] * MATMUL_WORK_PER_MAC) + size)


class MseLossBackward0(OpNode):
    """``dtype``: the result's, where the two operands' differ (a float input with an integer
    target), so that the formula computes in it; None where they agree."""

    __slots__ = ("scale", "reduction", "shapes", "dtype")

    def backward(self, F, g):
        x, t = F.unpack(self)
        if self.dtype is not None:
            x, t = F.cast(x, self.dtype), F.cast(t, self.dtype)
        diff = (x - t) * (2 * self.scale)
        grad = g * diff
        return (
            F.sum_to(grad, self.shapes[0]) if self.needs(0) else None,
            F.sum_to(-grad, self.shapes[1]) if self.needs(1) else None,
        )


def _broadcasts(shape: tuple, target: tuple) -> bool:
    try:
        np.broadcast_shapes(shape, target)
    except ValueError:
        return False
    return True


def _weight(weight: Tensor | None, classes: int, fn: str) -> None:
    if weight is None:
        return
    tensor_arg(weight, fn, "weight", 3)
    if weight.numel() != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but got "
                           f"weight tensor of shape: {list(weight.shape)}")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean (or ``reduction="sum"``/``"none"``) squared difference of ``input`` and ``target``, as torch's."""
    tensor_arg(input, "mse_loss", "input", 1)
    tensor_arg(target, "mse_loss", "target", 2)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    same_device(input, target)
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            UserWarning,
            stacklevel=2,
        )
        try:
            np.broadcast_shapes(input.shape, target.shape)
        except ValueError:
            raise broadcast_error(input.shape, target.shape) from None
    dtype = result_dtype(input, target)  # torch's promotion (float32 with int64: float32)
    if dtype.kind not in "fc":
        raise NotImplementedError(f'"mse_cpu" not implemented for \'{scalar_type_name(dtype)}\'')
    dev = input.device
    xp = dev.xp
    x, t = input.data, target.data
    mixed = input.dtype != target.dtype
    if mixed:
        x, t = dev.backend.astype(x, dtype), dev.backend.astype(t, dtype)
    diff = x - t
    sq = diff * diff
    size = math.prod(sq.shape)
    out = xp.mean(sq) if reduction == "mean" else xp.sum(sq) if reduction == "sum" else sq
    return record(MseLossBackward0, (input, target), out, dev, 1.0 / size if reduction == "mean" else 1.0,
                  reduction, (input.shape, target.shape), dtype if mixed else None, saved=(input, target), work=size)


class NllLossBackward0(SavesVariables):
    """The gradient lands on each row's target class, scaled by its weight (and 1/total for mean):
    ``coef``, a coefficient per input element, zero off the targets and on ignored rows.

    Closing cross_entropy, the node also carries log_softmax's backward: ``dim`` is the class dim (None
    for nll_loss) and ``logp`` the log-probabilities (Note [cross_entropy is one
    node]). The node keeps its arrays itself: they are its own, made by its forward, never a tensor a
    caller holds, so there is no version to check and no saved-tensor hook to run (cross_entropy takes
    the general path while one is set)."""

    __slots__ = ("reduction", "rows", "dim", "coef", "logp")

    def backward(self, F, g):
        coef, logp = self.coef, self.logp
        if F is not ArrayMath:  # the recorded backward: its constants as tensors (Note [cross_entropy is one node])
            device = self._input_meta[0][2]
            coef = plain(coef, device)
            if logp is not None:
                # from the node's own edge: the logits as the forward saw them, whatever in place made of them since
                logits = Tensor._make(logp, device, True, self.edge_fns[0], self.edge_nrs[0], [0])
                logp = record(LogSoftmaxBackward0, (logits,), logp, device, self.dim)
        if self.reduction == "none":
            g = F.reshape(g, (self.rows, 1) if coef.ndim == 2 else ())
        grad = g * coef
        if logp is None:
            return (grad,)
        return (grad - F.exp(logp) * F.sum(grad, self.dim, True),)  # log_softmax's backward: torch's formula

    def release_variables(self) -> None:
        self.saved = RELEASED
        self.coef = self.logp = None


# Note [cross_entropy is one node]: cross_entropy with class indices over a (N, C) or (C,) input
# and no label smoothing records one NllLossBackward0 where torch records NllLossBackward0 over
# LogSoftmaxBackward0: the log-probabilities between them are no tensor the caller sees, so no hook,
# retain_grad or in-place change can reach them, and the only visible difference is that the loss's
# ``grad_fn.next_functions`` lead to the logits' node directly (as linear's AddmmBackward0 skips
# torch's TBackward0). What must hold: the same values, bit for bit, as log_softmax's node followed
# by nll_loss's (the general path; both agree with torch's to rounding): the log-probabilities are
# log_softmax's own kernels (``log_softmax_array``), kept by the node, and its gradient is nll_loss's
# coefficient times the incoming gradient, then log_softmax's formula on that (torch's,
# ``g - exp(out) * g.sum(dim)``), the two nodes' operations in their order. The next order needs the
# log-probabilities as a function of the logits: the recorded backward (``create_graph``) records
# torch's LogSoftmaxBackward0 from the node's own edge to the logits (the one the forward recorded, so
# an in-place change of the logits since then does not move it, as torch's saved-result node does not
# move) with the kept log-probabilities as its result, so the graph it builds is torch's. The other
# forms (K-dim inputs, probabilities as target, label smoothing) and any call under saved-tensor hooks
# take the general path: log_softmax's node, then the loss's. What it buys: one node and one op's
# Python fewer in W3's step (``python -m benchmarks.w3_breakdown``).


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """torch's signature: ``size_average`` and ``reduce`` (deprecated there) are accepted and ignored."""
    tensor_arg(input, "nll_loss_nd", "input", 1)
    tensor_arg(target, "nll_loss_nd", "target", 2)
    ignore_index = int_arg(ignore_index, "nll_loss_nd", "ignore_index", 5)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if target.dtype.kind not in "iu":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {scalar_type_name(target.dtype)}")
    return _nll_loss(input, target, weight, ignore_index, reduction)


_UINT64 = np.dtype(np.uint64)
"""Targets seen as unsigned: a negative one wraps to huge, so one bound checks both (Note [nll_loss's common case])."""


def _nll_loss(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str) -> Tensor:
    """nll_loss once its arguments are checked: cross_entropy checks the same ones (under its own
    name) and calls this, so they are not checked twice (Note [nll_loss's common case])."""
    if input.ndim > 2:
        return _nll_loss_kdim(input, target, weight, ignore_index, reduction)
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    dev = same_device(input, target)
    out, coef = _nll_arrays(input, input.data, target, weight, ignore_index, reduction, recording(input))
    return record(NllLossBackward0, (input,), out, dev, reduction, input.shape[0] if input.ndim == 2 else 1, None,
                  coef, None, work=math.prod(input.shape))


def _nll_arrays(input: Tensor, data: Any, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
                grad: bool) -> tuple[Any, Any]:
    """nll_loss's result for the log-probabilities ``data`` (of ``input``'s shape, 1 or 2 dims) and, when
    ``grad``, its node's coefficient (None otherwise); ``input`` names the dtype and device."""
    dev = input.device
    xp = dev.xp
    backend = dev.backend
    dtype = input.dtype
    logp = data if data.ndim == 2 else xp.reshape(data, (1, -1))
    tgt = target.data if target.ndim == 1 else xp.reshape(target.data, (-1,))
    if logp.shape[0] != tgt.shape[0]:
        raise ValueError(f"Expected input batch_size ({logp.shape[0]}) to match target batch_size ({tgt.shape[0]}).")
    classes = logp.shape[1]
    _weight(weight, classes, "nll_loss_nd")
    if target.dtype != np.int64:  # Byte targets: compared with ignore_index, which a uint8 may not hold
        tgt = backend.astype(tgt, np.int64)
    rows = backend.arange(logp.shape[0], np.int64)
    n = logp.shape[0]
    if weight is None and not 0 <= ignore_index < classes and 0 < n < 2 ** 24 and dtype.kind == "f" and (
            dtype.itemsize >= 4 and backend.max(backend.astype(tgt, _UINT64)) < classes):
        # Note [nll_loss's common case]: no weight, every target a class (negatives wrap to huge
        # as uint64: one cast and one reduction check both bounds) and none ignored, as in a
        # training loop: each row weighs 1, so the general path's mask, where, weights (``* 1.0``)
        # and their sum (exactly n, as an integer below 2**24 is in float32 too) are skipped, and so
        # is its out-of-bounds search. Same values bit for bit: ``x * 1.0`` is x, ``s / n`` divides
        # by the same n, and ``-1 / n`` rounded to float32 once is float32's own quotient (a
        # float64 quotient rounded to float32 is correctly rounded). cross_entropy checks its
        # arguments once, in ``_nll_loss`` (W3's loss: ``python -m benchmarks --only W3``).
        picked = -backend.getitem(logp, (rows, tgt))
        out = backend.sum(picked) / n if reduction == "mean" else backend.sum(picked) if reduction == "sum" else (
            picked if data.ndim == 2 else xp.reshape(picked, ()))
        coef = None
        if grad:  # one row per target, none repeated: the scale written in, a number cast on assignment
            coef = backend.zeros(logp.shape, dtype)
            backend.setitem(coef, (rows, tgt), -1 / n if reduction == "mean" else -1.0)
            if data.ndim != 2:
                coef = xp.reshape(coef, data.shape)
        return out, coef
    valid = tgt != ignore_index
    bad = xp.logical_and(valid, xp.logical_or(tgt < 0, tgt >= classes))
    if backend.any(bad):  # Note [Reductions without numpy's wrappers] in devices/backend.py
        first = backend.to_host(backend.getitem(tgt, bad))[0]
        raise IndexError(f"Target {int(first)} is out of bounds.")
    safe = xp.where(valid, tgt, 0)
    if weight is None:
        row_w = backend.astype(valid, dtype)
    else:
        same_device(input, weight)
        w = backend.astype(xp.reshape(weight.data, (-1,)), dtype)
        row_w = xp.where(valid, xp.take(w, safe), 0.0)
    picked = -backend.getitem(logp, (rows, safe)) * row_w  # one gather (numpy builds take_along_axis's in Python)
    if reduction == "mean":
        total = backend.sum(row_w)
        out = backend.sum(picked) / total
    elif reduction == "sum":
        total = None
        out = backend.sum(picked)
    else:
        total = None
        out = picked if data.ndim == 2 else xp.reshape(picked, ())
    coef = None
    if grad:  # -w / total at each row's target class (one per row: written, not added), 0 elsewhere
        scale = -row_w if total is None else -row_w / total
        coef = backend.index_add(logp.shape, (rows, safe), True, scale)
        if data.ndim != 2:
            coef = xp.reshape(coef, data.shape)
    return out, coef


def _nll_loss_kdim(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
                   reduction: str) -> Tensor:
    """(N, C, d1, ..., dk) input: the class dim moved last and every position made a row, which
    the 2-D loss weighs and averages exactly as torch's K-dim loss does."""
    expected = (input.shape[0],) + input.shape[2:]
    if target.shape != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    rows = input.permute(order).reshape(-1, input.shape[1])
    out = _nll_loss(rows, target.reshape(-1), weight, ignore_index, reduction)
    return out.reshape(expected) if reduction == "none" else out


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1, or 0 for an unbatched input), then nll_loss.

    A float ``target`` of the input's shape holds class probabilities instead of indices;
    ``weight`` then scales each class's term, and "mean" divides by the batch size (torch).
    ``label_smoothing`` mixes the target with the uniform distribution over the classes, as
    torch's ``cross_entropy_loss_label_smoothing`` does (``_label_smoothed``).
    """
    tensor_arg(input, "cross_entropy_loss", "input", 1)
    tensor_arg(target, "cross_entropy_loss", "target", 2)
    if weight is not None:
        tensor_arg(weight, "cross_entropy_loss", "weight", 3)
    ignore_index = int_arg(ignore_index, "cross_entropy_loss", "ignore_index", 5)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    dim = 1 if input.ndim >= 2 else 0
    if input.ndim > 0:
        _weight(weight, input.shape[dim], "cross_entropy_loss")
    if target.ndim == input.ndim and target.shape == input.shape:  # class probabilities, as torch decides it: by shape
        if target.dtype.kind != "f":
            raise RuntimeError("Expected floating point type for target with class probabilities, got "
                               f"{scalar_type_name(target.dtype)}")
    elif target.dtype.kind not in "iu":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {scalar_type_name(target.dtype)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if (label_smoothing == 0 and input.ndim in (1, 2) and target.dtype.kind in "iu" and input.dtype.kind == "f"
            and input.numel() and (not hooks_in_use[0] or saved_hooks.get() is None)):
        return _log_softmax_nll(input, target, weight, ignore_index, reduction, dim)
    logp = log_softmax(input, dim)
    if label_smoothing > 0 and target.dtype.kind == "f":
        target = target * (1 - label_smoothing) + label_smoothing / input.shape[dim]
    elif label_smoothing > 0:
        return _label_smoothed(logp, target, weight, ignore_index, reduction, label_smoothing, dim)
    if target.dtype.kind == "f":
        if weight is not None:
            same_device(input, weight)
            shape = (-1,) + (1,) * (input.ndim - dim - 1)
            target = target * weight.reshape(shape)
        losses = -(logp * target).sum(dim)
        if reduction == "mean":
            return losses.mean()
        return losses.sum() if reduction == "sum" else losses
    return _nll_loss(logp, target, weight, ignore_index, reduction)


def _log_softmax_nll(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
                     dim: int) -> Tensor:
    """cross_entropy with class indices over a (N, C) or (C,) float input, no label smoothing: one node
    (Note [cross_entropy is one node])."""
    dev = same_device(input, target)
    grad = recording(input)
    logp = log_softmax_array(input.data, dim, dev.xp, dev.backend)
    out, coef = _nll_arrays(input, logp, target, weight, ignore_index, reduction, grad)
    if not grad:
        return plain(out, dev)
    return record(NllLossBackward0, (input,), out, dev, reduction, input.shape[0] if input.ndim == 2 else 1, dim,
                  coef, logp, work=_FUSED_WORK * math.prod(input.shape))


_FUSED_WORK = 4
"""The fused node's backward per input element (Note [Cost classes] in ops/_node.py): nll_loss's product,
then log_softmax's exp, product and difference."""


def _label_smoothed(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
                    smoothing: float, dim: int) -> Tensor:
    """(1 - e) nll_loss + e / C * smooth, smooth = -sum_c w_c logp_c per position (0 where ignored),
    averaged for "mean" over the targets' weights (or the count of kept positions) as torch does."""
    classes = logp.shape[dim]
    nll = _nll_loss(logp, target, weight, ignore_index, reduction)
    if weight is not None:
        same_device(logp, weight)
        shape = (-1,) + (1,) * (logp.ndim - dim - 1)
        smooth = -(logp * weight.reshape(shape)).sum(dim)
    else:
        smooth = -logp.sum(dim)
    kept = target != ignore_index
    smooth = smooth * kept.to(smooth.dtype)
    if reduction == "mean":
        if weight is not None:
            safe = target * kept.to(target.dtype)
            total = (weight.reshape(-1)[safe.reshape(-1)] * kept.reshape(-1).to(weight.dtype)).sum()
        else:
            total = kept.to(smooth.dtype).sum()
        smooth = smooth.sum() / total
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1 - smoothing) + smooth * (smoothing / classes)
