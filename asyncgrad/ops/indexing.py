"""Indexing: basic (views) and integer/boolean-array (copies, repeated indices accumulate).

Indices are the device's: index tensors and arrays become arrays of the indexed tensor's device
(a CPU index tensor is transferred, as torch takes one for a CUDA tensor), and numpy's indexing
rules, which the standard does not have, are the backend's (``getitem``/``setitem``/``index_add``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from asyncgrad._convert import to_array
from asyncgrad._validate import check_array_dtype, complex_error, is_complex, normalize_dim, tensor_arg, type_label
from asyncgrad.devices.backend import backend_of
from asyncgrad.graph.node import RELEASED
from asyncgrad.ops._node import ArrayMath, OpNode, SavesVariables, plain, record, recording, same_device
from asyncgrad.ops.elementwise import broadcast_error
from asyncgrad.ops.shape import expanded_shape, indexed, reshape
from asyncgrad.tensor import Tensor, scalar_type_name, type_name

_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)
_SEQUENCE_AS_TUPLE = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in pytorch 2.9; "
    "use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as tensor index, "
    "x[torch.tensor(seq)], which will result either in an error or a different result")


# Note [Sequence index as tuple]
# torch (treatSequenceAsTuple, numpy's old rule) reads a list index shorter than 32 that holds a
# slice, Ellipsis, None, a tensor or a sequence as the tuple of its items, with a deprecation
# warning: ``x[[slice(None), [1, 3]]]`` is ``x[:, [1, 3]]`` and ``x[[[0, 4], [2, 2]]]`` is
# ``x[[0, 4], [2, 2]]``. numpy reads such a list as one array, so it is made a tuple first.
def sequence_as_tuple(index: Any) -> Any:
    """The index, a list that torch reads as a tuple made one (Note [Sequence index as tuple])."""
    if isinstance(index, list) and len(index) < 32 and any(
            isinstance(item, (slice, Tensor, list, tuple, np.ndarray)) or item is None or item is Ellipsis
            for item in index):
        warnings.warn(_SEQUENCE_AS_TUPLE, UserWarning, stacklevel=3)
        return tuple(index)
    return index
_INDEX_DTYPE = "tensors used as indices must be long, int, byte or bool tensors"


def normalize_index(x: Tensor, index: Any) -> tuple[Any, bool]:
    """The index as ``x``'s backend takes it (its arrays ``x``'s device's), and whether it is basic
    (gives a view)."""
    items = index if isinstance(index, tuple) else (index,)
    dev = x.device
    backend = dev.backend
    out = []
    basic = True
    for item in items:
        if isinstance(item, Tensor):
            if item.device is not dev and not item.device.is_cpu:  # a CPU index is taken, as torch takes one
                same_device(x, item)
            if item.dtype.kind not in "iub":
                raise IndexError(_INDEX_DTYPE)
            item = item.data if item.device is dev else dev.asarray(item.data)
            basic = False
        elif isinstance(item, (list, np.ndarray)) or backend.is_array(item):
            if isinstance(item, list):  # read as ag.tensor reads it: torch's errors for None or str inside
                item = to_array(item, None, dev)
            elif isinstance(item, np.ndarray):
                if item.dtype.kind not in "iub":
                    raise IndexError(_INDEX_DTYPE)
                item = dev.asarray(item)
            if backend.dtype(item).kind not in "iub":
                raise IndexError(_INDEX_DTYPE)
            basic = False
        elif isinstance(item, bool):
            basic = False
        elif isinstance(item, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(item).__name__}'")
        elif not isinstance(item, _BASIC):
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
                f"(got {type(item).__name__})"
            )
        out.append(item)
    return (out[0] if not isinstance(index, tuple) else tuple(out)), basic


def _owned(backend: Any, index: Any) -> Any:
    """An index the backward can keep: its arrays copied, so that changing the index tensor (or
    array) after the forward cannot move the gradient (torch would raise at backward instead)."""
    if isinstance(index, tuple):
        return tuple(_owned(backend, item) for item in index)
    return backend.copy(index) if backend.is_array(index) else index


def _torch_index_error(exc: IndexError, x: Tensor, index: Any = None) -> IndexError:
    """numpy's indexing errors in torch's words ("dimension", not "axis"; a mask's shape)."""
    text = str(exc)
    ndim, shape, backend = x.ndim, x.shape, x.device.backend
    if text.startswith("too many indices"):
        return IndexError(f"too many indices for tensor of dimension {ndim}")
    if text.startswith("boolean index did not match"):
        items = index if isinstance(index, tuple) else (index,)
        start = 0
        for item in items:
            if backend.is_array(item) and backend.dtype(item).kind == "b":
                mask = item.shape
                bad = next(i for i, n in enumerate(mask) if start + i >= len(shape) or shape[start + i] != n)
                return IndexError(f"The shape of the mask {list(mask)} at index {bad} does not match the shape of the "
                                  f"indexed tensor {list(shape)} at index {start + bad}")
            start += 0 if item is None or item is Ellipsis else getattr(item, "ndim", 1)
    return IndexError(text.replace(" for axis ", " for dimension "))


class _Index(SavesVariables):
    """x[index]: the gradient goes back to ``index`` of zeros of the input's ``shape``."""

    __slots__ = ()

    @property
    def saves_variables(self) -> bool:  # type: ignore[override]
        """torch saves the indices of an advanced index only (Note [Which nodes refuse a second pass] in
        graph/node.py)."""
        return not self.basic

    def release_variables(self) -> None:
        if not self.basic:
            self.saved = RELEASED

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, self.basic), g),)


