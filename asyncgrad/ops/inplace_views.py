"""In-place view ops: ``t_``, ``transpose_``, ``swapdims_``/``swapaxes_``, ``squeeze_``,
``unsqueeze_`` and ``as_strided_`` (and the out-of-place ``swapdims``/``swapaxes``)."""

# Note [In-place view ops]: such an op changes a tensor's own shape and strides, never its values.
# As torch does, the tensor keeps its data's memory, its base and its views; its version counter is
# bumped (a saved copy of it no longer describes it); and, where autograd records it, its history is
# *set*, not rebased: its ``grad_fn`` becomes the out-of-place op's node over its previous gradient
# edge, under torch's in-place name (``TBackward1``, ``UnsqueezeBackward1``...), and a view's base
# keeps its own ``grad_fn`` (no CopySlices: no value of the base changed). The checks are those of
# any in-place op (``apply_inplace`` in inplace.py): a leaf that requires grad, a view of one, and a
# view that may not be modified in place (Note [View creation] in _node.py) are refused in grad mode
# with torch's words. Without recording, a view whose base requires grad reads its base again
# (``AsStridedBackward0``, as after any in-place op on its family); any other tensor keeps its
# ``grad_fn``, whose gradient no longer has the tensor's shape, so a backward through it raises, as
# torch's does.

from __future__ import annotations

from typing import Any, Callable, Sequence

from asyncgrad.graph.grad_mode import INFERENCE_INPLACE, InferenceVersion, grad_enabled, inference_enabled, no_grad
from asyncgrad.ops import shape, views
from asyncgrad.ops._node import OpNode
from asyncgrad.ops.inplace import (
    AsStridedBackward0,
    _move_retain_grad,
    _rebased_node,
    view_creation_error,
)
from asyncgrad.tensor import Tensor
from asyncgrad.variable.accumulate import gradient_edge

__all__ = ["as_strided_", "squeeze_", "swapaxes", "swapaxes_", "swapdims", "swapdims_", "t_", "transpose_",
           "unsqueeze_"]


# torch's names for the nodes its in-place view ops record (derivatives.yaml's overload order)
class TBackward1(shape.TBackward0):
    __slots__ = ()


class TransposeBackward1(shape.TransposeBackward0):
    __slots__ = ()


class UnsqueezeBackward1(shape.UnsqueezeBackward0):
    __slots__ = ()


class SqueezeBackward3(shape.SqueezeBackward0):
    __slots__ = ()


class SqueezeBackward4(shape.SqueezeBackward1):
    __slots__ = ()


class SqueezeBackward5(shape.SqueezeBackward1):
    __slots__ = ()


class AsStridedBackward1(AsStridedBackward0):
    __slots__ = ()


def _inplace_view(x: Tensor, cls: type[OpNode], view: Callable[..., Tensor], *args: Any) -> Tensor:
    """``x`` becomes ``view(x, *args)`` in place (Note [In-place view ops]); ``cls`` names its node."""
    if x._vc.__class__ is InferenceVersion and not inference_enabled.get():
        raise RuntimeError(INFERENCE_INPLACE)
    grad_mode = grad_enabled.get()
    extra = x._extra
    base = extra.base if extra is not None else None
    if grad_mode and base is not None and extra.creation is not None and (base._requires_grad or x._requires_grad):
        raise RuntimeError(view_creation_error(extra.creation, "is being"))
    if grad_mode and x._requires_grad and x.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if grad_mode and base is not None and base._requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    recording = grad_mode and x._requires_grad
    if recording:
        out = view(x, *args)
        node = out.grad_fn
        assert issubclass(cls, node.__class__), (cls, node)
        node.__class__ = cls  # the same node under torch's in-place name: cls adds no field
        if extra is not None and extra.retains_grad:
            _move_retain_grad(x.grad_fn, x.output_nr, node)
        x.grad_fn, x.output_nr = node, 0
    else:
        with no_grad():
            out = view(x, *args)
    x._data = out._data
    x._vc[0] += 1
    if not recording and base is not None and x._requires_grad and extra.creation is None:
        node = _rebased_node(AsStridedBackward0, (gradient_edge(base),), x,
                             x.device.backend.view_index(base.data, x.data), base.shape, None, None,
                             work=base.data.size)
        if extra.retains_grad:
            _move_retain_grad(x.grad_fn, x.output_nr, node)
        x.grad_fn, x.output_nr = node, 0
    return x


def t_(x: Tensor) -> Tensor:
    return _inplace_view(x, TBackward1, shape.t)


def transpose_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return _inplace_view(x, TransposeBackward1, shape.transpose, dim0, dim1)


def swapdims(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """torch's alias of ``transpose``."""
    return shape.transpose(x, dim0, dim1)


def swapdims_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return _inplace_view(x, TransposeBackward1, shape.transpose, dim0, dim1)


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    """torch's alias of ``transpose``."""
    return shape.transpose(x, axis0, axis1)


def swapaxes_(x: Tensor, axis0: int, axis1: int) -> Tensor:
    return _inplace_view(x, TransposeBackward1, shape.transpose, axis0, axis1)


def unsqueeze_(x: Tensor, dim: int) -> Tensor:
    return _inplace_view(x, UnsqueezeBackward1, shape.unsqueeze, dim)


def squeeze_(x: Tensor, dim: Any = None) -> Tensor:
    cls = SqueezeBackward3 if dim is None else SqueezeBackward5 if isinstance(dim, (tuple, list)) else SqueezeBackward4
    return _inplace_view(x, cls, shape.squeeze, dim)


def as_strided_(x: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Tensor:
    return _inplace_view(x, AsStridedBackward1, views.as_strided, size, stride, storage_offset)
