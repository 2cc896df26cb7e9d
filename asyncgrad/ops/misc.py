"""ops-misc: torch's smaller ops and Tensor methods, each recorded through ``record`` under torch's
node name with torch's backward formula (logcumsumexp, nansum, put, pdist, index_fill, index_copy,
masked_scatter), the compositions torch itself composes (dstack, atleast_Nd, broadcast_tensors),
searchsorted/bucketize (no gradient), and the storage methods (set_, resize_, type, element_size).
"""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any, Sequence

import numpy as np

from asyncgrad import dtypes
from asyncgrad._validate import dtype_arg, int_list, normalize_dim, tensor_arg
from asyncgrad.devices.backend import backend_of
from asyncgrad.graph.grad_mode import INFERENCE_INPLACE, InferenceVersion, grad_enabled, inference_enabled
from asyncgrad.graph.node import NO_EDGE, before_write
from asyncgrad.ops import elementwise as _elementwise
from asyncgrad.ops import indexing as _indexing
from asyncgrad.ops import shape as shape_ops
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record
from asyncgrad.ops.elementwise import _dtype_of, broadcast_error
from asyncgrad.ops.indexing import _check_bounds, _on_device, _owned, _vector_index
from asyncgrad.ops.inplace import Error, _rebase, _rebased_node
from asyncgrad.ops.reduction import _kept_shape, normalize_dims
from asyncgrad.tensor import Tensor, scalar_type_name, type_name
from asyncgrad.variable.accumulate import gradient_edge


# --------------------------------------------------------------------------- logcumsumexp
def _logcumsumexp_array(xp: Any, backend: Any, x: Any, axis: int) -> Any:
    """log(cumsum(exp(x))) along ``axis`` as a running logaddexp: exact for any spread of values
    (one shift by the overall max would underflow the elements far below it to -inf)."""
    n = x.shape[axis]
    lead = (slice(None),) * axis
    if n == 0:
        return xp.asarray(x, copy=True)
    running = backend.getitem(x, lead + (0,))
    outs = [running]
    for i in range(1, n):
        running = xp.logaddexp(running, backend.getitem(x, lead + (i,)))
        outs.append(running)
    return xp.stack(outs, axis=axis)


def _flip(F: Any, x: Any, axis: int) -> Any:
    if F is ArrayMath:
        return _backend_xp(x).flip(x, axis=axis)
    return shape_ops.flip(x, axis)


def _backend_xp(x: Any) -> Any:
    return backend_of(x).xp


def _lcse(F: Any, x: Any, axis: int) -> Any:
    """logcumsumexp inside a formula: on arrays the scan itself, on tensors the recorded op."""
    if F is ArrayMath:
        backend = backend_of(x)
        return _logcumsumexp_array(backend.xp, backend, x, axis)
    return logcumsumexp(x, axis)


class LogcumsumexpBackward0(OpNode):
    """torch's logcumsumexp_backward: the gradient split by sign and summed in the log domain,
    grad_x = exp(rlcse(log g+ - out) + x) - exp(rlcse(log g- - out) + x), rlcse the reversed scan,
    so an input of 1e4 beside small ones gives finite gradients."""

    __slots__ = ("dim",)
    work_per_element = 30
    saves_result = True

    def backward(self, F, g):
        x, out = F.unpack(self)
        if len(out.shape) == 0 or math.prod(out.shape) == 0:
            return (g,)
        dim = self.dim
        dtype = x.dtype if isinstance(x, Tensor) else backend_of(x).dtype(x)
        # the log of a zero gradient part: torch's lowest float, a quarter of it here, so that the
        # recorded second order (which adds two such logs) stays finite; exp() of either is 0
        lowest = float(np.finfo(dtype).min) / 4
        zero = g == 0
        one = F.constant(_ones_like(F, g), g)
        log_abs = F.log(F.where(zero, one, g * F.sign(g)))
        floor = F.constant(_full_like(F, g, lowest), g)
        positive = F.where(g > 0, log_abs, floor)
        negative = F.where(g < 0, log_abs, floor)

        def rev(t: Any) -> Any:
            return _flip(F, _lcse(F, _flip(F, t, dim), dim), dim)

        return (F.exp(rev(positive - out) + x) - F.exp(rev(negative - out) + x),)


def _ones_like(F: Any, g: Any) -> Any:
    data = g if F is ArrayMath else g.data
    return _backend_xp(data).ones_like(data)


