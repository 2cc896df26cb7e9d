"""Sliding windows on raw device arrays: the kernels of convolution and pooling, forward and backward."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from asyncgrad.devices.backend import backend_of

# Note [Windows are strided views]: a convolution or a pooling reads, for every output position,
# a window of its (padded) input. Those windows are one strided view of the input, shaped
# ``(N, C, *kernel, *out)``: along a kernel axis the stride is the input's times the dilation,
# along an output axis the input's times the stride, so windows overlap in memory and nothing is
# copied (``backend.strided_view``, which the standard has no word for; nothing writes through it).
# Convolution turns the view into im2col's matrix with one reshape (the one copy) and multiplies
# it with the weight by BLAS (``xp.matmul``), batched over samples and groups. Going back,
# ``fold`` adds the columns into the (padded) input one spatial dim at a time, as a matmul with
# a 0/1 band matrix, so overlapping windows add up without a scatter; pooling's backwards, whose
# columns are cheap to give slab by slab, use ``fold_slabs`` (one strided slice-add per kernel
# position). Then the padding is cut off.
#
# Everything here takes and returns the arrays of one device, through its backend (Note [One
# array backend per device]), so ``ArrayMath`` (``_node.py``) can run a backward formula's
# ``F.convolution`` with it, and the recorded ops (``conv.py``, ``pooling.py``) their forwards.
# A layout ``params`` is ``(stride, pads, dilation, groups)``: tuples over the spatial dims, each
# pad a ``(before, after)`` pair (``padding='same'`` with an even kernel pads one more after).


Params = tuple[tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...], int]


def _at(a: Any, key: Any) -> Any:
    return a[key]


def out_size(size: int, kernel: int, stride: int, dilation: int, before: int, after: int) -> int:
    """Output positions along one dim: windows of ``dilation * (kernel - 1) + 1`` elements that fit."""
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def pad(x: Any, pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Any:
    """``x`` with its last ``len(pads)`` dims padded by ``value`` (a new array), or ``x`` itself."""
    if not any(before or after for before, after in pads):
        return x
    backend = backend_of(x)
    lead = x.ndim - len(pads)
    shape = x.shape[:lead] + tuple(n + b + a for n, (b, a) in zip(x.shape[lead:], pads))
    out = backend.full(shape, value, backend.dtype(x))
    backend.setitem(out, (slice(None),) * lead + tuple(slice(b, b + n) for n, (b, _) in zip(x.shape[lead:], pads)), x)
    return out


def windows(xp_: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
            out: tuple[int, ...]) -> Any:
    """The ``(N, C, *kernel, *out)`` view of a padded ``(N, C, *spatial)`` array (Note [Windows are strided views])."""
    backend = backend_of(xp_)
    st = backend.strides(xp_)
    spatial = st[2:]
    strides = st[:2] + tuple(s * d for s, d in zip(spatial, dilation)) + tuple(s * k for s, k in zip(spatial, stride))
    return backend.strided_view(xp_, xp_.shape[:2] + kernel + out, strides, 0)


def _offset_key(offset: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
                out: tuple[int, ...]) -> tuple:
    """The strided slice of the padded input that kernel position ``offset`` reads for every output."""
    return (slice(None), slice(None)) + tuple(
        slice(k * d, k * d + s * (o - 1) + 1, s) for k, s, d, o in zip(offset, stride, dilation, out))


def fold(cols: Any, shape: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
         dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> Any:
    """The adjoint of ``windows``: ``cols`` ``(N, C, *kernel, *out)`` added back into an input of
    ``shape`` (overlaps add up), its padding cut off.

    One spatial dim at a time, as a matmul with a 0/1 band matrix (row ``k * out + o`` has its one
    at ``o * stride + k * dilation``): BLAS does the adding, where one strided slice-add per kernel
    position (``fold_slabs``) runs numpy's loops over rows only ``out`` elements long. In 2-D one
    permute-copy makes each (sample, channel) a ``((k0, o0), (k1, o1))`` matrix, banded from the
    left and the right, where a dim at a time copies the columns twice."""
    backend = backend_of(cols)
    xp = backend.xp
    d = len(kernel)
    out = cols.shape[2 + d:]
    padded = tuple(n + b + a for n, (b, a) in zip(shape[2:], pads))
    dtype = backend.dtype(cols)
    if d == 2:  # one permute: per (n, c) the ((k0, o0), (k1, o1)) matrix, banded on both sides
        moved = xp.permute_dims(cols, (0, 1, 2, 4, 3, 5))
        m = xp.reshape(moved, cols.shape[:2] + (kernel[0] * out[0], kernel[1] * out[1]))
        rows = _band(kernel[0], out[0], padded[0], stride[0], dilation[0], backend, dtype)
        right = _band(kernel[1], out[1], padded[1], stride[1], dilation[1], backend, dtype)
        return crop(xp.matmul(xp.matmul(xp.matrix_transpose(rows), m), right), shape, pads)
    acc = cols
    labels = ["n", "c"] + [f"k{j}" for j in range(d)] + [f"o{j}" for j in range(d)]
    for j in range(d):  # (k_j, o_j) moved last and merged, times the band: p_j, appended last
        keep = [i for i, name in enumerate(labels) if name not in (f"k{j}", f"o{j}")]
        order = tuple(keep) + (labels.index(f"k{j}"), labels.index(f"o{j}"))
        moved = xp.permute_dims(acc, order)
        merged = xp.reshape(moved, moved.shape[:-2] + (kernel[j] * out[j],))
        acc = xp.matmul(merged, _band(kernel[j], out[j], padded[j], stride[j], dilation[j], backend, dtype))
        labels = [labels[i] for i in keep] + [f"p{j}"]
    return crop(acc, shape, pads)


def _band(kernel: int, out: int, size: int, stride: int, dilation: int, backend: Any, dtype: Any) -> Any:
    """The ``(kernel * out, size)`` matrix adding each (kernel position, output) column at the input
    position it read (``fold``), on the backend's device."""
    return backend.from_host(_band_rows(kernel, out, size, stride, dilation), dtype=dtype)


