"""Shape ops (views share memory and the version counter, as torch views do), joins, copies."""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import numpy as np

from asyncgrad._validate import dtype_arg, int_list, normalize_dim, tensor_arg, tensor_list
from asyncgrad.autograd.accumulate import gradient_edge
from asyncgrad.autograd.graph import NO_EDGE
from asyncgrad.devices import Device, cpu
from asyncgrad.devices import device as as_device
from asyncgrad.ops._node import OpNode, record_node
from asyncgrad.ops.elementwise import result_dtype
from asyncgrad.ops.reduction import _recording
from asyncgrad.tensor import Tensor, type_name


def _sizes(sizes: tuple, fn: str = "reshape", name: str = "shape") -> tuple[int, ...]:
    """``f(2, 3)`` or ``f((2, 3))`` as a tuple of ints, refused with torch's words otherwise."""
    if len(sizes) == 1 and sizes[0].__class__ is tuple and all(n.__class__ is int for n in sizes[0]):
        return sizes[0]
    return int_list(sizes, fn, name)


def _view(x: Tensor, out: Any, node: OpNode | None, work: int | None = 0) -> Tensor:
    """An output that shares ``x``'s memory: same version counter, ``x``'s base remembered.

    Most views' backwards are views again (``work`` 0); expand's sums (``work=None``).
    """
    if node is None:
        t = Tensor._make(out, x.device, False, None, 0, x._vc)
    else:
        t = record_node(node, out, x.device, work)
        t._vc = x._vc
    base = x._extra.base if x._extra is not None and x._extra.base is not None else x
    t._extras().base = base
    extra = base._extras()
    if extra.views is None:
        extra.views = weakref.WeakSet()
    extra.views.add(t)
    return t


def _node(cls: type, x: Tensor, **attrs: Any) -> OpNode | None:
    if not _recording(x):
        return None
    node = cls((gradient_edge(x),))
    for name, value in attrs.items():
        setattr(node, name, value)
    return node


# --------------------------------------------------------------------------- reshape family
class ViewBackward0(OpNode):
    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.reshape(g, self.shape),)


class ReshapeAliasBackward0(ViewBackward0):
    """reshape of a non-contiguous tensor that can still be a view (torch's _reshape_alias)."""

    __slots__ = ()


class UnsafeViewBackward0(ViewBackward0):
    """reshape that had to copy: torch clones, then views the copy (_unsafe_view)."""

    __slots__ = ()


def _infer_shape(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    text = "[" + ", ".join(str(s) for s in shape) + "]"
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, n in enumerate(shape):
        if n < -1:
            raise RuntimeError(f"invalid shape dimension {n} at index {i} of shape {text}")
    known = int(np.prod([s for s in shape if s != -1])) if shape else 1
    if -1 in shape:
        if known == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {text} because the unspecified "
                               "dimension size -1 can be any value and is ambiguous")
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{text}' is invalid for input of size {numel}")
        return tuple(numel // known if s == -1 else s for s in shape)
    if known != numel:
        raise RuntimeError(f"shape '{text}' is invalid for input of size {numel}")
    return shape


def reshape(x: Tensor, *shape: Any) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "reshape")
    new_shape = _infer_shape(_sizes(shape), x.data.size)
    out = x.data.reshape(new_shape)
    if np.may_share_memory(out, x.data):
        cls = ViewBackward0 if x.data.flags.c_contiguous else ReshapeAliasBackward0
        return _view(x, out, _node(cls, x, shape=x.data.shape))
    copy = clone(x, "C")  # as torch: a contiguous clone, viewed in the new shape (nodes named as torch's)
    out = copy.data.reshape(new_shape)
    node = _node(UnsafeViewBackward0, copy, shape=copy.data.shape)
    return Tensor._make(out, x.device, False, None, 0, [0]) if node is None else record_node(node, out, x.device)