def _full_like(F: Any, g: Any, value: float) -> Any:
    data = g if F is ArrayMath else g.data
    return _backend_xp(data).full_like(data, value)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(input), dim)), computed without overflow."""
    tensor_arg(input, "logcumsumexp")
    if input.dtype.kind not in "fc":
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{scalar_type_name(input.dtype)}'")
    axis = normalize_dim(dim, input.ndim, "logcumsumexp") if input.ndim else 0
    dev = input.device
    x = input.data
    out = dev.xp.asarray(x, copy=True) if x.ndim == 0 else _logcumsumexp_array(dev.xp, dev.backend, x, axis)
    return record(LogcumsumexpBackward0, (input,), out, dev, axis, saved=(input,))


# --------------------------------------------------------------------------- nansum
class NansumBackward0(OpNode):
    """The sum's gradient, zero where the input is NaN (torch: grad * self.isnan().logical_not())."""

    __slots__ = ("shape", "kept")
    work_per_element = 2

    def backward(self, F, g):
        (x,) = F.unpack(self)
        full = F.expand(F.reshape(g, self.kept), self.shape)
        return (F.where(x != x, F.zeros_like(full), full),)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """sum that counts NaN as 0 (torch's nansum; integers sum as int64, as sum)."""
    tensor_arg(input, "nansum")
    dev = input.device
    x = input.data
    axes = normalize_dims(dim, x.ndim, "nansum")
    if dtype is not None:
        dtype = dtype_arg(dtype, "nansum")
    elif input.dtype.kind in "biu":
        dtype = np.dtype(np.int64)
    if input.dtype.kind in "fc":
        x = dev.xp.where(dev.xp.isnan(x), dev.xp.zeros_like(x), x)
    if dtype is not None:
        x = dev.backend.astype(x, dtype)
    out = dev.xp.sum(x, axis=axes if x.ndim else None, keepdims=keepdim)
    kept = _kept_shape(tuple(input.shape), axes) if axes is not None else (1,) * input.ndim
    return record(NansumBackward0, (input,), out, dev, tuple(input.shape), kept, saved=(input,))


# --------------------------------------------------------------------------- atleast_Nd, dstack, broadcast_tensors
def _atleast(ndim: int, fn: str, tensors: tuple) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast_one(ndim, fn, t) for t in tensors[0])
    if len(tensors) == 1:
        return _atleast_one(ndim, fn, tensors[0])
    return tuple(_atleast_one(ndim, fn, t) for t in tensors)


