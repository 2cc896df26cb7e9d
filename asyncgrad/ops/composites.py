"""torch's composite ops: each is its definition in terms of other ops, so its graph is theirs.

torch implements these (``CompositeImplicitAutograd`` in its ``native_functions.yaml``) by calling
other ops, with no derivative formula of their own: ``fliplr(x).grad_fn`` is ``FlipBackward0``,
``cov``'s is the node of its last step. Here too: each function below checks its arguments with
torch's errors and composes the ops that torch composes, so values, node names and gradients of
every order come from those ops (Note [One way to record an op] in _node.py is kept by them).
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Sequence

import numpy as np

from asyncgrad import dtypes
from asyncgrad._validate import int_arg, int_list, normalize_dim, tensor_arg
from asyncgrad.ops import elementwise, indexing, linalg, misc, reduction, sorting, views
from asyncgrad.ops import shape as shape_ops
from asyncgrad.tensor import Tensor, scalar_type_name


def _size_args(size: tuple, fn: str) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    return tuple(int_list(size, fn, "size"))


# --------------------------------------------------------------------------- shapes
def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """torch's ``broadcast_to``: ``input.expand(size)``."""
    tensor_arg(input, "broadcast_to", "input", 1)
    return shape_ops.expand(input, tuple(size))


def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """torch's ``Tensor.sum_to_size``: the sum of ``input`` over the dimensions that ``size`` broadcasts."""
    target = _size_args(size, "sum_to_size")
    shape = tuple(input.shape)
    lead = len(shape) - len(target)
    if lead < 0 or any(t != 1 and t != s for t, s in zip(target, shape[lead:])):
        raise RuntimeError(f"size {{{list(target)}}} is not expandable to size {{{list(shape)}}}.")
    if shape == target:
        return input
    dims = list(range(lead)) + [lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1]
    out = reduction.sum(input, dims, True) if dims else input
    return shape_ops.view(out, target) if lead else out


def ravel(input: Tensor) -> Tensor:
    """torch's ``ravel``: a one-dimensional view where the layout allows, else a copy."""
    tensor_arg(input, "ravel", "input", 1)
    return shape_ops.reshape(input, -1)


def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``Tensor.reshape_as``: ``input.reshape(other.shape)``."""
    return shape_ops.reshape(input, tuple(tensor_arg(other, "reshape_as", "other", 1).shape))


def fliplr(input: Tensor) -> Tensor:
    """torch's ``fliplr``: ``flip(input, [1])`` of an at least 2-d tensor."""
    tensor_arg(input, "fliplr", "input", 1)
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return shape_ops.flip(input, [1])


def flipud(input: Tensor) -> Tensor:
    """torch's ``flipud``: ``flip(input, [0])`` of an at least 1-d tensor."""
    tensor_arg(input, "flipud", "input", 1)
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return shape_ops.flip(input, [0])


def _sections(n: int, sections: int) -> list[int]:
    """torch's split points of ``n`` elements into ``sections`` parts: the first ``n % sections`` one longer."""
    base, extra = divmod(n, sections)
    points, start = [], 0
    for i in range(sections - 1):
        start += base + (1 if i < extra else 0)
        points.append(start)
    return points


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """torch's ``tensor_split``: views of ``input`` split into ``sections`` nearly equal parts, or at
    ``indices`` (a list, or a 0-d/1-d integer tensor)."""
    tensor_arg(input, "tensor_split", "input", 1)
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    dim = normalize_dim(int_arg(dim, "tensor_split", "dim", 3), input.ndim, "tensor_split")
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.device.type != "cpu":
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be on cpu, but it's on "
                               f"{spec.device}")
        if spec.dtype.kind not in "iu":
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{spec.dtype}")
        if spec.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {spec.ndim} dims")
        spec = int(spec.item()) if spec.ndim == 0 else [int(i) for i in spec.tolist()]
    n = input.shape[dim]
    if isinstance(spec, (list, tuple)):
        points = [int(i) for i in spec]
    else:
        sections = int_arg(spec, "tensor_split", "sections", 2)
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        points = _sections(n, sections)
    out, start = [], 0
    for stop in [*points, n]:
        lo = min(max(start, 0), n)
        hi = min(max(stop, lo), n)
        index = (slice(None),) * dim + (slice(lo, hi),)
        out.append(indexing.getitem(input, index))
        start = stop
    return tuple(out)


