"""Reductions (sum, mean, max, min) and the normalisations along a dim (softmax, log_softmax).

Each forward computes on the device's arrays through its backend's Array API namespace
(Note [One array backend per device]) and returns through ``record`` (Note [One way to record
an op]); what only a node needs (max's gradient shares) is computed only when one records.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from asyncgrad._validate import bool_arg, dtype_arg, int_list, normalize_dim, tensor_arg, type_label
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record, recording
from asyncgrad.tensor import Tensor, scalar_type_name


def normalize_dims(dim: Any, ndim: int, fn: str = "sum") -> tuple[int, ...] | None:
    """sum/mean's ``dim``: None or ``()`` for every dim (torch), an int, or a tuple or list of ints."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        if not dim:
            return None
        dims = int_list((dim,), fn, "dim")
    elif dim.__class__ is int or (isinstance(dim, (int, np.integer)) and not isinstance(dim, bool)):
        dims = (int(dim),)
    else:
        raise TypeError(f"{fn}(): argument 'dim' (position 1) must be tuple of ints, not {type_label(dim)}")
    axes = tuple(normalize_dim(d, ndim, fn) for d in dims)
    seen = set()
    for axis in axes:
        if axis in seen:
            raise RuntimeError(f"dim {axis} appears multiple times in the list of dims")
        seen.add(axis)
    return axes


def _no_integer_kernel(x: Tensor, axis: int, op: str) -> None:
    """torch has no softmax kernels for integer tensors (and says so, naming the kernel)."""
    dtype = x.dtype
    if dtype.kind not in "fc":
        kernel = f"{op}_lastdim_kernel_impl" if axis == x.ndim - 1 else f"{op}_kernel_impl"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(dtype)}\'')


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(1 for _ in shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


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
    if x.__class__ is not Tensor:
        tensor_arg(x, "sum")
    data = x.data
    axes = normalize_dims(dim, data.ndim, "sum")
    if keepdim.__class__ is not bool:
        keepdim = bool_arg(keepdim, "sum", "keepdim")
    if dtype is not None:
        dtype = dtype_arg(dtype, "sum")
    else:
        x_dtype = x.dtype
        if x_dtype.kind in "biu" and x_dtype != np.int64:  # torch sums integers and bools as int64
            dtype = np.int64
    dev = x.device
    if dtype is not None:  # cast first: the standard's sum takes no bools, and a dtype only to widen
        data = dev.backend.astype(data, dtype)
    out = dev.xp.sum(data, axis=axes if data.ndim else None, keepdims=keepdim)  # a 0-d tensor's dim 0 is itself
    if axes is None and not keepdim:
        return record(SumBackward0, (x,), out, dev, data.shape, work=0)
    return record(SumBackward1, (x,), out, dev, data.shape, _kept_shape(data.shape, axes), work=0)


class MeanBackward0(OpNode):
    __slots__ = ("shape", "count")

    def backward(self, F, g):
        if F is ArrayMath:  # a broadcast view is enough where nobody sees the gradient
            return (F.expand(g / self.count, self.shape),)
        return (F.expand(g, self.shape) / self.count,)  # torch's order: a new tensor, writable in place


class MeanBackward1(OpNode):
    __slots__ = ("shape", "kept", "count")

    def backward(self, F, g):
        if F is ArrayMath:
            return (F.expand(F.reshape(g / self.count, self.kept), self.shape),)
        return (F.expand(F.reshape(g, self.kept), self.shape) / self.count,)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "mean")
    data = x.data
    x_dtype = x.dtype
    if x_dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {scalar_type_name(x_dtype)}"
        )
    axes = normalize_dims(dim, data.ndim, "mean")
    if keepdim.__class__ is not bool:
        keepdim = bool_arg(keepdim, "mean", "keepdim")
    dev = x.device
    shape = data.shape
    reduced = axes if shape else None  # a 0-d tensor's dim 0 is itself
    out = dev.xp.mean(data, axis=reduced, keepdims=keepdim)
    count = data.size if reduced is None else math.prod(shape[a] for a in reduced)
    if axes is None and not keepdim:
        return record(MeanBackward0, (x,), out, dev, shape, count, work=0)
    return record(MeanBackward1, (x,), out, dev, shape, _kept_shape(shape, reduced), count, work=0)


# --------------------------------------------------------------------------- max / min
class ReductionResult(NamedTuple):
    """``(values, indices)`` of max/min along a dim, as torch.return_types."""

    values: Tensor
    indices: Tensor


def _even_share(x: Tensor, value: Any) -> Tensor:
    """Each element's share of a full max/min's gradient, as torch's evenly_distribute_backward:
    ties split it evenly; a NaN result came from the NaNs, which split it (``data == nan`` is
    all False, and dividing by its zero count made every gradient NaN). The result is NaN exactly
    when the input holds one, so the NaNs join the ties unconditionally: no device has to tell
    the host whether the result is NaN."""
    dev, data = x.device, x.data
    xp = dev.xp
    mask = data == value
    if x.dtype.kind == "f":
        mask = xp.logical_or(mask, xp.isnan(data))
    share = dev.backend.astype(mask, x.dtype)
    return plain(share / xp.sum(share), dev)


class _EvenShare(OpNode):
    """max()/min() of all elements: ties share the gradient evenly (torch's amax rule), and so
    do NaNs when the result is NaN (``_even_share``). torch saves the input and the result too:
    changing either in place refuses the backward."""

    __slots__ = ()
    saves_result = True

    def backward(self, F, g):
        share = F.unpack(self)[0]
        return (g * share,)