def _atleast_one(ndim: int, fn: str, t: Tensor) -> Tensor:
    tensor_arg(t, fn)
    if t.ndim >= ndim:
        return t
    if t.ndim == 0:
        return shape_ops.reshape(t, (1,) * ndim)
    if ndim == 2 or t.ndim == 2:  # (N,) -> (1, N); atleast_3d: (M, N) -> (M, N, 1)
        return shape_ops.unsqueeze(t, 0 if ndim == 2 else -1)
    return shape_ops.unsqueeze(shape_ops.unsqueeze(t, 0), -1)  # atleast_3d of (N,): (1, N, 1)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dim (a view); one tensor gives a tensor, several a tuple."""
    return _atleast(1, "atleast_1d", tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor viewed with at least two dimensions (a tuple when given several), as torch's."""
    return _atleast(2, "atleast_2d", tensors)


def atleast_3d(*tensors: Any) -> Any:
    """(N,) becomes (1, N, 1) and (M, N) becomes (M, N, 1), as numpy's and torch's."""
    return _atleast(3, "atleast_3d", tensors)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """cat along dim 2 of the at-least-3-d views (CatBackward0, as torch)."""
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError("dstack expects a non-empty TensorList")
    return shape_ops.cat(list(_atleast(3, "dstack", (tuple(tensors),))), 2)


def broadcast_tensors(*tensors: Any) -> tuple[Tensor, ...]:
    """Every tensor expanded to the shapes' broadcast (ExpandBackward0 views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        tensor_arg(t, "broadcast_tensors")
    shape: tuple[int, ...] = ()
    for t in tensors:
        try:
            shape = tuple(np.broadcast_shapes(shape, tuple(t.shape)))
        except ValueError:
            raise broadcast_error(shape, tuple(t.shape)) from None
    return tuple(t if tuple(t.shape) == shape else shape_ops.expand(t, shape) for t in tensors)


# --------------------------------------------------------------------------- put
class PutBackward0(OpNode):
    """put(x, index, source): x keeps the gradient except where written (all of it when
    accumulating); source gets the gradient taken at ``index``."""

    __slots__ = ("index", "shape", "source_shape", "accumulate")
    work_per_element = 1

    def backward(self, F, g):
        gx = gs = None
        flat = F.reshape(g, (-1,))
        if self.needs(0):
            if self.accumulate:
                gx = g
            else:
                zeros = F.constant(_zeros_for(F, flat, self.index), flat)
                gx = F.reshape(F.index_put(flat, self.index, zeros), self.shape)
        if self.needs(1):
            gs = F.reshape(F.index(flat, self.index), self.source_shape)
        return gx, gs


def _zeros_for(F: Any, flat: Any, index: Any) -> Any:
    data = flat if F is ArrayMath else flat.data
    backend = backend_of(data)
    return backend.zeros(tuple(index[0].shape), backend.dtype(data))


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """torch's put: ``source``'s elements written (or added) at the flat positions ``index`` of
    ``input`` read as 1-d; negative positions count from the end."""
    tensor_arg(input, "put")
    tensor_arg(index, "put", "index", 2)
    tensor_arg(source, "put", "source", 3)
    if index.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {scalar_type_name(index.dtype)}")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {scalar_type_name(input.dtype)} and source.dtype = "
                           f"{scalar_type_name(source.dtype)}")
    dev = input.device
    xp = dev.xp
    numel = input.numel()
    positions = xp.reshape(index.data, (-1,))
    if int(positions.shape[0]):
        low, high = int(xp.min(positions)), int(xp.max(positions))
        for bad in (low, high):
            if not -numel <= bad < numel:
                raise IndexError(f"out of range: tried to access index {bad} on a tensor of {numel} elements.")
    positions = xp.where(positions < 0, positions + numel, positions)
    flat = xp.reshape(xp.asarray(input.data, copy=True), (-1,))
    values = xp.reshape(source.data, (-1,))
    if accumulate:
        flat = flat + dev.backend.index_add((numel,), (positions,), False, values)
    else:
        dev.backend.setitem(flat, (positions,), values)
    out = xp.reshape(flat, tuple(input.shape))
    return record(PutBackward0, (input, source), out, dev, (positions,), tuple(input.shape), tuple(source.shape),
                  bool(accumulate))


# --------------------------------------------------------------------------- pdist
class PdistBackward0(OpNode):
    """d(pair i<j) = ||x_i - x_j||_p: row i gets g d^(1-p) |diff|^(p-1) sign(diff), row j the
    negative (0 where the distance is 0, as torch)."""

    __slots__ = ("p", "rows", "n")
    work_per_element = 10
    saves_result = True

    def backward(self, F, g):
        x, dist = F.unpack(self)
        i, j = self.rows
        diff = F.index(x, (i,)) - F.index(x, (j,))
        d = F.reshape(dist, (-1, 1))
        gcol = F.reshape(g, (-1, 1))
        zero = d == 0
        safe = F.where(zero, F.constant(_ones_like(F, d), d), d)
        p = self.p
        if p == 0:
            term = diff * 0
        elif p == 1:
            term = gcol * F.sign(diff)
        elif p == 2:
            term = gcol * diff / safe
        elif math.isinf(p):
            absd = diff * F.sign(diff)
            term = gcol * F.sign(diff) * F.where(absd == d, F.constant(_ones_like(F, absd), absd),
                                                 F.constant(_zeros_like(F, absd), absd))
        else:
            absd = diff * F.sign(diff)
            term = gcol * F.sign(diff) * absd ** (p - 1) / safe ** (p - 1)
        term = F.where(zero, F.zeros_like(term), term)
        shape = (self.n, x.shape[1])
        return (F.index_add(shape, ((i,), False), term) - F.index_add(shape, ((j,), False), term),)


def _zeros_like(F: Any, g: Any) -> Any:
    data = g if F is ArrayMath else g.data
    return _backend_xp(data).zeros_like(data)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between every pair of rows i < j, in row-major order of the pairs."""
    tensor_arg(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.kind != "f":
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    dev = input.device
    xp = dev.xp
    n = input.shape[0]
    ar = dev.asarray(list(range(n)), np.int64)
    i, j = xp.nonzero(xp.reshape(ar, (n, 1)) < xp.reshape(ar, (1, n)))  # the pairs i < j, row-major
    diff = dev.backend.getitem(input.data, (i,)) - dev.backend.getitem(input.data, (j,))
    absd = xp.abs(diff)
    if p == 0:
        out = xp.sum(dev.backend.astype(absd != 0, input.dtype), axis=1)
    elif math.isinf(p):
        out = xp.max(absd, axis=1) if diff.shape[1] else xp.zeros((diff.shape[0],), dtype=diff.dtype)
    elif p == 1:
        out = xp.sum(absd, axis=1)
    elif p == 2:
        out = xp.sqrt(xp.sum(absd * absd, axis=1))
    else:
        out = xp.sum(absd ** p, axis=1) ** (1 / p)
    return record(PdistBackward0, (input,), out, dev, float(p), (i, j), n, saved=(input,))


# --------------------------------------------------------------------------- Tensor storage methods
def element_size(x: Tensor) -> int:
    """Bytes per element."""
    return int(np.dtype(x.dtype).itemsize)


def itemsize(x: Tensor) -> int:
    return int(np.dtype(x.dtype).itemsize)


def nbytes(x: Tensor) -> int:
    return x.numel() * int(np.dtype(x.dtype).itemsize)


_LEGACY_TYPES = {
    "FloatTensor": dtypes.float32, "DoubleTensor": dtypes.float64, "HalfTensor": dtypes.float16,
    "LongTensor": dtypes.int64, "IntTensor": dtypes.int32, "ShortTensor": dtypes.int16, "CharTensor": dtypes.int8,
    "ByteTensor": dtypes.uint8, "BoolTensor": dtypes.bool,
}


def _type_string(x: Tensor) -> str:
    """asyncgrad's spelling of torch's legacy type string: ``asyncgrad.FloatTensor``, and on a
    GPU ``asyncgrad.cuda.FloatTensor`` (torch: ``torch.FloatTensor``, ``torch.cuda.FloatTensor``)."""
    name = type_name(x.dtype)
    return name if x.device.type == "cpu" else name.replace("asyncgrad.", f"asyncgrad.{x.device.type}.", 1)


def type(x: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:  # noqa: A001
    """torch's ``Tensor.type``: with no argument the type string (``asyncgrad.FloatTensor``); with a
    dtype or a type string (``'asyncgrad.DoubleTensor'``, torch's ``'torch.DoubleTensor'`` too, a
    ``cuda.`` one moving to the GPU) the tensor in that type: ``x`` itself when it already is."""
    if dtype is None:
        return _type_string(x)
    device = None
    if isinstance(dtype, str):
        parts = dtype.split(".")
        if len(parts) not in (2, 3) or parts[0] not in ("asyncgrad", "torch") or parts[-1] not in _LEGACY_TYPES or (
                len(parts) == 3 and parts[1] != "cuda"):
            raise ValueError(f"invalid type: '{dtype}'")
        if len(parts) == 3:
            device = "cuda"
        target = _LEGACY_TYPES[parts[-1]]
    else:
        try:
            target = np.dtype(dtype)
        except TypeError:
            raise TypeError("dtype must be a type, str, or dtype object") from None
    out = x
    if target != x.dtype:
        out = shape_ops.to(out, target)
    if device is not None and out.device.type != device:
        out = shape_ops.to(out, device)
    return out


def type_as(x: Tensor, other: Tensor) -> Tensor:
    """``x.type(other.type())``: ``other``'s dtype (and kind of device)."""
    tensor_arg(other, "type_as", "other", 1)
    out = type(x, other.dtype)
    if other.device is not out.device:
        out = shape_ops.to(out, other.device)
    return out


_RESIZE_GRAD = "cannot resize variables that require grad"


def _resized(x: Tensor, sizes: tuple[int, ...]) -> Any:
    """The array of ``x`` resized as torch's storage is: the first elements in memory order (C order
    of a contiguous tensor) kept, a larger tensor's new elements zeroed."""
    dev = x.device
    xp = dev.xp
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    numel = math.prod(sizes)
    flat = xp.reshape(x.data, (-1,))
    if numel <= int(flat.shape[0]):
        return xp.reshape(flat[:numel], sizes)
    grown = dev.backend.zeros((numel,), x.dtype)
    dev.backend.setitem(grown, (slice(0, int(flat.shape[0])),), flat)
    return xp.reshape(grown, sizes)


def _sizes(args: tuple, fn: str) -> tuple[int, ...]:
    """resize's sizes, ``f(2, 3)`` or ``f((2, 3))``, checked as torch's parser checks them."""
    if not args:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
    return int_list(args, fn)


def _refuse_inference(x: Tensor) -> None:
    """resize_ and set_ are in-place ops: an inference tensor is refused outside inference_mode
    before anything is written (Note [Inference tensors] in graph/grad_mode.py), and a tensor
    saved inside allow_mutation_on_saved_tensors is cloned first."""
    if x._vc.__class__ is InferenceVersion and not inference_enabled.get():
        raise RuntimeError(INFERENCE_INPLACE)
    before_write(x)  # Note [Mutation on saved tensors] in autograd/graph.py


def _store(x: Tensor, array: Any) -> None:
    """``x`` now holds ``array``; a leaf whose shape changed gets a fresh AccumulateGrad next time,
    whose metadata says the new shape (torch resets its grad accumulator when the metadata changes)."""
    if tuple(array.shape) != tuple(x.shape) and x._extra is not None and x.grad_fn is None:
        x._extra.grad_accumulator = None
    x._data = array  # the slot itself (Note [The data slot] in tensor.py)


def resize_(x: Tensor, *sizes: Any) -> Tensor:
    """torch's resize_: in place, the elements kept in memory order; refused on a tensor that
    requires grad, in any grad mode (torch's wording). Shrinking keeps sharing memory, growing
    reallocates. A new shape bumps the version, as torch's does: a backward that saved ``x`` is
    refused."""
    if x.requires_grad:
        raise RuntimeError(_RESIZE_GRAD)
    return resize_output(x, _sizes(sizes, "resize_"))


def resize_output(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``x`` resized to ``shape`` for an ``out=`` result (torch's resize_output, which does not go
    through resize_'s refusal: out= refuses a tensor that requires grad itself, in grad mode only)."""
    if shape != tuple(x.shape):  # torch's resize_ to its own shape is no in-place op at all
        _refuse_inference(x)
        _store(x, _resized(x, shape))
        x._vc[0] += 1
    return x


def resize_as_(x: Tensor, the_template: Tensor) -> Tensor:
    tensor_arg(the_template, "resize_as_", "the_template", 1)
    return resize_(x, tuple(the_template.shape))


def resize(x: Tensor, *sizes: Any) -> Tensor:
    """The deprecated out-of-place resize (torch warns as here): same number of elements, a
    reshape of a contiguous copy; otherwise a resized copy that records nothing."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    shape = _sizes(sizes, "resize")
    if math.prod(shape) == x.numel():
        return shape_ops.reshape(shape_ops.contiguous(x), shape)
    return plain(_resized(x, shape), x.device)


def set_(x: Tensor, source: Tensor | None = None) -> Tensor:
    """torch's set_: ``x`` takes ``source``'s memory, shape and strides (writes through either show
    in both), keeps its own version counter and bumps it. A leaf that requires grad is refused in
    grad mode, as torch refuses an in-place op on it; in grad mode, when ``x`` or ``source``
    requires grad, ``x`` becomes the output of a node whose backward raises torch's words."""
    if grad_enabled.get() and x.requires_grad and x.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    _refuse_inference(x)
    if source is None:
        _store(x, x.device.backend.zeros((0,), x.dtype))
    else:
        tensor_arg(source, "set_", "source", 1)
        if source.dtype != x.dtype:
            raise RuntimeError(f"Could not set tensor of type {_c_type(source.dtype)} to a tensor of type "
                               f"{_c_type(x.dtype)}")
        if source.device is not x.device:
            raise RuntimeError(f"Attempted to set the storage of a tensor on device \"{x.device}\" to a storage on "
                               f"different device \"{source.device}\".  This is no longer allowed; the devices "
                               "must match.")
        _store(x, source.data)
    x._vc[0] += 1
    if x._extra is not None:
        # torch resets the accumulator of a tensor that set_ gave new memory (its generated code's
        # reset_grad_accumulator), in any grad mode: a leaf reaches a fresh AccumulateGrad from now
        # on, so a graph recorded before does not count as using it (grad(out, x) says x was not
        # used), while that graph still accumulates into x through the old one
        x._extra.grad_accumulator = None
    if grad_enabled.get() and (x._requires_grad or (source is not None and source._requires_grad)):
        # torch records set_ as its NotImplemented node: a backward through x raises, instead of
        # flowing into x's old history, which no longer made its value (a silently wrong gradient)
        edges = (gradient_edge(x), NO_EDGE if source is None else gradient_edge(source))
        _rebase(x, _rebased_node(Error, edges, x, "derivative for set_ is not implemented"))
    return x


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def _c_type(dtype: Any) -> str:
    name = np.dtype(dtype).name
    return _C_NAMES.get(name, name)


__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "dstack", "logcumsumexp", "nansum",
           "pdist", "put"]


# --------------------------------------------------------------------------- index_fill, index_copy, masked_scatter
class IndexFillBackward0(OpNode):
    """index_fill with a number: the filled slices get no gradient."""

    __slots__ = ("key",)
    work_per_element = 1

    def backward(self, F, g):
        return (F.index_put(g, self.key, 0.0),)


class IndexFillBackward1(OpNode):
    """index_fill with a 0-d tensor value: the value gets the sum of the filled slices' gradient,
    each filled position counted once however often the index repeats it (as torch, which sums over
    the index's unique entries): the gradient's total less the total of what was not filled."""

    __slots__ = ("key", "unique")
    work_per_element = 1

    def backward(self, F, g):
        kept = F.index_put(g, self.key, 0.0)
        return (kept if self.needs(0) else None,
                F.sum(g - kept) if self.needs(1) else None)


def _index_dim(x: Tensor, dim: Any, index: Tensor, fn: str) -> tuple[int, Any, tuple]:
    tensor_arg(index, fn, "index", 2)
    if index.dtype != np.int64:
        raise IndexError(f"{fn}_(): Expected dtype int64 for index.")
    if index.ndim > 1:  # torch's words; _vector_index's would name index_add_
        if fn == "index_fill":
            raise RuntimeError("Index has to be a vector/scalar")
        raise IndexError(f"{fn}_(): Index should have dimension 1 or 0 (got {index.ndim})")
    axis, idx, key = _vector_index(x, dim, index, fn, "")
    size = x.shape[axis] if x.ndim else 1
    if fn == "index_fill":  # torch wraps index_fill's negative indices (from -size), not index_copy's
        _check_bounds(idx, size, axis, x.device.backend, IndexError, low=-size)
        idx = x.device.xp.where(idx < 0, idx + size, idx)
        return axis, idx, (slice(None),) * axis + (idx,)
    _check_bounds(idx, size, axis, x.device.backend, IndexError, prefix=f"{fn}_(): ")
    return axis, idx, key


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """``input`` with the slices ``index`` along ``dim`` set to ``value`` (a number or a 0-d tensor)."""
    tensor_arg(input, "index_fill")
    if input.ndim == 0:  # a 0-d input is filled as its one-element vector
        normalize_dim(dim, 0, "index_fill")
        return shape_ops.reshape(index_fill(shape_ops.reshape(input, (1,)), 0, index, value), ())
    axis, idx, key = _index_dim(input, dim, index, "index_fill")
    dev = input.device
    out = dev.xp.asarray(input.data, copy=True)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        dev.backend.setitem(out, key, dev.backend.astype(_on_device(input, value), input.dtype))
        return record(IndexFillBackward1, (input, value), out, dev, _owned(dev.backend, key))
    dev.backend.setitem(out, key, value)
    return record(IndexFillBackward0, (input,), out, dev, _owned(dev.backend, key))


class IndexCopyBackward0(OpNode):
    """index_copy: the overwritten slices' gradient goes to ``source``, the rest to the input."""

    __slots__ = ("key",)
    work_per_element = 1

    def backward(self, F, g):
        return (F.index_put(g, self.key, 0.0) if self.needs(0) else None,
                F.index(g, self.key) if self.needs(1) else None)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``input`` with ``source``'s slices copied to the positions ``index`` along ``dim``."""
    tensor_arg(input, "index_copy")
    tensor_arg(source, "index_copy", "source", 3)
    if input.ndim == 0:  # a 0-d input (and source): their one-element vectors', reshaped back
        normalize_dim(dim, 0, "index_copy")
        vector = shape_ops.reshape(source, (1,)) if source.ndim == 0 else source
        return shape_ops.reshape(index_copy(shape_ops.reshape(input, (1,)), 0, index, vector), ())
    axis, idx, key = _index_dim(input, dim, index, "index_copy")
    n = int(idx.shape[0])
    src_n = source.shape[axis] if source.ndim > axis else 1
    if n != src_n:
        raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) ({src_n})")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{scalar_type_name(input.dtype)} and (source) {scalar_type_name(source.dtype)}")
    dev = input.device
    out = dev.xp.asarray(input.data, copy=True)
    dev.backend.setitem(out, key, _on_device(input, source))
    return record(IndexCopyBackward0, (input, source), out, dev, _owned(dev.backend, key))


class MaskedScatterBackward0(OpNode):
    """masked_scatter: the input keeps the gradient off the mask; ``source``'s first ``count``
    elements get the masked gradient in order, the rest zeros (torch's masked_scatter_backward)."""

    __slots__ = ("mask", "source_shape")
    work_per_element = 2

    def backward(self, F, g):
        mask = F.constant(self.mask, g)
        gx = F.where(mask, F.zeros_like(g), g) if self.needs(0) else None
        gs = None
        if self.needs(1):
            taken = F.index(g, (self.mask,))
            rest = math.prod(self.source_shape) - int(taken.shape[0])
            if rest:
                data = taken if F is ArrayMath else taken.data
                backend = backend_of(data)
                pad = F.constant(backend.zeros((rest,), backend.dtype(data)), taken)
                taken = F.cat([taken, pad], 0)
            gs = F.reshape(taken, self.source_shape)
        return gx, gs


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the elements where ``mask`` is True replaced, in order, by ``source``'s first ones."""
    tensor_arg(input, "masked_scatter")
    tensor_arg(mask, "masked_scatter", "mask", 1)
    tensor_arg(source, "masked_scatter", "source", 2)
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{scalar_type_name(mask.dtype)}")
    dev = input.device
    xp = dev.xp
    try:
        shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    except ValueError:
        raise broadcast_error(tuple(input.shape), tuple(mask.shape)) from None
    m = xp.broadcast_to(_on_device(input, mask), shape)
    count = int(xp.sum(dev.backend.astype(m, np.int64)))
    if count > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out = xp.asarray(xp.broadcast_to(input.data, shape), copy=True)
    values = dev.backend.getitem(xp.reshape(_on_device(input, source), (-1,)), (slice(0, count),))
    dev.backend.setitem(out, (m,), values)
    mask_copy = dev.backend.copy(m)
    if shape != tuple(input.shape):  # the input was broadcast: its gradient is summed back
        out_t = record(MaskedScatterBackward0, (shape_ops.expand(input, shape), source), out, dev, mask_copy,
                       tuple(source.shape))
        return out_t
    return record(MaskedScatterBackward0, (input, source), out, dev, mask_copy, tuple(source.shape))


# --------------------------------------------------------------------------- index_put with accumulate
def index_put(input: Tensor, indices: Sequence[Tensor | None], values: Tensor, accumulate: bool = False) -> Tensor:
    """torch's ``index_put``: ``input[indices] = values`` out of place (IndexPutBackward0); with
    ``accumulate=True`` the values are added, repeated positions adding up (composed here as
    index_add over the indexed dims flattened: IndexAddBackward0)."""
    tensor_arg(input, "index_put")
    if not isinstance(indices, (list, tuple)):
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of Tensors, not "
                        f"{builtins.type(indices).__name__}")
    index = tuple(slice(None) if i is None else i for i in indices)
    if not accumulate:
        return _indexing.index_put(input, index, values)
    if any(not isinstance(i, Tensor) for i in index):
        raise NotImplementedError("index_put with accumulate=True takes index tensors for the leading dims only")
    dev = input.device
    xp = dev.xp
    arrays = [_on_device(input, i) for i in index]
    if len(arrays) == 1 and arrays[0].dtype == xp.bool:
        arrays = list(xp.nonzero(arrays[0]))
    k = len(arrays)
    lead = tuple(input.shape[:k])
    arrays = list(xp.broadcast_arrays(*[xp.where(a < 0, a + n, a) for a, n in zip(arrays, lead)]))
    rows = arrays[0]
    for a, n in zip(arrays[1:], lead[1:]):
        rows = rows * n + a
    rows = xp.reshape(dev.backend.astype(rows, np.int64), (-1,))
    rest = tuple(input.shape[k:])
    count = int(rows.shape[0])
    flat = shape_ops.reshape(input, (math.prod(lead),) + rest)
    vals = values if isinstance(values, Tensor) else Tensor(values, dtype=input.dtype, device=dev)
    target = tuple(arrays[0].shape) + rest
    if tuple(vals.shape) != target:
        vals = shape_ops.expand(vals, target)
    vals = shape_ops.reshape(vals, (count,) + rest)
    out = _indexing.index_add(flat, 0, plain(rows, dev), vals)
    return shape_ops.reshape(out, tuple(input.shape))


# --------------------------------------------------------------------------- searchsorted, bucketize
def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """The insertion positions of ``input`` in ``sorted_sequence``'s last dim (a tensor of them, no
    gradient): the first position not below the value, or with ``right``/``side='right'`` above it."""
    tensor_arg(sorted_sequence, "searchsorted", "sorted_sequence", 1)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    dev = sorted_sequence.device
    xp = dev.xp
    backend = dev.backend
    values = input if isinstance(input, Tensor) else Tensor(input, dtype=sorted_sequence.dtype, device=dev)
    boundaries = sorted_sequence.data
    v = _on_device(sorted_sequence, values)
    if boundaries.ndim > 1 and tuple(boundaries.shape[:-1]) != tuple(v.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(boundaries.shape)} and input value tensor {list(v.shape)}")
    order = None if sorter is None else _on_device(sorted_sequence, sorter)
    how = "right" if right else "left"

    def row(b: Any, vals: Any, o: Any) -> Any:
        if o is not None:
            b = xp.take(b, o, axis=0)
        return xp.searchsorted(b, vals, side=how)

    if boundaries.ndim <= 1:
        found = row(boundaries, v, order)
    else:
        rows_b = xp.reshape(boundaries, (-1, boundaries.shape[-1]))
        rows_v = xp.reshape(v, (-1, v.shape[-1]))
        rows_o = None if order is None else xp.reshape(order, (-1, order.shape[-1]))
        found = xp.reshape(xp.stack([row(rows_b[r], rows_v[r], None if rows_o is None else rows_o[r])
                                     for r in range(int(rows_b.shape[0]))]), tuple(v.shape))
    return plain(backend.astype(found, np.int32 if out_int32 else np.int64), dev)


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """searchsorted with the values first and 1-d ``boundaries`` (torch's bucketize)."""
    tensor_arg(boundaries, "bucketize", "boundaries", 2)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """torch's ``isin``: whether each element of ``elements`` is among ``test_elements`` (either may be
    a number, not both), compared in their promoted dtype; a bool tensor of ``elements``' shape, never
    a node. ``invert`` negates it; ``assume_unique`` only lets torch take a faster path."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        got = f"{builtins.type(elements).__name__}, {builtins.type(test_elements).__name__}"
        raise TypeError(f"isin() received an invalid combination of arguments - got ({got}), but expected one of:\n"
                        " * (Tensor elements, Tensor test_elements, *, bool assume_unique = False, bool invert = False,"
                        " Tensor out = None)\n"
                        " * (Number element, Tensor test_elements, *, bool assume_unique = False, bool invert = False,"
                        " Tensor out = None)\n"
                        " * (Tensor elements, Number test_element, *, bool assume_unique = False, bool invert = False,"
                        " Tensor out = None)\n")
    for t in (elements, test_elements):
        if isinstance(t, Tensor) and t.dtype == np.bool_:
            raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    te, tt, de, dt, dev = _elementwise.operands(elements, test_elements, "isin")
    xp = dev.xp
    if tt is None:  # a number to test against
        found = de == dt
    else:
        values = de if te is not None else dev.backend.full((), de, _dtype_of(dt))
        flat = xp.reshape(values, (-1,))
        candidates = xp.sort(xp.reshape(dt, (-1,)))
        n = candidates.shape[0]
        if n == 0 or flat.shape[0] == 0:
            found = dev.backend.full(tuple(values.shape), False, dtypes.bool)
        else:  # each value against the nearest candidate not below it
            at = xp.clip(xp.searchsorted(candidates, flat), 0, n - 1)
            found = xp.reshape(xp.take(candidates, at, axis=0) == flat, tuple(values.shape))
    return plain(xp.logical_not(found) if invert else found, dev)


__all__ += ["bucketize", "index_copy", "index_fill", "index_put", "isin", "masked_scatter", "searchsorted"]
