"""``unfold`` (im2col), ``fold`` (col2im) and ``max_unpool1d/2d/3d``, with their layers.

``unfold`` is a convolution with a fixed one-hot weight: output channel ``c K + k`` reads input
channel ``c`` at kernel position ``k`` alone (``groups = C``), which is im2col's ``(C, kh, kw)``
row order; ``fold``, its adjoint, is the transposed convolution with that weight. So their
gradients (each other) and every higher order are the convolution's (Note [Three
convolutions] in ops/conv.py). ``max_unpool`` scatters each value to its recorded position in a
zero output; its gradient gathers from there (the scatter's).
"""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.factories import tensor, zeros
from asyncgrad.nn.module import Module
from asyncgrad.ops.conv import conv2d, conv_transpose2d
from asyncgrad.tensor import Tensor

__all__ = ["Fold", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "Unfold", "fold", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "unfold"]


def _pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)  # type: ignore[return-value]


def _one_hot_weight(channels: int, kernel: tuple[int, int], like: Tensor) -> Tensor:
    """``(C K, 1, kh, kw)``: row ``c K + k`` is 1 at kernel position ``k``, 0 elsewhere."""
    k = kernel[0] * kernel[1]
    rows = [[[[1.0 if i * kernel[1] + j == r else 0.0 for j in range(kernel[1])] for i in range(kernel[0])]]
            for r in range(k)]
    return tensor(rows * channels, dtype=like.dtype, device=like.device)


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """torch.nn.functional.unfold: ``(N, C, H, W)`` (or ``(C, H, W)``) to ``(N, C kh kw, L)``."""
    tensor_arg(input, "unfold", "input", 1)
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    kernel, dil, pads, step = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    batched = input if input.ndim == 4 else input.unsqueeze(0)
    n, c, h, w = batched.shape
    blocks = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, p, d, k, s in zip((h, w), pads, dil, kernel, step)]
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size={kernel}, dilation={dil}, "
                           f"padding={pads}, calculated shape of the array of sliding blocks as {tuple(blocks)}, but "
                           "its components must be at least one.")
    cols = conv2d(batched, _one_hot_weight(c, kernel, input), None, step, pads, dil, c)
    out = cols.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """torch.nn.functional.fold: ``(N, C kh kw, L)`` (or unbatched) summed back into ``(N, C, H, W)``."""
    tensor_arg(input, "fold", "input", 1)
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.ndim}D)")
    size, kernel, dil, pads, step = (_pair(output_size), _pair(kernel_size), _pair(dilation), _pair(padding),
                                     _pair(stride))
    batched = input if input.ndim == 3 else input.unsqueeze(0)
    n, rows, length = batched.shape
    k = kernel[0] * kernel[1]
    if rows % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={rows} and kernel_size={kernel}")
    blocks = [(o + 2 * p - d * (kk - 1) - 1) // s + 1 for o, p, d, kk, s in zip(size, pads, dil, kernel, step)]
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation={dil}, padding={pads}, "
                           f"stride={step}, expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={length}.")
    c = rows // k
    reached = [(b - 1) * s - 2 * p + d * (kk - 1) + 1 for b, s, p, d, kk in zip(blocks, step, pads, dil, kernel)]
    extra = [o - r for o, r in zip(size, reached)]
    grid = batched.reshape(n, rows, blocks[0], blocks[1])
    out = conv_transpose2d(grid, _one_hot_weight(c, kernel, input), None, step, pads, extra, c, dil)
    return out if input.ndim == 3 else out.squeeze(0)


def _max_unpool(d: int, fn: str, input: Tensor, indices: Tensor, kernel_size: Any, stride: Any, padding: Any,
                output_size: Any) -> Tensor:
    tensor_arg(input, fn, "input", 1)
    tensor_arg(indices, fn, "indices", 2)
    kernel = (kernel_size,) * d if isinstance(kernel_size, int) else tuple(kernel_size)
    step = kernel if stride is None else (stride,) * d if isinstance(stride, int) else tuple(stride)
    pads = (padding,) * d if isinstance(padding, int) else tuple(padding)
    spatial = input.shape[-d:]
    default = [(n - 1) * s - 2 * p + k for n, s, p, k in zip(spatial, step, pads, kernel)]
    if output_size is None:
        sizes = default
    else:
        sizes = list(output_size)
        if len(sizes) == d + 2 or (len(sizes) == d + 1 and input.ndim == d + 1):
            sizes = sizes[-d:]
        if len(sizes) != d:
            raise ValueError(f"output_size should be a sequence containing {d} or {d + 2} elements, but it has a "
                             f"length of '{len(sizes)}'")
        for j, (o, low, s) in enumerate(zip(sizes, default, step)):
            if not low - s < o < low + s:
                raise ValueError(f'invalid output_size "{tuple(sizes)}" (dim {j} must be between {low - s} and '
                                 f"{low + s})")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    lead = input.shape[:-d]
    plane = math.prod(sizes)
    flat = input.reshape(*(lead + (-1,)))
    where = indices.reshape(*(lead + (-1,)))
    if where.numel() and (int(where.min().item()) < 0 or int(where.max().item()) >= plane):
        raise RuntimeError(f"Found an invalid max index: {int(where.max().item())} (output volumes are of size "
                           f"{'x'.join(map(str, sizes))}")
    out = zeros(*(lead + (plane,)), dtype=input.dtype, device=input.device).scatter(-1, where, flat)
    return out.reshape(*(lead + tuple(sizes)))


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool1d: ``max_pool1d``'s values put back at its indices, zeros elsewhere."""
    return _max_unpool(1, "max_unpool1d", input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool2d."""
    return _max_unpool(2, "max_unpool2d", input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """torch.nn.functional.max_unpool3d."""
    return _max_unpool(3, "max_unpool3d", input, indices, kernel_size, stride, padding, output_size)


class Unfold(Module):
    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class _MaxUnpoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _fn = staticmethod(max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    _fn = staticmethod(max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    _fn = staticmethod(max_unpool3d)