def _split_along(input: Tensor, spec: Any, dim: int, fn: str, least: int) -> tuple[Tensor, ...]:
    tensor_arg(input, fn, "input", 1)
    if input.ndim < least:
        raise RuntimeError(f"torch.{fn} requires a tensor with at least {least} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    if not isinstance(spec, (list, tuple, Tensor)):
        sections = int_arg(spec, fn, "sections", 2)
        size = input.shape[dim]
        if sections <= 0 or size % sections:
            raise RuntimeError(f"torch.{fn} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{size} is not divisible by the split_size {sections}!")
    return tensor_split(input, spec, dim)


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """torch's ``hsplit``: ``tensor_split`` along dimension 1 (0 for a 1-d tensor), sections dividing it."""
    tensor_arg(input, "hsplit", "input", 1)
    if input.ndim < 1:
        raise RuntimeError("torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 "
                           "dimensions!")
    return _split_along(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """torch's ``vsplit``: ``tensor_split`` along dimension 0 of an at least 2-d tensor."""
    return _split_along(input, indices_or_sections, 0, "vsplit", 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """torch's ``dsplit``: ``tensor_split`` along dimension 2 of an at least 3-d tensor."""
    return _split_along(input, indices_or_sections, 2, "dsplit", 3)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """torch's ``column_stack``: 0-d and 1-d tensors as columns, then ``hstack``."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    columns = [shape_ops.reshape(t, t.numel(), 1) if t.ndim <= 1 else t
               for t in (tensor_arg(t, "column_stack", "tensors", 1) for t in tensors)]
    return shape_ops.hstack(columns)


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """torch's ``meshgrid``: each 0-d or 1-d tensor expanded to the grid (``"ij"``, the default, or ``"xy"``)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if tensor_arg(t, "meshgrid", "tensors", 1).ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    swap = indexing == "xy" and len(tensors) >= 2
    order = list(tensors)
    if swap:
        order[0], order[1] = order[1], order[0]
    sizes = tuple(t.numel() for t in order)
    grids = []
    for i, t in enumerate(order):
        view_shape = [1] * len(order)
        view_shape[i] = -1
        grids.append(shape_ops.expand(shape_ops.view(t, tuple(view_shape)), sizes))
    if swap:  # the grids of (second, first, ...) are the "xy" grids of (first, second, ...), swapped back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """torch's ``cartesian_prod``: the rows of every combination of the 1-d tensors' elements."""
    for t in tensors:
        if tensor_arg(t, "cartesian_prod", "tensors", 1).ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return shape_ops.stack([shape_ops.flatten(g) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """torch's ``combinations``: the ``r``-element combinations of a 1-d tensor's elements, as rows."""
    tensor_arg(input, "combinations", "input", 1)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    r = int_arg(r, "combinations", "r", 2)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return shape_ops.reshape(indexing.getitem(input, slice(0, 0)), 0)
    n = input.shape[0]
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(n), r))
    columns = []
    for j in range(r):
        index = _index_array(input, [row[j] for row in rows])
        columns.append(indexing.getitem(input, index))
    return shape_ops.stack(columns, 1)


def msort(input: Tensor) -> Tensor:
    """torch's ``msort``: ``sort(input, dim=0).values``."""
    tensor_arg(input, "msort", "input", 1)
    return sorting.sort(input, 0)[0]


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """torch's ``take_along_dim``: ``gather`` with ``indices`` broadcast against ``input`` (all but
    ``dim``); with no ``dim``, of the flattened tensors."""
    tensor_arg(input, "take_along_dim", "input", 1)
    tensor_arg(indices, "take_along_dim", "indices", 2)
    if indices.dtype != dtypes.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{scalar_type_name(indices.dtype)}")
    if dim is None:
        flat = shape_ops.reshape(indices, -1)
        return indexing.gather(shape_ops.reshape(input, -1), 0, _wrapped(flat, input.numel()))
    dim = normalize_dim(int_arg(dim, "take_along_dim", "dim", 3), input.ndim, "take_along_dim")
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    shape_in, shape_ix = list(input.shape), list(indices.shape)
    shape_in[dim] = shape_ix[dim] = 1
    common = list(np.broadcast_shapes(tuple(shape_in), tuple(shape_ix)))
    wanted_in, wanted_ix = list(common), list(common)
    wanted_in[dim], wanted_ix[dim] = input.shape[dim], indices.shape[dim]
    indices = _wrapped(indices, input.shape[dim])
    return indexing.gather(shape_ops.expand(input, tuple(wanted_in)), dim, shape_ops.expand(indices, tuple(wanted_ix)))


def _wrapped(indices: Tensor, size: int) -> Tensor:
    """Negative indices counted from the end, as torch's take_along_dim takes them."""
    if indices.numel() == 0 or not bool((indices < 0).any().item()):
        return indices
    return elementwise.where(indices < 0, elementwise.add(indices, size), indices)


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """torch's ``repeat_interleave``: each element (slice along ``dim``) repeated ``repeats`` times
    (a number or one count per element), by ``index_select``; ``repeat_interleave(counts)`` alone
    gives the indices themselves."""
    if repeats is None:  # repeat_interleave(repeats): the index of each repeated position
        counts = tensor_arg(input, "repeat_interleave", "repeats", 1).reshape(-1).tolist()
        return _index_array(input, [i for i, c in enumerate(counts) for _ in range(c)])
    tensor_arg(input, "repeat_interleave", "input", 1)
    if dim is None:
        input = shape_ops.reshape(input, -1)
        dim = 0
    dim = normalize_dim(int_arg(dim, "repeat_interleave", "dim", 3), input.ndim, "repeat_interleave")
    n = input.shape[dim]
    if not isinstance(repeats, Tensor):  # torch's int form: each slice expanded, a copy, viewed back
        count = int_arg(repeats, "repeat_interleave", "repeats", 2)
        if count < 0:
            raise RuntimeError("repeats can not be negative")
        grown = tuple(input.shape[:dim + 1]) + (count,) + tuple(input.shape[dim + 1:])
        copied = shape_ops.clone(shape_ops.expand(shape_ops.unsqueeze(input, dim + 1), grown))
        return shape_ops.view(copied, tuple(input.shape[:dim]) + (n * count,) + tuple(input.shape[dim + 1:]))
    counts = [int(c) for c in repeats.reshape(-1).tolist()]
    if len(counts) == 1:
        counts = counts * n
    if len(counts) != n:
        raise RuntimeError("repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{len(counts)} and input.size(0) = {n}")
    if any(c < 0 for c in counts):
        raise RuntimeError("repeats can not be negative")
    positions = _index_array(input, [i for i, c in enumerate(counts) for _ in range(c)])
    return indexing.index_select(input, dim, positions)


def _index_array(like: Tensor, positions: list[int]) -> Tensor:
    """An int64 index tensor (no grad) on ``like``'s device, from host positions."""
    return Tensor._make(like.device.asarray(positions, dtype=np.dtype(np.int64)), like.device, False, None, 0, [0])


def H(input: Tensor) -> Tensor:  # noqa: N802  (torch's attribute name)
    """torch's ``Tensor.H``: the (conjugate) transpose of a matrix; a 0-d tensor is its own."""
    if input.ndim == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return input
    if input.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {input.ndim}-D tensor. "
                           "For batches of matrices, consider using tensor.mH")
    return shape_ops.transpose(input, 0, 1)


def mH(input: Tensor) -> Tensor:  # noqa: N802  (torch's attribute name)
    """torch's ``Tensor.mH``: the (conjugate) transpose of the last two dimensions."""
    if input.ndim < 2:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return shape_ops.transpose(input, -2, -1)


# --------------------------------------------------------------------------- products
def inner(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``inner``: the sum over the last dimension of both, for every pair of their other indices."""
    tensor_arg(input, "inner", "input", 1)
    tensor_arg(other, "inner", "other", 2)
    if input.ndim == 0 or other.ndim == 0:
        return elementwise.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError("inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """torch's ``tensordot``: contract ``dims`` (a count of ``a``'s last and ``b``'s first dimensions,
    or two lists) as one matrix product between permuted, reshaped operands."""
    tensor_arg(a, "tensordot", "a", 1)
    tensor_arg(b, "tensordot", "b", 2)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (list, tuple)):
        if len(dims) != 2:
            raise RuntimeError(f"tensordot expects dims to be a pair of lists, but got {dims}")
        da = [dims[0]] if isinstance(dims[0], int) else list(dims[0])
        db = [dims[1]] if isinstance(dims[1], int) else list(dims[1])
    else:
        n = int_arg(dims, "tensordot", "dims", 3)
        if n < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={n}")
        if n > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={n}")
        da, db = list(range(a.ndim - n, a.ndim)), list(range(n))
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    da = [normalize_dim(d, a.ndim, "tensordot") for d in da]
    db = [normalize_dim(d, b.ndim, "tensordot") for d in db]
    for x, y in zip(da, db):  # a size-1 dim against a larger one is summed first (torch's broadcast)
        if a.shape[x] == b.shape[y]:
            continue
        if b.shape[y] == 1:
            a = reduction.sum(a, x, True)
        elif a.shape[x] == 1:
            b = reduction.sum(b, y, True)
        else:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} and "
                               f"second has size {b.shape[y]} in dim {y}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    size = math.prod(a.shape[d] for d in da)
    left = shape_ops.reshape(shape_ops.permute(a, free_a + da), math.prod(a.shape[d] for d in free_a), size)
    right = shape_ops.reshape(shape_ops.permute(b, db + free_b), size, math.prod(b.shape[d] for d in free_b))
    out_shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return shape_ops.reshape(linalg.mm(left, right), out_shape)


# --------------------------------------------------------------------------- statistics
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """torch's ``cov``: the covariance of the rows' variables (columns are observations), with
    frequency and reliability weights, as torch computes it."""
    tensor_arg(input, "cov", "input", 1)
    if input.ndim > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = shape_ops.view(input, (1, -1)) if input.ndim < 2 else input
    num_observations = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else elementwise.mul(w, aweights)
    if w is None:
        avg = reduction.mean(x, 1)
        norm_factor: Any = num_observations - correction
    else:
        w_sum = reduction.sum(w)
        avg = elementwise.div(reduction.sum(elementwise.mul(x, w), 1), w_sum)
        if aweights is None:
            norm_factor = elementwise.sub(w_sum, correction)
        else:
            norm_factor = elementwise.sub(w_sum, elementwise.div(elementwise.mul(
                reduction.sum(elementwise.mul(w, aweights)), correction), w_sum))
    if isinstance(norm_factor, Tensor):
        if bool((norm_factor <= 0).item()):
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                          "of observations.", UserWarning, stacklevel=2)
            norm_factor = elementwise.clamp(norm_factor, 0)
    elif norm_factor <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                      "of observations.", UserWarning, stacklevel=2)
        norm_factor = 0
    x = elementwise.sub(x, shape_ops.unsqueeze(avg, 1))
    xw = x if w is None else elementwise.mul(x, w)
    c = linalg.mm(x, shape_ops.t(xw))
    return shape_ops.squeeze(elementwise.div(c, norm_factor))


def corrcoef(input: Tensor) -> Tensor:
    """torch's ``corrcoef``: ``cov`` normalised by the standard deviations, clipped to [-1, 1]."""
    tensor_arg(input, "corrcoef", "input", 1)
    if input.ndim > 2:
        raise RuntimeError("corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return elementwise.div(c, c)
    d = shape_ops.diag(c)
    stddev = elementwise.sqrt(d)
    c = elementwise.div(c, shape_ops.unsqueeze(stddev, 1))
    c = elementwise.div(c, shape_ops.unsqueeze(stddev, 0))
    return elementwise.clamp(c, -1, 1)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch's ``nanmean``: ``nansum / (number of non-NaN elements)``."""
    tensor_arg(input, "nanmean", "input", 1)
    if input.dtype.kind != "f":
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{scalar_type_name(input.dtype)}")
    count = reduction.sum(elementwise.logical_not(elementwise.isnan(input)), dim, keepdim)
    total = misc.nansum(input, dim, keepdim, dtype=dtype)
    return elementwise.div(total, shape_ops.to_dtype(count, total.dtype))


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """torch's ``diff``: the ``n``-th forward difference along ``dim``, after ``prepend``/``append``."""
    tensor_arg(input, "diff", "input", 1)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = int_arg(n, "diff", "n", 2)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = normalize_dim(int_arg(dim, "diff", "dim", 3), input.ndim, "diff")
    if n == 0:  # torch: the input itself, prepend and append ignored
        return input
    parts = [t for t in (prepend, input, append) if t is not None]
    if len(parts) > 1:
        parts = [t if t.ndim else shape_ops.expand(shape_ops.unsqueeze(t, 0), tuple(
            1 if i == dim else s for i, s in enumerate(input.shape))) for t in parts]
        input = shape_ops.cat(parts, dim)
    for _ in range(n):
        length = input.shape[dim]
        if length == 0:
            break
        later = views.narrow(input, dim, 1, length - 1)
        earlier = views.narrow(input, dim, 0, length - 1)
        if input.dtype == dtypes.bool:
            input = elementwise.ne(later, earlier)  # torch's logical_xor of the two
        else:
            input = elementwise.sub(later, earlier)
    return input


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """torch's ``cumulative_trapezoid``: the running trapezoidal integral of ``y`` along ``dim``."""
    tensor_arg(y, "cumulative_trapezoid", "y", 1)
    if x is not None and dx is not None:
        raise RuntimeError("cumulative_trapezoid: received both x and dx; use only one of them.")
    dim = normalize_dim(int_arg(dim, "cumulative_trapezoid", "dim", 3), y.ndim, "cumulative_trapezoid")
    length = y.shape[dim]
    if length == 0:
        return reduction.cumsum(views.narrow(y, dim, 0, 0), dim)
    total = elementwise.add(views.narrow(y, dim, 0, length - 1), views.narrow(y, dim, 1, length - 1))
    if x is None:  # torch's order of operations, for its rounding: (dx / 2 * (l + r)).cumsum
        return reduction.cumsum(elementwise.mul(total, (1.0 if dx is None else dx) / 2.0), dim)
    if x.ndim == 1:
        view_shape = [1] * y.ndim
        view_shape[dim] = -1
        steps = shape_ops.view(diff(x), tuple(view_shape))
    else:
        steps = diff(x, dim=dim)
    return elementwise.div(reduction.cumsum(elementwise.mul(steps, total), dim), 2.0)  # (dx (l + r)).cumsum / 2


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """torch's ``diagflat``: the flattened input on the ``offset`` diagonal of a square matrix."""
    tensor_arg(input, "diagflat", "input", 1)
    return shape_ops.diag(shape_ops.reshape(input, -1), int_arg(offset, "diagflat", "offset", 2))


def float_power(input: Any, exponent: Any) -> Tensor:
    """torch's ``float_power``: ``pow`` computed in float64 (both operands cast first)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")

    def as_double(value: Any) -> Any:
        if isinstance(value, Tensor):
            return value if value.dtype == dtypes.float64 else shape_ops.to_dtype(value, dtypes.float64)
        return float(value) if not isinstance(value, bool) else float(value)

    return elementwise.pow(as_double(input), as_double(exponent))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str, ignore_nan: bool,
              fn: str) -> Tensor:
    """torch's quantile algorithm: sort (NaN last), a fractional rank per quantile, then the value at
    it (``lower``/``higher``/``nearest``) or a ``lerp`` between its two neighbours (``linear``,
    ``midpoint``); a slice holding NaN gives NaN unless NaNs are ignored (``nanquantile``)."""
    tensor_arg(input, fn, "input", 1)
    if input.dtype.kind != "f":
        raise RuntimeError(f"{fn}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{fn}() interpolation must be one of linear, lower, higher, midpoint or nearest, but "
                           f"got {interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{fn}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{fn}() q tensor must be same dtype as the input tensor")
        scalar_q = q.ndim == 0
        values = [float(v) for v in q.detach().reshape(-1).tolist()]
        if any(not 0 <= v <= 1 for v in values):
            raise RuntimeError(f"{fn}() q values must be in the range [0, 1]")
    else:
        scalar_q = True
        values = [float(q)]
        if not 0 <= values[0] <= 1:
            raise RuntimeError(f"{fn}() q must be in the range [0, 1] but got {values[0]}")
    if dim is None:
        x = shape_ops.reshape(input, -1)
        kept_shape = (1,) * input.ndim
    else:
        axis = normalize_dim(int_arg(dim, fn, "dim", 3), input.ndim, fn)
        x = views.movedim(input, axis, -1) if input.ndim else shape_ops.reshape(input, 1)
        kept_shape = tuple(1 if i == axis else s for i, s in enumerate(input.shape))
    n = x.shape[-1]
    if n == 0:
        raise IndexError(f"{fn}() input tensor must be non-empty")
    batch = tuple(x.shape[:-1])
    dev = input.device
    backend = dev.backend
    xp = dev.xp
    ordered = sorting.sort(x, -1)[0]
    nan_count = xp.sum(backend.astype(xp.isnan(ordered.data), np.dtype(np.int64)), axis=-1, keepdims=True)

    def constant(array: Any) -> Tensor:
        return Tensor._make(array, dev, False, None, 0, [0])

    q_shape = (len(values),) + (1,) * (len(batch) + 1)
    # the ranks are computed from q itself, so a q that requires grad gets lerp's weight gradient, as torch's
    q_t = shape_ops.reshape(q, q_shape) if isinstance(q, Tensor) else constant(
        xp.reshape(dev.asarray(values, dtype=np.dtype(input.dtype)), q_shape))
    if ignore_nan:  # the last non-NaN rank of each slice (0 for a slice of NaNs, whose value is NaN)
        ranks_t = elementwise.mul(q_t, constant(backend.astype(xp.clip(n - nan_count - 1, 0, None), input.dtype)))
    else:
        ranks_t = elementwise.mul(q_t, float(n - 1))
        ranks_t = elementwise.where(constant(nan_count > 0), float(n - 1), ranks_t)  # its NaN, sorted last
    ranks_t = shape_ops.expand(ranks_t, (len(values),) + batch + (1,))
    ranks = ranks_t.data
    if interpolation == "lower":
        below = above = xp.floor(ranks)
    elif interpolation == "higher":
        below = above = xp.ceil(ranks)
    elif interpolation == "nearest":
        below = above = xp.round(ranks)
    else:
        below, above = xp.floor(ranks), xp.ceil(ranks)
    expanded = shape_ops.expand(shape_ops.unsqueeze(ordered, 0), (len(values),) + batch + (n,))

    low = indexing.gather(expanded, -1, constant(backend.astype(below, np.dtype(np.int64))))
    if interpolation in ("lower", "higher", "nearest"):
        result = low
    else:
        high = indexing.gather(expanded, -1, constant(backend.astype(above, np.dtype(np.int64))))
        weights = constant(xp.full_like(ranks, 0.5)) if interpolation == "midpoint" else elementwise.sub(
            ranks_t, constant(below))
        result = elementwise.lerp(low, high, weights)
    result = shape_ops.squeeze(result, -1)  # (quantiles,) + batch
    if keepdim:
        result = shape_ops.reshape(result, (len(values),) + kept_shape)
    elif dim is None:
        result = shape_ops.reshape(result, (len(values),))
    return shape_ops.squeeze(result, 0) if scalar_q else result


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """torch's ``quantile``: the ``q``-th quantiles (a number or a 1-d tensor) of all elements or along ``dim``."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """torch's ``nanquantile``: ``quantile`` of the values that are not NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> tuple[Tensor, ...]:
    """torch's ``gradient``: second-order central differences inside, one-sided differences of
    order ``edge_order`` at the ends, along each of ``dim`` (all by default), with a uniform
    ``spacing`` (a number, or one per dim) or coordinates (one 1-d tensor per dim)."""
    tensor_arg(input, "gradient", "input", 1)
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, (list, tuple)):
        dims = [normalize_dim(int_arg(d, "gradient", "dim", 3), input.ndim, "gradient") for d in dim]
    else:
        dims = [normalize_dim(int_arg(dim, "gradient", "dim", 3), input.ndim, "gradient")]
    if spacing is None:
        spacing = 1.0
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) != len(dims):
        raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length {len(steps)} "
                           f"and a dim argument of length {len(dims)}.")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    out = []
    for axis, step in zip(dims, steps):
        n = input.shape[axis]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")

        def part(start: int, stop: int, axis: int = axis) -> Tensor:
            return views.narrow(input, axis, start, stop - start)

        if isinstance(step, Tensor):
            out.append(_gradient_along_coordinates(input, axis, step, edge_order, part))
            continue
        h = float(step)
        inner = elementwise.div(elementwise.sub(part(2, n), part(0, n - 2)), 2.0 * h)
        if edge_order == 1:
            first = elementwise.div(elementwise.sub(part(1, 2), part(0, 1)), h)
            last = elementwise.div(elementwise.sub(part(n - 1, n), part(n - 2, n - 1)), h)
        else:
            first = elementwise.div(part(0, 1) * -1.5 + part(1, 2) * 2.0 - part(2, 3) * 0.5, h)
            last = elementwise.div(part(n - 3, n - 2) * 0.5 - part(n - 2, n - 1) * 2.0 + part(n - 1, n) * 1.5, h)
        out.append(shape_ops.cat([first, inner, last], axis))
    return tuple(out)