class MaxBackward1(_EvenShare):
    __slots__ = ()


class MinBackward1(_EvenShare):
    __slots__ = ()


class _ToIndex(OpNode):
    """max(dim)/min(dim): the gradient goes to the index each value came from (a saved one-hot
    of the input's shape, which the formula multiplies: one formula for both namespaces)."""

    __slots__ = ()

    def backward(self, F, g):
        (onehot,) = F.unpack(self)
        return (F.reshape(g, self.kept) * onehot,)


class MaxBackward0(_ToIndex):
    __slots__ = ("kept",)


class MinBackward0(_ToIndex):
    __slots__ = ("kept",)


def _extreme(x: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Any:
    name = "max" if is_max else "min"
    if x.__class__ is not Tensor:
        tensor_arg(x, name)
    if isinstance(dim, Tensor):  # torch's max(input, other) overload: the elementwise maximum
        from asyncgrad.ops.elementwise import maximum, minimum

        return (maximum if is_max else minimum)(x, dim)
    data = x.data
    dev = x.device
    xp = dev.xp
    if dim is None:
        if data.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
                "with the 'dim' argument."
            )
        out = xp.max(data) if is_max else xp.min(data)
        if not recording(x):
            return plain(out, dev)
        return record(MaxBackward1 if is_max else MinBackward1, (x,), out, dev, saved=(_even_share(x, out), x),
                      work=data.size)
    axis = normalize_dim(dim, data.ndim, name)
    if data.ndim == 0:
        return _extreme_0d(x, is_max)
    if data.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    indices = (xp.argmax if is_max else xp.argmin)(data, axis=axis, keepdims=True)
    values = xp.take_along_axis(data, indices, axis=axis)
    if keepdim:
        out_indices = indices
    else:
        values = xp.squeeze(values, axis=axis)
        out_indices = xp.squeeze(indices, axis=axis)
    index_tensor = plain(out_indices, dev)
    if not recording(x):
        return ReductionResult(plain(values, dev), index_tensor)
    backend = dev.backend
    positions = xp.reshape(backend.arange(data.shape[axis], np.int64),
                           tuple(-1 if i == axis else 1 for i in range(data.ndim)))
    onehot = plain(backend.astype(positions == indices, x.dtype), dev)
    cls = MaxBackward0 if is_max else MinBackward0
    return ReductionResult(record(cls, (x,), values, dev, indices.shape, saved=(onehot,), work=data.size),
                           index_tensor)


def _extreme_0d(x: Tensor, is_max: bool) -> ReductionResult:
    """max/min(dim) of a 0-d tensor: itself, at index 0 (torch; the standard has no axis to reduce)."""
    dev = x.device
    backend = dev.backend
    index_tensor = plain(backend.zeros((), np.int64), dev)
    values = dev.xp.asarray(x.data, copy=True)
    if not recording(x):
        return ReductionResult(plain(values, dev), index_tensor)
    onehot = plain(backend.ones((), x.dtype), dev)
    return ReductionResult(record(MaxBackward0 if is_max else MinBackward0, (x,), values, dev, (), saved=(onehot,)),
                           index_tensor)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, False)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg_extreme(x, dim, keepdim, "argmax")


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg_extreme(x, dim, keepdim, "argmin")


def _arg_extreme(x: Tensor, dim: Any, keepdim: bool, name: str) -> Tensor:
    """argmax/argmin, of the flattened tensor or along a dim; a 0-d tensor's is 0 (the standard
    has no axis to reduce). Indices are int64 tensors that never record."""
    if x.__class__ is not Tensor:
        tensor_arg(x, name)
    data = x.data
    dev = x.device
    fn = dev.xp.argmax if name == "argmax" else dev.xp.argmin
    if dim is None:
        if data.size == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        return plain(fn(data), dev)
    axis = normalize_dim(dim, data.ndim, name)
    if data.ndim == 0:
        return plain(dev.backend.zeros((), np.int64), dev)
    if data.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    return plain(fn(data, axis=axis, keepdims=keepdim), dev)


# --------------------------------------------------------------------------- softmax family
def _contiguous(out: Any, backend: Any) -> Any:
    """torch's softmax results are contiguous; an elementwise result follows its input's layout."""
    return out if backend.is_contiguous(out) else backend.copy(out, "C")


class SoftmaxBackward0(OpNode):
    __slots__ = ("dim",)
    saves_result = True

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (y * (g - F.sum(g * y, self.dim, True)),)


def softmax(x: Tensor, dim: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "softmax")
    _no_integer_kernel(x, axis, "softmax")
    dev = x.device
    xp = dev.xp
    shifted = xp.exp(data - xp.max(data, axis=axis, keepdims=True))  # stable: the largest term is exp(0)
    out = _contiguous(shifted / xp.sum(shifted, axis=axis, keepdims=True), dev.backend)
    return record(SoftmaxBackward0, (x,), out, dev, axis)


class LogSoftmaxBackward0(OpNode):
    __slots__ = ("dim",)
    saves_result = True

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g - F.exp(y) * F.sum(g, self.dim, True),)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "log_softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "log_softmax")
    _no_integer_kernel(x, axis, "log_softmax")
    dev = x.device
    xp = dev.xp
    shifted = data - xp.max(data, axis=axis, keepdims=True)
    out = _contiguous(shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True)), dev.backend)
    return record(LogSoftmaxBackward0, (x,), out, dev, axis)