class IndexBackward0(_Index):
    """An advanced index; SliceBackward0 / SelectBackward0 / AliasBackward0 / UnsqueezeBackward0
    are the basic index's (Note [basic index names])."""

    __slots__ = ("shape", "index", "basic")


class SliceBackward0(_Index):
    __slots__ = ("shape", "index", "basic")


class SelectBackward0(_Index):
    __slots__ = ("shape", "index", "basic")


class AliasBackward0(_Index):
    __slots__ = ("shape", "index", "basic")


class UnsqueezeBackward0(_Index):
    __slots__ = ("shape", "index", "basic")


def _basic_node(x: Tensor, index: Any) -> type:
    """The node torch would show for a basic index (Note [basic index names])."""
    if not isinstance(index, tuple):
        return (SelectBackward0 if isinstance(index, (int, np.integer)) else SliceBackward0 if isinstance(index, slice)
                else UnsqueezeBackward0 if index is None else AliasBackward0)
    cls: type = AliasBackward0
    dim = 0
    for item in index:
        if item is None:
            cls = UnsqueezeBackward0
        elif item is Ellipsis:
            dim += x.ndim - sum(1 for other in index if other is not None and other is not Ellipsis)
        elif isinstance(item, slice):
            trivial = (item.start in (None, 0) and item.step in (None, 1)
                       and (item.stop is None or item.stop >= x.shape[dim]))
            cls = cls if trivial else SliceBackward0
            dim += 1
        else:
            cls = SelectBackward0
            dim += 1
    return cls


# Note [basic index names]
# torch applies a basic index item by item (None: unsqueeze, an integer: select, a slice: slice,
# skipped inside a tuple when it keeps the whole dimension) and shows the last op's node, or
# AliasBackward0 when none ran. asyncgrad records one node for the whole index, named the same way.


def getitem(x: Tensor, index: Any) -> Tensor:
    index = sequence_as_tuple(index)
    if x.ndim == 0 and index not in ((), Ellipsis, None):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                         "C++ to convert a 0-dim tensor to a number")
    idx, basic = normalize_index(x, index)
    backend = x.device.backend
    try:
        if basic:
            # with an Ellipsis numpy gives a 0-d view, not a scalar copy, for a full integer index
            key = ((*idx, Ellipsis) if Ellipsis not in idx else idx) if isinstance(idx, tuple) else (
                (idx, Ellipsis) if idx is not Ellipsis else idx)
            out = backend.view(x.data, indexed, key)
        else:
            out = backend.getitem(x.data, idx)
    except IndexError as exc:
        raise _torch_index_error(exc, x, idx) from None
    if basic:
        return record(_basic_node(x, idx), (x,), out, x.device, x.shape, idx, True, view_of=x)
    if not backend.is_contiguous(out):  # torch's result is contiguous; numpy's may keep x's layout
        out = backend.copy(out, "C")
    return record(IndexBackward0, (x,), out, x.device, x.shape, _owned(backend, idx) if recording(x) else idx, False)


class IndexBackwardBackward0(OpNode):
    """The backward of indexing, itself differentiable: its gradient is indexing again."""

    __slots__ = ("index",)

    def backward(self, F, g):
        return (F.index(g, self.index[0]),)


def index_add_into(shape: tuple[int, ...], index: Any, g: Tensor) -> Tensor:
    """``TensorMath.index_add``: zeros of ``shape`` with ``g`` added at ``index`` (an (index, basic) pair)."""
    return record(IndexBackwardBackward0, (g,), g.device.backend.index_add(shape, index[0], index[1], g.data),
                  g.device, index)


class IndexPutBackward0(OpNode):
    """x[index] = value, out of place: x keeps the gradient outside ``index``, value gets the rest."""

    __slots__ = ("index", "value_shape")

    def backward(self, F, g):
        keep = F.unpack(self)[0]  # the index tensors after it are saved for their version check
        gv = None
        if self.needs(1):
            gv = F.sum_to(F.index(g, self.index), self.value_shape)
        return (g * keep if self.needs(0) else None, gv)


