"""Pooling: ``max_pool1d/2d``, ``avg_pool1d/2d``, ``adaptive_avg_pool2d`` on sliding windows."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import SavesVariables, plain, record
from asyncgrad.ops.indexing import gather
from asyncgrad.ops.shape import squeeze, unsqueeze
from asyncgrad.ops.windows import max_pool, pool
from asyncgrad.tensor import Tensor

# Note [Pooling's linear maps]: for fixed windows (and, for max pooling, a fixed choice of each
# window's largest element) pooling is linear in its input, and so is its gradient. Each pooling
# is a pair of maps, adjoint to one another, on raw arrays in ``windows.pool``:
#
# * max: ``max_gather`` (the value at each window's argmax) and ``max_scatter`` (a gradient sent
#   back to those positions; overlapping windows add up);
# * average: ``avg_forward`` (window sums over the divisor) and ``avg_backward``;
# * adaptive average: ``adaptive_forward`` (``rows @ x @ cols.T``, averaging matrices) and
#   ``adaptive_backward``.
#
# One node class per map records it, and its formula is the adjoint map through ``F.pool``, so
# ``create_graph=True`` records the backward as the adjoint op and higher orders follow. Node
# names are torch's (``MaxPool2DWithIndicesBackward0``, its backward's
# ``MaxPool2DWithIndicesBackwardBackward0``...). The 1-D poolings run the 2-D ones on an
# unsqueezed input, as torch does (their node is then the squeeze's, as torch's is).


_ADJOINT = {"max_gather": "max_scatter", "max_scatter": "max_gather", "avg_forward": "avg_backward",
            "avg_backward": "avg_forward", "adaptive_forward": "adaptive_backward",
            "adaptive_backward": "adaptive_forward"}


class _Pool(SavesVariables):
    """One of pooling's linear maps (Note [Pooling's linear maps]); ``info`` holds the windows and
    the argmax, divisor or averaging matrices, which torch keeps as saved variables."""

    __slots__ = ("kind", "info")

    def backward(self, F, g):
        return (F.pool(_ADJOINT[self.kind], g, self.info),)


class MaxPool2DWithIndicesBackward0(_Pool):
    __slots__ = ()


class MaxPool2DWithIndicesBackwardBackward0(_Pool):
    __slots__ = ()


class AvgPool2DBackward0(_Pool):
    __slots__ = ()


class AvgPool2DBackwardBackward0(_Pool):
    __slots__ = ()


class AdaptiveAvgPool2DBackward0(_Pool):
    __slots__ = ()


class AdaptiveAvgPool2DBackwardBackward0(_Pool):
    __slots__ = ()


class MaxPool3DWithIndicesBackward0(_Pool):
    __slots__ = ()


class MaxPool3DWithIndicesBackwardBackward0(_Pool):
    __slots__ = ()


class AvgPool3DBackward0(_Pool):
    __slots__ = ()


class AvgPool3DBackwardBackward0(_Pool):
    __slots__ = ()


class AdaptiveAvgPool3DBackward0(_Pool):
    __slots__ = ()


class AdaptiveAvgPool3DBackwardBackward0(_Pool):
    __slots__ = ()


_NODES = {("max_gather", 2): MaxPool2DWithIndicesBackward0, ("max_scatter", 2): MaxPool2DWithIndicesBackwardBackward0,
          ("avg_forward", 2): AvgPool2DBackward0, ("avg_backward", 2): AvgPool2DBackwardBackward0,
          ("adaptive_forward", 2): AdaptiveAvgPool2DBackward0,
          ("adaptive_backward", 2): AdaptiveAvgPool2DBackwardBackward0,
          ("max_gather", 3): MaxPool3DWithIndicesBackward0, ("max_scatter", 3): MaxPool3DWithIndicesBackwardBackward0,
          ("avg_forward", 3): AvgPool3DBackward0, ("avg_backward", 3): AvgPool3DBackwardBackward0,
          ("adaptive_forward", 3): AdaptiveAvgPool3DBackward0,
          ("adaptive_backward", 3): AdaptiveAvgPool3DBackwardBackward0}
"""Each map's node, by the number of spatial dims (torch names the 2-D and 3-D poolings apart)."""


