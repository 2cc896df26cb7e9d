"""The layers and losses the notebooks and the demo train with, each a thin Module over an op."""

from __future__ import annotations

import math
from typing import Any

from asyncgrad._validate import int_list
from asyncgrad.factories import rand
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.nn import functional as F
from asyncgrad.nn.container import Sequential  # noqa: F401  (Sequential lives in container.py)
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.elementwise import sigmoid, tanh
from asyncgrad.tensor import Tensor


def _uniform_parameter(shape: tuple[int, ...], bound: float, dtype: Any, device: Any) -> Parameter:
    """U(-bound, bound) from asyncgrad's seeded generator, so ``ag.manual_seed`` fixes the init."""
    with no_grad():
        values = rand(*shape, dtype=dtype, device=device) * (2 * bound) - bound
    return Parameter(values)


class Linear(Module):
    """``y = x @ weight.T + bias``, initialised as torch does: U(-1/sqrt(in), 1/sqrt(in)) for both.

    (torch's kaiming_uniform_ with a=sqrt(5) reduces to exactly that bound for the weight.)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        int_list(((out_features, in_features),), "empty")  # torch's words: it allocates the weight with empty()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = _uniform_parameter((out_features, in_features), bound, dtype, device)
        self.bias = _uniform_parameter((out_features,), bound, dtype, device) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return tanh(input)


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return sigmoid(input)


class MSELoss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)



# CrossEntropyLoss lives with the other losses in nn/loss.py (with label_smoothing and its weight as
# a buffer); named here too, where it used to be defined, for code that imports it from this module.
from asyncgrad.nn.loss import CrossEntropyLoss  # noqa: E402, F401