def index_put(x: Tensor, index: Any, value: Any) -> Tensor:
    """``x`` with ``value`` written at ``index``, as a new tensor; ``x.__setitem__`` writes it back in place."""
    if isinstance(value, Tensor):
        if value.device is not x.device:
            same_device(x, value)
        tv, dv = value, value.data
    elif isinstance(value, (int, float, np.number, np.bool_)):
        if isinstance(value, np.complexfloating):
            raise complex_error(value.dtype)
        tv, dv = None, value
    elif isinstance(value, np.ndarray):
        check_array_dtype(value)
        tv, dv = None, x.device.asarray(value)
    elif is_complex(value):
        raise complex_error("complex128")
    else:
        raise TypeError(f"can't assign a {type_label(value)} to a {type_name(x.dtype)}")
    idx, basic = normalize_index(x, index)
    dev = x.device
    backend = dev.backend
    out = backend.copy(x.data, "C")  # the result keeps x's dtype: the value is cast on assignment
    try:
        backend.setitem(out, idx, dv)
    except ValueError:
        value_shape = tuple(getattr(dv, "shape", ()))
        target = backend.getitem(x.data, idx).shape
        if basic:  # torch copies into the view: expand's words
            expanded_shape(value_shape, x.dtype, target)
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value_shape)} cannot be broadcast to "
                           f"indexing result of shape {list(target)}") from None
    except IndexError as exc:
        raise _torch_index_error(exc, x, idx) from None
    if not recording(x, tv):
        return plain(out, dev)
    keep = backend.ones(x.shape, x.dtype)
    backend.setitem(keep, idx, 0)
    # the index tensors too, as torch saves them: changing one in place refuses the backward
    tensors = tuple(i for i in (index if isinstance(index, tuple) else (index,)) if isinstance(i, Tensor))
    return record(IndexPutBackward0, (x, tv), out, dev, _owned(backend, idx), tv.shape if tv is not None else (),
                  saved=(plain(keep, dev), *tensors))


# --------------------------------------------------------------------------- gather / scatter / index_select
# Note [Indices along a dim]: torch's gather, scatter, index_select, index_add and the sorting ops'
# backwards address one element per index entry: entry (i, j, k) of ``index`` along dim 1 means
# position (i, index[i, j, k], k). asyncgrad spells that as a numpy-style advanced index, the
# tuple ``along(index, dim)`` of ``index`` at the dim and broadcast ``arange``s elsewhere, so that
# the backends' ``getitem`` (gather), ``setitem`` (scatter) and ``index_add`` (scatter-add,
# repeated indices adding up) do the work on every device, and the backward formulas need nothing
# but ``F.index`` and ``F.index_add``, which are each other's gradients (second order for free).


def along(index: Any, axis: int, backend: Any) -> tuple:
    """The advanced index addressing, for each entry of the device array ``index``, the element at
    that entry's position with ``axis`` replaced by the entry's value (Note [Indices along a dim])."""
    xp = backend.xp
    ndim = index.ndim
    items = []
    for k, n in enumerate(index.shape):
        if k == axis:
            items.append(index)
        else:
            items.append(xp.reshape(backend.arange(n, np.int64), tuple(n if i == k else 1 for i in range(ndim))))
    return tuple(items)


def _index_arg(index: Any, fn: str, pos: int, dtype_error: str) -> Tensor:
    """The index tensor of gather/scatter/index_select/index_add: a Tensor of int32 or int64 (torch's
    words). gather and scatter take an empty index of any dtype, as torch's (it checks the dtype of
    an index that has elements only): returned as int64."""
    tensor_arg(index, fn, "index", pos)
    if index.dtype not in (np.int64, np.int32):
        if index.numel() == 0 and fn in ("gather", "scatter", "scatter_add"):
            return index.to(np.int64)
        raise RuntimeError(dtype_error.format(type=scalar_type_name(index.dtype)))
    return index


def _on_device(x: Tensor, t: Tensor) -> Any:
    """``t``'s array on ``x``'s device (a CPU index is taken, as torch takes one for a CUDA tensor)."""
    if t.device is x.device:
        return t.data
    if not t.device.is_cpu:
        same_device(x, t)
    return x.device.asarray(t.data)


def _check_bounds(index: Any, size: int, dim: int, backend: Any, error: type[Exception] = RuntimeError,
                  message: str | None = None, prefix: str = "", low: int = 0) -> None:
    """torch's refusal of an index outside ``[low, size)`` (``low`` is ``-size`` where negative
    indices wrap), naming the first bad one (one host sync)."""
    xp = backend.xp
    if index.size == 0:
        return
    bad = xp.logical_or(index < low, index >= size)
    if bool(xp.any(bad)):
        host = backend.to_host(index)
        first = int(host[backend.to_host(bad)][0])
        raise error(message or f"{prefix}index {first} is out of bounds for dimension {dim} with size {size}")


def _check_along(fn: str, x: Tensor, index: Tensor, axis: int, src: Tensor | None = None) -> None:
    """gather/scatter's shape rules: the index has the input's number of dims, and is no larger
    than it outside ``axis`` (and no larger than ``src`` anywhere)."""
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        which = "input" if fn == "gather" else "self"
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {which} tensor")
    ishape, xshape = list(index.shape), list(x.shape)
    if fn == "gather":
        for k, (a, b) in enumerate(zip(ishape, xshape)):
            if k != axis and a > b:
                raise RuntimeError(f"Size does not match at dimension {k} expected index {ishape} to be no larger than "
                                   f"self {xshape} apart from dimension {axis}")
        return
    bad_self = any(k != axis and a > b for k, (a, b) in enumerate(zip(ishape, xshape)))
    bad_src = src is not None and any(a > b for a, b in zip(ishape, src.shape))
    if bad_self or bad_src:
        tail = f" and to be no larger size than src {list(src.shape)}" if src is not None else ""
        raise RuntimeError(f"Expected index {ishape} to be no larger than self {xshape} apart from dimension "
                           f"{axis}{tail}")


class GatherBackward0(SavesVariables):
    """gather: the gradient is added back where each entry came from (scatter-add into zeros)."""

    __slots__ = ("shape", "index")

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, False), g),)


