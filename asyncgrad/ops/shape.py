"""Shape ops (views share memory and the version counter, as torch views do), joins, copies.

A view's array comes from ``backend.view`` (Note [Views share memory on every device] in
devices/backend.py), never from ``xp.reshape``/``xp.permute_dims``, which the standard lets
copy: an in-place write through a view must change its base on every device, as in torch.
"""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any, Sequence

import numpy as np

from asyncgrad._layout import (
    contiguous_format,
    contiguous_strides,
    element_strides,
    format_arg,
    format_strides,
    is_contiguous_as,
    memory_format,
    preserve_format,
    strides_for,
    suggest_memory_format,
)
from asyncgrad._validate import dtype_arg, int_arg, int_list, normalize_dim, tensor_arg, tensor_list
from asyncgrad.devices import Device, cpu
from asyncgrad.devices import device as as_device
from asyncgrad.ops._node import ArrayMath, OpNode, plain, record
from asyncgrad.tensor import Tensor, type_name


def _sizes(sizes: tuple, fn: str = "reshape", name: str = "shape") -> tuple[int, ...]:
    """``f(2, 3)`` or ``f((2, 3))`` as a tuple of ints, refused with torch's words otherwise."""
    if len(sizes) == 1 and sizes[0].__class__ is tuple and all(n.__class__ is int for n in sizes[0]):
        return sizes[0]
    return int_list(sizes, fn, name)


