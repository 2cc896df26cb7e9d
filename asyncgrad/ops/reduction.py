"""Reductions (sum, mean, max, min) and the normalisations along a dim (softmax, log_softmax)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from asyncgrad._validate import bool_arg, dtype_arg, int_list, normalize_dim, tensor_arg, type_label
from asyncgrad.autograd.accumulate import gradient_edge
from asyncgrad.autograd.grad_mode import grad_enabled
from asyncgrad.autograd.saved import SavedTensor
from asyncgrad.ops._node import ArrayMath, OpNode, record_node
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
    if x.data.dtype.kind not in "fc":
        kernel = f"{op}_lastdim_kernel_impl" if axis == x.data.ndim - 1 else f"{op}_kernel_impl"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(x.data.dtype)}\'')


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
    if x.__class__ is not Tensor:
        tensor_arg(x, "sum")
    data = x.data
    axes = normalize_dims(dim, data.ndim, "sum")
    if keepdim.__class__ is not bool:
        keepdim = bool_arg(keepdim, "sum", "keepdim")
    if dtype is not None:
        dtype = dtype_arg(dtype, "sum")
    elif data.dtype.kind in "biu":
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
    return record_node(node, out, x.device, 0)


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
    if data.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {scalar_type_name(data.dtype)}"
        )
    axes = normalize_dims(dim, data.ndim, "mean")
    if keepdim.__class__ is not bool:
        keepdim = bool_arg(keepdim, "mean", "keepdim")
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
    return record_node(node, out, x.device, 0)


# --------------------------------------------------------------------------- max / min
class ReductionResult(NamedTuple):
    """``(values, indices)`` of max/min along a dim, as torch.return_types."""

    values: Tensor
    indices: Tensor


def _even_share(data: Any, value: Any) -> Any:
    """Each element's share of a full max/min's gradient, as torch's evenly_distribute_backward:
    ties split it evenly; a NaN result came from the NaNs, which split it (``data == nan`` is
    all False, and dividing by its zero count made every gradient NaN)."""
    xp = np if isinstance(data, np.ndarray) else __import__("cupy")
    mask = xp.isnan(data) if data.dtype.kind == "f" and bool(xp.isnan(value)) else data == value
    return (mask / mask.sum()).astype(data.dtype)


class MaxBackward1(OpNode):
    """max()/min() of all elements: ties share the gradient evenly (torch's amax rule), and so
    do NaNs when the result is NaN (``_even_share``)."""

    __slots__ = ()

    def backward(self, F, g):
        share = F.unpack(self)[0]
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
    name = "max" if is_max else "min"
    if x.__class__ is not Tensor:
        tensor_arg(x, name)
    if isinstance(dim, Tensor):  # torch's max(input, other) overload: the elementwise maximum
        from asyncgrad.ops.elementwise import maximum, minimum

        return (maximum if is_max else minimum)(x, dim)
    data = x.data
    if dim is None:
        if data.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
                "with the 'dim' argument."
            )
        out = np.asarray(data.max() if is_max else data.min())
        if not _recording(x):
            return _plain(out, x)
        node = (MaxBackward1 if is_max else MinBackward1)((gradient_edge(x),))
        # the input and the result too, as torch saves them: changing one in place refuses the backward
        node.saved = (SavedTensor(_plain(_even_share(data, out), x)), SavedTensor(x))
        result = record_node(node, out, x.device, data.size)
        node.saved += (SavedTensor(result, is_output=True),)
        return result
    axis = normalize_dim(dim, data.ndim, name)
    if data.ndim == 0:
        return _extreme_0d(x, is_max)
    if data.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
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
    return ReductionResult(record_node(node, values, x.device, data.size), index_tensor)


def _extreme_0d(x: Tensor, is_max: bool) -> ReductionResult:
    """max/min(dim) of a 0-d tensor: itself, at index 0 (torch; numpy has no axis to reduce)."""
    index_tensor = _plain(np.zeros((), dtype=np.int64), x)
    values = x.data.copy()
    if not _recording(x):
        return ReductionResult(_plain(values, x), index_tensor)
    node = (MaxBackward0 if is_max else MinBackward0)((gradient_edge(x),))
    node.kept = ()
    node.saved = (SavedTensor(_plain(np.ones((), dtype=values.dtype), x)),)
    return ReductionResult(record_node(node, values, x.device), index_tensor)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _extreme(x, dim, keepdim, False)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "argmax")
    if dim is None:
        if x.data.size == 0:
            raise IndexError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
        return _plain(np.asarray(x.data.argmax()), x)
    return _plain(_arg_extreme(x, dim, keepdim, "argmax"), x)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "argmin")
    if dim is None:
        if x.data.size == 0:
            raise IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0.")
        return _plain(np.asarray(x.data.argmin()), x)
    return _plain(_arg_extreme(x, dim, keepdim, "argmin"), x)


def _arg_extreme(x: Tensor, dim: Any, keepdim: bool, name: str) -> Any:
    """argmax/argmin along a dim; a 0-d tensor's is 0 (numpy has no axis to reduce)."""
    axis = normalize_dim(dim, x.ndim, name)
    data = x.data
    if data.ndim == 0:
        return np.zeros((), dtype=np.int64)
    if data.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    return np.asarray(getattr(data, name)(axis=axis, keepdims=keepdim))


# --------------------------------------------------------------------------- softmax family
class SoftmaxBackward0(OpNode):
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (y * (g - F.sum(g * y, self.dim, True)),)


def softmax(x: Tensor, dim: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "softmax")
    _no_integer_kernel(x, axis, "softmax")
    shifted = np.exp(data - data.max(axis=axis, keepdims=True))
    out = np.ascontiguousarray(shifted / shifted.sum(axis=axis, keepdims=True))  # contiguous, as torch's
    if not _recording(x):
        return _plain(out, x)
    node = SoftmaxBackward0((gradient_edge(x),))
    node.dim = axis
    result = record_node(node, out, x.device)
    node.saved = (SavedTensor(result, is_output=True),)
    return result


class LogSoftmaxBackward0(OpNode):
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g - F.exp(y) * F.sum(g, self.dim, True),)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "log_softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "log_softmax")
    _no_integer_kernel(x, axis, "log_softmax")
    shifted = data - data.max(axis=axis, keepdims=True)
    out = np.ascontiguousarray(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True)))  # as torch's
    if not _recording(x):
        return _plain(out, x)
    node = LogSoftmaxBackward0((gradient_edge(x),))
    node.dim = axis
    result = record_node(node, out, x.device)
    node.saved = (SavedTensor(result, is_output=True),)
    return result
