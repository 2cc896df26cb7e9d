"""Reductions (sum, mean, max, min) and the normalisations along a dim (softmax, log_softmax).

Each forward computes on the device's arrays through its backend's Array API namespace
(Note [One array backend per device]) and returns through ``record`` (Note [One way to record
an op]); what only a node needs (max's gradient shares) is computed only when one records.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from asyncgrad._validate import bool_arg, dtype_arg, int_list, normalize_dim, tensor_arg, type_label
from asyncgrad.devices.backend import backend_of
from asyncgrad.dtypes import get_default_dtype
from asyncgrad.ops import shape as shape_ops
from asyncgrad.ops._node import ArrayMath, OpNode, SavesResult, input_meta, plain, record, recording
from asyncgrad.tensor import ReductionResult, Tensor, scalar_type_name  # noqa: F401  (ReductionResult: sorting.py)


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
    """Sum of all elements, or over ``dim`` (an int or a tuple), keeping it with ``keepdim``; integers
    and bools sum in ``int64``, as torch's."""
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
    """Mean of all elements, or over ``dim`` (an int or a tuple), as torch's (floating dtypes only)."""
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
    """``max(x)``: the largest element; ``max(x, dim)``: the named tuple ``(values, indices)`` along ``dim``;
    ``max(a, b)``: ``maximum``. As torch's."""
    return _extreme(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``min(x)``: the smallest element; ``min(x, dim)``: the named tuple ``(values, indices)`` along ``dim``;
    ``min(a, b)``: ``minimum``. As torch's."""
    return _extreme(x, dim, keepdim, False)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor, or along ``dim``), the first at ties, as torch's."""
    return _arg_extreme(x, dim, keepdim, "argmax")


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor, or along ``dim``), the first at ties, as torch's."""
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


class SoftmaxBackward0(SavesResult):  # Note [A saved result kept in its node]
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (y * (g - F.sum(g * y, self.dim, True)),)


def _cast_first(x: Tensor, dtype: Any, fn: str) -> Tensor:
    """softmax's and log_softmax's ``dtype=``: the input cast first (a ToCopyBackward0, as torch)."""
    if dtype is None:
        return x
    dtype = dtype_arg(dtype, fn)
    return x if x.dtype == dtype else shape_ops.to_dtype(x, dtype)


def softmax(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``exp(x) / exp(x).sum(dim, keepdim=True)``, computed stably along ``dim``, as torch's (in
    ``dtype`` when given: the input cast first)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "softmax")
    x = _cast_first(x, dtype, "softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "softmax")
    _no_integer_kernel(x, axis, "softmax")
    dev = x.device
    xp = dev.xp
    if data.size == 0:  # nothing to normalise (the max of an empty slice has no identity)
        return record(SoftmaxBackward0, (x,), dev.backend.copy(data, "C"), dev, axis)
    shifted = xp.exp(data - xp.max(data, axis=axis, keepdims=True))  # stable: the largest term is exp(0)
    out = _contiguous(shifted / xp.sum(shifted, axis=axis, keepdims=True), dev.backend)
    return record(SoftmaxBackward0, (x,), out, dev, axis)


class LogSoftmaxBackward0(SavesResult):  # Note [A saved result kept in its node]
    __slots__ = ("dim",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g - F.exp(y) * F.sum(g, self.dim, True),)


def log_softmax(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``log(softmax(x, dim))``, computed stably along ``dim``, as torch's (in ``dtype`` when given:
    the input cast first)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "log_softmax")
    x = _cast_first(x, dtype, "log_softmax")
    data = x.data
    axis = normalize_dim(dim, data.ndim, "log_softmax")
    _no_integer_kernel(x, axis, "log_softmax")
    dev = x.device
    xp = dev.xp
    backend = dev.backend  # Note [Reductions without numpy's wrappers] in devices/backend.py
    if data.size == 0:
        return record(LogSoftmaxBackward0, (x,), backend.copy(data, "C"), dev, axis)
    return record(LogSoftmaxBackward0, (x,), log_softmax_array(data, axis, xp, backend), dev, axis)


