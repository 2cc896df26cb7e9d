"""``ag.masked``: torch.masked's reductions and normalisations on strided tensors.

Each is torch's composition: the input with its masked-out elements replaced by the operation's
identity (0 for sums and norms, 1 for products, -inf for maxima, log-sum-exps and softmax, inf
for minima and softmin, NaN for the median), then the plain operation; ``mean``, ``var`` and
``std`` divide by the number of elements the mask keeps. The mask broadcasts to the input and
carries no gradient; masked-out elements get a zero gradient (the ``where``'s).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import plain
from asyncgrad.ops.activation import softmin as _softmin
from asyncgrad.ops.elementwise import maximum, where
from asyncgrad.ops.linalg import vector_norm
from asyncgrad.ops.reduction import log_softmax as _log_softmax
from asyncgrad.ops.reduction import softmax as _softmax
from asyncgrad.tensor import Tensor

__all__ = ["amax", "amin", "cumprod", "cumsum", "log_softmax", "logaddexp", "logsumexp", "mean", "median", "norm",
           "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]




def _dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """torch's canonical dims: None (or an empty tuple) is every dim."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(ndim))
    items = (dim,) if isinstance(dim, int) else tuple(dim)
    nd = max(ndim, 1)
    out = []
    for d in items:
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
        out.append(d % nd)
    return tuple(sorted(set(out))) if ndim else ()


def _mask(input: Tensor, mask: Tensor | None) -> Tensor | None:
    """The canonical mask: bool, broadcast to the input's shape (None: every element)."""
    if mask is None:
        return None
    if mask.ndim > input.ndim:
        raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher than of the input)")
    m = mask if mask.dtype == np.bool_ else mask != 0
    if tuple(m.shape) != tuple(input.shape):
        m = m.expand(*input.shape)
    return m.detach()


def _cast(input: Tensor, dtype: Any) -> Tensor:
    return input if dtype is None else input.to(dtype)


def _fill(input: Tensor, mask: Tensor | None, value: float) -> Tensor:
    """``input`` with its masked-out elements replaced by ``value`` (the operation's identity)."""
    return input if mask is None else where(mask, input, value)


def _reduce_dims(x: Tensor, dims: tuple[int, ...], keepdim: bool, fn: str) -> Tensor:
    for d in reversed(dims):
        x = getattr(x, fn)(d, keepdim=keepdim)
    return x


def sum(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
        mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "sum", "input", 1)
    x = _fill(_cast(input, dtype), _mask(input, mask), 0.0)
    dims = _dims(dim, input.ndim)
    return x.sum(dims, keepdim=bool(keepdim)) if dims else (x * 1 if not keepdim else x * 1)


def prod(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "prod", "input", 1)
    x = _fill(_cast(input, dtype), _mask(input, mask), 1.0)
    return _reduce_dims(x, _dims(dim, input.ndim), bool(keepdim), "prod") if input.ndim else x * 1


def cumsum(input: Tensor, dim: int, *, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "cumsum", "input", 1)
    return _fill(_cast(input, dtype), _mask(input, mask), 0.0).cumsum(dim)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "cumprod", "input", 1)
    return _fill(_cast(input, dtype), _mask(input, mask), 1.0).cumprod(dim)


def amax(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "amax", "input", 1)
    x = _fill(input, _mask(input, mask), -math.inf)
    dims = _dims(dim, input.ndim)
    return _cast(x.amax(dims, keepdim=bool(keepdim)) if dims else x * 1, dtype)


def amin(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "amin", "input", 1)
    x = _fill(input, _mask(input, mask), math.inf)
    dims = _dims(dim, input.ndim)
    return _cast(x.amin(dims, keepdim=bool(keepdim)) if dims else x * 1, dtype)


def _count(input: Tensor, mask: Tensor | None, dims: tuple[int, ...], keepdim: bool) -> Any:
    """How many elements each reduction keeps: a constant tensor (or a number with no mask)."""
    if mask is None:
        return float(np.prod([input.shape[d] for d in dims])) if dims else 1.0
    counts = mask.to(input.dtype if input.dtype.kind == "f" else np.float32)
    return counts.sum(dims, keepdim=keepdim) if dims else counts


def mean(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "mean", "input", 1)
    m = _mask(input, mask)
    dims = _dims(dim, input.ndim)
    total = sum(input, dims, keepdim=keepdim, dtype=dtype, mask=m)
    return total / _count(input if dtype is None else input.to(dtype), m, dims, bool(keepdim))


