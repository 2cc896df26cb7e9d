"""Sorting and selecting by rank: sort, argsort, topk, kthvalue, median, nanmedian, unique.

One stable argsort per device (the backend's ``argsort``: the standard's has no NaN order and
numpy's no descending) ranks the elements as torch does, NaN above every number; each op then
takes what it needs along the dim. The values' gradient goes back to the indices they came
from (Note [Indices along a dim] in ``indexing.py``), so its own gradient is a gather again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad._validate import bool_arg, int_arg, normalize_dim, tensor_arg
from asyncgrad.ops._node import OpNode, SavesVariables, plain, record, recording
from asyncgrad.ops.indexing import along
from asyncgrad.ops.reduction import ReductionResult
from asyncgrad.tensor import Tensor


class _ToIndices(SavesVariables):
    """Values picked along a dim (sort, topk, kthvalue, median(dim)): the gradient, its reduced
    dim restored (``kept``), is added back at the indices the values came from."""

    __slots__ = ("shape", "kept", "index")

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, False), F.reshape(g, self.kept)),)


class SortBackward0(_ToIndices):
    __slots__ = ()


class TopkBackward0(_ToIndices):
    __slots__ = ()


class KthvalueBackward0(_ToIndices):
    __slots__ = ()


class MedianBackward1(_ToIndices):
    __slots__ = ()


class NanmedianBackward1(_ToIndices):
    __slots__ = ()


def _picked(cls: type[OpNode], x: Tensor, axis: int, order: Any, keepdim: bool = True) -> ReductionResult:
    """The values of ``x`` at ``order`` (indices along ``axis``, the dim kept) and those indices,
    the dim squeezed unless ``keepdim``; the values record ``cls``."""
    dev = x.device
    backend = dev.backend
    xp = dev.xp
    key = along(order, axis, backend)
    values = backend.getitem(x.data, key)
    indices = order
    if not keepdim:
        values = xp.squeeze(values, axis=axis)
        indices = xp.squeeze(order, axis=axis)
    index_tensor = plain(indices, dev)
    if not recording(x):
        return ReductionResult(plain(values, dev), index_tensor)
    return ReductionResult(record(cls, (x,), values, dev, x.shape, order.shape, key), index_tensor)


def _vector(x: Tensor) -> Tensor:
    """A 0-d tensor as the one-element vector the dim ops work on (torch treats its dim 0 so)."""
    return x.reshape(1) if x.ndim == 0 else x


def _scalar(result: ReductionResult, was_0d: bool) -> ReductionResult:
    if not was_0d:
        return result
    return ReductionResult(result.values.reshape(()), result.indices.reshape(()))


def sort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> ReductionResult:
    """torch's ``sort``: ``(values, indices)`` along ``dim``; always stable (ties keep their order,
    which ``stable=False`` allows), NaN sorted above every number."""
    tensor_arg(x, "sort")
    axis = normalize_dim(dim, x.ndim, "sort")
    descending = bool_arg(descending, "sort", "descending")
    was_0d, x = x.ndim == 0, _vector(x)
    order = x.device.backend.argsort(x.data, axis, descending)
    return _scalar(_picked(SortBackward0, x, axis, order), was_0d)


def argsort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """torch's ``argsort``: the indices ``sort`` gives (int64, never recording)."""
    tensor_arg(x, "argsort")
    axis = normalize_dim(dim, x.ndim, "argsort")
    if x.ndim == 0:
        return plain(x.device.backend.zeros((), np.int64), x.device)
    return plain(x.device.backend.argsort(x.data, axis, bool_arg(descending, "argsort", "descending")), x.device)


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ReductionResult:
    """torch's ``topk``: the ``k`` largest (``largest=False``: smallest) values along ``dim`` and their
    indices, in rank order (``sorted=False`` allows any order: this one)."""
    tensor_arg(x, "topk")
    k = int_arg(k, "topk", "k", 2)
    axis = normalize_dim(dim, x.ndim, "topk")
    n = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    was_0d, x = x.ndim == 0, _vector(x)
    order = x.device.backend.argsort(x.data, axis, bool_arg(largest, "topk", "largest"))
    order = x.device.backend.getitem(order, (slice(None),) * axis + (slice(0, k),))
    return _scalar(_picked(TopkBackward0, x, axis, order), was_0d)


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ReductionResult:
    """torch's ``kthvalue``: the ``k``-th smallest value along ``dim`` (1-based) and its index."""
    tensor_arg(x, "kthvalue")
    k = int_arg(k, "kthvalue", "k", 2)
    axis = normalize_dim(dim, x.ndim, "kthvalue")
    n = x.shape[axis] if x.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {axis}")
    keepdim = bool_arg(keepdim, "kthvalue", "keepdim")
    was_0d, x = x.ndim == 0, _vector(x)
    order = x.device.backend.argsort(x.data, axis, False)
    order = x.device.backend.getitem(order, (slice(None),) * axis + (slice(k - 1, k),))
    return _scalar(_picked(KthvalueBackward0, x, axis, order, keepdim), was_0d)


