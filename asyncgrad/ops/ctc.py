"""ctc_loss: torch's alpha-beta formulation (Graves et al.), on the device's arrays.

The forward runs the alpha recursion over time for the whole batch at once (states: the target
with blanks around and between its labels, ``2 S + 1`` of them) and records CtcLossBackward0 on
the per-sequence negative log likelihoods; the reductions are the ops torch composes after it
(divide by the target lengths, mean). The backward runs the beta recursion and applies torch's
formula ``exp(lp) - exp(log(sum over the states of label c of alpha beta) + nll - lp)``, which is
the gradient as seen through a log_softmax that made ``log_probs`` (torch's choice: its result is
exact for the usual ``ctc_loss(log_softmax(x))`` and is what torch returns for ``log_probs``).
torch has no second derivative of it, nor has this.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record
from asyncgrad.ops.loss import check_reduction
from asyncgrad.tensor import Tensor, scalar_type_name

_NEG_INF = float("-inf")


def _lengths(value: Any, name: str) -> list[int]:
    if isinstance(value, Tensor):
        return [int(v) for v in value.reshape(-1).tolist()]
    return [int(v) for v in value]


def _logaddexp3(xp: Any, a: Any, b: Any, c: Any) -> Any:
    return xp.logaddexp(xp.logaddexp(a, b), c)


def _shift(xp: Any, backend: Any, a: Any, k: int, fill: float) -> Any:
    """``a`` moved ``k`` states along its last axis (towards higher states; ``-k``: lower), ``fill`` coming in."""
    n = a.shape[-1]
    out = backend.full(tuple(a.shape), fill, backend.dtype(a))
    if abs(k) >= n:
        return out
    if k > 0:
        backend.setitem(out, (Ellipsis, slice(k, None)), backend.getitem(a, (Ellipsis, slice(0, n - k))))
    else:
        backend.setitem(out, (Ellipsis, slice(0, n + k)), backend.getitem(a, (Ellipsis, slice(-k, None))))
    return out


class CtcLossBackward0(OpNode):
    """The gradient of the per-sequence negative log likelihoods with respect to ``log_probs``."""

    __slots__ = ("ext", "skip", "input_lengths", "target_lengths", "zero_infinity", "device")
    work_per_element = 40

    def backward(self, F, g):
        if F is not ArrayMath:
            raise NotImplementedError("the derivative for '_ctc_loss_backward' is not implemented.")
        lp_t, nll_t, alpha_t = self.saved[0].data, self.saved[1].data, self.saved[2].data
        for saved in self.saved:
            saved.check_version(self)
        return (_ctc_grad(self.device, lp_t, nll_t, alpha_t, g, self.ext, self.skip, self.input_lengths,
                          self.target_lengths, self.zero_infinity), None)


def _ctc_grad(dev: Any, lp: Any, nll: Any, alpha: Any, g: Any, ext: Any, skip: Any, il: list[int],
              tls: list[int], zero_infinity: bool) -> Any:
    """torch's ctc_loss_backward_cpu: the beta recursion, then the formula in the module docstring."""
    backend = dev.backend
    xp = dev.xp
    dtype = backend.dtype(lp)
    T, N, C = lp.shape
    L = ext.shape[1]
    n_idx = xp.reshape(dev.asarray(list(range(N)), np.int64), (N, 1))
    lpe = backend.getitem(lp, (slice(None), n_idx, ext))  # (T, N, L)
    s_idx = xp.reshape(dev.asarray(list(range(L)), np.int64), (1, L))
    last = xp.reshape(dev.asarray(tls, np.int64), (N, 1)) * 2  # the final blank's state
    skip_next = _shift(xp, backend, skip, -2, False)  # state s + 2 may be reached by skipping s + 1
    ends = xp.logical_or(s_idx == last, s_idx == last - 1)
    beta = backend.full((T, N, L), _NEG_INF, dtype)
    nxt = backend.full((N, L), _NEG_INF, dtype)
    for t in range(T - 1, -1, -1):
        here = backend.getitem(lpe, (t,))
        start = xp.where(ends, here, _NEG_INF)
        rec = _logaddexp3(xp, nxt, _shift(xp, backend, nxt, -1, _NEG_INF),
                          xp.where(skip_next, _shift(xp, backend, nxt, -2, _NEG_INF), _NEG_INF)) + here
        at_end = xp.reshape(dev.asarray([t == n - 1 for n in il], np.bool_), (N, 1))
        inside = xp.reshape(dev.asarray([t < n - 1 for n in il], np.bool_), (N, 1))
        cur = xp.where(at_end, start, xp.where(inside, rec, _NEG_INF))
        cur = xp.where(s_idx <= last, cur, _NEG_INF)
        backend.setitem(beta, (t,), cur)
        nxt = cur
    ab = alpha + beta  # log(alpha beta), the log prob of the state counted twice
    m = xp.max(ab, axis=2, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0.0)
    e = xp.exp(ab - m)
    shape = (T, N, L)
    index = (xp.broadcast_to(xp.reshape(dev.asarray(list(range(T)), np.int64), (T, 1, 1)), shape),
             xp.broadcast_to(xp.reshape(n_idx, (1, N, 1)), shape), xp.broadcast_to(xp.reshape(ext, (1, N, L)), shape))
    summed = backend.index_add((T, N, C), index, False, e)
    positive = summed > 0
    m_c = xp.max(xp.where(xp.isfinite(ab), ab, _NEG_INF), axis=2, keepdims=True)
    m_c = xp.where(xp.isfinite(m_c), m_c, 0.0)
    lcab = xp.where(positive, xp.log(xp.where(positive, summed, 1.0)) + m_c, _NEG_INF)
    grad = xp.exp(lp) - xp.exp(lcab + xp.reshape(nll, (1, N, 1)) - lp)
    valid_t = xp.reshape(dev.asarray([[t < n for n in il] for t in range(T)], np.bool_), (T, N, 1))
    grad = xp.where(valid_t, grad, 0.0)
    if zero_infinity:
        grad = xp.where(xp.reshape(xp.isfinite(nll), (1, N, 1)), grad, 0.0)
    return grad * xp.reshape(g, (1, N, 1))