def _as_vector(fn: Any, x: Tensor, dim: Any, index: Any, *args: Any, **kwargs: Any) -> Tensor:
    """A 0-d tensor's gather/scatter/index op: the op on its one-element vector, reshaped back to 0-d,
    except gather's, whose result has its index's shape (a 1-element index gives shape (1,), as torch)."""
    normalize_dim(dim, 0, fn.__name__)
    shape = index.shape if fn is gather and isinstance(index, Tensor) else ()
    if isinstance(index, Tensor) and index.ndim == 0:
        index = reshape(index, (1,))
    args = tuple(reshape(a, (1,)) if isinstance(a, Tensor) and a.ndim == 0 else a for a in args)
    return reshape(fn(reshape(x, (1,)), 0, index, *args, **kwargs), shape)


def gather(x: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """torch's ``gather``: ``out[i][j][k] = x[i][index[i][j][k]][k]`` along ``dim`` (Note [Indices along a dim])."""
    tensor_arg(x, "gather")
    if x.ndim == 0:  # the one-element vector's gather, shaped as the index (torch's result)
        normalize_dim(dim, 0, "gather")
        tensor_arg(index, "gather", "index", 3)
        vector_index = reshape(index, (1,)) if index.ndim == 0 else index
        return reshape(gather(reshape(x, (1,)), 0, vector_index), tuple(index.shape))
    axis = normalize_dim(dim, x.ndim, "gather")
    if isinstance(index, Tensor) and index.numel() == 0 and index.dtype.kind in "iu":
        # torch takes an empty index of any integer dtype and shape: an empty result of its shape
        dev = x.device
        key = tuple(dev.backend.zeros(tuple(index.shape), np.dtype(np.int64)) for _ in range(x.ndim))
        return record(GatherBackward0, (x,), dev.backend.getitem(x.data, key), dev, x.shape, key)
    index = _index_arg(index, "gather", 2, "gather(): Expected dtype int32/int64 for index")
    if index.numel() == 0 and index.ndim != x.ndim:  # an empty index of another rank: torch's empty result
        return reshape(getitem(reshape(x, (-1,)), slice(0, 0)), tuple(index.shape))
    _check_along("gather", x, index, axis)
    dev = x.device
    backend = dev.backend
    idx = _on_device(x, index)
    _check_bounds(idx, x.shape[axis], axis, backend)
    key = along(idx, axis, backend)
    out = backend.getitem(x.data, key)
    return record(GatherBackward0, (x,), out, dev, x.shape, _owned(backend, key) if recording(x) else key)


def _src_part(src_shape: tuple[int, ...], index_shape: tuple[int, ...]) -> tuple | None:
    """The basic index of ``src``'s entries that scatter reads (its leading ``index_shape`` block), or None for all."""
    if src_shape == index_shape:
        return None
    return tuple(slice(0, n) for n in index_shape)


class _Scatter(SavesVariables):
    """scatter (ScatterBackward0: a src tensor; ScatterBackward1: a value): the input keeps its
    gradient where nothing was written; src gets the gradient of the places it was written to.
    torch refuses src larger than the index at backward (an invalid gradient's shape); asyncgrad
    gives its unread entries zeros."""

    __slots__ = ("index", "src_shape", "part")

    def backward(self, F, g):
        keep = F.unpack(self)[0]  # the index after it is saved for its version check, as torch saves it
        gs = None
        if self.num_outputs > 1 and self.needs(1):
            gs = F.index(g, self.index)
            if self.part is not None:
                gs = F.index_add(self.src_shape, (self.part, True), gs)
        return (F.where(keep, g, 0.0) if self.needs(0) else None, gs)[:self.num_outputs]


class ScatterBackward0(_Scatter):
    __slots__ = ()


class ScatterBackward1(_Scatter):
    __slots__ = ()


class ScatterAddBackward0(SavesVariables):
    """scatter_add: the input's gradient passes; src gets the gradient where each entry was added."""

    __slots__ = ("index", "src_shape", "part")

    def backward(self, F, g):
        gs = None
        if self.needs(1):
            gs = F.index(g, self.index)
            if self.part is not None:
                gs = F.index_add(self.src_shape, (self.part, True), gs)
        return (g if self.needs(0) else None, gs)


def _scatter_args(fn: str, x: Tensor, dim: Any, index: Any, src: Any) -> tuple[int, Any, tuple, Tensor | None]:
    axis = normalize_dim(dim, x.ndim, fn)
    index = _index_arg(index, fn, 2, "scatter(): Expected dtype int32/int64 for index")
    ts = src if isinstance(src, Tensor) else None
    if ts is not None and ts.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _check_along(fn, x, index, axis, ts)
    backend = x.device.backend
    idx = _on_device(x, index)
    _check_bounds(idx, x.shape[axis], axis, backend)
    return axis, idx, along(idx, axis, backend), ts


def scatter(x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: str | None = None
            ) -> Tensor:
    """torch's ``scatter`` (out of place): ``out[i][index[i][j][k]][k] = src[i][j][k]`` along ``dim``,
    or a number ``value`` there. ``reduce="add"``/``"multiply"`` combine instead of writing; torch
    records no usable gradient for them (its node is NotImplemented), asyncgrad refuses them when
    recording. Where indices repeat, which write wins is unspecified, as in torch."""
    tensor_arg(x, "scatter")
    if src is None:
        src = value
    if x.ndim == 0:
        return _as_vector(scatter, x, dim, index, src, reduce=reduce)
    if not isinstance(src, (Tensor, bool, int, float, np.number)):
        raise TypeError(f"scatter() received an invalid combination of arguments - got (int, Tensor, "
                            f"{type_label(src)}), but expected one of: (int dim, Tensor index, Tensor src) or "
                            "(int dim, Tensor index, Number value)")
    axis, idx, key, ts = _scatter_args("scatter", x, dim, index, src)
    dev = x.device
    backend = dev.backend
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if ts is not None:
        part = _src_part(ts.shape, index.shape)
        values = ts.data if part is None else backend.view(ts.data, indexed, part)
        values = _on_device(x, ts) if ts.device is not dev else values
    else:
        part, values = None, src
    if reduce is not None:
        if recording(x, ts):
            raise RuntimeError(f"the derivative for 'scatter' with reduce='{reduce}' is not implemented")
        out = backend.copy(x.data, "C")
        if reduce == "add":
            added = values if ts is not None else backend.full(index.shape, values, x.dtype)
            return plain(out + backend.index_add(x.shape, key, False, added), dev)
        return plain(backend.scatter_multiply(out, key, values), dev)
    out = backend.copy(x.data, "C")
    backend.setitem(out, key, values)
    if not recording(x, ts):
        return plain(out, dev)
    keep = backend.ones(x.shape, np.bool_)
    backend.setitem(keep, key, False)
    key = _owned(backend, key)
    if ts is None:
        return record(ScatterBackward1, (x,), out, dev, key, (), None, saved=(plain(keep, dev), index))
    return record(ScatterBackward0, (x, ts), out, dev, key, ts.shape, part, saved=(plain(keep, dev), index))


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """torch's ``scatter_add`` (out of place): ``out[i][index[i][j][k]][k] += src[i][j][k]``, repeated
    indices adding up."""
    tensor_arg(x, "scatter_add")
    tensor_arg(src, "scatter_add", "src", 3)
    if x.ndim == 0:
        return _as_vector(scatter_add, x, dim, index, src)
    axis, idx, key, ts = _scatter_args("scatter_add", x, dim, index, src)
    dev = x.device
    backend = dev.backend
    part = _src_part(src.shape, index.shape)
    values = _on_device(x, src)
    if part is not None:
        values = backend.view(values, indexed, part)
    out = x.data + backend.index_add(x.shape, key, False, values)
    return record(ScatterAddBackward0, (x, src), out, dev, _owned(backend, key) if recording(x, src) else key,
                  src.shape, part)


class IndexSelectBackward0(SavesVariables):
    """index_select: the gradient is added back at the selected positions (repeats add up)."""

    __slots__ = ("shape", "index")

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, False), g),)