@functools.lru_cache(maxsize=64)
def _band_rows(kernel: int, out: int, size: int, stride: int, dilation: int) -> tuple:
    rows = []
    for k in range(kernel):
        for o in range(out):
            row = [0.0] * size
            row[o * stride + k * dilation] = 1.0
            rows.append(row)
    return tuple(map(tuple, rows))


def fold_slabs(slab: Any, like: Any, shape: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
               dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...], out: tuple[int, ...]) -> Any:
    """``fold`` of columns given slab by slab: ``slab(index, offset)`` is the ``(N, C, *out)``
    gradient that kernel position ``offset`` (``index`` in C order) read, added where it read it."""
    backend = backend_of(like)
    padded = shape[:2] + tuple(n + b + a for n, (b, a) in zip(shape[2:], pads))
    acc = backend.zeros(padded, backend.dtype(like))
    # windows that cannot overlap (pooling's default, stride = kernel) each own their elements:
    # a slab is stored, not added, which skips reading ``acc`` back
    disjoint = all(s >= d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))
    for index, offset in enumerate(itertools.product(*(range(k) for k in kernel))):
        key = _offset_key(offset, stride, dilation, out)
        if disjoint:
            backend.setitem(acc, key, slab(index, offset))
        else:
            target = backend.view(acc, _at, key)
            target += slab(index, offset)
    return crop(acc, shape, pads)