def _check_args(log_probs: Tensor, targets: Tensor, il: list[int], tls: list[int], blank: int, T: int, N: int,
                C: int) -> None:
    """torch's ctc_loss_allocate_outputs checks, in its order and words: without them a length
    past the targets or the input would read padding or another sample's labels silently."""
    where = "(while checking arguments for ctc_loss_allocate_outputs)"
    if log_probs.dtype.kind != "f":
        raise NotImplementedError(f'"ctc_loss_{log_probs.device.type}" not implemented for '
                                  f"'{scalar_type_name(log_probs.dtype)}'")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if len(il) != N:
        raise RuntimeError(f"input_lengths must be of size batch_size, but got {len(il)} and {N}")
    if len(tls) != N:
        raise RuntimeError(f"target_lengths must be of size batch_size, but got {len(tls)} and {N}")
    for length in tls:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {length} {where}")
    if targets.ndim == 1:
        if targets.shape[0] != sum(tls):
            raise RuntimeError(f"Expected tensor to have size {sum(tls)} at dimension 0, but got size "
                               f"{targets.shape[0]} for argument #2 'targets' {where}")
    else:
        if targets.shape[0] != N:
            raise RuntimeError(f"Expected tensor to have size {N} at dimension 0, but got size {targets.shape[0]} "
                               f"for argument #2 'targets' {where}")
        if tls and targets.shape[1] < max(tls):
            raise RuntimeError(f"Expected tensor to have size at least {max(tls)} at dimension 1, but got size "
                               f"{targets.shape[1]} for argument #2 'targets' {where}")
    for length in il:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {length} {where}")
        if length > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {length} {where}")


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """torch's ctc_loss: ``log_probs`` (T, N, C) or (T, C), ``targets`` (N, S) padded or the
    targets one after another (1-d); ``reduction='mean'`` divides each loss by its target length
    (at least 1) and averages over the batch; ``zero_infinity`` zeroes impossible alignments and
    their gradients."""
    tensor_arg(log_probs, "ctc_loss", "log_probs", 1)
    tensor_arg(targets, "ctc_loss", "targets", 2)
    check_reduction(reduction)
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.ndim == 1 else targets
    il = _lengths(input_lengths, "input_lengths")
    tls = _lengths(target_lengths, "target_lengths")
    T, N, C = log_probs.shape
    _check_args(log_probs, targets, il, tls, blank, T, N, C)
    dev = log_probs.device
    backend = dev.backend
    xp = dev.xp
    host_targets = [int(v) for v in targets.reshape(-1).tolist()]
    smax = max(tls) if tls else 0
    rows = []
    offset = 0
    width = targets.shape[1] if targets.ndim == 2 else 0
    for n in range(N):
        if targets.ndim == 2:
            row = host_targets[n * width:n * width + tls[n]]
        else:
            row = host_targets[offset:offset + tls[n]]
            offset += tls[n]
        rows.append(row + [blank] * (smax - len(row)))
    L = 2 * smax + 1
    ext_rows = [[blank if s % 2 == 0 else row[s // 2] for s in range(L)] for row in rows]
    skip_rows = [[s >= 2 and r[s] != blank and r[s] != r[s - 2] for s in range(L)] for r in ext_rows]
    ext = dev.asarray(ext_rows, np.int64) if N else backend.zeros((0, L), np.int64)
    skip = dev.asarray(skip_rows, np.bool_) if N else backend.zeros((0, L), np.bool_)
    lp = log_probs.data
    dtype = backend.dtype(lp)
    n_idx = xp.reshape(dev.asarray(list(range(N)), np.int64), (N, 1))
    lpe = backend.getitem(lp, (slice(None), n_idx, ext))  # (T, N, L)
    s_idx = xp.reshape(dev.asarray(list(range(L)), np.int64), (1, L))
    last = xp.reshape(dev.asarray(tls, np.int64), (N, 1)) * 2
    valid = s_idx <= last
    alpha = backend.full((T, N, L), _NEG_INF, dtype)
    if T:
        first = xp.where(s_idx <= 1, backend.getitem(lpe, (0,)), _NEG_INF)
        first = xp.where(valid, first, _NEG_INF)
        backend.setitem(alpha, (0,), first)
        prev = first
        for t in range(1, T):
            cand = _logaddexp3(xp, prev, _shift(xp, backend, prev, 1, _NEG_INF),
                               xp.where(skip, _shift(xp, backend, prev, 2, _NEG_INF), _NEG_INF))
            cur = xp.where(valid, cand + backend.getitem(lpe, (t,)), _NEG_INF)
            live = xp.reshape(dev.asarray([t < n for n in il], np.bool_), (N, 1))
            cur = xp.where(live, cur, _NEG_INF)
            backend.setitem(alpha, (t,), cur)
            prev = xp.where(live, cur, prev)
    # the log likelihood: the last blank and the last label at the last valid time
    last_t = dev.asarray([max(n - 1, 0) for n in il], np.int64)
    final = backend.getitem(alpha, (last_t, xp.reshape(n_idx, (N,))))  # (N, L)
    ends = xp.logical_or(s_idx == last, xp.logical_and(s_idx == last - 1, last > 0))
    m = xp.max(xp.where(ends, final, _NEG_INF), axis=1)
    m = xp.where(xp.isfinite(m), m, 0.0)  # no path at all: the sum below is 0, its log -inf
    total = xp.sum(xp.where(ends, xp.exp(final - xp.reshape(m, (N, 1))), 0.0), axis=1)
    positive = total > 0
    ll = xp.where(positive, xp.log(xp.where(positive, total, 1.0)) + m, _NEG_INF)
    if any(n == 0 for n in il):  # an empty input aligns only with an empty target
        empty = dev.asarray([n == 0 for n in il], np.bool_)
        zero_target = dev.asarray([k == 0 for k in tls], np.bool_)
        ll = xp.where(empty, xp.where(zero_target, 0.0, _NEG_INF), ll)
    nll = -ll
    if zero_infinity:
        nll = xp.where(xp.isfinite(nll), nll, 0.0)
    nll_t = plain(nll, dev)
    losses = record(CtcLossBackward0, (log_probs, targets), nll, dev, ext, skip, il, tls, bool(zero_infinity), dev,
                    saved=(log_probs, nll_t, plain(alpha, dev)))
    if unbatched:
        losses = losses.squeeze(0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    divisor = Tensor([float(max(k, 1)) for k in tls], dtype=log_probs.dtype, device=dev)
    if unbatched:
        divisor = divisor.squeeze(0)
    return (losses / divisor).mean()


__all__ = ["ctc_loss"]

