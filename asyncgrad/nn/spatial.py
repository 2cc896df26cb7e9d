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


def _source(out: int, size: int, scale: float | None, align_corners: bool | None, nearest: bool) -> list[float]:
    """Each output position's source coordinate along one dim, by torch's rules."""
    if nearest:
        step = 1.0 / scale if scale else size / out
        return [min(math.floor(i * step), size - 1) for i in range(out)]
    if align_corners:
        step = (size - 1) / (out - 1) if out > 1 else 0.0
        return [i * step for i in range(out)]
    step = 1.0 / scale if scale else size / out
    return [max((i + 0.5) * step - 0.5, 0.0) for i in range(out)]


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """torch.nn.functional.interpolate, modes ``nearest`` (1-D and 2-D) and ``bilinear`` (2-D,
    ``align_corners`` as torch)."""
    tensor_arg(input, "interpolate", "input", 1)
    dims = input.ndim - 2
    if mode not in ("nearest", "bilinear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported by asyncgrad (nearest, bilinear)")
    if mode == "bilinear" and dims != 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but bilinear mode needs 4D input")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported by asyncgrad")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    spatial = input.shape[2:]
    if size is not None:
        sizes = [size] * dims if isinstance(size, int) else list(size)
        scales: list[float | None] = [None] * dims
    else:
        scales = [float(scale_factor)] * dims if isinstance(scale_factor, (int, float)) else \
            [float(s) for s in scale_factor]
        sizes = [math.floor(n * s) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = [None] * dims
    x = input
    for i in range(dims):
        dim = 2 + i
        src = _source(sizes[i], spatial[i], scales[i], align_corners, mode == "nearest")
        if mode == "nearest":
            x = _gather(x, dim, [int(s) for s in src])
            continue
        low = [min(int(math.floor(s)), spatial[i] - 1) for s in src]
        high = [min(lo + 1, spatial[i] - 1) for lo in low]
        frac = tensor(np.asarray([s - lo for s, lo in zip(src, low)]), dtype=input.dtype, device=input.device)
        frac = frac.reshape((-1,) + (1,) * (input.ndim - 1 - dim))
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
