"""``asyncgrad.nn.functional``: the stateless ops behind the layers, named as in torch.nn.functional."""

from __future__ import annotations

from asyncgrad._validate import tensor_arg
from asyncgrad.ops.nn import cross_entropy, linear, mse_loss, nll_loss
from asyncgrad.ops.reduction import log_softmax, softmax
from asyncgrad.tensor import Tensor

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "nll_loss", "relu", "softmax"]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``inplace=True`` overwrites ``input`` (and bumps its version) instead of allocating."""
    tensor_arg(input, "relu")
    return input.relu_() if inplace else input.relu()