def log_softmax_array(data: Any, axis: int, xp: Any, backend: Any) -> Any:
    """log_softmax's kernels on a non-empty float array: ``x - max - log(sum(exp(x - max)))``, contiguous.
    cross_entropy's fused node (ops/nn.py) computes its log-probabilities with this too, so both agree
    bit for bit."""
    shifted = data - backend.max(data, axis=axis, keepdims=True)
    return _contiguous(shifted - xp.log(backend.sum(xp.exp(shifted), axis=axis, keepdims=True)), backend)


# --------------------------------------------------------------------------- scans, products, spread
# (cumsum, cumprod, prod, var/std and their _mean forms, logsumexp, amax/amin, any/all)
def _int_as_long(x: Tensor, dtype: Any, fn: str) -> Any:
    """The dtype a sum-like op computes in: ``dtype`` if given, int64 for integers and bools (torch)."""
    if dtype is not None:
        return dtype_arg(dtype, fn)
    return np.dtype(np.int64) if x.dtype.kind in "biu" else None


def _flip(axis: int) -> tuple:
    """The basic index reversing ``axis``: reverse cumulative sums are flipped cumulative sums."""
    return (slice(None),) * axis + (slice(None, None, -1),)


def _revcumsum(F: Any, v: Any, axis: int) -> Any:
    """``sum(v[k:])`` at each ``k`` along ``axis``, exactly (no total minus running sum)."""
    flip = _flip(axis)
    return F.index(F.cumsum(F.index(v, flip), axis), flip)


class CumsumBackward0(OpNode):
    """cumsum: each input feeds every later output, so its gradient is the reverse cumulative sum."""

    __slots__ = ("dim", "dtype")

    def backward(self, F, g):
        grad = g if self.dim is None else _revcumsum(F, g, self.dim)
        return (grad if self.dtype is None else F.cast(grad, self.dtype),)


def _cumulative(x: Tensor, dim: int, dtype: Any, fn: str) -> tuple[Any, int | None, Any]:
    """``cumsum``/``cumprod``'s forward (``fn`` names the Array API's ``cumulative_{sum,prod}``): the
    result, the node's ``dim`` (None for a 0-d input, a copy) and its ``dtype`` (the input's, to cast
    the gradient back to, when the op computed in another)."""
    tensor_arg(x, fn)
    axis = normalize_dim(dim, x.ndim, fn)
    dtype = _int_as_long(x, dtype, fn)
    dev = x.device
    data = x.data if dtype is None else dev.backend.astype(x.data, dtype)
    back = None if dtype is None or dtype == x.dtype else x.dtype
    if x.ndim == 0:
        return dev.xp.asarray(data, copy=True), None, back
    scan = dev.xp.cumulative_sum if fn == "cumsum" else dev.xp.cumulative_prod
    return scan(data, axis=axis), axis, back


