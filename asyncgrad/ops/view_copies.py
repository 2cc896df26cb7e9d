"""The ``*_copy`` variants of the view ops (``expand_copy``, ``t_copy``, ``unbind_copy``...).

Note [A view's copy]: torch's ``<view>_copy(x, ...)`` is the view ``<view>(x, ...)`` materialised:
a new tensor that owns its memory (no ``_base``, its own version counter), whose gradient is
the view's. Here it is the view op itself (its node, its formula, its checks and words), then
one ``_ViewCopy`` node over each of the view's results, which copies it into fresh memory and
passes the gradient through unchanged. The copy node is named after the view's as torch names
its: ``ExpandBackward0`` gives ``ExpandBackward0_copy`` (``narrow_copy``'s is torch's
``NarrowCopyBackward0``). One class per name, made once from the view node's name.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import OpNode, record
from asyncgrad.ops.shape import expand, permute, squeeze, t, transpose, unsqueeze, view
from asyncgrad.ops.views import as_strided, diagonal, narrow, split_with_sizes, unbind
from asyncgrad.tensor import Tensor

__all__ = ["alias_copy", "as_strided_copy", "diagonal_copy", "expand_copy", "narrow_copy", "permute_copy",
           "split_with_sizes_copy", "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold",
           "unfold_copy", "unsqueeze_copy", "view_copy"]


class _ViewCopy(OpNode):
    """A view's result copied into its own memory (Note [A view's copy]): the gradient passes through."""

    __slots__ = ()
    work_per_element = 0

    def backward(self, F, g):
        return (g,)


_CLASSES: dict[str, type] = {}


def _copy_class(name: str) -> type:
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (_ViewCopy,), {"__slots__": (), "__module__": __name__})
    return cls


def _materialise(x: Tensor, fn: str, make: Callable[[], Any], name: str | None = None) -> Any:
    """``make()``'s view (or views) of ``x``, each copied through a ``<view node>_copy`` node."""
    tensor_arg(x, fn, "input", 1)
    result = make()
    views = result if isinstance(result, tuple) else (result,)
    outs = []
    for v in views:
        node = name or (f"{v.grad_fn.name()}_copy" if v.grad_fn is not None else "AliasBackward0_copy")
        outs.append(record(_copy_class(node), (v,), v.device.backend.copy(v.data, "C"), v.device))
    return tuple(outs) if isinstance(result, tuple) else outs[0]


def expand_copy(input: Tensor, size: Sequence[int], *, implicit: bool = False) -> Tensor:
    """torch.expand_copy: ``input.expand(size)`` in its own memory."""
    return _materialise(input, "expand_copy", lambda: expand(input, *size))


def permute_copy(input: Tensor, dims: Sequence[int]) -> Tensor:
    """torch.permute_copy: ``input.permute(dims)`` in its own memory."""
    return _materialise(input, "permute_copy", lambda: permute(input, *dims))


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """torch.transpose_copy: ``input.transpose(dim0, dim1)`` in its own memory."""
    return _materialise(input, "transpose_copy", lambda: transpose(input, dim0, dim1))


def t_copy(input: Tensor) -> Tensor:
    """torch.t_copy: ``input.t()`` in its own memory."""
    return _materialise(input, "t_copy", lambda: t(input))


def view_copy(input: Tensor, size: Any) -> Tensor:
    """torch.view_copy: ``input.view(size)`` (a dtype ``size`` is refused: asyncgrad has no such view)."""
    return _materialise(input, "view_copy", lambda: view(input, *([size] if isinstance(size, int) else size)))


def squeeze_copy(input: Tensor, dim: Any = None) -> Tensor:
    """torch.squeeze_copy: ``input.squeeze(dim)`` in its own memory."""
    return _materialise(input, "squeeze_copy", lambda: squeeze(input, dim))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    """torch.unsqueeze_copy: ``input.unsqueeze(dim)`` in its own memory."""
    return _materialise(input, "unsqueeze_copy", lambda: unsqueeze(input, dim))


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """torch.diagonal_copy: ``input.diagonal(offset, dim1, dim2)`` in its own memory."""
    return _materialise(input, "diagonal_copy", lambda: diagonal(input, offset, dim1, dim2))


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """torch.narrow_copy: ``input.narrow(dim, start, length)`` in its own memory (NarrowCopyBackward0)."""
    return _materialise(input, "narrow_copy", lambda: narrow(input, dim, start, length), "NarrowCopyBackward0")


def alias_copy(input: Tensor) -> Tensor:
    """torch.alias_copy: a copy of the whole tensor (AliasBackward0_copy)."""
    return _materialise(input, "alias_copy", lambda: view(input, *input.shape), "AliasBackward0_copy")


def as_strided_copy(input: Tensor, size: Sequence[int], stride: Sequence[int],
                    storage_offset: int | None = None) -> Tensor:
    """torch.as_strided_copy: ``input.as_strided(size, stride, storage_offset)`` in its own memory."""
    return _materialise(input, "as_strided_copy", lambda: as_strided(input, size, stride, storage_offset))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """torch.unbind_copy: ``input.unbind(dim)``, each slice in its own memory."""
    return _materialise(input, "unbind_copy", lambda: unbind(input, dim))


def split_with_sizes_copy(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """torch.split_with_sizes_copy: ``input.split_with_sizes(split_sizes, dim)``, each piece in its own memory."""
    return _materialise(input, "split_with_sizes_copy", lambda: split_with_sizes(input, split_sizes, dim))


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: every ``size``-long slice along ``dimension``, ``step`` apart, as a new
    last dim: a strided view of ``input`` (``as_strided`` over its own strides and offset)."""
    nd = max(input.ndim, 1)
    if not -nd <= dimension < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got "
                         f"{dimension})")
    d = dimension % nd
    n = input.shape[d] if input.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    strides = input.stride() if input.ndim else ()
    if input.ndim == 0:
        return as_strided(input, (size,), (1,), input.storage_offset())
    shape = input.shape[:d] + ((n - size) // step + 1,) + input.shape[d + 1:] + (size,)
    new_strides = strides[:d] + (strides[d] * step,) + strides[d + 1:] + (strides[d],)
    return as_strided(input, shape, new_strides, input.storage_offset())


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """torch.unfold_copy: ``input.unfold(dimension, size, step)`` in its own memory."""
    return _materialise(input, "unfold_copy", lambda: unfold(input, dimension, size, step), "UnfoldBackward0_copy")