def _vector_index(x: Tensor, dim: Any, index: Any, fn: str, dtype_error: str) -> tuple[int, Any, tuple]:
    """index_select/index_add's (axis, index array, ``x[key]`` selecting along ``axis``)."""
    axis = normalize_dim(dim, x.ndim, fn)
    _index_arg(index, fn, 2, dtype_error)
    idx = _on_device(x, index)
    if index.ndim > 1:
        if fn == "index_select":
            raise IndexError("index_select(): Index is supposed to be a vector")
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{scalar_type_name(index.dtype)} and size: {list(index.shape)}")
    if index.ndim == 0:
        idx = x.device.xp.reshape(idx, (1,))
    return axis, idx, (slice(None),) * axis + (idx,)


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch's ``index_select``: the entries of ``x`` at ``index`` (a vector) along ``dim``."""
    tensor_arg(x, "index_select")
    if x.ndim == 0:
        return _as_vector(index_select, x, dim, index)
    axis, idx, key = _vector_index(x, dim, index, "index_select",
                                   "index_select(): Expected dtype int32 or int64 for index")
    dev = x.device
    backend = dev.backend
    _check_bounds(idx, x.shape[axis], axis, backend, IndexError, "index out of range in self")
    out = backend.getitem(x.data, key)
    if not backend.is_contiguous(out):
        out = backend.copy(out, "C")
    return record(IndexSelectBackward0, (x,), out, dev, x.shape, _owned(backend, key) if recording(x) else key)


class IndexAddBackward0(SavesVariables):
    """index_add: the input's gradient passes; source gets ``alpha`` times the gradient it was added to."""

    __slots__ = ("index", "alpha", "source_shape")

    def backward(self, F, g):
        gs = None
        if self.needs(1):
            gs = F.reshape(F.index(g, self.index), self.source_shape)
            if self.alpha != 1:
                gs = gs * self.alpha
        return (g if self.needs(0) else None, gs)