def view(x: Tensor, *shape: Any) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "view")
    new_shape = _infer_shape(_sizes(shape, "view", "size"), x.data.size)
    out = x.data.view()
    try:
        out.shape = new_shape
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return _view(x, out, _node(ViewBackward0, x, shape=x.data.shape))


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merges dims ``start_dim..end_dim`` into one.

    Note [flatten returns its input]
    As in ATen's ``flatten``: when there is nothing to merge (``start_dim == end_dim``
    after wrapping, which covers every 1-D tensor) the result *is* the input, not a
    new view, so a hook or ``retain_grad`` on the result lands on the input itself.
    A 0-d tensor is the one exception: it becomes a 1-element 1-D view (``reshape(1)``).
    The dims are checked first, so a 0-d tensor accepts only dims in [-1, 0].
    """
    if x.__class__ is not Tensor:
        tensor_arg(x, "flatten")
    start = normalize_dim(start_dim, x.ndim, "flatten", "start_dim", 1)
    end = normalize_dim(end_dim, x.ndim, "flatten", "end_dim", 2)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if x.ndim == 0:
        return reshape(x, 1)
    if start == end:
        return x
    shape = x.shape[:start] + (int(np.prod(x.shape[start:end + 1])),) + x.shape[end + 1:]
    return reshape(x, shape)


class UnsqueezeBackward0(OpNode):
    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.reshape(g, self.shape),)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "unsqueeze")
    axis = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    out = np.expand_dims(x.data, axis) if isinstance(x.data, np.ndarray) else x.data.reshape(
        x.shape[:axis] + (1,) + x.shape[axis:])
    return _view(x, out, _node(UnsqueezeBackward0, x, shape=x.data.shape))


class SqueezeBackward0(OpNode):
    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.reshape(g, self.shape),)


class SqueezeBackward1(SqueezeBackward0):
    __slots__ = ()


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "squeeze")
    if dim is None:
        out = x.data.reshape(tuple(n for n in x.shape if n != 1))
        return _view(x, out, _node(SqueezeBackward0, x, shape=x.data.shape))
    axes = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    axes = tuple(normalize_dim(d, x.ndim, "squeeze") for d in axes)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"dim {next(a for a in axes if axes.count(a) > 1)} appears multiple times in the list "
                           "of dims")
    shape = tuple(n for i, n in enumerate(x.shape) if not (i in axes and n == 1))
    return _view(x, x.data.reshape(shape), _node(SqueezeBackward1, x, shape=x.data.shape))


class ExpandBackward0(OpNode):
    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.sum_to(g, self.shape),)


def expand(x: Tensor, *sizes: Any) -> Tensor:
    sizes = _sizes(sizes, "expand", "size")
    if len(sizes) < x.ndim:
        raise RuntimeError(
            f"expand({type_name(x.dtype)}{{{list(x.shape)}}}, size={list(sizes)}): the number of sizes provided "
            f"({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({x.ndim})"
        )
    lead = len(sizes) - x.ndim
    for i in range(lead):
        if sizes[i] < 0:
            raise RuntimeError(
                f"The expanded size of the tensor ({sizes[i]}) isn't allowed in a leading, non-existing dimension {i}")
    target = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i in range(x.ndim):
        have, want = x.shape[i], target[i + lead]
        if have != want and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton "
                f"dimension {i + lead}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(x.shape)}"
            )
    out = np.broadcast_to(x.data, target)
    if x.data.flags.writeable:  # writable like torch's; in-place ops refuse a real overlap (Note [Memory overlap])
        out = np.lib.stride_tricks.as_strided(x.data, out.shape, out.strides)
    return _view(x, out, _node(ExpandBackward0, x, shape=x.data.shape), None)


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, tensor_arg(other, "expand_as", "other").shape)


# --------------------------------------------------------------------------- axis order
class PermuteBackward0(OpNode):
    __slots__ = ("inverse",)

    def backward(self, F, g):
        return (F.permute(g, self.inverse),)


def permute(x: Tensor, *dims: Any) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "permute")
    dims = _sizes(dims, "permute", "dims")
    if len(dims) != x.ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
            f"desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}"
        )
    axes = tuple(normalize_dim(d, x.ndim, "permute") for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    inverse = tuple(int(i) for i in np.argsort(axes))
    return _view(x, x.data.transpose(axes), _node(PermuteBackward0, x, inverse=inverse))


class TransposeBackward0(OpNode):
    __slots__ = ("dim0", "dim1")

    def backward(self, F, g):
        axes = list(range(g.ndim))
        axes[self.dim0], axes[self.dim1] = axes[self.dim1], axes[self.dim0]
        return (F.permute(g, tuple(axes)),)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "transpose")
    ndim = x.ndim
    d0, d1 = normalize_dim(dim0, ndim, "transpose", "dim0", 1), normalize_dim(dim1, ndim, "transpose", "dim1", 2)
    if x.ndim == 0:
        return _view(x, x.data, _node(TransposeBackward0, x, dim0=0, dim1=0))
    return _view(x, x.data.swapaxes(d0, d1), _node(TransposeBackward0, x, dim0=d0, dim1=d1))


class TBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        return (F.mT(g) if g.ndim == 2 else g,)


def t(x: Tensor) -> Tensor:
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return _view(x, x.data.T, _node(TBackward0, x))


def numpy_T(x: Tensor) -> Tensor:
    return permute(x, tuple(reversed(range(x.ndim))))


def mT(x: Tensor) -> Tensor:
    if x.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {x.ndim}-D tensor.")
    return transpose(x, -2, -1)


# --------------------------------------------------------------------------- joins
class CatBackward0(OpNode):
    __slots__ = ("dim", "bounds")

    def backward(self, F, g):
        lead = (slice(None),) * self.dim
        return tuple(
            F.index(g, lead + (slice(start, stop),)) if self.needs(i) else None
            for i, (start, stop) in enumerate(self.bounds)
        )


def _check_tensors(name: str, tensors: Sequence[Tensor]) -> list[Tensor]:
    """A non-empty list or tuple of tensors on one device, worded as torch's cat and stack."""
    empty = (ValueError("asyncgrad.cat(): expected a non-empty list of Tensors") if name == "cat" else
             RuntimeError("stack expects a non-empty TensorList"))
    tensors = tensor_list(tensors, name, empty)
    for t in tensors[1:]:
        if t.device is not tensors[0].device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{tensors[0].device} and {t.device}!")
    return tensors


