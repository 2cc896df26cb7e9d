"""Convolution layers: ``Conv1d`` and ``Conv2d`` over ``ops/conv.py``, initialised as torch does."""

from __future__ import annotations

import math
from typing import Any

from asyncgrad.autograd.grad_mode import no_grad
from asyncgrad.factories import rand
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.conv import conv_nd
from asyncgrad.tensor import Tensor


def _ntuple(value: Any, d: int) -> tuple:
    return (value,) * d if isinstance(value, int) else tuple(value)


class _ConvNd(Module):
    """torch's ``_ConvNd``: weight ``(out, in / groups, *kernel)``, bias ``(out,)``, both
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in / groups * prod(kernel) (torch's
    kaiming_uniform_ with a=sqrt(5) reduces to exactly that bound)."""

    _d = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
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
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        shape = (out_channels, in_channels // groups) + self.kernel_size
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