def _work(info: tuple) -> int:
    kernel, _, _, _, x_shape, out, _ = info
    return 2 * x_shape[0] * x_shape[1] * math.prod(out) * math.prod(kernel) + math.prod(x_shape)


def pool_op(kind: str, a: Tensor, info: tuple) -> Tensor:
    """``TensorMath.pool``: one of pooling's maps as a recorded op."""
    return record(_NODES[kind, len(info[0])], (a,), pool(kind, a.data, info), a.device, kind, info,
                  work=_work(info))


_PAIR_WORDS = {"kernel_size": "must either be a single int", "stride": "must either be omitted, a single int",
               "padding": "must either be a single int", "dilation": "must be either a single int"}
"""How torch's max_pool2d/avg_pool2d word a size that is not one int or two (dilation's word order is its own)."""


def _pair(value: Any, name: str, fn: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    items = tuple(value)
    if len(items) == 1:
        return (items[0], items[0])
    if len(items) != 2:
        raise RuntimeError(f"{fn}: {name} {_PAIR_WORDS[name]}, or a tuple of two ints")
    return items  # type: ignore[return-value]


def _windows_of(fn: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                ceil_mode: bool) -> tuple:
    """Checks (torch's words) and the window layout: kernel, stride, pads (the padding, plus what
    ceil_mode adds after), dilation, the batched input shape, the output size."""
    if input.ndim not in (3, 4) or any(n == 0 for n in input.shape[-3:]):  # a batch of 0 is allowed
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    kernel = _pair(kernel_size, "kernel_size", fn)
    omitted = stride is None or (not isinstance(stride, int) and len(stride) == 0)
    step = kernel if omitted else _pair(stride, "stride", fn)
    pads = _pair(padding, "padding", fn)
    dil = _pair(dilation, "dilation", fn)
    if any(s == 0 for s in step):
        raise RuntimeError("stride should not be zero")
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    for p, k, d in zip(pads, kernel, dil):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    shape = input.shape if input.ndim == 4 else (1,) + input.shape
    out = []
    extra = []
    for n, k, s, p, d in zip(shape[2:], kernel, step, pads, dil):
        span = n + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    if any(o <= 0 for o in out):
        c = shape[1]
        raise RuntimeError(f"Given input size: ({c}x{shape[2]}x{shape[3]}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}). Output size is too small")
    return kernel, step, tuple((p, p + e) for p, e in zip(pads, extra)), dil, shape, tuple(out)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """torch.nn.functional.max_pool2d; ``return_indices`` gives each maximum's flat position in
    its input plane (int64), as torch does, for ``max_unpool2d``-style uses."""
    tensor_arg(input, "max_pool2d", "input", 1)
    kernel, step, pads, dil, shape, out = _windows_of("max_pool2d", input, kernel_size, stride, padding, dilation,
                                                      ceil_mode)
    dev = input.device
    backend = dev.backend
    xp = dev.xp
    dtype = input.dtype
    low = -math.inf if dtype.kind == "f" else int(np.iinfo(dtype).min) if dtype.kind in "iu" else False
    x = input.data if input.ndim == 4 else xp.reshape(input.data, shape)
    values, arg, _ = max_pool(x, kernel, step, pads, dil, low)
    info = (kernel, step, pads, dil, shape, out, arg)
    if input.ndim == 3:
        values = xp.reshape(values, values.shape[1:])
    result = record(MaxPool2DWithIndicesBackward0, (input,), values, dev, "max_gather", info, work=_work(info))
    if not return_indices:
        return result
    rows = xp.reshape(backend.arange(out[0], np.int64), (-1, 1)) * step[0] - pads[0][0]
    cols = xp.reshape(backend.arange(out[1], np.int64), (1, -1)) * step[1] - pads[1][0]
    arg = backend.astype(arg, np.dtype(np.int64))  # max_pool's may be int8
    at = (rows + (arg // kernel[1]) * dil[0]) * shape[3] + cols + (arg % kernel[1]) * dil[1]
    return result, plain(at if input.ndim == 4 else xp.reshape(at, at.shape[1:]), dev)


def _divisor(shape: tuple, kernel: tuple, step: tuple, pads: tuple, out: tuple, count_include_pad: bool,
             divisor_override: int | None, dev: Any) -> Any:
    """torch's divisor of each window: its elements inside the padded input (``count_include_pad``)
    or inside the input itself; ceil_mode's extra windows count only what they overlap."""
    if divisor_override is not None:
        return divisor_override
    counts = []
    for n, k, s, (p, _), o in zip(shape[2:], kernel, step, pads, out):
        dim = []
        for i in range(o):
            start = i * s - p
            end = min(start + k, n + p)
            dim.append(end - start if count_include_pad else min(end, n) - max(start, 0))
        counts.append(dim)
    table = [[float(a * b) for b in counts[1]] for a in counts[0]]
    return dev.backend.from_host(table, dtype=None)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """torch.nn.functional.avg_pool2d (torch's divisor rules, ``_divisor``)."""
    tensor_arg(input, "avg_pool2d", "input", 1)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    kernel, step, pads, dil, shape, out = _windows_of("avg_pool2d", input, kernel_size, stride, padding, 1,
                                                      ceil_mode)
    dev = input.device
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"avg_pool2d" not implemented for \'{input.dtype.name.capitalize()}\'')
    divisor = _divisor(shape, kernel, step, pads, out, count_include_pad, divisor_override, dev)
    if not isinstance(divisor, int):
        divisor = dev.backend.astype(divisor, input.dtype)
    info = (kernel, step, pads, dil, shape, out, divisor)
    return record(AvgPool2DBackward0, (input,), pool("avg_forward", input.data, info), dev, "avg_forward", info,
                  work=_work(info))


def _averaging(n: int, o: int, dtype: Any, dev: Any) -> Any:
    """The (o, n) matrix averaging torch's adaptive windows [floor(i n / o), ceil((i + 1) n / o))."""
    rows = []
    for i in range(o):
        start, end = (i * n) // o, -(-((i + 1) * n) // o)
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(n)])
    return dev.backend.from_host(rows, dtype=dtype)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d: ``output_size`` an int or a pair (None keeps a size)."""
    tensor_arg(input, "adaptive_avg_pool2d", "input", 1)
    if input.ndim not in (3, 4):
        raise ValueError(f"Input dimension should be at least 3, got {input.ndim}" if input.ndim < 3 else
                         f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    size = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(size) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be 2, but got {len(size)}")
    h, w = input.shape[-2:]
    oh, ow = (h if size[0] is None else size[0]), (w if size[1] is None else size[1])
    dev = input.device
    shape = input.shape if input.ndim == 4 else (1,) + input.shape
    info = ((1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), shape, (oh, ow),
            (_averaging(h, oh, input.dtype, dev), _averaging(w, ow, input.dtype, dev)))
    return record(AdaptiveAvgPool2DBackward0, (input,), pool("adaptive_forward", input.data, info), dev,
                  "adaptive_forward", info, work=2 * math.prod(shape[:2]) * (h * w * ow + h * ow * oh) // 16)


_SINGLE_WORDS = {"kernel_size": "must be an int, list of ints or tuple of ints",
                 "stride": "must be None, an int, list of ints, or tuple of ints",
                 "padding": "must be an int, list of ints, or tuple of ints",
                 "dilation": "must be an int, list of ints or tuple of ints"}
"""How torch's max_pool1d words a size that is not one int (avg_pool1d's argument parser words it alike for all)."""


def _single(value: Any, arg: str, fn: str) -> int:
    """A 1-D pooling's size argument: an int, or a sequence of exactly one (torch's errors otherwise)."""
    if isinstance(value, int):
        return value
    items = tuple(value)
    if len(items) != 1:
        if fn == "avg_pool1d":
            raise RuntimeError(f"avg_pool1d() argument '{arg}' should contain one int (got {len(items)})")
        raise RuntimeError(f"{fn}() {arg} {_SINGLE_WORDS[arg]} of size 1 but got size {len(items)}")
    return items[0]


def _one_d(fn: Any, input: Tensor, name: str, kernel_size: Any, stride: Any, padding: Any, *rest: Any) -> Any:
    """A 1-D pooling as torch runs it: the 2-D one on ``input.unsqueeze(-2)``, then squeezed."""
    tensor_arg(input, name, "input", 1)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{name}() Expected 2D or 3D input tensor, but got {list(input.shape)}")
    kernel = _single(kernel_size, "kernel_size", name)
    omitted = stride is None or (not isinstance(stride, int) and len(stride) == 0)
    step = None if omitted else (1, _single(stride, "stride", name))
    result = fn(unsqueeze(input, -2), (1, kernel), step, (0, _single(padding, "padding", name)), *rest)
    if isinstance(result, tuple):
        return squeeze(result[0], -2), squeeze(result[1], -2)
    return squeeze(result, -2)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """torch.nn.functional.max_pool1d on ``(N, C, L)`` or ``(C, L)``."""
    dil = _single(dilation, "dilation", "max_pool1d")
    return _one_d(max_pool2d, input, "max_pool1d", kernel_size, stride, padding, (1, dil), ceil_mode, return_indices)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """torch.nn.functional.avg_pool1d on ``(N, C, L)`` or ``(C, L)``."""
    return _one_d(avg_pool2d, input, "avg_pool1d", kernel_size, stride, padding, ceil_mode, count_include_pad)


# --------------------------------------------------------------------------- 3-D and adaptive poolings
def _ntuple(value: Any, d: int, name: str, fn: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * d
    items = tuple(value)
    if len(items) == 1:
        return items * d
    if len(items) != d:
        raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of {d} ints")
    return items


def _windows_3d(fn: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                ceil_mode: bool) -> tuple:
    """``_windows_of`` for three spatial dims (torch's words for 3-D poolings)."""
    if input.ndim not in (4, 5) or any(n == 0 for n in input.shape[-4:]):  # a batch of 0 is allowed
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    kernel = _ntuple(kernel_size, 3, "kernel_size", fn)
    omitted = stride is None or (not isinstance(stride, int) and len(stride) == 0)
    step = kernel if omitted else _ntuple(stride, 3, "stride", fn)
    pads = _ntuple(padding, 3, "padding", fn)
    dil = _ntuple(dilation, 3, "dilation", fn)
    if any(s == 0 for s in step):
        raise RuntimeError("stride should not be zero")
    for p, k, d in zip(pads, kernel, dil):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    shape = input.shape if input.ndim == 5 else (1,) + input.shape
    out, extra = [], []
    for n, k, s, p, d in zip(shape[2:], kernel, step, pads, dil):
        span = n + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    if any(o <= 0 for o in out):
        t, h, w = shape[2:]
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size (kT: {kernel[0]} "
                           f"kH: {kernel[1]} kW: {kernel[2]})")
    return kernel, step, tuple((p, p + e) for p, e in zip(pads, extra)), dil, shape, tuple(out)


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """torch.nn.functional.max_pool3d on ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (the 2-D one's maps
    over three dims: Note [Pooling's linear maps])."""
    tensor_arg(input, "max_pool3d", "input", 1)
    kernel, step, pads, dil, shape, out = _windows_3d("max_pool3d", input, kernel_size, stride, padding, dilation,
                                                      ceil_mode)
    dev = input.device
    xp = dev.xp
    dtype = input.dtype
    low = -math.inf if dtype.kind == "f" else int(np.iinfo(dtype).min) if dtype.kind in "iu" else False
    x = input.data if input.ndim == 5 else xp.reshape(input.data, shape)
    values, arg, _ = max_pool(x, kernel, step, pads, dil, low)
    info = (kernel, step, pads, dil, shape, out, arg)
    if input.ndim == 4:
        values = xp.reshape(values, values.shape[1:])
    result = record(MaxPool3DWithIndicesBackward0, (input,), values, dev, "max_gather", info, work=_work(info))
    if not return_indices:
        return result
    at = _flat_positions(dev, arg, kernel, step, pads, dil, shape, out)
    return result, plain(at if input.ndim == 5 else xp.reshape(at, at.shape[1:]), dev)


def _flat_positions(dev: Any, arg: Any, kernel: tuple, step: tuple, pads: tuple, dil: tuple, shape: tuple,
                    out: tuple) -> Any:
    """Each window's argmax (its C-order position in the window) as a flat index into its input
    plane or volume, int64, as torch's ``return_indices`` gives it."""
    backend = dev.backend
    xp = dev.xp
    d = len(kernel)
    arg = backend.astype(arg, np.dtype(np.int64))
    at = None
    for j in range(d):
        digit = (arg // math.prod(kernel[j + 1:])) % kernel[j]
        start = xp.reshape(backend.arange(out[j], np.int64), (out[j],) + (1,) * (d - 1 - j)) * step[j] - pads[j][0]
        coordinate = start + digit * dil[j]
        at = coordinate if at is None else at * shape[2 + j] + coordinate
    return at


def _divisor_nd(shape: tuple, kernel: tuple, step: tuple, pads: tuple, out: tuple, count_include_pad: bool,
                divisor_override: int | None, dev: Any, dtype: Any) -> Any:
    """``_divisor`` over any number of spatial dims: the product of each dim's window counts."""
    if divisor_override is not None:
        return divisor_override
    table: Any = 1.0
    for n, k, s, (p, _), o in zip(shape[2:], kernel, step, pads, out):
        counts = []
        for i in range(o):
            start = i * s - p
            end = min(start + k, n + p)
            counts.append(float(end - start if count_include_pad else min(end, n) - max(start, 0)))
        table = _outer(table, counts)
    return dev.asarray(table, dtype=dtype)


def _outer(table: Any, counts: list[float]) -> Any:
    """The nested list ``table[..., i] * counts[i]`` (an outer product of host numbers)."""
    if isinstance(table, float):
        return [table * c for c in counts]
    return [_outer(row, counts) for row in table]


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """torch.nn.functional.avg_pool3d (torch's divisor rules)."""
    tensor_arg(input, "avg_pool3d", "input", 1)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    kernel, step, pads, dil, shape, out = _windows_3d("avg_pool3d", input, kernel_size, stride, padding, 1,
                                                      ceil_mode)
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"avg_pool3d_out_frame" not implemented for \'{input.dtype.name.capitalize()}\'')
    dev = input.device
    divisor = _divisor_nd(shape, kernel, step, pads, out, count_include_pad, divisor_override, dev, input.dtype)
    info = (kernel, step, pads, dil, shape, out, divisor)
    return record(AvgPool3DBackward0, (input,), pool("avg_forward", input.data, info), dev, "avg_forward", info,
                  work=_work(info))


def _adaptive_sizes(fn: str, input: Tensor, output_size: Any, d: int) -> tuple[int, ...]:
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"{fn}(): Expected {d + 1}D or {d + 2}D tensor, but got "
                           f"{'' if fn.startswith('adaptive_max') else ''}{list(input.shape)}"
                           if not fn.startswith("adaptive_max") else
                           f"{fn}(): Expected {d + 1}D or {d + 2}D tensor, but got: {list(input.shape)}")
    size = (output_size,) * d if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(size) != d:
        raise ValueError(f"{fn}: output_size must be {d}, but got {len(size)}" if fn.endswith("2d") else
                         f"Input to {fn} must have {d} elements, but got {len(size)}")
    spatial = input.shape[-d:]
    return tuple(n if o is None else o for n, o in zip(spatial, size))


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool3d: an averaging matrix per spatial dim."""
    tensor_arg(input, "adaptive_avg_pool3d", "input", 1)
    sizes = _adaptive_sizes("adaptive_avg_pool3d", input, output_size, 3)
    dev = input.device
    shape = input.shape if input.ndim == 5 else (1,) + input.shape
    mats = tuple(_averaging(n, o, input.dtype, dev) for n, o in zip(shape[2:], sizes))
    info = ((1, 1, 1), (1, 1, 1), ((0, 0),) * 3, (1, 1, 1), shape, sizes, mats)
    return record(AdaptiveAvgPool3DBackward0, (input,), pool("adaptive_forward", input.data, info), dev,
                  "adaptive_forward", info, work=2 * math.prod(input.shape) * max(sizes) // 16 + 1)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool1d: the 2-D one on ``input.unsqueeze(-2)``, as torch runs it."""
    tensor_arg(input, "adaptive_avg_pool1d", "input", 1)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d() argument 'input' should have 2 or 3 dimensions, got "
                           f"{input.ndim}")
    size = output_size if isinstance(output_size, int) else _single(output_size, "output_size", "adaptive_avg_pool1d")
    return squeeze(adaptive_avg_pool2d(unsqueeze(input, -2), (1, size)), -2)