def _join_node(cls: type, tensors: list[Tensor]) -> OpNode | None:
    if not _recording_any(tensors):
        return None
    return cls(tuple(gradient_edge(t) if t._requires_grad else NO_EDGE for t in tensors))


def _recording_any(tensors: list[Tensor]) -> bool:
    return any(_recording(t) for t in tensors)


def _joined_dtype(tensors: list[Tensor]) -> Any:
    """None (numpy's choice) when all dtypes agree, else torch's promotion (int64 + float32 is float32)."""
    first = tensors[0].dtype
    if all(t.dtype == first for t in tensors):
        return None
    return result_dtype(*(t.data for t in tensors))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = _check_tensors("cat", tensors)
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    axis = normalize_dim(dim, tensors[0].ndim, "cat", "dim", 2)
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != tensors[0].ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {tensors[0].ndim} and {t.ndim}")
        for d in range(t.ndim):
            if d != axis and t.shape[d] != tensors[0].shape[d]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {axis}. Expected size {tensors[0].shape[d]} "
                    f"but got size {t.shape[d]} for tensor number {i} in the list."
                )
    xp = tensors[0].device.xp
    # torch's cat is contiguous; numpy's follows its inputs' layout (so a view of it would copy)
    out = xp.ascontiguousarray(xp.concatenate([t.data for t in tensors], axis=axis, dtype=_joined_dtype(tensors)))
    node = _join_node(CatBackward0, tensors)
    if node is None:
        return Tensor._make(out, tensors[0].device, False, None, 0, [0])
    node.dim = axis
    offsets = np.cumsum([0] + [t.shape[axis] for t in tensors])
    node.bounds = tuple(zip(offsets[:-1].tolist(), offsets[1:].tolist()))
    return record_node(node, out, tensors[0].device)


