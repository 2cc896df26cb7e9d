"""Convolution layers: ``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d`` over ``ops/conv.py``, initialised as torch does."""

from __future__ import annotations

import math
from typing import Any

from asyncgrad.factories import rand
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.conv import conv_nd, conv_transpose_nd
from asyncgrad.tensor import Tensor


def _ntuple(value: Any, d: int) -> tuple:
    return (value,) * d if isinstance(value, int) else tuple(value)


class _ConvNd(Module):
    """torch's ``_ConvNd``: weight ``(out, in / groups, *kernel)``, bias ``(out,)``, both
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in / groups * prod(kernel) (torch's
    kaiming_uniform_ with a=sqrt(5) reduces to exactly that bound)."""

    _d = 2

    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None, output_padding: Any = 0) -> None:
        super().__init__()
        d = self._d
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, d)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode={padding_mode!r}: asyncgrad's convolutions pad with zeros only "
                                      "(pad first with nn.functional.pad)")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, d)
        self.stride = _ntuple(stride, d)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, d)
        self.dilation = _ntuple(dilation, d)
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = _ntuple(output_padding, d)
        # torch's fan_in is the weight's dim 1 times the kernel: in / groups for a convolution,
        # out / groups for a transposed one, whose weight is (in, out / groups, *kernel)
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        with no_grad():
            self.weight = Parameter(rand(*shape, dtype=dtype, device=device) * (2 * bound) - bound)
            self.bias = Parameter(rand(out_channels, dtype=dtype, device=device) * (2 * bound) - bound) if bias \
                else None

    def forward(self, input: Tensor) -> Tensor:
        return conv_nd(self._d, input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._d:
            text += f", padding={self.padding}"
        if self.output_padding != (0,) * self._d:
            text += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * self._d:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv1d(_ConvNd):
    """torch.nn.Conv1d on ``(N, C, L)`` or ``(C, L)``."""

    _d = 1


class Conv2d(_ConvNd):
    """torch.nn.Conv2d on ``(N, C, H, W)`` or ``(C, H, W)``."""

    _d = 2


class Conv3d(_ConvNd):
    """torch.nn.Conv3d on ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""

    _d = 3


class _ConvTransposeNd(_ConvNd):
    """torch's ``_ConvTransposeNd``: weight ``(in, out / groups, *kernel)``; ``forward(input,
    output_size)`` picks the output_padding that gives ``output_size`` (torch's rule and words)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple:
        if output_size is None:
            return self.output_padding
        d = self._d
        sizes = list(output_size)
        if len(sizes) == d + 2 or (len(sizes) == d + 1 and input.ndim == d + 1):
            sizes = sizes[-d:]
        if len(sizes) != d:
            raise ValueError(f"ConvTranspose{d}D: for {input.ndim}D input, output_size must have {d} or {d + 2} "
                             f"elements (got {len(sizes)})")
        spatial = input.shape[input.ndim - d:]
        lows = [(n - 1) * s - 2 * p + v * (k - 1) + 1
                for n, s, p, v, k in zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        highs = [low + s - 1 for low, s in zip(lows, self.stride)]
        if not all(low <= n <= high for low, n, high in zip(lows, sizes, highs)):
            raise ValueError(f"requested an output size of {sizes}, but valid sizes range from {lows} to {highs} "
                             f"(for an input of {list(spatial)})")
        extra = [n - low for n, low in zip(sizes, lows)]
        return tuple(extra)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:  # type: ignore[override]
        return conv_transpose_nd(self._d, input, self.weight, self.bias, self.stride, self.padding,
                                 self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d on ``(N, C, L)`` or ``(C, L)``."""

    _d = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d on ``(N, C, H, W)`` or ``(C, H, W)``."""

    _d = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d on ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""

    _d = 3