def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """torch's ``index_add`` (out of place): ``x`` with ``alpha * source`` added at ``index`` along ``dim``,
    repeated indices adding up; ``x.index_add_`` writes it back in place."""
    tensor_arg(x, "index_add")
    tensor_arg(source, "index_add", "source", 3)
    if x.ndim == 0:
        return _as_vector(index_add, x, dim, index, source, alpha=alpha)
    axis, idx, key = _vector_index(x, dim, index, "index_add",
                                   "index_add_(): Expected dtype int32/int64 for index but got: {type}")
    if source.dtype != x.dtype:
        raise RuntimeError(f"index_add_(): self ({scalar_type_name(x.dtype)}) and source "
                           f"({scalar_type_name(source.dtype)}) must have the same scalar type")
    n = idx.shape[0]
    src_n = source.shape[axis] if source.ndim > axis else 1
    if n != src_n:
        raise RuntimeError(f"index_add_(): Number of indices ({n}) should be equal to source.size(dim): ({src_n}), "
                           f"for dim: {axis}")
    target = tuple(n if k == axis else s for k, s in enumerate(x.shape))
    if source.ndim and source.shape != target:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(x.shape)} source.shape = {list(source.shape)}")
    dev = x.device
    backend = dev.backend
    _check_bounds(idx, x.shape[axis], axis, backend)
    values = _on_device(x, source)
    if alpha != 1:
        values = values * alpha
    out = x.data + backend.index_add(x.shape, key, False, backend.xp.reshape(values, target))
    return record(IndexAddBackward0, (x, source), out, dev, _owned(backend, key) if recording(x, source) else key,
                  alpha, source.shape)


# --------------------------------------------------------------------------- masks
class _MaskedFill(OpNode):
    """masked_fill: the input keeps the gradient where the mask is False (summed back to its shape
    where the mask broadcast it); a value tensor (MaskedFillBackward1) gets the sum of the rest."""

    __slots__ = ("x_shape",)

    def backward(self, F, g):
        (mask,) = F.unpack(self)
        gx = F.sum_to(F.where(mask, 0.0, g), self.x_shape) if self.needs(0) else None
        if self.num_outputs == 1:
            return (gx,)
        return (gx, F.sum(F.where(mask, g, 0.0)) if self.needs(1) else None)


class MaskedFillBackward0(_MaskedFill):
    __slots__ = ()


class MaskedFillBackward1(_MaskedFill):
    __slots__ = ()


_C_TYPE = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
           "float64": "double", "float32": "float", "float16": "c10::Half"}
"""The C++ type torch's mask messages name a dtype by."""


def _mask_arg(x: Tensor, mask: Any, fn: str, error: str) -> Any:
    tensor_arg(mask, fn, "mask", 2)
    if mask.dtype != np.bool_:
        raise RuntimeError(error.format(type=_C_TYPE.get(mask.dtype.name, mask.dtype.name)))
    return _on_device(x, mask)


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """torch's ``masked_fill`` (out of place): ``value`` where ``mask`` is True, broadcast together
    with ``x``; ``value`` is a number or a 0-d tensor, cast to ``x``'s dtype."""
    tensor_arg(x, "masked_fill")
    m = _mask_arg(x, mask, "masked_fill", "masked_fill_ only supports boolean masks, but got mask with dtype {type}")
    dev = x.device
    backend = dev.backend
    tv = None
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        tv = value
        fill = backend.astype(_on_device(x, value), x.dtype)
    elif isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        fill = backend.full((), value, x.dtype)
    else:
        raise TypeError(f"masked_fill() received an invalid combination of arguments - got (Tensor, "
                        f"{type_label(value)}), but expected one of: (Tensor mask, Tensor value) or "
                        "(Tensor mask, Number value)")
    try:
        out = dev.xp.where(m, fill, x.data)
    except ValueError:
        raise broadcast_error(mask.shape, x.shape) from None
    if not backend.is_contiguous(out):
        out = backend.copy(out, "C")
    # the mask tensor itself, as torch saves it: changing it in place refuses the backward (its
    # array, saved plain, would silently route the gradient by the new mask)
    saved = ((mask if m is mask.data else plain(m, dev)) if recording(x, tv) else None,)
    if tv is None:
        return record(MaskedFillBackward0, (x,), out, dev, x.shape, saved=saved)
    return record(MaskedFillBackward1, (x, tv), out, dev, x.shape, saved=saved)


class MaskedSelectBackward0(SavesVariables):
    """masked_select: the gradient goes back to the selected positions of the broadcast input."""

    __slots__ = ("shape", "mask")

    def backward(self, F, g):
        return (F.sum_to(F.index_add(self.mask.shape, (self.mask, False), g), self.shape),)


def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """torch's ``masked_select``: the entries of ``x`` where ``mask`` is True (both broadcast), as a vector."""
    tensor_arg(x, "masked_select")
    m = _mask_arg(x, mask, "masked_select", "masked_select: expected BoolTensor for mask")
    dev = x.device
    xp = dev.xp
    try:
        shape = tuple(np.broadcast_shapes(tuple(mask.shape), tuple(x.shape)))
    except ValueError:
        raise broadcast_error(mask.shape, x.shape) from None
    data = xp.broadcast_to(x.data, shape) if x.shape != shape else x.data
    m = xp.broadcast_to(m, shape) if mask.shape != shape else m
    out = dev.backend.getitem(data, m)
    if not recording(x):
        return plain(out, dev)
    return record(MaskedSelectBackward0, (x,), out, dev, x.shape, dev.backend.copy(m, "C"))