def _gradient_along_coordinates(input: Tensor, axis: int, x: Tensor, edge_order: int, part: Any) -> Tensor:
    """gradient along ``axis`` at the coordinates ``x`` (non-uniform central differences, numpy's weights)."""
    n = input.shape[axis]
    if x.ndim != 1 or x.shape[0] != n:
        raise RuntimeError("torch.gradient expected each tensor to be on the same device and to have the size of "
                           f"the dimension it spaces, {n}")
    shape = [1] * input.ndim
    shape[axis] = -1

    def along(t: Tensor) -> Tensor:
        return shape_ops.reshape(t, tuple(shape))

    dx = diff(x)
    dx1, dx2 = along(views.narrow(dx, 0, 0, n - 2)), along(views.narrow(dx, 0, 1, n - 2))
    total = dx1 + dx2
    a = -dx2 / (dx1 * total)
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * total)
    inner = a * part(0, n - 2) + b * part(1, n - 1) + c * part(2, n)
    if edge_order == 1:
        first = (part(1, 2) - part(0, 1)) / along(views.narrow(dx, 0, 0, 1))
        last = (part(n - 1, n) - part(n - 2, n - 1)) / along(views.narrow(dx, 0, n - 2, 1))
    else:
        d1, d2 = along(views.narrow(dx, 0, 0, 1)), along(views.narrow(dx, 0, 1, 1))
        s = d1 + d2
        first = (-(2.0 * d1 + d2) / (d1 * s)) * part(0, 1) + (s / (d1 * d2)) * part(1, 2) - (d1 / (d2 * s)) * part(2, 3)
        d1, d2 = along(views.narrow(dx, 0, n - 3, 1)), along(views.narrow(dx, 0, n - 2, 1))
        s = d1 + d2
        last = (d2 / (d1 * s)) * part(n - 3, n - 2) - (s / (d1 * d2)) * part(n - 2, n - 1) + (
            (2.0 * d2 + d1) / (d2 * s)) * part(n - 1, n)
    return shape_ops.cat([first, inner, last], axis)
