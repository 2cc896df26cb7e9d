"""``pad``, ``interpolate`` and ``one_hot``, written with asyncgrad's differentiable ops.

Each is a composition: constant padding writes the input into a filled tensor (its gradient is
the slice it was written to), reflect/replicate/circular padding and nearest/bilinear resizing
gather rows and columns by integer indices (their gradients add back at those indices, repeats
included). So gradients of every order come from the ops' own formulas; the nodes are those
ops' (``IndexPutBackward0``, ``IndexBackward0``, ...), not torch's fused ``ConstantPadNdBackward0``
or ``UpsampleBilinear2DBackward0``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.factories import arange, full, tensor
from asyncgrad.ops.indexing import index_put
from asyncgrad.ops.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from asyncgrad.tensor import Tensor


def _index(values: Sequence[int], like: Tensor) -> Tensor:
    return tensor(np.asarray(values, dtype=np.int64), device=like.device)


def _gather(x: Tensor, dim: int, index: Sequence[int]) -> Tensor:
    """``x`` indexed along ``dim`` by ``index`` (an advanced index: gradients add back)."""
    return x[(slice(None),) * dim + (_index(index, x),)]


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """torch.nn.functional.pad: ``pad`` is (before, after) pairs from the last dim backwards;
    negative amounts crop (constant mode)."""
    tensor_arg(input, "pad", "input", 1)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]  # last dim first
    if mode == "constant":
        x = input
        for i, (before, after) in enumerate(pairs):  # crop first where an amount is negative
            dim = input.ndim - 1 - i
            if before < 0 or after < 0:
                n = x.shape[dim]
                x = x[(slice(None),) * dim + (slice(max(0, -before), n - max(0, -after)),)]
        shape = list(x.shape)
        key: list[Any] = [slice(None)] * x.ndim
        for i, (before, after) in enumerate(pairs):
            dim = input.ndim - 1 - i
            shape[dim] = x.shape[dim] + max(0, before) + max(0, after)
            key[dim] = slice(max(0, before), max(0, before) + x.shape[dim])
        out = full(tuple(shape), 0.0 if value is None else value, dtype=input.dtype, device=input.device)
        return index_put(out, tuple(key), x)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    dims = len(pairs)
    if input.ndim not in (dims + 1, dims + 2) or dims > 3:
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.")
    # Note [Circular padding crops first]: as torch's ``_pad_circular``, a negative amount crops that
    # side first and the other side's padding wraps around what is left, so ``(-1, 1)`` of
    # ``[a, b, c]`` is ``[b, c, b]``, never the uncropped input's ``[b, c, a]``.
    x = input
    for i, (before, after) in enumerate(pairs):
        dim = input.ndim - 1 - i
        n = x.shape[dim]
        if mode == "reflect" and (before >= n or after >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({before}, {after}) at dimension {dim} of input {list(x.shape)}")
        if mode == "circular":  # Note [Circular padding crops first]
            if before < 0 or after < 0:
                x = x[(slice(None),) * dim + (slice(max(0, -before), n - max(0, -after)),)]
                n = x.shape[dim]
                before, after = max(0, before), max(0, after)
            if before > n or after > n:
                raise RuntimeError("Padding value causes wrapping around more than once.")
        positions = range(-before, n + after)
        if mode == "reflect":
            index = [abs(p) if p < n else 2 * (n - 1) - p for p in positions]
        elif mode == "replicate":
            index = [min(max(p, 0), n - 1) for p in positions]
        else:
            index = [p % n for p in positions]
        x = _gather(x, dim, index)
    return x


def _source(out: int, size: int, scale: float | None, align_corners: bool | None, mode: str) -> list[float]:
    """Each output position's source coordinate along one dim, by torch's rules (``nearest``: the
    floor of ``i / scale``; ``nearest-exact``: of its pixel centre; the interpolating modes: the
    centre's position, clamped at 0 except for bicubic, or the corners' grid with align_corners)."""
    step = 1.0 / scale if scale else size / out
    if mode == "nearest":
        return [min(math.floor(i * step), size - 1) for i in range(out)]
    if mode == "nearest-exact":
        return [min(math.floor((i + 0.5) * step), size - 1) for i in range(out)]
    if align_corners:
        step = (size - 1) / (out - 1) if out > 1 else 0.0
        return [i * step for i in range(out)]
    if mode == "bicubic":
        return [(i + 0.5) * step - 0.5 for i in range(out)]
    return [max((i + 0.5) * step - 0.5, 0.0) for i in range(out)]


_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
"""The interpolating modes and the one number of spatial dims each takes."""

_CUBIC_A = -0.75
"""The cubic convolution's coefficient torch's bicubic mode uses."""


def _cubic_weights(t: float) -> list[float]:
    """The four taps' weights at fraction ``t`` past the second tap (Keys' cubic convolution)."""
    a = _CUBIC_A

    def near(x: float) -> float:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: float) -> float:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """torch.nn.functional.interpolate: ``nearest`` and ``nearest-exact`` (1-D to 3-D), ``linear``,
    ``bilinear``, ``trilinear`` and ``bicubic`` (separable, one dim at a time, ``align_corners`` as
    torch), ``area`` (adaptive average pooling)."""
    tensor_arg(input, "interpolate", "input", 1)
    dims = input.ndim - 2
    modes = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    if mode not in modes:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if mode in _DIMS and dims != _DIMS[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_DIMS[mode] + 2}D input")
    if not 1 <= dims <= 3:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported by asyncgrad")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if mode in _DIMS and align_corners is None:
        align_corners = False
    spatial = input.shape[2:]
    if size is not None:
        sizes = [size] * dims if isinstance(size, int) else list(size)
        if len(sizes) != dims:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(spatial)} and output size of {sizes}. Please provide "
                             "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                             "format.")
        scales: list[float | None] = [None] * dims
    else:
        scales = [float(scale_factor)] * dims if isinstance(scale_factor, (int, float)) else \
            [float(s) for s in scale_factor]
        sizes = [math.floor(n * s) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = [None] * dims
    if mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dims - 1]
        return pool(input, sizes[0] if dims == 1 else tuple(sizes))
    x = input
    for i in range(dims):
        dim = 2 + i
        src = _source(sizes[i], spatial[i], scales[i], align_corners, mode)
        if mode in ("nearest", "nearest-exact"):
            x = _gather(x, dim, [int(s) for s in src])
            continue
        shape = (-1,) + (1,) * (input.ndim - 1 - dim)
        if mode == "bicubic":
            floors = [math.floor(s) for s in src]
            weights = [_cubic_weights(s - f) for s, f in zip(src, floors)]
            total = None
            for tap in range(4):
                index = [min(max(f - 1 + tap, 0), spatial[i] - 1) for f in floors]
                w = tensor(np.asarray([row[tap] for row in weights]), dtype=input.dtype,
                           device=input.device).reshape(shape)
                term = _gather(x, dim, index) * w
                total = term if total is None else total + term
            x = total
            continue
        low = [min(int(math.floor(s)), spatial[i] - 1) for s in src]
        high = [min(lo + 1, spatial[i] - 1) for lo in low]
        frac = tensor(np.asarray([s - lo for s, lo in zip(src, low)]), dtype=input.dtype, device=input.device)
        frac = frac.reshape(shape)
        x = _gather(x, dim, low) * (1 - frac) + _gather(x, dim, high) * frac
    return x


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """torch.nn.functional.one_hot: int64 indices to an int64 ``(..., num_classes)`` tensor."""
    tensor_arg(tensor, "one_hot", "self", 1)
    if tensor.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel() and (int(tensor.min().item()) < 0):
        raise RuntimeError("Class values must be non-negative.")
    if tensor.numel() and int(tensor.max().item()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    classes = arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()