# The views, as functions of a native array (numpy's or CuPy's ndarray), for ``backend.view``.
def _reshaped(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` in ``shape`` without a copy; AttributeError where its strides cannot say it."""
    out = a.view()
    out.shape = shape
    return out


def _permuted(a: Any, axes: tuple[int, ...]) -> Any:
    return a.transpose(axes)


def _swapped(a: Any, dim0: int, dim1: int) -> Any:
    return a.swapaxes(dim0, dim1)


def _transposed(a: Any) -> Any:
    return a.T


def indexed(a: Any, index: Any) -> Any:
    """A basic index (integers, slices, None, Ellipsis): a view."""
    return a[index]


# --------------------------------------------------------------------------- reshape family
class _Reshape(OpNode):
    """A view in another shape: the gradient is viewed back in the input's (``shape``). A view's
    backward is a view again, so it costs nothing (Note [Cost classes])."""

    __slots__ = ()
    work_per_element = 0

    def backward(self, F, g):
        return (F.reshape(g, self.shape),)


class ViewBackward0(_Reshape):
    __slots__ = ("shape",)


class ReshapeAliasBackward0(_Reshape):
    """reshape of a non-contiguous tensor that can still be a view (torch's _reshape_alias)."""

    __slots__ = ("shape",)


class UnsafeViewBackward0(_Reshape):
    """reshape that had to copy: torch clones, then views the copy (_unsafe_view)."""

    __slots__ = ("shape",)
    work_per_element = 1


def _infer_shape(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    text = "[" + ", ".join(str(s) for s in shape) + "]"
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, n in enumerate(shape):
        if n < -1:
            raise RuntimeError(f"invalid shape dimension {n} at index {i} of shape {text}")
    known = math.prod(s for s in shape if s != -1)
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
    """A view where the strides allow one, else (as torch) a contiguous clone viewed in the new shape."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "reshape")
    data = x.data
    new_shape = _infer_shape(_sizes(shape), data.size)
    backend = x.device.backend
    try:
        out = backend.view(data, _reshaped, new_shape)
    except AttributeError:
        copy = contiguous(x)  # nodes named as torch's: CloneBackward0 under UnsafeViewBackward0
        return record(UnsafeViewBackward0, (copy,), backend.view(copy.data, _reshaped, new_shape), x.device,
                      data.shape)
    cls = ViewBackward0 if backend.is_contiguous(data) else ReshapeAliasBackward0
    return record(cls, (x,), out, x.device, data.shape, view_of=x)


def view(x: Tensor, *shape: Any) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "view")
    data = x.data
    new_shape = _infer_shape(_sizes(shape, "view", "size"), data.size)
    try:
        out = x.device.backend.view(data, _reshaped, new_shape)
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return record(ViewBackward0, (x,), out, x.device, data.shape, view_of=x)


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
        return x  # Note [flatten returns its input]
    shape = x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:]
    return reshape(x, shape)


class UnsqueezeBackward0(_Reshape):
    __slots__ = ("shape",)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """A view with a dimension of size one inserted at ``dim``, as torch's."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "unsqueeze")
    axis = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    shape = x.shape
    out = x.device.backend.view(x.data, _reshaped, shape[:axis] + (1,) + shape[axis:])
    return record(UnsqueezeBackward0, (x,), out, x.device, shape, view_of=x)


class SqueezeBackward0(_Reshape):
    __slots__ = ("shape",)


class SqueezeBackward1(_Reshape):
    __slots__ = ("shape",)


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    """A view without the dimensions of size one (all of them, or those of ``dim``), as torch's."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "squeeze")
    if dim is None:
        cls = SqueezeBackward0
        shape = tuple(n for n in x.shape if n != 1)
    else:
        cls = SqueezeBackward1
        axes = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        axes = tuple(normalize_dim(d, x.ndim, "squeeze") for d in axes)
        if len(set(axes)) != len(axes):
            raise RuntimeError(f"dim {next(a for a in axes if axes.count(a) > 1)} appears multiple times in the "
                               "list of dims")
        shape = tuple(n for i, n in enumerate(x.shape) if not (i in axes and n == 1))
    return record(cls, (x,), x.device.backend.view(x.data, _reshaped, shape), x.device, x.shape, view_of=x)


class ExpandBackward0(OpNode):
    __slots__ = ("shape",)

    def backward(self, F, g):
        return (F.sum_to(g, self.shape),)


def expanded_shape(shape: tuple[int, ...], dtype: np.dtype, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``expand(*sizes)`` gives a tensor of ``shape``, or torch's error."""
    ndim = len(shape)
    if len(sizes) < ndim:
        raise RuntimeError(
            f"expand({type_name(dtype)}{{{list(shape)}}}, size={list(sizes)}): the number of sizes provided "
            f"({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({ndim})"
        )
    lead = len(sizes) - ndim
    for i in range(lead):
        if sizes[i] < 0:
            raise RuntimeError(
                f"The expanded size of the tensor ({sizes[i]}) isn't allowed in a leading, non-existing dimension {i}")
    target = tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i in range(ndim):
        have, want = shape[i], target[i + lead]
        if have != want and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton "
                f"dimension {i + lead}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(shape)}"
            )
    return target


def expand(x: Tensor, *sizes: Any) -> Tensor:
    """A view with strides 0 where it grows, writable like torch's; in-place ops refuse a real
    overlap themselves (Note [Memory overlap] in inplace.py)."""
    target = expanded_shape(x.shape, x.dtype, _sizes(sizes, "expand", "size"))
    out = x.device.backend.broadcast_view(x.data, target)
    return record(ExpandBackward0, (x,), out, x.device, x.shape, view_of=x)


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, tensor_arg(other, "expand_as", "other").shape)


# --------------------------------------------------------------------------- axis order
class PermuteBackward0(OpNode):
    __slots__ = ("inverse",)
    work_per_element = 0

    def backward(self, F, g):
        return (F.permute(g, self.inverse),)


def permute(x: Tensor, *dims: Any) -> Tensor:
    """A view with the dimensions reordered as ``dims``, as torch's."""
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
    inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
    return record(PermuteBackward0, (x,), x.device.backend.view(x.data, _permuted, axes), x.device, inverse,
                  view_of=x)


class TransposeBackward0(OpNode):
    __slots__ = ("dim0", "dim1")
    work_per_element = 0

    def backward(self, F, g):
        if g.ndim == 0:  # a 0-d tensor's transpose (dims 0 and -1 both name its one position) is itself
            return (g,)
        axes = list(range(g.ndim))
        axes[self.dim0], axes[self.dim1] = axes[self.dim1], axes[self.dim0]
        return (F.permute(g, tuple(axes)),)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view with dimensions ``dim0`` and ``dim1`` swapped, as torch's."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "transpose")
    ndim = x.ndim
    d0, d1 = normalize_dim(dim0, ndim, "transpose", "dim0", 1), normalize_dim(dim1, ndim, "transpose", "dim1", 2)
    if ndim == 0:
        return record(TransposeBackward0, (x,), x.data, x.device, 0, 0, view_of=x)
    return record(TransposeBackward0, (x,), x.device.backend.view(x.data, _swapped, d0, d1), x.device, d0, d1,
                  view_of=x)


class TBackward0(OpNode):
    __slots__ = ()
    work_per_element = 0

    def backward(self, F, g):
        return (F.mT(g) if g.ndim == 2 else g,)


def t(x: Tensor) -> Tensor:
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return record(TBackward0, (x,), x.device.backend.view(x.data, _transposed), x.device, view_of=x)


def numpy_T(x: Tensor) -> Tensor:
    return permute(x, tuple(reversed(range(x.ndim))))


def mT(x: Tensor) -> Tensor:
    if x.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {x.ndim}-D tensor.")
    return transpose(x, -2, -1)


# --------------------------------------------------------------------------- joins
class CatBackward0(OpNode):
    """Each input's slice of the gradient; a skipped legacy empty input (Note [cat's legacy empty
    tensors]) has no bounds and gets an empty gradient of its shape ``(0,)``."""

    __slots__ = ("dim", "bounds")

    def backward(self, F, g):
        lead = (slice(None),) * self.dim
        grads = []
        for i, bounds in enumerate(self.bounds):
            if not self.needs(i):
                grads.append(None)
            elif bounds is None:
                grads.append(F.reshape(F.index(g, (slice(0, 0),) * g.ndim), (0,)))
            else:
                grads.append(F.index(g, lead + (slice(*bounds),)))
        return tuple(grads)


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


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _joined(tensors: list[Tensor]) -> list[Any]:
    """The tensors' arrays in torch's promoted dtype: a higher category wins over a wider type
    (int64 with float32 gives float32, numpy says float64). The standard's concat and stack
    take one dtype, so the arrays are cast before they are joined."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        other = t.dtype
        if other != dtype:
            ka, kb = _CATEGORY[dtype.kind], _CATEGORY[other.kind]
            dtype = np.promote_types(dtype, other) if ka == kb else dtype if ka > kb else other
    backend = tensors[0].device.backend
    return [t.data if t.dtype == dtype else backend.astype(t.data, dtype) for t in tensors]


def _contiguous(backend: Any, out: Any) -> Any:
    """torch's cat and stack give contiguous results; numpy's follow their inputs' layout (so a
    view of such a result would copy where torch's does not)."""
    return out if backend.is_contiguous(out) else backend.copy(out, "C")


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors joined along an existing dimension ``dim``, as torch's."""
    tensors = _check_tensors("cat", tensors)
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # Note [cat's legacy empty tensors]: as torch, a 1-d empty tensor (shape (0,)) joins a cat
    # of tensors of any shape: it is skipped, unless every input is one.
    skipped = [t.shape == (0,) for t in tensors]
    if all(skipped):
        skipped = [False] * len(tensors)
    first = tensors[skipped.index(False)]
    axis = normalize_dim(dim, first.ndim, "cat", "dim", 2)
    for i, t in enumerate(tensors):
        if skipped[i] or t is first:
            continue
        if t.ndim != first.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {first.ndim} and {t.ndim}")
        for d in range(t.ndim):
            if d != axis and t.shape[d] != first.shape[d]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {axis}. Expected size {first.shape[d]} "
                    f"but got size {t.shape[d]} for tensor number {i} in the list."
                )
    dev = first.device
    joined = [array for array, skip in zip(_joined(tensors), skipped) if not skip]
    out = _contiguous(dev.backend, dev.xp.concat(joined, axis=axis))
    offsets = iter(accumulate((t.shape[axis] for t, skip in zip(tensors, skipped) if not skip), initial=0))
    start = next(offsets)
    bounds = []
    for skip in skipped:
        if skip:
            bounds.append(None)
        else:
            stop = next(offsets)
            bounds.append((start, stop))
            start = stop
    return record(CatBackward0, tuple(tensors), out, dev, axis, tuple(bounds))


class StackBackward0(OpNode):
    __slots__ = ("dim", "count")

    def backward(self, F, g):
        lead = (slice(None),) * self.dim
        return tuple(F.index(g, lead + (i,)) if self.needs(i) else None for i in range(self.count))


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors of one shape joined along a new dimension ``dim``, as torch's."""
    tensors = _check_tensors("stack", tensors)
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at entry 0 and "
                f"{list(t.shape)} at entry {i}"
            )
    axis = normalize_dim(dim, tensors[0].ndim + 1, "stack", "dim", 2)
    dev = tensors[0].device
    out = _contiguous(dev.backend, dev.xp.stack(_joined(tensors), axis=axis))
    return record(StackBackward0, tuple(tensors), out, dev, axis, len(tensors))


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """torch's ``vstack``: ``cat`` along dim 0 of the tensors made at least 2-d (a 1-d tensor of n
    is a row (1, n), a 0-d one (1, 1)), so the node is CatBackward0 as torch's."""
    return cat([_at_least(t, 2) for t in _non_empty(tensors, "vstack")], 0)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """torch's ``hstack``: ``cat`` along dim 0 of 1-d tensors (0-d ones made (1,)), else along dim 1."""
    tensors = [_at_least(t, 1) for t in _non_empty(tensors, "hstack")]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def _non_empty(tensors: Sequence[Tensor], name: str) -> Sequence[Tensor]:
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def _at_least(t: Tensor, ndim: int) -> Tensor:
    """torch's ``atleast_1d``/``atleast_2d`` for one tensor: leading dims of 1 as a view."""
    if not isinstance(t, Tensor):
        return t  # cat words the refusal
    return t if t.ndim >= ndim else reshape(t, *((1,) * (ndim - max(t.ndim, 1)) + (tuple(t.shape) or (1,))))


# --------------------------------------------------------------------------- copies
class CloneBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        return (g,)


def layout_copy(x: Tensor, fmt: memory_format) -> Any:
    """A copy of ``x``'s array in ``fmt``, with torch's strides (Note [Strides are the device
    memory's] in _layout.py): preserve_format keeps a dense layout exactly and a strided one's
    order (torch's empty_like); a row-major target is one plain copy."""
    data = x.data
    backend = x.device.backend
    if fmt is contiguous_format or backend.is_contiguous(data) and fmt is preserve_format:
        return backend.copy(data, "C")
    shape = data.shape
    strides = strides_for(shape, element_strides(backend.strides(data), x.dtype.itemsize), fmt)
    if strides == contiguous_strides(shape):
        return backend.copy(data, "C")
    return backend.copy_strided(data, strides)


def clone(x: Tensor, *, memory_format: memory_format = preserve_format) -> Tensor:
    """A copy, in torch's layout for ``memory_format`` (preserve_format: the copy of a transposed
    tensor is transposed too; an expanded one's is contiguous)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "clone")
    if memory_format is not preserve_format:
        format_arg(memory_format, "clone")
    return record(CloneBackward0, (x,), layout_copy(x, memory_format), x.device)


def contiguous(x: Tensor, memory_format: memory_format = contiguous_format) -> Tensor:
    """``x`` itself when it is contiguous in ``memory_format``, else a copy that is (torch's)."""
    if memory_format is contiguous_format:
        if x.device.backend.is_contiguous(x.data):
            return x
    else:
        format_arg(memory_format, "contiguous")
        if is_contiguous(x, memory_format=memory_format):
            return x  # preserve_format asks whether x is row-major (torch's is_contiguous), as contiguous_format
        if memory_format is preserve_format:
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return record(CloneBackward0, (x,), layout_copy(x, memory_format), x.device)


def stride(x: Tensor, dim: Any = None) -> Any:
    """torch's ``stride()``: the strides in elements, or one dimension's (Note [Strides are the
    device memory's] in _layout.py)."""
    strides = element_strides(x.device.backend.strides(x.data), x.dtype.itemsize)
    if dim is None:
        return strides
    dim = int_arg(dim, "stride", "dim", 1)
    if not strides:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return strides[normalize_dim(dim, len(strides), "stride")]


def is_contiguous(x: Tensor, *, memory_format: memory_format = contiguous_format) -> bool:
    """torch's ``is_contiguous``: dims of size 1 are free; channels-last only at its rank."""
    if memory_format is contiguous_format:
        return x.device.backend.is_contiguous(x.data)
    format_arg(memory_format, "is_contiguous")
    data = x.data
    return is_contiguous_as(data.shape, element_strides(x.device.backend.strides(data), x.dtype.itemsize),
                            memory_format)


class ToCopyBackward0(OpNode):
    """Casts the gradient back to the input's dtype and, after a transfer (``src_device`` not
    None), moves it back to the input's device."""

    __slots__ = ("src_device", "src_dtype")

    def backward(self, F, g):
        g = F.cast(g, self.src_dtype)
        return (g if self.src_device is None else F.to_device(g, self.src_device),)


def _in_format(array: Any, backend: Any, fmt: memory_format) -> Any:
    """``array`` (a new copy) laid out in ``fmt``: itself where it already is (or for preserve_format)."""
    if fmt is preserve_format:
        return array
    shape = tuple(array.shape)
    strides = element_strides(backend.strides(array), backend.dtype(array).itemsize)
    if is_contiguous_as(shape, strides, fmt) and (fmt is contiguous_format or strides == format_strides(shape, fmt)):
        return array
    return backend.copy_strided(array, format_strides(shape, fmt))


def to_device(x: Tensor, device: Device, fmt: memory_format = preserve_format) -> Tensor:
    """An explicit transfer (``device.asarray``), always a copy, as torch: a sim device shares host
    memory, and an in-place op on the copy must not change the original behind its version counter."""
    out = _in_format(device.asarray(x.data, copy=None if x.device.type == "cuda" else True), device.backend, fmt)
    return record(ToCopyBackward0, (x,), out, device, x.device, x.dtype)


def to_dtype(x: Tensor, dtype: np.dtype, fmt: memory_format = preserve_format) -> Tensor:
    out = _in_format(x.device.backend.astype(x.data, dtype, copy=True), x.device.backend, fmt)
    if dtype.kind not in "fc":  # an integer or bool result carries no gradient: torch leaves the graph
        return plain(out, x.device)
    return record(ToCopyBackward0, (x,), out, x.device, None, x.dtype)


def to_args(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """The device and dtype a ``to(...)`` call names (``Tensor.to`` and ``Module.to``): a device
    (str or Device), a dtype or a tensor (its device and dtype) positionally, or ``device=`` and
    ``dtype=``, which are popped from ``kwargs`` (what is left there is the caller's error)."""
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    for arg in args:
        if isinstance(arg, (str, Device)):
            dev = arg
        elif isinstance(arg, Tensor):
            dev, dtype = arg.device, arg.dtype
        elif arg is not None:
            dtype = arg
    return dev, dtype


def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(device)``, ``to(dtype)`` or ``to(device, dtype)``, and ``memory_format=``; differentiable
    both ways. As torch's, it returns ``self`` when nothing changes, a memory format included:
    one that ``self``'s strides already suggest (suggest_memory_format), so a transposed matrix
    stays transposed under ``to(memory_format=contiguous_format)``."""
    fmt = kwargs.pop("memory_format", preserve_format)
    if fmt is not preserve_format:
        format_arg(fmt, "to")
    # torch's trailing (non_blocking, copy) flags, positional or by name: non_blocking is a hint a
    # synchronous copy meets; copy=True returns a new tensor even when nothing changes
    flags = [a for a in args if a.__class__ is bool]
    args = tuple(a for a in args if a.__class__ is not bool)
    kwargs.pop("non_blocking", None)
    copy = kwargs.pop("copy", flags[1] if len(flags) > 1 else False)
    dev, dtype = to_args(args, kwargs)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    dtype = dtype_arg(dtype, "to")
    out = self
    if dtype is not None and dtype != self.dtype:
        out = to_dtype(out, dtype, fmt)
    if dev is not None and as_device(dev) is not self.device:
        out = to_device(out, as_device(dev), fmt)
    if out is self and fmt is not preserve_format:
        data = self.data
        strides = element_strides(self.device.backend.strides(data), self.dtype.itemsize)
        if suggest_memory_format(data.shape, strides) is not fmt:
            out = record(ToCopyBackward0, (self,), layout_copy(self, fmt), self.device, None, self.dtype)
    if out is self and copy:
        out = record(ToCopyBackward0, (self,), layout_copy(self, fmt), self.device, None, self.dtype)
    return out


def to_cpu(self: Tensor) -> Tensor:
    return to(self, cpu)


def to_cuda(self: Tensor, index: int = 0) -> Tensor:
    return to(self, f"cuda:{index}")


# --------------------------------------------------------------------------- copies in another arrangement
# repeat, tile, flip, roll, tril, triu, diag: new tensors (torch's are contiguous copies, never views).
class RepeatBackward0(OpNode):
    """repeat: each input element appears once per tile; its gradient is the sum over the tiles
    (the gradient viewed as (tiles, size) pairs per dimension, summed over the tiles)."""

    __slots__ = ("repeats", "shape")

    def backward(self, F, g):
        lead = len(self.repeats) - len(self.shape)
        split: list[int] = list(self.repeats[:lead])
        for r, n in zip(self.repeats[lead:], self.shape):
            split += [r, n]
        axes = tuple(range(lead)) + tuple(lead + 2 * i for i in range(len(self.shape)))
        return (F.reshape(F.sum(F.reshape(g, tuple(split)), axes), self.shape),)


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    """torch's repeat (numpy's tile): ``x`` tiled ``sizes`` times, at least one size per dimension."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "repeat")
    repeats = _sizes(sizes, "repeat", "repeats")
    if len(repeats) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    lead = len(repeats) - x.ndim
    padded = (1,) * lead + x.shape
    target = [r * n for r, n in zip(repeats, padded)]
    for n in target:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {target}")
    xp = x.device.xp
    out = xp.tile(xp.reshape(x.data, padded), repeats) if repeats else x.device.backend.copy(x.data, "C")
    return record(RepeatBackward0, (x,), _contiguous(x.device.backend, out), x.device, repeats, x.shape)


def tile(x: Tensor, dims: Any) -> Tensor:
    """torch's tile: repeat, with ones prepended when ``dims`` has fewer entries than ``x`` has dimensions."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "tile")
    dims = int_list((dims,), "tile", "dims")
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def _dim_list(x: Tensor, dims: Any, fn: str) -> tuple[int, ...]:
    axes = tuple(normalize_dim(d, x.ndim, fn) for d in int_list((dims,), fn, "dims"))
    for a in axes:
        if axes.count(a) > 1:
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
    return axes


class FlipBackward0(OpNode):
    __slots__ = ("dims",)
    work_per_element = 0

    def backward(self, F, g):
        return (F.index(g, tuple(slice(None, None, -1) if i in self.dims else slice(None) for i in range(g.ndim))),)


def flip(x: Tensor, *dims: Any, **keyword: Any) -> Tensor:
    """``x`` reversed along ``dims``: a copy, as torch's (numpy's flip is a view with negative strides).
    torch's forms: ``flip(x, dims)``, ``flip(x, dims=...)``, ``x.flip(0, 1)``."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "flip")
    if keyword:
        unknown = next((k for k in keyword if k != "dims"), None)
        if unknown is not None or dims:
            raise TypeError(f"flip() got an unexpected keyword argument '{unknown or 'dims'}'")
        dims = (keyword["dims"],)
    axes = _dim_list(x, dims[0] if len(dims) == 1 else dims, "flip")
    backend = x.device.backend
    out = backend.copy(x.device.xp.flip(x.data, axis=axes), "C") if axes and x.ndim else backend.copy(x.data, "C")
    return record(FlipBackward0, (x,), out, x.device, axes)


class RollBackward0(OpNode):
    """roll: the gradient rolled back (``shifts`` negated); ``dims`` empty means the flattened tensor."""

    __slots__ = ("shifts", "dims")
    work_per_element = 0

    def backward(self, F, g):
        return (_rolled(F, g, tuple(-s for s in self.shifts), self.dims),)


def _rolled(F: Any, a: Any, shifts: tuple[int, ...], dims: tuple[int, ...]) -> Any:
    """``a`` rolled, written against ``F`` (slices and a concat) so that the backward is differentiable."""
    if not dims:
        shape = a.shape
        return F.reshape(_rolled(F, F.reshape(a, (-1,)), shifts, (0,)), shape)
    for shift, dim in zip(shifts, dims):
        n = a.shape[dim]
        if n == 0 or shift % n == 0:
            continue
        cut = n - shift % n
        lead = (slice(None),) * dim
        a = F.cat([F.index(a, lead + (slice(cut, None),)), F.index(a, lead + (slice(0, cut),))], dim)
    return a


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Elements shifted by ``shifts`` along ``dims`` (over the flattened tensor without ``dims``),
    wrapping around, as torch's."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "roll")
    shifts = int_list((shifts,), "roll", "shifts")
    axes = () if dims is None else tuple(normalize_dim(d, x.ndim, "roll") for d in int_list((dims,), "roll", "dims"))
    if not shifts:
        raise RuntimeError("`shifts` required")
    if dims is None and len(shifts) != 1 or dims is not None and len(shifts) != len(axes):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(axes)}")
    backend = x.device.backend
    out = backend.copy(_rolled(ArrayMath, x.data, shifts, axes), "C")
    return record(RollBackward0, (x,), out, x.device, shifts, axes)


class TrilBackward0(OpNode):
    """tril/triu: the gradient where the result kept the input (``mask``, a constant)."""

    __slots__ = ("mask",)

    def backward(self, F, g):
        return (F.where(F.constant(self.mask, g), g, 0.0),)


class TriuBackward0(TrilBackward0):
    __slots__ = ()


def _triangle(x: Tensor, diagonal: int, name: str, cls: type[OpNode]) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, name)
    diagonal = int_arg(diagonal, name, "diagonal", 2)
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    dev = x.device
    backend = dev.backend
    xp = dev.xp
    rows, cols = x.shape[-2:]
    i = xp.reshape(backend.arange(rows, np.dtype(np.int64)), (rows, 1))
    j = xp.reshape(backend.arange(cols, np.dtype(np.int64)), (1, cols))
    mask = (j - i <= diagonal) if cls is TrilBackward0 else (j - i >= diagonal)
    out = xp.where(mask, x.data, backend.zeros((), x.dtype))
    return record(cls, (x,), _contiguous(backend, out), dev, mask)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle (on and below the ``diagonal``-th diagonal) of the last two dimensions."""
    return _triangle(x, diagonal, "tril", TrilBackward0)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle (on and above the ``diagonal``-th diagonal) of the last two dimensions."""
    return _triangle(x, diagonal, "triu", TriuBackward0)


def _diagonal_positions(backend: Any, rows: int, cols: int, offset: int) -> tuple[Any, Any]:
    """Row and column indices (device arrays) of the ``offset`` diagonal of a ``rows`` x ``cols`` matrix."""
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    steps = backend.arange(length, np.dtype(np.int64))
    return steps + max(0, -offset), steps + max(0, offset)


class DiagEmbedBackward0(OpNode):
    """diag of a vector, diag_embed: the gradient is the matrix gradient's diagonal (``index``: its
    positions, after ``axes`` moved the matrices' dims last for diag_embed)."""

    __slots__ = ("index", "axes")

    def backward(self, F, g):
        if self.axes is not None:
            g = F.permute(g, self.axes)
        return (F.index(g, self.index),)


class DiagonalBackward0_copy(OpNode):  # noqa: N801  (torch's name: diag of a matrix is diagonal_copy)
    """diag of a matrix: the gradient goes back to the diagonal's positions (``index``) of zeros."""

    __slots__ = ("index", "shape")

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, False), g),)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's matrix with the vector on the ``diagonal``-th diagonal, or a matrix's diagonal (a copy)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "diag")
    diagonal = int_arg(diagonal, "diag", "diagonal", 2)
    if x.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    dev = x.device
    backend = dev.backend
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        index = _diagonal_positions(backend, n, n, diagonal)
        out = backend.zeros((n, n), x.dtype)
        backend.setitem(out, index, x.data)
        return record(DiagEmbedBackward0, (x,), out, dev, index, None)
    index = _diagonal_positions(backend, *x.shape, diagonal)
    out = backend.getitem(x.data, index)
    return record(DiagonalBackward0_copy, (x,), out, dev, index, x.shape)


# --------------------------------------------------------------------------- rot90, diag_embed
class Rot90Backward0(OpNode):
    """``rot90(x, k, dims)``: the gradient rotated back, ``rot90(g, -k, dims)``."""

    __slots__ = ("k", "dims")

    def backward(self, F, g):
        return (F.rot90(g, -self.k, self.dims),)


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """torch's ``rot90``: ``k`` quarter turns in the plane of ``dims``, from the first towards the second."""
    tensor_arg(input, "rot90", "input", 1)
    k = int_arg(k, "rot90", "k", 2)
    dims = tuple(int_list((dims,), "rot90", "dims"))
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0 = normalize_dim(dims[0], input.ndim, "rot90")
    d1 = normalize_dim(dims[1], input.ndim, "rot90")
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    out = input.device.backend.copy(ArrayMath.rot90(input.data, k, (d0, d1)), "C")
    return record(Rot90Backward0, (input,), out, input.device, k, (d0, d1))


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch's ``diag_embed``: the last dimension of ``input`` on the ``offset`` diagonal of new
    matrices spanning ``dim1`` and ``dim2`` of the result (zeros elsewhere)."""
    tensor_arg(input, "diag_embed", "input", 1)
    offset = int_arg(offset, "diag_embed", "offset", 2)
    ndim = input.ndim + 1
    d1 = normalize_dim(int_arg(dim1, "diag_embed", "dim1", 3), ndim, "diag_embed")
    d2 = normalize_dim(int_arg(dim2, "diag_embed", "dim2", 4), ndim, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    dev = input.device
    backend = dev.backend
    xp = dev.xp
    length = input.shape[-1] if input.ndim else 1
    n = length + abs(offset)
    batch = tuple(input.shape[:-1])
    out = backend.zeros(batch + (n, n), input.dtype)
    rows, cols = _diagonal_positions(backend, n, n, offset)
    index = (Ellipsis, rows, cols)
    backend.setitem(out, index, xp.reshape(input.data, batch + (length,)))
    # the matrices' dims go to d1 and d2, the batch dims keep their order in the others
    others = iter(range(len(batch)))
    order = tuple(len(batch) if i == d1 else len(batch) + 1 if i == d2 else next(others) for i in range(ndim))
    inverse = tuple(sorted(range(ndim), key=order.__getitem__))
    out = backend.copy(xp.permute_dims(out, order), "C")
    return record(DiagEmbedBackward0, (input,), out, dev, index, inverse)
