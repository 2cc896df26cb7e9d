"""Indexing: basic (views) and integer/boolean-array (copies, repeated indices accumulate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad._convert import to_array
from asyncgrad._validate import complex_error, is_complex, type_label
from asyncgrad.autograd.accumulate import gradient_edge
from asyncgrad.autograd.graph import RELEASED
from asyncgrad.autograd.saved import SavedTensor
from asyncgrad.ops._node import OpNode, SavesVariables, record_node, same_device
from asyncgrad.ops.elementwise import _binary_node, operands
from asyncgrad.ops.reduction import _recording
from asyncgrad.ops.shape import _view
from asyncgrad.tensor import Tensor, type_name

_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)


def normalize_index(x: Tensor, index: Any) -> tuple[Any, bool]:
    """The index as the array module takes it, and whether it is basic (gives a view)."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    basic = True
    for item in items:
        if isinstance(item, Tensor):
            same_device(x, item) if item.device is not x.device and not item.device.is_cpu else None
            item = x.device.asarray(item.data) if item.device is not x.device else item.data
            if item.dtype.kind not in "iub":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            basic = False
        elif isinstance(item, (list, np.ndarray)):
            if isinstance(item, list):  # read as ag.tensor reads it: torch's errors for None or str inside
                item = to_array(item, None, x.device)
            item = x.device.asarray(item) if x.device.type == "cuda" else np.asarray(item)
            if item.dtype.kind not in "iub":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
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


def _owned(index: Any) -> Any:
    """An index the backward can keep: its arrays copied, so that changing the index tensor (or
    array) after the forward cannot move the gradient (torch would raise at backward instead)."""
    if isinstance(index, tuple):
        return tuple(_owned(item) for item in index)
    return index.copy() if hasattr(index, "copy") and not isinstance(index, (int, np.integer)) else index


def _torch_index_error(exc: IndexError, ndim: int, shape: tuple = (), index: Any = None) -> IndexError:
    """numpy's indexing errors in torch's words ("dimension", not "axis"; a mask's shape)."""
    text = str(exc)
    if text.startswith("too many indices"):
        return IndexError(f"too many indices for tensor of dimension {ndim}")
    if text.startswith("boolean index did not match"):
        items = index if isinstance(index, tuple) else (index,)
        start = 0
        for item in items:
            if getattr(item, "dtype", None) is not None and item.dtype.kind == "b":
                mask = item.shape
                bad = next(i for i, n in enumerate(mask) if start + i >= len(shape) or shape[start + i] != n)
                return IndexError(f"The shape of the mask {list(mask)} at index {bad} does not match the shape of the "
                                  f"indexed tensor {list(shape)} at index {start + bad}")
            start += 0 if item is None or item is Ellipsis else getattr(item, "ndim", 1)
    return IndexError(text.replace(" for axis ", " for dimension "))


class IndexBackward0(SavesVariables):
    """x[index]; SliceBackward0 / SelectBackward0 are its basic-index forms."""

    __slots__ = ("shape", "index", "basic")

    @property
    def saves_variables(self) -> bool:  # type: ignore[override]
        """torch saves the indices of an advanced index only (Note [Which nodes refuse a second pass] in graph.py)."""
        return not self.basic

    def release_variables(self) -> None:
        if not self.basic:
            self.saved = RELEASED

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, self.basic), g),)


class SliceBackward0(IndexBackward0):
    __slots__ = ()


class SelectBackward0(IndexBackward0):
    __slots__ = ()


class AliasBackward0(IndexBackward0):
    __slots__ = ()


class UnsqueezeBackward0(IndexBackward0):
    __slots__ = ()


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
    try:
        # with an Ellipsis numpy returns a 0-d view, not a scalar copy, for a full integer index
        out = x.data[(*idx, Ellipsis) if basic and isinstance(idx, tuple) and Ellipsis not in idx
                     else (idx, Ellipsis) if basic and not isinstance(idx, tuple) and idx is not Ellipsis else idx]
    except IndexError as exc:
        raise _torch_index_error(exc, x.ndim, x.shape, idx) from None
    if not isinstance(out, type(x.data)):
        out = x.device.xp.asarray(out)
    elif not basic and not out.flags.c_contiguous:  # torch's result is contiguous; numpy's may keep x's layout
        out = x.device.xp.ascontiguousarray(out)
    if not _recording(x):
        node = None
    else:
        cls = _basic_node(x, idx) if basic else IndexBackward0
        node = cls((gradient_edge(x),))
        node.shape = x.data.shape
        node.index = idx if basic else _owned(idx)
        node.basic = basic
    if basic:
        return _view(x, out, node, None)
    if node is None:
        return Tensor._make(out, x.device, False, None, 0, [0])
    return record_node(node, out, x.device)


class IndexBackwardBackward0(OpNode):
    """The backward of indexing, itself differentiable: its gradient is indexing again."""

    __slots__ = ("index",)

    def backward(self, F, g):
        return (F.index(g, self.index[0]),)


def index_add_into(shape: tuple[int, ...], index: Any, g: Tensor) -> Tensor:
    out = g.device.backend.index_add(shape, index[0], index[1], g.data)
    if not _recording(g):
        return Tensor._make(out, g.device, False, None, 0, [0])
    node = IndexBackwardBackward0((gradient_edge(g),))
    node.index = index
    return record_node(node, out, g.device)


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
    if not isinstance(value, (Tensor, int, float, np.number, np.bool_, np.ndarray)):
        if is_complex(value):
            raise complex_error("complex128")
        raise TypeError(f"can't assign a {type_label(value)} to a {type_name(x.dtype)}")
    idx, basic = normalize_index(x, index)
    tx, tv, dx, dv, dev = operands(x, value, "index_put_")
    dx = x.data  # the result keeps x's dtype (the value is cast on assignment), unlike promotion
    out = dx.copy()
    try:
        out[idx] = dv
    except ValueError:
        if basic:  # torch copies into the view: expand's words
            from asyncgrad.ops.shape import expand

            expand(Tensor._make(np.broadcast_to(np.zeros((), dx.dtype), np.shape(dv)), dev, False, None, 0, [0]),
                   *dx[idx].shape)
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(dv))} cannot be broadcast to "
                           f"indexing result of shape {list(dx[idx].shape)}") from None
    except IndexError as exc:
        raise _torch_index_error(exc, dx.ndim, dx.shape, idx) from None
    node = object.__new__(IndexPutBackward0)
    if not _binary_node(node, tx, tv):
        return Tensor._make(out, dev, False, None, 0, [0])
    keep = np.ones(dx.shape, dtype=dx.dtype) if isinstance(dx, np.ndarray) else dev.xp.ones(dx.shape, dtype=dx.dtype)
    keep[idx] = 0
    node.index = _owned(idx)
    node.value_shape = tv.shape if tv is not None else ()
    node.saved = (SavedTensor(Tensor._make(keep, dev, False, None, 0, [0])),)
    return record_node(node, out, dev)