def _std_var(input: Tensor, dim: Any, unbiased: Any, correction: Any, keepdim: bool, dtype: Any,
             mask: Tensor | None, sqrt: bool) -> Tensor:
    if unbiased is not None and correction is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    c = 1.0 if unbiased is None or unbiased else 0.0
    if correction is not None:
        c = float(correction)
    x = _cast(input, dtype)
    if x.dtype.kind != "f":
        x = x.to(np.float32)
    m = _mask(input, mask)
    dims = _dims(dim, input.ndim)
    count = _count(x, m, dims, True)
    centred = x - sum(x, dims, keepdim=True, mask=m) / count
    total = sum(centred * centred, dims, keepdim=keepdim, mask=m)
    if not isinstance(count, float) and not keepdim:
        count = count.reshape(*total.shape)
    if c != 0:
        divisor = count - c
        total = total / (maximum(divisor, divisor * 0) if not isinstance(divisor, float) else max(divisor, 0.0))
    else:
        total = total / count
    return total.sqrt() if sqrt else total


def var(input: Tensor, dim: Any = None, unbiased: bool | None = None, *, correction: Any = None,
        keepdim: bool = False, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "var", "input", 1)
    return _std_var(input, dim, unbiased, correction, bool(keepdim), dtype, mask, False)


def std(input: Tensor, dim: Any = None, unbiased: bool | None = None, *, correction: Any = None,
        keepdim: bool = False, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "std", "input", 1)
    return _std_var(input, dim, unbiased, correction, bool(keepdim), dtype, mask, True)


def norm(input: Tensor, ord: float | None = 2.0, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "norm", "input", 1)
    ord = 2.0 if ord is None else ord
    x = _fill(input, _mask(input, mask), math.inf if ord == -math.inf else 0.0)
    return vector_norm(x, ord, _dims(dim, input.ndim), bool(keepdim), dtype=dtype)


def normalize(input: Tensor, ord: float, dim: int, *, eps: float = 1e-12, dtype: Any = None,
              mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "normalize", "input", 1)
    m = _mask(input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=m)
    x = _fill(input, m, math.inf if ord == -math.inf else 0.0)
    return x / maximum(nrm, nrm.detach() * 0 + eps)


def median(input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype: Any = None,
           mask: Tensor | None = None) -> Tensor:
    """The lower median of the kept elements along ``dim`` (torch's nanmedian of the input with
    NaN where masked out): NaN where nothing is kept."""
    tensor_arg(input, "median", "input", 1)
    x = _cast(input, dtype)
    if x.dtype.kind != "f":
        x = x.to(np.float32)
    x = _fill(x, _mask(input, mask), math.nan)
    if x.ndim == 0:
        return x * 1
    d = _dims(dim, x.ndim)[0]
    values, _ = x.sort(d)
    kept = (~values.isnan()).to(np.float64).sum(d, keepdim=True)
    index = plain(x.device.asarray(np.maximum((np.asarray(kept.detach().cpu().numpy()) - 1) // 2, 0)
                                   .astype(np.int64)), x.device)
    out = values.gather(d, index)
    return out if keepdim else out.squeeze(d)


def _softmax_family(fn: Any, fill: float, input: Tensor, dim: int, dtype: Any, mask: Tensor | None) -> Tensor:
    x = _cast(input, dtype)
    if x.numel() == 0:  # nothing to normalise: an empty result, still part of the graph
        return x * 1
    return fn(_fill(x, _mask(input, mask), fill), dim)


def softmax(input: Tensor, dim: int, *, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "softmax", "input", 1)
    return _softmax_family(_softmax, -math.inf, input, dim, dtype, mask)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "log_softmax", "input", 1)
    return _softmax_family(_log_softmax, -math.inf, input, dim, dtype, mask)


def softmin(input: Tensor, dim: int, *, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "softmin", "input", 1)
    return _softmax_family(_softmin, math.inf, input, dim, dtype, mask)


def logsumexp(input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
              mask: Tensor | None = None) -> Tensor:
    tensor_arg(input, "logsumexp", "input", 1)
    x = _fill(_cast(input, dtype), _mask(input, mask), -math.inf)
    dims = _dims(dim, input.ndim)
    return x.logsumexp(dims, keepdim=bool(keepdim)) if dims else x * 1


def logaddexp(input: Tensor, other: Tensor, *, dtype: Any = None, input_mask: Tensor | None = None,
              other_mask: Tensor | None = None) -> Tensor:
    """log(exp(a) + exp(b)) of the two inputs, each with -inf where its mask drops it; -inf where
    both are -inf."""
    tensor_arg(input, "logaddexp", "input", 1)
    a = _fill(input, _mask(input, input_mask), -math.inf)
    b = _fill(other, _mask(other, other_mask), -math.inf)
    top = maximum(a, b).detach()
    finite = top.isfinite()
    shift = where(finite, top, 0.0)
    out = (a - shift).exp() + (b - shift).exp()
    return _cast(where(finite, out.log() + shift, maximum(a, b)), dtype)



