"""``bilinear`` (``y = x1^T A x2 + b`` per output feature) and the ``Bilinear`` layer."""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.factories import rand
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.linalg import einsum
from asyncgrad.tensor import Tensor

__all__ = ["Bilinear", "bilinear"]


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]`` (torch's
    composition, an einsum, so its gradients are the einsum's)."""
    tensor_arg(input1, "bilinear", "input1", 1)
    tensor_arg(input2, "bilinear", "input2", 2)
    tensor_arg(weight, "bilinear", "weight", 3)
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    if input1.shape[:-1] != input2.shape[:-1]:
        for i in range(input1.ndim - 1):
            if input1.shape[i] != input2.shape[i]:
                raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {input1.shape[i]} and "
                                   f"{input2.shape[i]}")
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {weight.shape[1] if weight.ndim > 1 else 0}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {weight.shape[2]}")
    if bias is not None and bias.shape[-1:] != weight.shape[:1]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[-1]} but expected "
                           f"{weight.shape[0]}")
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


class Bilinear(Module):
    """torch.nn.Bilinear: weight ``(out, in1, in2)`` and bias ``(out,)``, U(-1/sqrt(in1), 1/sqrt(in1))."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        bound = 1 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        with no_grad():
            self.weight = Parameter(rand(out_features, in1_features, in2_features, dtype=dtype, device=device)
                                    * (2 * bound) - bound)
            self.bias = Parameter(rand(out_features, dtype=dtype, device=device) * (2 * bound) - bound) if bias \
                else None

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
