"""Sorting and selecting by rank: sort, argsort, topk, kthvalue, median, nanmedian, unique.

One stable argsort per device (the backend's ``argsort``: the standard's has no NaN order and
numpy's no descending) ranks the elements as torch does, NaN above every number; each op then
takes what it needs along the dim. The values' gradient goes back to the indices they came
from (Note [Indices along a dim] in ``indexing.py``), so its own gradient is a gather again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from asyncgrad._validate import bool_arg, int_arg, normalize_dim, tensor_arg
from asyncgrad.ops._node import ArrayMath, OpNode, SavesVariables, input_meta, plain, record, recording
from asyncgrad.ops.indexing import along
from asyncgrad.tensor import ReductionResult, Tensor


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


# --------------------------------------------------------------------------- mode, cummax/cummin, aminmax
class ModeBackward0(_ToIndices):
    __slots__ = ()


_MODE_CHUNK = 1 << 22
"""Elements of the pairwise comparison ``mode`` builds at once (slices x n x n)."""


def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> ReductionResult:
    """torch's ``mode`` along ``dim``: the most frequent value of each slice (the smallest among
    equally frequent ones) and the index of its last occurrence. Each element's count comes from
    comparing the slice with itself (``n²`` per slice, in chunks of slices)."""
    tensor_arg(x, "mode")
    was_0d, x = x.ndim == 0, _vector(x)
    axis = normalize_dim(dim, x.ndim, "mode")
    keepdim = bool_arg(keepdim, "mode", "keepdim")
    n = x.shape[axis]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {axis} to have non-zero size.")
    dev = x.device
    xp = dev.xp
    backend = dev.backend
    moved = xp.moveaxis(x.data, axis, -1)
    lead = moved.shape[:-1]
    rows = xp.reshape(moved, (-1, n))
    positions = backend.arange(n, np.int64)
    picks = []
    step = max(1, _MODE_CHUNK // max(1, n * n))
    for start in range(0, rows.shape[0], step):
        block = rows[start:min(start + step, rows.shape[0]), ...]
        same = xp.reshape(block, block.shape + (1,)) == xp.reshape(block, (block.shape[0], 1, n))
        counts = xp.sum(backend.astype(same, np.int64), axis=2)
        best = xp.max(counts, axis=1, keepdims=True)
        candidates = xp.where(counts == best, block, xp.max(block, axis=1, keepdims=True))
        value = xp.min(candidates, axis=1, keepdims=True)
        last = xp.max(xp.where(block == value, xp.reshape(positions, (1, n)), -1), axis=1)
        picks.append(last)
    index = xp.concat(picks) if picks else backend.arange(0, np.int64)
    order = xp.moveaxis(xp.reshape(index, lead + (1,)), -1, axis)
    return _scalar(_picked(ModeBackward0, x, axis, order, keepdim), was_0d)


class CummaxBackward0(_ToIndices):
    """cummax: each value's gradient goes to the index it came from; repeated indices add up (a
    0-d input, ``index`` None, is its own running extreme)."""

    __slots__ = ()

    def backward(self, F, g):
        return (g,) if self.index is None else _ToIndices.backward(self, F, g)


class CumminBackward0(CummaxBackward0):
    __slots__ = ()


def _cumulative_extreme(x: Tensor, dim: Any, is_max: bool) -> ReductionResult:
    fn = "cummax" if is_max else "cummin"
    tensor_arg(x, fn)
    axis = normalize_dim(int_arg(dim, fn, "dim", 2), x.ndim, fn)
    dev = x.device
    if x.ndim == 0:  # the element itself, at index 0
        cls = CummaxBackward0 if is_max else CumminBackward0
        return ReductionResult(record(cls, (x,), dev.backend.copy(x.data, "C"), dev, (), (), None),
                               plain(dev.backend.full((), 0, np.int64), dev))
    xp = dev.xp
    backend = dev.backend
    n = x.shape[axis]
    data = xp.moveaxis(x.data, axis, 0)
    values, indices = [], []
    if n:
        best = data[0, ...]
        where = backend.full(best.shape, 0, np.int64)
        floating = x.dtype.kind == "f"
        for i in range(n):
            current = data[i, ...]
            better = current >= best if is_max else current <= best
            if floating:  # torch's rule: a NaN always takes over, a number only from a number
                better = xp.logical_or(xp.isnan(current), xp.logical_and(better, xp.logical_not(xp.isnan(best))))
            best = xp.where(better, current, best)
            where = xp.where(better, i, where)
            values.append(best)
            indices.append(where)
        out = xp.moveaxis(xp.stack(values), 0, axis)
        order = xp.moveaxis(xp.stack(indices), 0, axis)
    else:
        out = backend.copy(x.data, "C")
        order = backend.full(x.shape, 0, np.int64)
    index_tensor = plain(order, dev)
    if not recording(x):
        result = ReductionResult(plain(out, dev), index_tensor)
    else:
        key = along(order, axis, backend)
        result = ReductionResult(record(CummaxBackward0 if is_max else CumminBackward0, (x,), out, dev, x.shape,
                                        order.shape, key), index_tensor)
    return result


def cummax(input: Tensor, dim: int) -> ReductionResult:
    """torch's ``cummax``: the running maximum along ``dim`` and where it was reached (the last
    index among equal values; a NaN, once seen, stays)."""
    return _cumulative_extreme(input, dim, True)


def cummin(input: Tensor, dim: int) -> ReductionResult:
    """torch's ``cummin``: the running minimum along ``dim`` and where it was reached."""
    return _cumulative_extreme(input, dim, False)


