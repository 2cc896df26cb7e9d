"""``asyncgrad.nn.functional``: the stateless ops behind the layers, named as in torch.nn.functional."""

from __future__ import annotations

from asyncgrad._validate import tensor_arg
from asyncgrad.ops.nn import cross_entropy, linear, mse_loss, nll_loss
from asyncgrad.ops.reduction import log_softmax, softmax
from asyncgrad.tensor import Tensor

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "nll_loss", "relu", "softmax"]

# nn-conv: convolution, pooling, embedding, padding, resizing, one_hot
from asyncgrad.nn.spatial import interpolate, one_hot, pad  # noqa: E402
from asyncgrad.ops.conv import conv1d, conv2d  # noqa: E402
from asyncgrad.ops.embedding import embedding  # noqa: E402
from asyncgrad.ops.pooling import adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d  # noqa: E402

__all__ += ["adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "embedding", "interpolate",
           "max_pool1d", "max_pool2d", "one_hot", "pad"]
# end nn-conv


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``inplace=True`` overwrites ``input`` (and bumps its version) instead of allocating."""
    tensor_arg(input, "relu")
    return input.relu_() if inplace else input.relu()