def nonzero(x: Tensor, *, as_tuple: bool = False) -> Any:
    """torch's ``nonzero``: the indices of the non-zero entries, one row each (int64, ``(n, ndim)``),
    or with ``as_tuple=True`` one vector per dim (a 0-d tensor counts as a vector of one)."""
    tensor_arg(x, "nonzero")
    dev = x.device
    xp = dev.xp
    data = x.data if x.ndim else xp.reshape(x.data, (1,))
    where = [dev.backend.astype(i, np.int64) for i in xp.nonzero(data)]
    if as_tuple:
        return tuple(plain(i, dev) for i in where)
    if x.ndim == 0:
        return plain(dev.backend.zeros((where[0].shape[0], 0), np.int64), dev)
    return plain(xp.stack(where, axis=1), dev)


# --------------------------------------------------------------------------- take
class TakeBackward0(OpNode):
    """``take``: the gradient added back at the flat positions it was read from (repeats add up)."""

    __slots__ = ("shape", "positions")

    def backward(self, F, g):
        flat = F.index_add((math.prod(self.shape),), (self.positions, False), F.reshape(g, (-1,)))
        return (F.reshape(flat, self.shape),)


def take(input: Tensor, index: Tensor) -> Tensor:
    """torch's ``take``: the elements of ``input`` at the flat positions ``index`` (negative count
    from the end), shaped as ``index``."""
    tensor_arg(input, "take", "input", 1)
    tensor_arg(index, "take", "index", 2)
    if index.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {scalar_type_name(index.dtype)}")
    dev = input.device
    if index.device is not dev:
        same_device(input, index)
    backend = dev.backend
    xp = dev.xp
    n = input.numel()
    positions = xp.reshape(index.data, (-1,))
    if positions.shape[0]:
        low, high = int(xp.min(positions)), int(xp.max(positions))
        if n == 0:
            raise IndexError("take(): tried to take from an empty tensor")
        if low < -n or high >= n:
            bad = high if high >= n else low
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    positions = xp.where(positions < 0, positions + n, positions)
    out = xp.reshape(backend.getitem(xp.reshape(input.data, (-1,)), positions), index.shape)
    return record(TakeBackward0, (input,), out, dev, input.shape, positions)


# --------------------------------------------------------------------------- scatter_reduce, index_reduce
# Note [Reducing scatters]: ``scatter_reduce(x, dim, index, src, reduce, include_self)`` combines
# every ``src`` entry into the position of ``x`` its index names (``key``, Note [Indices along a
# dim]) with ``reduce`` (sum, prod, mean, amax, amin), the position's own value included unless
# ``include_self`` is False; ``index_reduce`` is the same with a 1-d index of slices, spread to
# ``src``'s shape. The gradients are torch's ``scatter_reduce_backward``: sum and mean pass the
# gradient (divided by each position's count for mean) back to the position and to every entry
# that went there; amax/amin share it evenly among the values equal to the result; prod gives each
# member the product of the others (``x``'s gradient is ``g * P`` with ``P`` the product of what
# was scattered in; ``src``'s counts zeros: one zero gets the product of the rest, two or more
# leave every member zero). Positions excluded by ``include_self=False`` give ``x`` no gradient.
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


class _ReduceScatter(OpNode):
    __slots__ = ("reduce", "include_self", "axis", "index", "key", "count", "src_shape", "part")
    saves_result = True
    op_name: str
    src_name: str
    """The op's name and its source argument's, as torch's errors say them."""

    def backward(self, F, g):
        x, src, result = F.unpack(self)
        if self.part is not None:  # the block of src the index reads
            src = F.index(src, self.part)
        key, reduce = self.key, self.reduce
        if reduce == "sum":
            gx, gs = g, F.index(g, key)
        elif reduce == "mean":
            share = g / F.constant(self.count, g)
            gx, gs = share, F.index(share, key)
        elif reduce in ("amax", "amin"):
            self_hit = F.cast(x == result, g.dtype)  # counted even when excluded, as torch counts it
            src_hit = F.cast(src == F.index(result, key), g.dtype)
            spread = g / (self_hit + F.index_add(tuple(x.shape), (key, False), src_hit))
            gx, gs = self_hit * spread, src_hit * F.index(spread, key)
        else:  # prod: each member gets the product of the others (Note [Reducing scatters])
            ones = _ones_for(F, x)
            zero = src == 0
            zeros_in = F.index_add(tuple(x.shape), (key, False), F.cast(zero, g.dtype))
            if self.include_self:
                zeros_in = zeros_in + F.cast(x == 0, g.dtype)
            safe_src = F.where(zero, 1.0, src)
            base = F.where(x == 0, 1.0, x) if self.include_self else ones
            nonzero_product = F.scatter_prod(base, key, self.axis, self.index, safe_src)
            gx = g * F.scatter_prod(ones, key, self.axis, self.index, src)
            zeros_at = F.index(zeros_in, key)
            only_zero = F.index(g * nonzero_product, key)
            no_zero = F.index(g * result, key) / safe_src
            gs = F.where(zero, F.where(zeros_at == 1.0, only_zero, 0.0), F.where(zeros_at == 0.0, no_zero, 0.0))
        if not self.include_self:
            gx = F.index_put(gx, key, 0.0)
        if self.part is not None:
            gs = F.index_add(self.src_shape, (self.part, True), gs)
        if reduce == "prod" and F is not ArrayMath and self.needs(1):
            # torch's: the gradient above is right where two zeros of src meet, its own gradient is not,
            # so a recorded backward refuses to go through src's gradient there
            src_zeros = F.index_add(tuple(x.shape), (key, False), F.cast(src == 0, g.dtype))
            if bool((src_zeros > 1.0).any()):
                gs = F.delayed_error(gs, f"{self.op_name}(): Double backward is unsupported for {self.src_name} when "
                                         f">1 zeros in {self.src_name} are scattered to the same position in self")
        return (gx if self.needs(0) else None, gs if self.needs(1) else None)