class AminmaxResult(NamedTuple):
    """torch's ``aminmax`` return type."""

    min: Tensor
    max: Tensor


class AminmaxBackward0(OpNode):
    """aminmax: each of the two gradients shared evenly among the elements that reach its extreme
    (torch's ``aminmax_backward``: amin's and amax's formulas, summed)."""

    __slots__ = ("kept",)

    def apply(self, grads: list, create_graph: bool) -> Any:
        return self.backward(self.graph_math if create_graph else ArrayMath, grads)

    def backward(self, F, grads):
        low_share, high_share = F.unpack(self)
        total = None
        for g, share in zip(grads, (low_share, high_share)):
            if g is None:
                continue
            part = F.reshape(g, self.kept) * share
            total = part if total is None else total + part
        return (total,)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> AminmaxResult:
    """torch's ``aminmax``: ``amin`` and ``amax`` of all elements or along ``dim``, from one node."""
    tensor_arg(input, "aminmax")
    keepdim = bool_arg(keepdim, "aminmax", "keepdim")
    dev = input.device
    xp = dev.xp
    backend = dev.backend
    if dim is None:
        axes: Any = None
        if input.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
    else:
        axis = normalize_dim(int_arg(dim, "aminmax", "dim", 2), input.ndim, "aminmax")
        if input.ndim and input.shape[axis] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {axis} to have non-zero size.")
        axes = (axis,) if input.ndim else None
    data = input.data
    low = xp.min(data, axis=axes, keepdims=True)
    high = xp.max(data, axis=axes, keepdims=True)
    if keepdim and (dim is not None or input.ndim == 0):
        shape = low.shape
    elif dim is None:
        shape = (1,) * input.ndim if keepdim else ()
    else:
        shape = tuple(s for i, s in enumerate(input.shape) if i != axes[0]) if axes else ()
    low_out, high_out = xp.reshape(low, shape), xp.reshape(high, shape)
    if not recording(input):
        return AminmaxResult(plain(low_out, dev), plain(high_out, dev))
    shares = []
    for kept in (low, high):
        ties = backend.astype(data == kept, input.dtype)
        count = xp.sum(ties, axis=axes, keepdims=True)
        shares.append(plain(xp.where(count == 0, float("nan"), ties / xp.where(count == 0, 1.0, count)), dev))
    first = record(AminmaxBackward0, (input,), low_out, dev, low.shape, saved=tuple(shares))
    node = first.grad_fn
    node._input_meta = node._input_meta + input_meta(tuple(high_out.shape), backend.dtype(high_out), dev)
    return AminmaxResult(first, Tensor._make(high_out, dev, True, node, 1, [0]))