class _EvenlyDistributed(OpNode):
    """median() of all elements: torch's evenly_distribute_backward, ties (and NaNs, when the
    median is NaN) sharing the gradient evenly. x and the result are saved too, as torch saves them:
    changing either in place refuses the backward with torch's error."""

    __slots__ = ()
    saves_result = True

    def backward(self, F, g):
        share = F.unpack(self)[0]
        return (g * share,)


class MedianBackward0(_EvenlyDistributed):
    __slots__ = ()


class NanmedianBackward0(_EvenlyDistributed):
    __slots__ = ()


def _median_order(x: Tensor, axis: int, ignore_nan: bool = False) -> Any:
    """Per slice along ``axis`` (kept), the index of torch's median: the lower middle of the sorted
    values, or the first NaN where the slice holds one (the median is then NaN). ``ignore_nan``
    (nanmedian): the lower middle of the values that are not NaN, the first NaN where all are."""
    dev = x.device
    xp = dev.xp
    backend = dev.backend
    order = backend.argsort(x.data, axis, False)
    n = x.shape[axis]
    rank = backend.full(tuple(1 if i == axis else s for i, s in enumerate(x.shape)), (n - 1) // 2, np.int64)
    if x.dtype.kind == "f":  # NaNs sort last: the first of them sits at n - (their count)
        nans = xp.sum(backend.astype(xp.isnan(x.data), np.int64), axis=axis, keepdims=True)
        if ignore_nan:
            valid = n - nans
            rank = xp.where(valid > 0, (valid - 1) // 2, n - nans)
        else:
            rank = xp.where(nans > 0, n - nans, rank)
    return xp.take_along_axis(order, rank, axis=axis)


def median(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """torch's ``median``: the lower of the two middle values (no average), NaN if there is one;
    of all elements (a tensor) or along ``dim`` (values and indices)."""
    return _median(x, dim, keepdim, "median", False)


def nanmedian(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """torch's ``nanmedian``: ``median`` of the values that are not NaN (NaN where all are); of all
    elements (a tensor; the gradient shared by the elements equal to it, as median's) or along
    ``dim`` (values and indices; the gradient goes to the index). Where a slice is all NaN, the
    index is its first NaN's (torch's is whichever its selection algorithm leaves there)."""
    return _median(x, dim, keepdim, "nanmedian", True)


def _median(x: Tensor, dim: Any, keepdim: bool, name: str, ignore_nan: bool) -> Any:
    tensor_arg(x, name)
    dev = x.device
    if dim is None:
        if x.numel() == 0:
            return plain(dev.backend.full((), float("nan"), x.dtype), dev)
        flat = dev.xp.reshape(x.data, (-1,))
        pick = _median_order(Tensor._make(flat, dev, False, None, 0, [0]), 0, ignore_nan)
        value = dev.xp.reshape(dev.backend.getitem(flat, pick), ())
        if not recording(x):
            return plain(value, dev)
        mask = x.data == value
        if x.dtype.kind == "f":
            mask = dev.xp.logical_or(mask, dev.xp.logical_and(dev.xp.isnan(x.data), dev.xp.isnan(value)))
        share = dev.backend.astype(mask, x.dtype)
        node = NanmedianBackward0 if ignore_nan else MedianBackward0
        return record(node, (x,), value, dev, saved=(plain(share / dev.xp.sum(share), dev), x))
    axis = normalize_dim(dim, x.ndim, name)
    keepdim = bool_arg(keepdim, name, "keepdim")
    if x.ndim and x.shape[axis] == 0:  # torch names median() for both
        raise IndexError(f"median(): Expected reduction dim {axis} to have non-zero size.")
    was_0d, x = x.ndim == 0, _vector(x)
    node = NanmedianBackward1 if ignore_nan else MedianBackward1
    return _scalar(_picked(node, x, axis, _median_order(x, axis, ignore_nan), keepdim), was_0d)


def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Any:
    """torch's ``unique`` of all elements: the distinct values, sorted (torch may sort even when
    ``sorted=False``; this always does), with each element's position among them and their
    counts if asked. Not differentiable (torch records a node whose backward refuses)."""
    tensor_arg(x, "unique")
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not implemented in asyncgrad; flatten first or use dim=None")
    dev = x.device
    values, inverse, counts = dev.backend.unique(x.data)
    out = plain(values, dev)
    if not return_inverse and not return_counts:
        return out
    extra = ([plain(inverse, dev)] if return_inverse else []) + ([plain(counts, dev)] if return_counts else [])
    return (out, *extra)