def crop(acc: Any, shape: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> Any:
    """The unpadded ``shape`` inside a padded array, as a contiguous copy (a gradient owns its memory)."""
    if not any(b or a for b, a in pads):
        return acc
    backend = backend_of(acc)
    key = (slice(None), slice(None)) + tuple(slice(b, b + n) for n, (b, _) in zip(shape[2:], pads))
    return backend.copy(backend.view(acc, _at, key), "C")


def _layout(w_shape: tuple[int, ...], groups: int) -> tuple[int, int, int]:
    """Output channels per group, input channels per group times kernel elements, kernel elements."""
    k = math.prod(w_shape[2:])
    return w_shape[0] // groups, w_shape[1] * k, k


_SHORT_ROW = 16
"""Output rows at most this long take whole-row columns (Note [Whole-row columns])."""


def _row_columns(xpad: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
                 out: tuple[int, ...], groups: int) -> Any | None:
    """im2col's columns in whole rows, ``(G, Cg * K, N * prod(out[:-1]) * W)`` for a padded input of
    width ``W`` (Note [Whole-row columns]), or None where they would not pay (a strided last dim,
    output rows long enough to copy well, or input rows much wider than the output's)."""
    width, last = xpad.shape[-1], out[-1]
    if stride[-1] != 1 or last > _SHORT_ROW or 2 * width > 3 * last:
        return None
    backend = backend_of(xpad)
    xp = backend.xp
    n, c = xpad.shape[:2]
    total = math.prod(xpad.shape)
    tail = (kernel[-1] - 1) * dilation[-1]
    buf = backend.empty((total + tail,), backend.dtype(xpad))
    backend.setitem(buf, slice(0, total), xp.reshape(xpad, (-1,)))
    backend.setitem(buf, slice(total, total + tail), 0)
    item = backend.dtype(xpad).itemsize
    st = tuple(item * math.prod(xpad.shape[i + 1:]) for i in range(xpad.ndim))  # C-order strides of xpad
    spatial = st[2:]
    view = backend.strided_view(
        buf, (c,) + kernel + (n,) + out[:-1] + (width,),
        (st[1],) + tuple(s * d for s, d in zip(spatial, dilation)) + (st[0],)
        + tuple(s * k for s, k in zip(spatial[:-1], stride[:-1])) + (item,), 0)
    return xp.reshape(backend.recycled_copy(view),
                      (groups, c // groups * math.prod(kernel), n * math.prod(out[:-1]) * width))


def _channels_last(channels: int, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
                   out: tuple[int, ...], groups: int) -> bool:
    """Whether im2col's columns are taken channels-last (Note [Channels-last columns]): one group,
    and runs of ``C * K[-1]`` contiguous elements longer than the output rows the other layouts copy.

    Note [Channels-last columns]: im2col copies a strided view; numpy's copy costs several times
    more per element on short contiguous runs than on long ones. From the ``(N, C, *S)`` input the
    window view's contiguous runs are output rows (``out[-1]`` elements with stride 1), short in a
    network's later layers; from the input moved channels-last, ``(N, *S, C)`` (one copy of the
    input, the padding written with it), a window's last kernel row is ``K[-1] * C`` contiguous
    elements, long where channels are many. Those columns, ``(N, P, K * C)`` with ``P`` the output
    positions, serve the forward as one batched matmul with the weight laid out ``(O, K * C)``
    (``_weight_last``), whose result is already ``(N, O, P)``, and the weight's gradient as
    ``g (N, O, P)`` times them, summed over samples (``conv_weight_grad``). With several groups
    a group's channels are not one run, so they keep the other layouts (tests/ops/
    test_conv_channels_last.py checks every layout against exact sums and torch)."""
    if groups != 1:
        return False
    run = channels * (kernel[-1] if dilation[-1] == 1 else 1)
    rows = out[-1] if stride[-1] == 1 else 1
    return run > max(rows, _SHORT_ROW)


def _last_columns(x: Any, pads: tuple[tuple[int, int], ...], kernel: tuple[int, ...], stride: tuple[int, ...],
                  dilation: tuple[int, ...], out: tuple[int, ...]) -> Any:
    """im2col's columns channels-last, ``(N, prod(out), prod(kernel) * C)``, of an unpadded
    ``(N, C, *S)`` input: padded and moved channels-last in one copy, then the windows copied out
    (Note [Channels-last columns])."""
    backend = backend_of(x)
    xp = backend.xp
    d = len(kernel)
    n, c = x.shape[:2]
    moved = xp.permute_dims(x, (0,) + tuple(range(2, 2 + d)) + (1,))
    if any(b or a for b, a in pads):
        last = backend.zeros((n,) + tuple(size + b + a for size, (b, a) in zip(x.shape[2:], pads)) + (c,),
                             backend.dtype(x))
        backend.setitem(last, (slice(None),) + tuple(slice(b, b + size) for size, (b, _) in
                                                     zip(x.shape[2:], pads)), moved)
    else:
        last = backend.copy(moved, "C")
    st = backend.strides(last)
    spatial = st[1:1 + d]
    view = backend.strided_view(
        last, (n,) + out + kernel + (c,),
        (st[0],) + tuple(s * k for s, k in zip(spatial, stride)) + tuple(s * k for s, k in zip(spatial, dilation))
        + (st[-1],), 0)
    return xp.reshape(backend.recycled_copy(view), (n, math.prod(out), math.prod(kernel) * c))


def _weight_last(w: Any) -> Any:
    """The weight ``(O, C, *K)`` as ``(O, K * C)``, channels varying fastest, as ``_last_columns``."""
    xp = backend_of(w).xp
    moved = xp.permute_dims(w, (0,) + tuple(range(2, w.ndim)) + (1,))
    return xp.reshape(moved, (w.shape[0], -1))


def conv_forward(x: Any, w: Any, params: Params) -> Any:
    """``conv(x, w)`` without bias: im2col from the windows, then one batched matmul with the weight.

    Note [Whole-row columns]: with stride 1 along the last dim, a window row read at kernel
    position ``k`` is the padded input's row from ``k * dilation`` on; taken ``W`` long (the padded
    width) instead of ``out[-1]``, consecutive output rows are consecutive memory, so im2col
    copies runs of ``out[-2] * W`` elements instead of ``out[-1]`` (numpy's copy of short rows
    costs several times more per element). The ``W - out[-1]`` extra columns per row read into
    the next row (into a zero tail after the last), give garbage outputs, and are cut off; their
    cost, ``W / out[-1]`` times the multiply-adds, is why only short output rows (``_SHORT_ROW``:
    measured, runs of 24 or more already copy about as fast) from input rows at most 1.5 times
    as wide take this way. Laid out ``(C, K, N, out)``, the columns serve the forward as one
    matmul over all samples and the weight's gradient as it is (``conv_weight_grad``), where the
    gradient is padded with zeros at the extra columns; an input holding inf or NaN could turn
    a zero times garbage into NaN there, so the weight's gradient then takes the exact columns
    (W8, LeNet: ``python -m benchmarks --only W8``; tests/ops/test_conv_row_columns.py)."""
    return conv_forward_columns(x, w, params)[0]


Columns = tuple
"""``(layout, columns)`` of ``conv_columns``: ``"last"`` (Note [Channels-last columns]), ``"rows"``
(Note [Whole-row columns]) or ``"windows"`` (the plain ``(N, G, Cg * K, P)`` copy of the windows)."""


def conv_columns(x: Any, kernel: tuple[int, ...], params: Params, out: tuple[int, ...]) -> Columns:
    """im2col's columns of ``x`` for a kernel of this shape, the first ``out`` windows along each dim
    (fewer than fit where a transposed convolution's adjoint cuts them), in the one layout the
    forward's product and the weight's gradient both read (``conv_forward_columns``,
    ``conv_weight_grad``)."""
    stride, pads, dilation, groups = params
    backend = backend_of(x)
    xp = backend.xp
    if _channels_last(x.shape[1], kernel, stride, dilation, out, groups):  # Note [Channels-last columns]
        return "last", _last_columns(x, pads, kernel, stride, dilation, out)
    xpad = pad(x, pads)
    rows = _row_columns(xpad, kernel, stride, dilation, out, groups)
    if rows is not None:  # Note [Whole-row columns]
        return "rows", rows
    cgk = x.shape[1] // groups * math.prod(kernel)
    return "windows", xp.reshape(backend.recycled_copy(windows(xpad, kernel, stride, dilation, out)),
                                 (x.shape[0], groups, cgk, math.prod(out)))


def conv_forward_columns(x: Any, w: Any, params: Params) -> tuple[Any, Columns]:
    """``conv_forward`` and the columns it multiplied (which ``conv_weight_grad`` can take back)."""
    stride, pads, dilation, groups = params
    backend = backend_of(x)
    xp = backend.xp
    kernel = w.shape[2:]
    out = tuple(out_size(n, k, s, d, b, a) for n, k, s, d, (b, a) in zip(x.shape[2:], kernel, stride, dilation, pads))
    og, cgk, _ = _layout(w.shape, groups)
    columns = conv_columns(x, kernel, params, out)
    layout, cols = columns
    if layout == "last":
        y = xp.matmul(_weight_last(w), xp.matrix_transpose(cols))  # (N, O, P)
        return xp.reshape(y, (x.shape[0], w.shape[0]) + out), columns
    if layout == "rows":
        width = x.shape[-1] + pads[-1][0] + pads[-1][1]
        y = xp.matmul(xp.reshape(w, (groups, og, cgk)), cols)
        y = xp.reshape(y, (w.shape[0], x.shape[0]) + out[:-1] + (width,))
        y = xp.permute_dims(y, (1, 0) + tuple(range(2, y.ndim)))
        return backend.copy(backend.view(y, _at, (Ellipsis, slice(0, out[-1]))), "C"), columns
    y = xp.matmul(xp.reshape(w, (groups, og, cgk)), cols)
    return xp.reshape(y, (x.shape[0], w.shape[0]) + out), columns


def conv_input_grad(g: Any, w: Any, x_shape: tuple[int, ...], params: Params) -> Any:
    """The adjoint of ``conv`` in ``x`` (a transposed convolution): with a stride and one group,
    ``phase_input_grad`` (Note [Strided input gradients by phase]); else ``columns_input_grad``, or
    in 2-D the cheapest of it, ``banded_input_grad`` (Note [Banded weight]) and, with stride and
    dilation 1 along the last dim, ``shifted_rows_input_grad`` (Note [Shifted gradient rows]).
    Costs in multiply-adds, a copied element counting as 16 of them (Note [Cost classes])."""
    stride, pads, dilation, groups = params
    if groups == 1 and any(s > 1 for s in stride):
        return phase_input_grad(g, w, x_shape, params)
    if len(w.shape) == 4:
        n, c = x_shape[:2]
        (k0, k1), (o0, o1), og = w.shape[2:], g.shape[2:], w.shape[0] // groups
        p0, p1 = (size + b + a for size, (b, a) in zip(x_shape[2:], pads))
        columns = n * c * k0 * k1 * o0 * o1
        costs = {
            columns_input_grad: columns * og + n * c * p0 * k0 * o0 * (k1 * o1 + p1) + 16 * columns,
            banded_input_grad: n * o0 * og * o1 * c * k0 * p1 + 16 * (n * c * k0 * o0 * p1 + n * og * groups * o0 * o1),
        }
        if stride[1] == 1 and dilation[1] == 1:
            costs[shifted_rows_input_grad] = p1 * k0 * c * k1 * og * o0 * n + 16 * (
                2 * n * og * groups * o0 * o1 + p1 * k0 * c * o0 * n + n * c * p0 * p1)
        return min(costs, key=costs.__getitem__)(g, w, x_shape, params)  # the first of equal costs
    return columns_input_grad(g, w, x_shape, params)


def phase_input_grad(g: Any, w: Any, x_shape: tuple[int, ...], params: Params) -> Any:
    """``conv_input_grad`` of a strided convolution (one group) as one matmul and one add per kernel
    position, into an accumulator laid out by phase.

    Note [Strided input gradients by phase]: kernel position ``k`` sends output ``o``'s gradient to
    padded input position ``o * s + k * d``, that is to phase ``r = (k d) mod s`` at ``o + (k d) div s``
    of that phase's positions. With the accumulator laid out ``(*phases, *positions, N * C)``, the
    slab of one kernel position is the contiguous block ``positions[(k d) div s :][: out]`` of its
    phase, and its values are one matmul, ``(*out, N) x C_in`` rows times the weight's
    ``(C_in, C)`` at ``k``, already in that layout: the slab-add runs over rows ``N * C * out[-1]``
    long, where the columns' fold (``fold``, ``fold_slabs``) adds rows ``out[-1]`` long with a stride,
    or multiplies by band matrices mostly of zeros. One permute-copy at the end interleaves the
    phases back into ``(N, C, *padded)``, and the padding is cut off. The adds overlap only
    within a phase, and they add, so any kernel, stride and dilation is exact
    (tests/ops/test_conv_input_grad.py checks it against the columns and torch)."""
    stride, pads, dilation, _ = params
    backend = backend_of(g)
    xp = backend.xp
    n, c = x_shape[:2]
    kernel, out = tuple(w.shape[2:]), tuple(g.shape[2:])
    d = len(kernel)
    padded = tuple(size + b + a for size, (b, a) in zip(x_shape[2:], pads))
    positions = tuple(-(-p // s) for p, s in zip(padded, stride))  # per phase, rounded up
    rows = xp.reshape(xp.permute_dims(g, tuple(range(2, 2 + d)) + (0, 1)), (-1, w.shape[0]))  # (*out, N) x C_in
    per_position = xp.permute_dims(w, tuple(range(2, 2 + d)) + (0, 1))  # (*K, C_in, C)
    acc = backend.zeros(tuple(stride) + positions + (n * c,), backend.dtype(g))
    for offset in itertools.product(*(range(k) for k in kernel)):
        shifts = tuple(k * v for k, v in zip(offset, dilation))
        key = tuple(t % s for t, s in zip(shifts, stride)) + tuple(
            slice(t // s, t // s + o) for t, s, o in zip(shifts, stride, out)) + (Ellipsis,)
        target = backend.view(acc, _at, key)
        target += xp.reshape(xp.matmul(rows, _at(per_position, offset + (Ellipsis,))), out + (n * c,))
    # (*phases, *positions, N, C) -> (N, C, positions_0, phase_0, positions_1, phase_1, ...)
    acc = xp.reshape(acc, tuple(stride) + positions + (n, c))
    order = (2 * d, 2 * d + 1) + tuple(axis for j in range(d) for axis in (d + j, j))
    full = xp.reshape(xp.permute_dims(acc, order), (n, c) + tuple(p * s for p, s in zip(positions, stride)))
    key = (slice(None), slice(None)) + tuple(slice(b, b + size) for size, (b, _) in zip(x_shape[2:], pads))
    return backend.copy(backend.view(full, _at, key), "C")


def columns_input_grad(g: Any, w: Any, x_shape: tuple[int, ...], params: Params) -> Any:
    """``conv_input_grad`` as the weight's columns times the gradient, folded back onto the input."""
    stride, pads, dilation, groups = params
    xp = backend_of(g).xp
    kernel = w.shape[2:]
    og, cgk, _ = _layout(w.shape, groups)
    out = g.shape[2:]
    n = g.shape[0]
    g2 = xp.reshape(g, (n, groups, og, math.prod(out)))
    cols = xp.matmul(xp.matrix_transpose(xp.reshape(w, (groups, og, cgk))), g2)
    cols = xp.reshape(cols, (n, x_shape[1]) + kernel + out)
    return fold(cols, x_shape, kernel, stride, dilation, pads)


def banded_input_grad(g: Any, w: Any, x_shape: tuple[int, ...], params: Params) -> Any:
    """``conv_input_grad`` in 2-D with the second spatial dim's fold moved onto the weight.

    Note [Banded weight]: the fold along dim 1 is a matmul with a band (``_band``), and it
    commutes with the product over output channels, so it can be applied to the weight first:
    ``w (O, C, K0, K1)`` times the band ``(K1, O1 * P1)`` is a small ``(O, C, K0, O1, P1)`` array
    (entry ``w[o, c, k0, (p1 - o1 * s) / d]`` where that is a kernel position, else 0). Then one
    large matmul, over (output channel, o1), gives ``(N, O0, K0, C, P1)``, and dim 0's fold is one
    slab-add per ``k0`` into an ``(N, P0, C, P1)`` accumulator: rows ``o0 * s + k0 * d`` take
    runs of ``C * P1`` contiguous elements (a 0/1 band matmul from the left would first need the
    product permuted so that ``(k0, o0)`` were adjacent). Against im2col's columns
    (``N * C * K0 * K1 * O0 * O1`` elements, permuted once more for the fold), it copies arrays
    ``K1 * O1 / P1`` times smaller and runs BLAS on one large product instead of thousands of
    tiny ones, for ``P1 / K1`` times the multiply-adds; ``conv_input_grad`` picks it when that
    costs less (tests/ops/test_conv_input_grad.py checks both kernels agree)."""
    stride, pads, dilation, groups = params
    backend = backend_of(g)
    xp = backend.xp
    dtype = backend.dtype(g)
    (k0, k1), (o0, o1) = w.shape[2:], g.shape[2:]
    og, cg = w.shape[0] // groups, w.shape[1]
    n = g.shape[0]
    p0, p1 = (size + b + a for size, (b, a) in zip(x_shape[2:], pads))
    right = xp.reshape(_band(k1, o1, p1, stride[1], dilation[1], backend, dtype), (k1, o1 * p1))
    wide = xp.reshape(xp.matmul(xp.reshape(w, (-1, k1)), right), (groups, og, cg, k0, o1, p1))
    wide = xp.reshape(xp.permute_dims(wide, (0, 1, 4, 3, 2, 5)), (groups, og * o1, k0 * cg * p1))
    rows = xp.permute_dims(xp.reshape(g, (n, groups, og, o0, o1)), (1, 0, 3, 2, 4))
    r = xp.matmul(xp.reshape(rows, (groups, n * o0, og * o1)), wide)  # (G, N * O0, K0 * Cg * P1)
    r = xp.permute_dims(xp.reshape(r, (groups, n, o0, k0, cg, p1)), (1, 2, 3, 0, 4, 5))  # (N, O0, K0, G, Cg, P1)
    acc = backend.zeros((n, p0, groups, cg, p1), dtype)
    for k in range(k0):
        target = backend.view(acc, _at, (slice(None), slice(k * dilation[0], k * dilation[0] + stride[0] * (o0 - 1) + 1,
                                                                 stride[0])))
        target += backend.view(r, _at, (slice(None), slice(None), k))
    acc = xp.permute_dims(xp.reshape(acc, (n, p0, groups * cg, p1)), (0, 2, 1, 3))
    key = (slice(None), slice(None)) + tuple(slice(b, b + size) for size, (b, _) in zip(x_shape[2:], pads))
    return backend.copy(backend.view(acc, _at, key), "C")


# Note [Shifted gradient rows]: with stride and dilation 1 along dim 1, input column ``p1``
# takes output column ``p1 - k1`` through kernel column ``k1``. Lay the gradient out
# ``(G, Q1, Og, O0, N)``, its ``O1`` columns at ``K1 - 1`` and zeros around them
# (``Q1 = P1 + K1 - 1``), so that one column step is ``Og`` channel steps: then for each ``p1``
# the ``K1 * Og`` rows (kernel column reversed, channel) that reach it are evenly spaced, one
# ``(K1 * Og, O0 * N)`` matrix at offset ``p1`` columns, and all ``P1`` of them are one strided
# view. One batched matmul with the weight laid out ``(K0 * Cg, K1 * Og)`` (kernel columns
# reversed) sums over channels and kernel columns at once, giving ``(G, P1, K0, Cg, O0, N)``;
# dim 0's fold is then one slab-add per ``k0`` over runs of ``O0 * N`` contiguous elements.
# It multiplies ``P1 / O1`` times the multiply-adds (the zeros at the borders), where
# ``banded_input_grad`` multiplies ``P1 / K1`` times, and im2col's columns are never built.
# The samples go last so that the runs are long. They are moved there in two copies, channels
# first and then samples last: one transposing copy would read consecutive elements a whole
# sample apart, a stride that maps them all to one cache set where a sample's size is a
# multiple of a power of two, several times slower.
# Each product reaches the input position it belongs to once and the zeros add nothing, so the
# sums are the columns' fold's (tests/ops/test_conv_input_grad.py checks it against them and torch).

def shifted_rows_input_grad(g: Any, w: Any, x_shape: tuple[int, ...], params: Params) -> Any:
    """``conv_input_grad`` in 2-D with stride and dilation 1 along the last dim: the fold along it
    done by the product itself, over the gradient's rows shifted (Note [Shifted gradient rows])."""
    stride, pads, dilation, groups = params
    backend = backend_of(g)
    xp = backend.xp
    dtype = backend.dtype(g)
    (k0, k1), (o0, o1) = w.shape[2:], g.shape[2:]
    og, cg = w.shape[0] // groups, w.shape[1]
    n, c = x_shape[:2]
    p0, p1 = (size + b + a for size, (b, a) in zip(x_shape[2:], pads))
    q1 = p1 + k1 - 1
    rows = xp.reshape(backend.copy(xp.permute_dims(g, (1, 0, 2, 3)), "C"), (groups, og, n, o0, o1))
    shifted = backend.zeros((groups, q1, og, o0, n), dtype)
    backend.setitem(shifted, (slice(None), slice(k1 - 1, k1 - 1 + o1)), xp.permute_dims(rows, (0, 4, 1, 3, 2)))
    item = dtype.itemsize
    step = o0 * n * item  # one channel
    view = backend.strided_view(shifted, (groups, p1, k1 * og, o0 * n), (q1 * og * step, og * step, step, item), 0)
    flipped = backend.view(xp.reshape(w, (groups, og, cg, k0, k1)), _at, (Ellipsis, slice(None, None, -1)))
    weight = xp.reshape(xp.permute_dims(flipped, (0, 3, 2, 4, 1)), (groups, 1, k0 * cg, k1 * og))
    r = xp.reshape(xp.matmul(weight, view), (groups, p1, k0, cg, o0, n))
    acc = backend.zeros((groups, p1, cg, p0, n), dtype)
    for k in range(k0):
        start = k * dilation[0]
        target = backend.view(acc, _at, (Ellipsis, slice(start, start + stride[0] * (o0 - 1) + 1, stride[0]),
                                         slice(None)))
        target += backend.view(r, _at, (slice(None), slice(None), k))
    full = xp.reshape(xp.permute_dims(acc, (4, 0, 2, 3, 1)), (n, c, p0, p1))
    key = (slice(None), slice(None)) + tuple(slice(b, b + size) for size, (b, _) in zip(x_shape[2:], pads))
    return backend.copy(backend.view(full, _at, key), "C")


def conv_weight_grad(x: Any, g: Any, w_shape: tuple[int, ...], params: Params, columns: Columns | None = None) -> Any:
    """The adjoint of ``conv`` in ``w``: the gradient times im2col's columns (``columns``, the
    forward's, when it kept them: Note [A convolution keeps its columns] in conv.py), summed over
    samples and positions. Where a sample's ``(Og, Cg * K)`` product is no larger than its columns
    (``Og <= P``), one batched matmul over samples then a sum over them, which reads the
    gradient as it lies; else one matmul per group over the gradient moved to ``(G, Og, N * P)``
    (``_contract``)."""
    stride, pads, dilation, groups = params
    backend = backend_of(x)
    xp = backend.xp
    kernel = w_shape[2:]
    out = g.shape[2:]
    og, cgk, _ = _layout(w_shape, groups)
    n = x.shape[0]
    d = len(kernel)
    positions = math.prod(out)
    layout, cols = conv_columns(x, kernel, params, out) if columns is None else columns
    if layout == "last":  # Note [Channels-last columns]: (N, P, K * C)
        if og <= positions:
            dw = xp.sum(xp.matmul(xp.reshape(g, (n, og, positions)), cols), axis=0)
        else:
            gm = xp.reshape(xp.permute_dims(g, (0,) + tuple(range(2, 2 + d)) + (1,)), (n * positions, og))
            dw = xp.matmul(xp.matrix_transpose(gm), xp.reshape(cols, (n * positions, -1)))
        dw = xp.reshape(dw, (w_shape[0],) + kernel + (w_shape[1],))
        return backend.copy(xp.permute_dims(dw, (0, 1 + d) + tuple(range(1, 1 + d))), "C")
    if layout == "rows" and bool(xp.all(xp.isfinite(x))):  # Note [Whole-row columns]: g zero-padded
        width = x.shape[-1] + pads[-1][0] + pads[-1][1]
        gt = backend.zeros((w_shape[0], n) + out[:-1] + (width,), backend.dtype(g))
        backend.setitem(gt, (Ellipsis, slice(0, out[-1])), xp.permute_dims(g, (1, 0) + tuple(range(2, g.ndim))))
        return xp.reshape(_contract(xp.reshape(gt, (groups, og, -1)), cols), w_shape)
    if layout == "rows":  # a non-finite input: the exact columns (Note [Whole-row columns])
        cols = xp.reshape(windows(pad(x, pads), kernel, stride, dilation, out), (n, groups, cgk, positions))
    if og <= positions:  # the forward's columns, (N, G, Cg * K, P)
        return xp.reshape(xp.sum(xp.matmul(xp.reshape(g, (n, groups, og, positions)), xp.matrix_transpose(cols)),
                                 axis=0), w_shape)
    rows = n * positions
    cols = xp.reshape(xp.permute_dims(cols, (1, 2, 0, 3)), (groups, cgk, rows))  # (G, Cg * K, N * P)
    g2 = xp.reshape(xp.permute_dims(xp.reshape(g, (n, groups, og, positions)), (1, 2, 0, 3)), (groups, og, rows))
    return xp.reshape(_contract(g2, cols), w_shape)


def _contract(g: Any, cols: Any) -> Any:
    """``g (G, Og, R)`` times ``cols (G, Cg * K, R)`` transposed: the weight's gradient, summed over
    the ``R`` (sample, position) pairs. OpenBLAS runs a product whose result has few rows and a
    long inner dim slowly, so the larger of ``Og`` and ``Cg * K`` is made the result's rows (the
    other way round, the small result is transposed after). LeNet's weight gradients: 0.51 ->
    0.46 ms (8 -> 16 channels, 5 x 5) and 0.426 -> 0.380 ms (1 -> 8); a 3 x 3 kernel from 3
    channels to 64 (``Og > Cg * K``) keeps its order: 0.67 ms, 0.72 swapped."""
    xp = backend_of(g).xp
    if g.shape[1] >= cols.shape[1]:
        return xp.matmul(g, xp.matrix_transpose(cols))
    return xp.permute_dims(xp.matmul(cols, xp.matrix_transpose(g)), (0, 2, 1))


def convolution(kind: str, a: Any, b: Any, shape: tuple[int, ...] | None, params: Params) -> Any:
    """One of the three bilinear maps of a convolution (Note [Three convolutions] in conv.py):
    ``"forward"`` conv(x=a, w=b) (cut to ``shape``'s spatial size where one is given), ``"input"``
    its adjoint in x (g=a, w=b, x's ``shape``),
    ``"weight"`` its adjoint in w (x=a, g=b, w's ``shape``)."""
    if kind == "forward":
        y = conv_forward(a, b, params)
        if shape is not None and tuple(y.shape[2:]) != tuple(shape[2:]):
            # the adjoint of a transposed convolution whose output_padding is at least its stride
            # reads trailing windows past the input it came from: those outputs are cut off
            backend = backend_of(y)
            return backend.copy(backend.view(y, _at, (slice(None), slice(None)) + tuple(slice(0, n) for n in
                                                                                        shape[2:])), "C")
        return y
    if kind == "input":
        return conv_input_grad(a, b, shape, params)  # type: ignore[arg-type]
    return conv_weight_grad(a, b, shape, params)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- pooling
PoolInfo = tuple  # (kernel, stride, pads, dilation, x_shape, out, extra): extra is the argmax, divisor or matrices


_PLANES_PER_INPUT = 4
"""Max pooling copies its windows' positions into planes (Note [Max pooling on planes]) when they
hold at most this many times the input's elements (stride below the kernel repeats elements)."""


def max_pool(x: Any, kernel: tuple[int, ...], stride: tuple[int, ...], pads: tuple[tuple[int, int], ...],
             dilation: tuple[int, ...], low: Any) -> tuple[Any, Any, tuple[int, ...]]:
    """Each window's largest value and its position in the window (C order), as torch picks it: the
    first of equal maxima, and in a window holding NaN (the maximum then) the last NaN. Elementwise
    passes over one slice per kernel position (an ``argmax`` over a short axis of an im2col copy
    costs several times more), copied into planes first where that pays (Note [Max pooling on
    planes]): the maxima, then the first position holding each; the padding is ``low``, never
    picked."""
    backend = backend_of(x)
    xp = backend.xp
    xpad = pad(x, pads, low)
    out = tuple(out_size(n, k, s, d, 0, 0) for n, k, s, d in zip(xpad.shape[2:], kernel, stride, dilation))
    parts = [backend.view(xpad, _at, _offset_key(offset, stride, dilation, out))
             for offset in itertools.product(*(range(k) for k in kernel))]
    shape = xpad.shape[:2] + out
    if 1 < len(parts) and len(parts) * math.prod(shape) <= _PLANES_PER_INPUT * math.prod(x.shape):
        # Note [Max pooling on planes]: a kernel position's slice steps through the input by the
        # stride, and numpy's elementwise loops run vectorised only over contiguous operands; the
        # passes below read every slice about three times (its maximum, its comparison, NaN's
        # search), so each slice is copied once into a contiguous plane, in one strided pass, and
        # every pass after that is contiguous. The planes are the same values in the same order,
        # so the maxima and positions are the slices' own.
        planes = backend.empty((len(parts),) + shape, backend.dtype(xpad))
        for index, part in enumerate(parts):
            backend.setitem(planes, index, part)
        parts = [backend.view(planes, _at, index) for index in range(len(parts))]
    best = xp.maximum(parts[0], parts[1]) if len(parts) > 1 else backend.copy(parts[0], "C")
    for part in parts[2:]:
        best = xp.maximum(best, part)  # propagates NaN, as torch's maximum does
    # the first position holding the maximum = how many positions before it do not (each one
    # counts while no position up to it equals the maximum); counted branchlessly (a ``where`` per
    # position mispredicts: Note [Branchless zero_where]), in int8 where the window's positions
    # fit (an eighth of int64's memory traffic, in every pass here and in the backward's
    # comparisons; ``max_pool2d`` widens it for ``return_indices``)
    arg_dtype = np.dtype(np.int8 if len(parts) <= 127 else np.int64)
    if len(parts) == 1:
        arg = backend.zeros(best.shape, arg_dtype)
    else:
        before = xp.not_equal(parts[0], best)
        arg = backend.astype(before, arg_dtype, copy=True)
        for part in parts[1:-1]:
            before = xp.logical_and(before, xp.not_equal(part, best))
            arg += backend.astype(before, arg_dtype)
    if backend.dtype(x).kind == "f" and backend.any_nan(best):
        for index, part in enumerate(parts):
            arg = xp.where(xp.isnan(part), backend.full((), index, arg_dtype), arg)
    return best, arg, out


def pool(kind: str, a: Any, info: PoolInfo) -> Any:
    """The linear maps of pooling (Note [Pooling's linear maps] in pooling.py), on raw arrays."""
    backend = backend_of(a)
    xp = backend.xp
    if a.ndim == 1 + len(info[0]):  # an unbatched (C, *spatial) tensor: one sample
        batched = _pool(kind, xp.reshape(a, (1,) + a.shape), info)
        return xp.reshape(batched, batched.shape[1:])
    return _pool(kind, a, info)


def _scatter_disjoint(g: Any, arg: Any, x_shape: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
                      dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...], out: tuple[int, ...]) -> Any:
    """Max pooling's gradient where windows do not overlap: each window's gradient stored at its
    argmax, one indexed store of the whole gradient into the flat (padded) input.

    Note [Max-pool scatter by flat index]: the window at output ``o`` starts at
    ``sum_j o_j * s_j * P_j`` in its plane (``P_j`` the padded plane's C-order strides), and its
    C-order position ``a`` is ``sum_j r_j * d_j * P_j`` further, ``r_j`` the digits of ``a`` in
    the kernel's radix. With ``q_j = a // prod(k[j + 1:])`` (so ``r_j = q_j - k_j * q_{j - 1}``)
    that is ``sum_j q_j * e_j``, ``e_j = d_j P_j - k_{j + 1} d_{j + 1} P_{j + 1}``: one multiply
    and add per dim, in int32 where the input's elements fit (numpy's int64 multiply is far
    slower), widened for the store (numpy stores through int32 indices at a third of the speed
    of int64's). Distinct windows never share an element, so a plain store is exact (inf and NaN
    included) and nothing adds up; it replaces one masked store per kernel position into strided
    slabs (``fold_slabs``), which overlapping windows still take."""
    backend = backend_of(g)
    xp = backend.xp
    d = len(kernel)
    padded = tuple(n + b + a for n, (b, a) in zip(x_shape[2:], pads))
    plane = math.prod(padded)
    total = x_shape[0] * x_shape[1] * plane
    int64 = np.dtype(np.int64)
    index_dtype = np.dtype(np.int32) if total < 2 ** 31 else int64
    strides = [math.prod(padded[j + 1:]) for j in range(d)]
    scaled = [dl * st for dl, st in zip(dilation, strides)]
    position = backend.astype(arg, index_dtype)
    index = position * scaled[-1]
    for j in range(d - 1):
        q = position // math.prod(kernel[j + 1:])
        q *= scaled[j] - kernel[j + 1] * scaled[j + 1]
        index += q
    starts = backend.zeros(out, index_dtype)  # where each window starts in its plane: a small (*out) grid
    for j in range(d):
        starts = starts + xp.reshape(backend.arange(out[j], index_dtype) * (stride[j] * strides[j]),
                                     (out[j],) + (1,) * (d - 1 - j))
    index += starts
    index += xp.reshape(backend.arange(x_shape[0] * x_shape[1], index_dtype) * plane, x_shape[:2] + (1,) * d)
    index = backend.astype(index, int64)  # numpy indexes with int32 arrays at a third of int64's speed
    acc = backend.zeros((total,), backend.dtype(g))
    backend.setitem(acc, xp.reshape(index, (-1,)), xp.reshape(g, (-1,)))
    return crop(xp.reshape(acc, x_shape[:2] + padded), x_shape, pads)


def _pool(kind: str, a: Any, info: PoolInfo) -> Any:
    kernel, stride, pads, dilation, x_shape, out, extra = info
    backend = backend_of(a)
    xp = backend.xp
    if kind == "max_scatter":      # a: (N, C, *out) gradient -> each window's argmax position
        if all(s >= d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation)):  # windows do not overlap
            return _scatter_disjoint(a, extra, x_shape, kernel, stride, dilation, pads, out)
        return fold_slabs(lambda index, offset: backend.zero_where(extra != index, a), a, x_shape, kernel, stride,
                          dilation, pads, out)  # Note [Branchless zero_where] in devices/backend.py
    if kind == "max_gather":       # a: input-shaped -> the value at each window's argmax position
        apad = pad(a, pads)
        result = backend.zeros(x_shape[:2] + out, backend.dtype(a))
        for index, offset in enumerate(itertools.product(*(range(k) for k in kernel))):
            part = backend.view(apad, _at, _offset_key(offset, stride, dilation, out))
            result = xp.where(extra == index, part, result)
        return result
    if kind == "avg_forward":      # a: the input -> window sums / divisor
        apad = pad(a, pads)
        axes = tuple(range(2, 2 + len(kernel)))
        return xp.sum(windows(apad, kernel, stride, dilation, out), axis=axes) / extra
    if kind == "avg_backward":     # a: (N, C, *out) gradient -> spread evenly over each window
        share = a / extra
        return fold_slabs(lambda index, offset: share, a, x_shape, kernel, stride, dilation, pads, out)
    if len(extra) != 2:            # adaptive average in 1 or 3 dims: one averaging matrix per dim
        return _mode_products(a, extra, kind == "adaptive_forward")
    rows, cols = extra             # adaptive average: y = rows @ x @ cols.T, and its adjoint
    if kind == "adaptive_forward":
        return xp.matmul(rows, xp.matmul(a, xp.matrix_transpose(cols)))
    return xp.matmul(xp.matrix_transpose(rows), xp.matmul(a, cols))


def _mode_products(a: Any, matrices: tuple, forward: bool) -> Any:
    """``a`` ``(N, C, *spatial)`` times one matrix per spatial dim ``j`` (``(out_j, in_j)``; its
    transpose for the adjoint, ``forward=False``): the dim moved last, a matmul, moved back."""
    xp = backend_of(a).xp
    nd = a.ndim
    for j, m in enumerate(matrices):
        axis = 2 + j
        order = tuple(i for i in range(nd) if i != axis) + (axis,)
        moved = xp.permute_dims(a, order)
        moved = xp.matmul(moved, xp.matrix_transpose(m) if forward else m)
        back = [0] * nd
        for position, i in enumerate(order):
            back[i] = position
        a = xp.permute_dims(moved, tuple(back))
    return a
