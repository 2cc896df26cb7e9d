"""Indexing: basic (views) and integer/boolean-array (copies, repeated indices accumulate).

Indices are the device's: index tensors and arrays become arrays of the indexed tensor's device
(a CPU index tensor is transferred, as torch takes one for a CUDA tensor), and numpy's indexing
rules, which the standard does not have, are the backend's (``getitem``/``setitem``/``index_add``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad._convert import to_array
from asyncgrad._validate import check_array_dtype, complex_error, is_complex, type_label
from asyncgrad.autograd.graph import RELEASED
from asyncgrad.ops._node import OpNode, SavesVariables, plain, record, recording, same_device
from asyncgrad.ops.shape import expanded_shape, indexed
from asyncgrad.tensor import Tensor, type_name

_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)
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
        """torch saves the indices of an advanced index only (Note [Which nodes refuse a second pass] in graph.py)."""
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
        (keep,) = F.unpack(self)
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
    return record(IndexPutBackward0, (x, tv), out, dev, _owned(backend, idx), tv.shape if tv is not None else (),
                  saved=(plain(keep, dev),))