def cumsum(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """torch's ``cumsum`` along ``dim``; integers and bools sum as int64 unless ``dtype`` says otherwise."""
    out, axis, back = _cumulative(x, dim, dtype, "cumsum")
    return record(CumsumBackward0, (x,), out, x.device, axis, back, work=2)


def _cumprod_backward(F: Any, x: Any, out: Any, g: Any, axis: int) -> Any:
    """Note [cumprod's gradient with zeros]: d out_i / d x_k = prod_{j <= i, j != k} x_j for i >= k.
    Where ``x_k`` is not 0 that is ``out_i / x_k``, so the gradient is ``revcumsum(g * out) / x``,
    torch's formula without zeros. Along a slice with zeros, z its first zero: before z the same
    formula holds (x_k is not 0 there; the outputs from z on are 0 either way, and stay functions
    of x through ``out``). From z on, the gradient is that of the cumulative product of x' (x with
    x_z set to 1: fewer zeros, so the recursion ends), times x_z after z: 0 in value, but its
    derivative in x_z is not, so the formula stays exact when differentiated again (second order
    through ``F``, as torch's cumprod is twice differentiable)."""
    raw = x.data if isinstance(x, Tensor) else x
    backend = backend_of(raw)
    xp = backend.xp
    zero = raw == 0
    if not bool(xp.any(zero)):  # torch's check too, on the host
        return _revcumsum(F, g * out, axis) / x
    seen = xp.cumulative_sum(backend.astype(zero, np.int64), axis=axis)
    before = F.constant(seen == 0, x)
    first = F.constant(xp.logical_and(zero, seen == 1), x)
    early = _revcumsum(F, g * out, axis) / F.where(before, x, 1.0)
    x1 = F.where(first, 1.0, x)
    late = _cumprod_backward(F, x1, F.cumprod(x1, axis), g, axis)
    x_z = F.sum(F.where(first, x, 0.0), axis, True)
    return F.where(before, early, F.where(first, late, late * x_z))


class CumprodBackward0(OpNode):
    """cumprod: Note [cumprod's gradient with zeros]. torch saves the input and the result."""

    __slots__ = ("dim", "dtype")
    saves_result = True
    work_per_element = 12

    def backward(self, F, g):
        x, out = F.unpack(self)
        if self.dim is None:
            grad = g
        else:
            xc = x if self.dtype is None else F.cast(x, out.dtype)
            grad = _cumprod_backward(F, xc, out, g, self.dim)
        return (grad if self.dtype is None else F.cast(grad, self.dtype),)


def cumprod(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """torch's ``cumprod`` along ``dim``; integers and bools multiply as int64 unless ``dtype`` says otherwise."""
    out, axis, back = _cumulative(x, dim, dtype, "cumprod")
    return record(CumprodBackward0, (x,), out, x.device, axis, back, saved=(x,))


def _prod_backward(F: Any, x: Any, g_kept: Any, axis: int) -> Any:
    """d prod / d x_k = prod_{j != k} x_j: the last cumulative product's gradient, so Note
    [cumprod's gradient with zeros] serves (one zero: only it gets a gradient; two: none does)."""
    n = x.shape[axis]
    if n == 0:
        return x * 0.0
    last = F.index_add(tuple(x.shape), ((slice(None),) * axis + (slice(n - 1, n),), True), g_kept)
    return _cumprod_backward(F, x, F.cumprod(x, axis), last, axis)


class ProdBackward0(OpNode):
    """prod() of all elements."""

    __slots__ = ()

    def backward(self, F, g):
        (x,) = F.unpack(self)
        flat = F.reshape(x, (-1,))
        return (F.reshape(_prod_backward(F, flat, F.reshape(g, (1,)), 0), tuple(x.shape)),)


class ProdBackward1(OpNode):
    """prod(dim, keepdim)."""

    __slots__ = ("dim", "kept")

    def backward(self, F, g):
        (x,) = F.unpack(self)
        if self.dim is None:  # a 0-d tensor's dim 0 is itself
            return (g,)
        return (_prod_backward(F, x, F.reshape(g, self.kept), self.dim),)


def prod(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch's ``prod``: of all elements, or along one ``dim`` (torch takes no tuple of dims);
    integers and bools multiply as int64; zeros in the input get torch's gradients."""
    tensor_arg(x, "prod")
    dtype = _int_as_long(x, dtype, "prod")
    dev = x.device
    data = x.data if dtype is None else dev.backend.astype(x.data, dtype)
    if dim is None:
        return record(ProdBackward0, (x,), dev.xp.prod(data), dev, saved=(x,), work=4 * x.numel())
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"prod() received an invalid combination of arguments - got ({type_label(dim)}), but expected "
                        "one of: (*, torch.dtype dtype) or (int dim, bool keepdim, *, torch.dtype dtype)")
    axis = normalize_dim(dim, x.ndim, "prod")
    keepdim = bool_arg(keepdim, "prod", "keepdim")
    if x.ndim == 0:
        return record(ProdBackward1, (x,), dev.xp.asarray(data, copy=True), dev, None, (), saved=(x,))
    out = dev.xp.prod(data, axis=axis, keepdims=keepdim)
    return record(ProdBackward1, (x,), out, dev, axis, _kept_shape(x.shape, (axis,)), saved=(x,),
                  work=12 * x.numel())


# ---- var / std
def _correction(fn: str, dim: Any, unbiased: Any, correction: Any) -> tuple[Any, float]:
    """torch's three spellings: ``var(unbiased)``, ``var(dim, unbiased, keepdim)``, ``var(dim, correction=)``."""
    if isinstance(dim, (bool, np.bool_)):  # var(False): the unbiased flag in dim's place
        if unbiased is not None:
            raise TypeError(f"{fn}() received an invalid combination of arguments")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{fn}() received an invalid combination of arguments - got (correction=int, unbiased=bool, ), "
                        "but expected one of: (tuple of ints dim, bool unbiased, bool keepdim) or "
                        "(tuple of ints dim, *, Number correction, bool keepdim)")
    if unbiased is not None:
        return dim, 1.0 if bool_arg(unbiased, fn, "unbiased") else 0.0
    return dim, 1.0 if correction is None else float(correction)


class _Spread(OpNode):
    """var/std: d var / dx = 2 (x - mean) / (N - correction), through each reduced slice."""

    __slots__ = ("axes", "kept", "count", "denom")

    def _dvar(self, F: Any, x: Any, g: Any) -> Any:
        """``g`` (the gradient of the variance, reduced shape) times d var / dx."""
        centered = x - F.sum(x, self.axes, True) / self.count
        return F.reshape(g, self.kept) * centered * (2.0 / self.denom)

    def _std_grad(self, F: Any, std: Any, g: Any) -> Any:
        """The gradient of the variance from that of the std: g / (2 std), 0 where std is 0 (torch's mask)."""
        zero = std == 0
        return F.where(zero, 0.0, g / (F.where(zero, 1.0, std) * 2.0))


class VarBackward0(_Spread):
    __slots__ = ()

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (self._dvar(F, x, g),)


class StdBackward0(_Spread):
    __slots__ = ()
    saves_result = True

    def backward(self, F, g):
        x, std = F.unpack(self)
        return (self._dvar(F, x, self._std_grad(F, std, g)),)


class _SpreadMean(_Spread):
    """var_mean/std_mean: one node, two outputs (the spread, output 0; the mean, output 1)."""

    __slots__ = ()

    def apply(self, grads: list, create_graph: bool) -> Any:
        return self.backward2(self.graph_math if create_graph else ArrayMath, grads[0], grads[1])

    def backward2(self, F: Any, g_spread: Any, g_mean: Any) -> tuple:
        saved = F.unpack(self)
        x = saved[0]
        grad = None
        if g_spread is not None:
            grad = self._dvar(F, x, g_spread if len(saved) == 1 else self._std_grad(F, saved[1], g_spread))
        if g_mean is not None:
            share = F.expand(F.reshape(g_mean, self.kept), tuple(x.shape)) / self.count
            grad = share if grad is None else grad + share
        return (grad,)


class VarMeanBackward0(_SpreadMean):
    __slots__ = ()


class StdMeanBackward0(_SpreadMean):
    __slots__ = ()
    saves_result = True


def _spread(fn: str, x: Tensor, dim: Any, unbiased: Any, keepdim: bool, correction: Any, is_std: bool,
            with_mean: bool) -> Any:
    tensor_arg(x, fn)
    if x.dtype.kind != "f":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dim, corr = _correction(fn, dim, unbiased, correction)
    axes = normalize_dims(dim, x.ndim, fn)
    keepdim = bool_arg(keepdim, fn, "keepdim")
    dev = x.device
    xp = dev.xp
    reduced = axes if x.ndim else None
    count = x.numel() if reduced is None else math.prod(x.shape[a] for a in reduced)
    out = xp.var(x.data, axis=reduced, correction=corr, keepdims=keepdim)
    if is_std:
        out = xp.sqrt(out)
    fields = (reduced, _kept_shape(x.shape, reduced), count, count - corr)
    if not with_mean:
        return record(StdBackward0 if is_std else VarBackward0, (x,), out, dev, *fields, saved=(x,), work=6)
    mean = xp.mean(x.data, axis=reduced, keepdims=keepdim)
    spread = record(StdMeanBackward0 if is_std else VarMeanBackward0, (x,), out, dev, *fields, saved=(x,), work=7)
    node = spread.grad_fn
    if node is None:
        return spread, plain(mean, dev)
    node._input_meta = node._input_meta + input_meta(tuple(mean.shape), x.dtype, dev)
    return spread, Tensor._make(mean, dev, True, node, 1, [0])


def var(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None) -> Tensor:
    """torch's ``var`` (``correction`` 1 unless ``unbiased=False`` or ``correction=`` say otherwise)."""
    return _spread("var", x, dim, unbiased, keepdim, correction, False, False)


def std(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *, correction: Any = None) -> Tensor:
    """torch's ``std``: the square root of ``var``; its gradient is 0 where it is 0, as torch's."""
    return _spread("std", x, dim, unbiased, keepdim, correction, True, False)


def var_mean(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple[Tensor, Tensor]:
    """torch's ``var_mean``: ``(var, mean)``, two outputs of one VarMeanBackward0 node."""
    return _spread("var_mean", x, dim, unbiased, keepdim, correction, False, True)


def std_mean(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple[Tensor, Tensor]:
    """torch's ``std_mean``: ``(std, mean)``, two outputs of one StdMeanBackward0 node."""
    return _spread("std_mean", x, dim, unbiased, keepdim, correction, True, True)


# ---- logsumexp, amax/amin, any/all
class LogsumexpBackward0(OpNode):
    """logsumexp: the softmax of the input along the reduced dims, times the gradient."""

    __slots__ = ("kept",)
    saves_result = True
    work_per_element = 3

    def backward(self, F, g):
        x, out = F.unpack(self)
        return (F.reshape(g, self.kept) * F.exp(x - F.reshape(out, self.kept)),)


def logsumexp(x: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """torch's ``logsumexp`` over ``dim`` (an int or a tuple; ``()`` is every dim), computed stably
    (the largest term shifted to 0; infinite maxima not shifted); integers compute in the default float dtype."""
    tensor_arg(x, "logsumexp")
    axes = normalize_dims(dim, x.ndim, "logsumexp")
    keepdim = bool_arg(keepdim, "logsumexp", "keepdim")
    dev = x.device
    xp = dev.xp
    data = x.data
    if x.dtype.kind != "f":
        data = dev.backend.astype(data, get_default_dtype())
    reduced = axes if x.ndim else None
    if data.size == 0:
        out = xp.log(xp.sum(xp.exp(data), axis=reduced, keepdims=keepdim))
    else:
        top = xp.max(data, axis=reduced, keepdims=True)
        top = xp.where(xp.isinf(top), 0.0, top)
        out = xp.log(xp.sum(xp.exp(data - top), axis=reduced, keepdims=True)) + top
        if not keepdim:
            out = xp.reshape(out, tuple(n for i, n in enumerate(x.shape) if reduced is not None and i not in reduced))
    return record(LogsumexpBackward0, (x,), out, dev, _kept_shape(x.shape, reduced), saved=(x,))


class _Amax(OpNode):
    """amax/amin: the gradient shared evenly among the ties in each reduced slice (torch's rule;
    NaN for a slice whose result is NaN, as torch's 0/0), a share saved by the forward. x and the
    result are saved too, as torch saves them, so that changing either in place refuses the backward
    with torch's error (Note [Clamp saves its input] in elementwise.py)."""

    __slots__ = ("kept",)
    saves_result = True

    def backward(self, F, g):
        share = F.unpack(self)[0]
        return (F.reshape(g, self.kept) * share,)


class AmaxBackward0(_Amax):
    __slots__ = ()


class AminBackward0(_Amax):
    __slots__ = ()


def _amax(x: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Tensor:
    fn = "amax" if is_max else "amin"
    tensor_arg(x, fn)
    axes = normalize_dims(dim, x.ndim, fn)
    keepdim = bool_arg(keepdim, fn, "keepdim")
    dev = x.device
    xp = dev.xp
    reduced = axes if x.ndim else None
    if x.numel() == 0 and (reduced is None or builtins.any(x.shape[a] == 0 for a in reduced)):
        if reduced is None:
            raise RuntimeError(f"{fn}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               "reduction dim with the 'dim' argument.")
        bad = next(a for a in reduced if x.shape[a] == 0)
        raise IndexError(f"{fn}(): Expected reduction dim {bad} to have non-zero size.")
    reduce = xp.max if is_max else xp.min
    kept = reduce(x.data, axis=reduced, keepdims=True)
    out = kept if keepdim else xp.reshape(kept, tuple(n for i, n in enumerate(x.shape)
                                                      if reduced is not None and i not in reduced))
    if not recording(x):
        return plain(out, dev)
    ties = dev.backend.astype(x.data == kept, x.dtype)
    count = xp.sum(ties, axis=reduced, keepdims=True)
    share = xp.where(count == 0, float("nan"), ties / xp.where(count == 0, 1.0, count))
    return record(AmaxBackward0 if is_max else AminBackward0, (x,), out, dev, kept.shape,
                  saved=(plain(share, dev), x))


def amax(x: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """torch's ``amax`` over ``dim`` (``()``: every dim); ties share the gradient evenly."""
    return _amax(x, dim, keepdim, True)


def amin(x: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """torch's ``amin`` over ``dim`` (``()``: every dim); ties share the gradient evenly."""
    return _amax(x, dim, keepdim, False)


def _truth(x: Tensor, dim: Any, keepdim: bool, fn: str) -> Tensor:
    """any/all: bool (uint8 for a uint8 input, as torch), over every dim or ``dim`` (an int or a
    tuple; torch reduces nothing for ``()``); NaN counts as true."""
    tensor_arg(x, fn)
    keepdim = bool_arg(keepdim, fn, "keepdim")
    dev = x.device
    xp = dev.xp
    data = x.data if x.dtype == np.bool_ else x.data != 0
    if isinstance(dim, (tuple, list)) and not dim:
        out = data
    else:
        axes = normalize_dims(dim, x.ndim, fn)
        out = (xp.any if fn == "any" else xp.all)(data, axis=axes if x.ndim else None, keepdims=keepdim)
    if x.dtype == np.uint8:
        out = dev.backend.astype(out, np.uint8)
    return plain(dev.xp.asarray(out, copy=True) if out is x.data else out, dev)


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """torch's ``count_nonzero``: how many elements are not zero, in all of ``x`` or along ``dim`` (an
    int or a tuple of them); int64, never a node."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "count_nonzero")
    data = x.data
    axes = normalize_dims(dim, data.ndim, "count_nonzero")
    dev = x.device
    counts = dev.backend.astype(dev.backend.astype(data, np.bool_), np.int64)
    return plain(dev.xp.sum(counts, axis=axes if data.ndim else None), dev)


def any(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether any element (or any along ``dim``) is nonzero: a bool tensor, as torch's."""
    return _truth(x, dim, keepdim, "any")


def all(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether every element (or every one along ``dim``) is nonzero: a bool tensor, as torch's."""
    return _truth(x, dim, keepdim, "all")