class StackBackward0(OpNode):
    __slots__ = ("dim", "count")

    def backward(self, F, g):
        lead = (slice(None),) * self.dim
        return tuple(F.index(g, lead + (i,)) if self.needs(i) else None for i in range(self.count))


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = _check_tensors("stack", tensors)
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at entry 0 and "
                f"{list(t.shape)} at entry {i}"
            )
    axis = normalize_dim(dim, tensors[0].ndim + 1, "stack", "dim", 2)
    xp = tensors[0].device.xp
    out = xp.ascontiguousarray(xp.stack([t.data for t in tensors], axis=axis, dtype=_joined_dtype(tensors)))
    node = _join_node(StackBackward0, tensors)
    if node is None:
        return Tensor._make(out, tensors[0].device, False, None, 0, [0])
    node.dim = axis
    node.count = len(tensors)
    return record_node(node, out, tensors[0].device)


# --------------------------------------------------------------------------- copies
class CloneBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        return (g,)


def clone(x: Tensor, order: str = "K") -> Tensor:
    """A copy; it keeps the input's layout (``order="K"``, torch's preserve_format: the copy of a
    transposed tensor is transposed too), while contiguous() and reshape copy in C order."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "clone")
    if order == "K" and any(stride == 0 and n > 1 for n, stride in zip(x.data.shape, x.data.strides)):
        order = "C"  # an expanded input: torch's copy is contiguous
    out = x.data.copy(order=order)
    node = _node(CloneBackward0, x)
    return Tensor._make(out, x.device, False, None, 0, [0]) if node is None else record_node(node, out, x.device)


def contiguous(x: Tensor) -> Tensor:
    return x if x.data.flags.c_contiguous else clone(x, "C")


class ToCopyBackward0(OpNode):
    """Moves the gradient back to where, and to the dtype, the input was."""

    __slots__ = ("src_device", "src_dtype")

    def backward(self, F, g):
        if g.dtype != self.src_dtype:
            g = F.cast(g, self.src_dtype)
        return (F.to_device(g, self.src_device),)


def _copy_to(x: Tensor, out: Any, device: Device) -> Tensor:
    node = _node(ToCopyBackward0, x, src_device=x.device, src_dtype=x.data.dtype)
    return Tensor._make(out, device, False, None, 0, [0]) if node is None else record_node(node, out, device)


def to_device(x: Tensor, device: Device) -> Tensor:
    """Always a copy, as torch: a sim device shares host memory, and an in-place op on the copy
    must not change the original behind its version counter."""
    return _copy_to(x, device.asarray(x.data, copy=None if x.device.type == "cuda" else True), device)


def to_dtype(x: Tensor, dtype: np.dtype) -> Tensor:
    if dtype.kind not in "fc" and x._requires_grad and _recording(x):
        out = x.data.astype(dtype)
        return Tensor._make(out, x.device, False, None, 0, [0])
    return _copy_to(x, x.data.astype(dtype), x.device)


def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(device)``, ``to(dtype)`` or ``to(device, dtype)``; differentiable both ways."""
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    for arg in args:
        if isinstance(arg, (str, Device)):
            dev = arg
        elif isinstance(arg, Tensor):
            dev, dtype = arg.device, arg.dtype
        elif arg is not None:
            dtype = arg
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    dtype = dtype_arg(dtype, "to")
    out = self
    if dtype is not None and dtype != self.dtype:
        out = to_dtype(out, dtype)
    if dev is not None and as_device(dev) is not self.device:
        out = to_device(out, as_device(dev))
    return out


def to_cpu(self: Tensor) -> Tensor:
    return to(self, cpu)


def to_cuda(self: Tensor, index: int = 0) -> Tensor:
    return to(self, f"cuda:{index}")