def _ones_for(F: Any, like: Any) -> Any:
    """Ones of ``like``'s shape and dtype, a constant of the formula's namespace."""
    if isinstance(like, Tensor):
        return F.constant(like.device.backend.ones(tuple(like.shape), like.dtype), like)
    backend = backend_of(like)
    return backend.ones(tuple(like.shape), backend.dtype(like))


class ScatterReduceBackward0(_ReduceScatter):
    __slots__ = ()
    op_name, src_name = "scatter_reduce", "src"


class IndexReduceBackward0(_ReduceScatter):
    __slots__ = ()
    op_name, src_name = "index_reduce", "source"


def _reduce_scatter(cls: type[OpNode], fn: str, x: Tensor, axis: int, idx: Any, src: Tensor, reduce: str,
                    include_self: bool) -> Tensor:
    """One reducing scatter (Note [Reducing scatters]): ``idx`` a device array of indices along
    ``axis``, shaped as (a leading block of) ``src``."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # torch's older names, still taken
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if src.dtype != x.dtype:
        raise RuntimeError(f"{fn}(): Expected self.dtype to be equal to src.dtype")
    dev = x.device
    backend = dev.backend
    xp = dev.xp
    part = _src_part(src.shape, tuple(idx.shape))
    values = _on_device(x, src)
    if part is not None:
        values = backend.view(values, indexed, part)
    key = along(idx, axis, backend)
    out = backend.copy(x.data, "C")
    count = None
    if reduce in ("sum", "mean"):
        if not include_self:
            backend.setitem(out, key, 0)
        out = out + backend.index_add(x.shape, key, False, values)
        if reduce == "mean":
            count = backend.index_add(x.shape, key, False, backend.ones(tuple(idx.shape), x.dtype))
            if include_self:
                count = count + 1
            count = xp.where(count == 0, 1.0, count)
            out = out / count if x.dtype.kind == "f" else xp.floor(out / count)
    elif reduce == "prod":
        if not include_self:
            backend.setitem(out, key, 1)
        out = backend.scatter_multiply(out, key, values)
    else:
        if not include_self:
            backend.setitem(out, key, -math.inf if reduce == "amax" else math.inf)
        out = backend.scatter_extreme(out, key, values, reduce == "amax")
    if not recording(x, src):
        return plain(out, dev)
    return record(cls, (x, src), out, dev, reduce, include_self, axis, idx, _owned(backend, key), count, src.shape,
                  part, saved=(x, src))


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """torch's ``scatter_reduce``: ``src``'s entries combined into ``input`` at ``index`` along ``dim``
    with ``reduce`` (Note [Reducing scatters])."""
    tensor_arg(input, "scatter_reduce")
    tensor_arg(src, "scatter_reduce", "src", 4)
    if input.ndim == 0:
        return _as_vector(scatter_reduce, input, dim, index, src, reduce, include_self=include_self)
    axis, idx, key, ts = _scatter_args("scatter_reduce", input, dim, index, src)
    return _reduce_scatter(ScatterReduceBackward0, "scatter_reduce", input, axis, _on_device(input, index), src,
                           reduce, include_self)


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """torch's ``index_reduce``: slice ``i`` of ``source`` along ``dim`` combined into slice
    ``index[i]`` of ``input`` with ``reduce`` (prod, mean, amax, amin; Note [Reducing scatters])."""
    tensor_arg(input, "index_reduce")
    tensor_arg(index, "index_reduce", "index", 3)
    tensor_arg(source, "index_reduce", "source", 4)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dtype != np.int64:
        raise RuntimeError("index_reduce_(): Expected dtype int64 for index")
    if index.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"Long and size: {list(index.shape)}")
    x, src = input, source
    if x.ndim == 0:
        x = reshape(x, (1,))
    if src.ndim == 0:
        src = reshape(src, (1,))
    axis = normalize_dim(dim, x.ndim, "index_reduce")
    n = index.numel()
    if src.shape[axis] != n:
        raise IndexError("index_reduce_(): Number of indices should be equal to source.size(dim)")
    backend = x.device.backend
    positions = x.device.xp.reshape(_on_device(x, reshape(index, (-1,))), tuple(
        n if i == axis else 1 for i in range(x.ndim)))
    size = x.shape[axis]
    _check_bounds(positions, size, axis, backend, IndexError, prefix="index_reduce_(): ")
    idx = x.device.xp.broadcast_to(positions, tuple(src.shape))
    out = _reduce_scatter(IndexReduceBackward0, "index_reduce", x, axis, idx, src, reduce, include_self)
    return reshape(out, ()) if input.ndim == 0 else out