def _adaptive_max(fn: str, input: Tensor, output_size: Any, d: int, return_indices: bool) -> Any:
    """Adaptive max pooling: window ``i`` of a dim of ``n`` is ``[floor(i n / o), ceil((i + 1) n / o))``;
    each window's first largest element (NaN wins, as in max pooling) is found on the arrays, and
    the result gathers it from the flattened input (``gather``'s node, whose gradient adds back at
    those positions and whose own gradient is that gather again)."""
    tensor_arg(input, fn, "input", 1)
    sizes = _adaptive_sizes(fn, input, output_size, d)
    dev = input.device
    xp = dev.xp
    backend = dev.backend
    batched = input.ndim == d + 2
    shape = input.shape if batched else (1,) + input.shape
    if any(n == 0 for n in shape[2:]) or any(o == 0 for o in sizes) and math.prod(shape) == 0:
        raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch dimensions, but input has "
                           f"sizes {list(input.shape)} with dimension {input.ndim - d} being empty")
    x = xp.reshape(input.data, shape)
    spatial = shape[2:]
    # every (output, tap) pair's flat position in the plane: window i of a dim of n is
    # [floor(i n / o), ceil((i + 1) n / o)); short windows repeat their last position (a repeat never
    # changes a maximum), so every window has the longest one's taps
    windows_per_dim = []
    for n, o in zip(spatial, sizes):
        bounds = [((i * n) // o, -(-((i + 1) * n) // o)) for i in range(o)]
        width = max(max((e - s for s, e in bounds), default=1), 1)
        windows_per_dim.append([[min(s + k, e - 1) for k in range(width)] for s, e in bounds])
    strides = [math.prod(spatial[j + 1:]) for j in range(d)]
    positions = []
    for outs in itertools.product(*(range(o) for o in sizes)):
        for taps in itertools.product(*(windows_per_dim[j][i] for j, i in enumerate(outs))):
            positions.append(sum(t * st for t, st in zip(taps, strides)))
    count = math.prod(len(w[0]) for w in windows_per_dim) if all(sizes) else 1
    index = xp.reshape(dev.asarray(positions, dtype=np.dtype(np.int64)), tuple(sizes) + (count,))
    plane = xp.reshape(x, shape[:2] + (-1,))
    picked = backend.getitem(plane, (slice(None), slice(None), index))  # (N, C, *out, taps)
    best = xp.max(picked, axis=-1, keepdims=True)
    hit = picked == best
    if input.dtype.kind == "f":
        hit = xp.logical_or(hit, xp.isnan(picked))
    first = xp.argmax(backend.astype(hit, np.dtype(np.int8)), axis=-1)  # the first hit: torch's pick
    where_flat = xp.reshape(index, (1, 1) + index.shape)
    chosen = xp.take_along_axis(xp.broadcast_to(where_flat, picked.shape), xp.reshape(first, first.shape + (1,)),
                                axis=-1)
    at = xp.reshape(chosen, shape[:2] + tuple(sizes))
    flat_input = input.reshape(*(input.shape[:-d] + (-1,)))
    gathered = gather(flat_input, flat_input.ndim - 1, plain(at if batched else xp.reshape(at, at.shape[1:]), dev)
                      .reshape(*(input.shape[:-d] + (-1,))))
    result = gathered.reshape(*(input.shape[:-d] + tuple(sizes)))
    if return_indices:
        return result, plain(at if batched else xp.reshape(at, at.shape[1:]), dev)
    return result


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """torch.nn.functional.adaptive_max_pool1d on ``(N, C, L)`` or ``(C, L)``."""
    tensor_arg(input, "adaptive_max_pool1d", "input", 1)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d() argument 'input' should have 2 or 3 dimensions, got {input.ndim}")
    size = output_size if isinstance(output_size, int) else _single(output_size, "output_size", "adaptive_max_pool1d")
    return _adaptive_max("adaptive_max_pool1d", input, (size,), 1, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """torch.nn.functional.adaptive_max_pool2d: ``output_size`` an int or a pair (None keeps a size)."""
    return _adaptive_max("adaptive_max_pool2d", input, output_size, 2, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """torch.nn.functional.adaptive_max_pool3d."""
    return _adaptive_max("adaptive_max_pool3d", input, output_size, 3, return_indices)
