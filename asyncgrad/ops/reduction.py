"""Reductions (sum, mean, max, min) and the normalisations along a dim (softmax, log_softmax)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from asyncgrad.autograd.grad_mode import grad_enabled
from asyncgrad.autograd.saved import SavedTensor
from asyncgrad.ops._node import OpNode, gradient_edge, record
from asyncgrad.tensor import Tensor, scalar_type_name


def normalize_dim(dim: int, ndim: int) -> int:
    low, high = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if not low <= dim <= high:
        raise IndexError(f"Dimension out of range (expected to be in range of [{low}, {high}], but got {dim})")
    return dim % ndim if ndim > 0 else 0


def normalize_dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    axes = tuple(normalize_dim(d, ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    return axes


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(1 for _ in shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _recording(x: Tensor) -> bool:
    return x._requires_grad and grad_enabled.get()


def _plain(out: Any, x: Tensor) -> Tensor:
    return Tensor._make(out, x.device, False, None, 0, [0])


# --------------------------------------------------------------------------- sum / mean
class SumBackward0(OpNode):
    """sum() of every element."""

    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.expand(g, self.shape),)


class SumBackward1(OpNode):
    """sum(dim, keepdim)."""

    __slots__ = ("shape", "kept")

    def backward(self, F, g):
        return (F.expand(F.reshape(g, self.kept), self.shape),)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    data = x.data
    axes = normalize_dims(dim, data.ndim)
    if dtype is None and data.dtype.kind in "biu":
        dtype = np.int64
    out = data.sum(axis=axes, keepdims=keepdim, dtype=dtype)
    out = np.asarray(out) if isinstance(data, np.ndarray) else out
    if not _recording(x):
        return _plain(out, x)
    if axes is None and not keepdim:
        node = SumBackward0((gradient_edge(x),))
    else:
        node = SumBackward1((gradient_edge(x),))
        node.kept = _kept_shape(data.shape, axes)
    node.shape = data.shape
    return record(node, out, x.device, 0)


class MeanBackward0(OpNode):
    __slots__ = ("shape", "count")

    def backward(self, F, g):
        return (F.expand(g / self.count, self.shape),)


class MeanBackward1(OpNode):
    __slots__ = ("shape", "kept", "count")

    def backward(self, F, g):
        return (F.expand(F.reshape(g / self.count, self.kept), self.shape),)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    data = x.data
    if data.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {scalar_type_name(data.dtype)}"
        )
    axes = normalize_dims(dim, data.ndim)
    out = data.mean(axis=axes, keepdims=keepdim)
    out = np.asarray(out, dtype=data.dtype) if isinstance(data, np.ndarray) else out
    if not _recording(x):
        return _plain(out, x)
    count = data.size if axes is None else int(np.prod([data.shape[a] for a in axes]))
    if axes is None and not keepdim:
        node = MeanBackward0((gradient_edge(x),))
    else:
        node = MeanBackward1((gradient_edge(x),))
        node.kept = _kept_shape(data.shape, axes)
    node.shape = data.shape
    node.count = count
    return record(node, out, x.device, 0)


# --------------------------------------------------------------------------- max / min
class ReductionResult(NamedTuple):
    """``(values, indices)`` of max/min along a dim, as torch.return_types."""

    values: Tensor
    indices: Tensor


class MaxBackward1(OpNode):
    """max()/min() of all elements: ties share the gradient evenly (torch's amax rule)."""

    __slots__ = ()

    def backward(self, F, g):
        (share,) = F.unpack(self)
        return (g * share,)


class MinBackward1(MaxBackward1):
    __slots__ = ()


class MaxBackward0(OpNode):
    """max(dim)/min(dim): the gradient goes to the index each value came from."""

    __slots__ = ("kept",)

    def backward(self, F, g):
        (onehot,) = F.unpack(self)
        return (F.reshape(g, self.kept) * onehot,)


class MinBackward0(MaxBackward0):
    __slots__ = ()


def _extreme(x: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Any:
    data = x.data
    name = "max" if is_max else "min"
    if data.size == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
            "with the 'dim' argument."
        )
    if dim is None:
        out = np.asarray(data.max() if is_max else data.min())
        if not _recording(x):
            return _plain(out, x)
        node = (MaxBackward1 if is_max else MinBackward1)((gradient_edge(x),))
        mask = data == out
        node.saved = (SavedTensor(_plain((mask / mask.sum()).astype(data.dtype), x)),)
        return record(node, out, x.device, data.size)
    axis = normalize_dim(dim, data.ndim)
    if data.ndim == 0:
        return _extreme_0d(x, is_max)
    indices = data.argmax(axis=axis, keepdims=True) if is_max else data.argmin(axis=axis, keepdims=True)
    values = np.take_along_axis(data, indices, axis=axis)
    if not keepdim:
        values = values.squeeze(axis)
        out_indices = indices.squeeze(axis)
    else:
        out_indices = indices
    index_tensor = _plain(out_indices, x)
    if not _recording(x):
        return ReductionResult(_plain(values, x), index_tensor)
    node = (MaxBackward0 if is_max else MinBackward0)((gradient_edge(x),))
    positions = np.arange(data.shape[axis]).reshape([-1 if i == axis else 1 for i in range(data.ndim)])
    node.kept = indices.shape
    node.saved = (SavedTensor(_plain((positions == indices).astype(data.dtype), x)),)
    return ReductionResult(record(node, values, x.device, data.size), index_tensor)


def _extreme_0d(x: Tensor, is_max: bool) -> ReductionResult:
    """max/min(dim) of a 0-d tensor: itself, at index 0 (torch; numpy has no axis to reduce)."""
    index_tensor = _plain(np.zeros((), dtype=np.int64), x)
    values = x.data.copy()
    if not _recording(x):
        return ReductionResult(_plain(values, x), index_tensor)
    node = (MaxBackward0 if is_max else MinBackward0)((gradient_edge(x),))
    node.kept = ()
    node.saved = (SavedTensor(_plain(np.ones((), dtype=values.dtype), x)),)
    return ReductionResult(record(node, values, x.device), index_tensor)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, False)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if dim is None:
        return _plain(np.asarray(x.data.argmax()), x)
    return _plain(x.data.argmax(axis=normalize_dim(dim, x.ndim), keepdims=keepdim), x)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if dim is None:
        return _plain(np.asarray(x.data.argmin()), x)
    return _plain(x.data.argmin(axis=normalize_dim(dim, x.ndim), keepdims=keepdim), x)


# --------------------------------------------------------------------------- softmax family
class SoftmaxBackward0(OpNode):
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (y * (g - F.sum(g * y, self.dim, True)),)


def softmax(x: Tensor, dim: int) -> Tensor:
    data = x.data
    axis = normalize_dim(dim, data.ndim)
    shifted = np.exp(data - data.max(axis=axis, keepdims=True))
    out = shifted / shifted.sum(axis=axis, keepdims=True)
    if not _recording(x):
        return _plain(out, x)
    node = SoftmaxBackward0((gradient_edge(x),))
    node.dim = axis
    result = record(node, out, x.device)
    node.saved = (SavedTensor(result, is_output=True),)
    return result


class LogSoftmaxBackward0(OpNode):
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g - F.exp(y) * F.sum(g, self.dim, True),)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    data = x.data
    axis = normalize_dim(dim, data.ndim)
    shifted = data - data.max(axis=axis, keepdims=True)
    out = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    if not _recording(x):
        return _plain(out, x)
    node = LogSoftmaxBackward0((gradient_edge(x),))
    node.dim = axis
    result = record(node, out, x.device)
    node.saved = (SavedTensor(result, is_output=True),)
    return result
