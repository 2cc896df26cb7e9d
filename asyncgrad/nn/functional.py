"""``asyncgrad.nn.functional``: the stateless ops behind the layers, named as in torch.nn.functional."""

from __future__ import annotations

import warnings
from typing import Any

from asyncgrad._validate import tensor_arg
from asyncgrad.ops.nn import cross_entropy, linear, mse_loss, nll_loss
from asyncgrad.ops.reduction import log_softmax, softmax
from asyncgrad.tensor import Tensor

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "nll_loss", "relu", "softmax"]

# convolution, pooling, embedding, padding, resizing, one_hot
from asyncgrad.nn.spatial import interpolate, one_hot, pad  # noqa: E402
from asyncgrad.ops.conv import (  # noqa: E402
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from asyncgrad.ops.embedding import embedding  # noqa: E402
from asyncgrad.ops.pooling import adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d  # noqa: E402

__all__ += ["adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
            "conv_transpose2d", "conv_transpose3d", "embedding", "interpolate",
           "max_pool1d", "max_pool2d", "one_hot", "pad"]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``inplace=True`` overwrites ``input`` (and bumps its version) instead of allocating."""
    tensor_arg(input, "relu")
    return input.relu_() if inplace else input.relu()


# activations, dropout, normalisation, losses, attention
from asyncgrad.nn.loss import (  # noqa: E402
    cosine_similarity,
    huber_loss,
    kl_div,
    l1_loss,
    normalize,
    smooth_l1_loss,
)
from asyncgrad.ops.activation import (  # noqa: E402
    celu,
    elu,
    gelu,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    silu,
    softplus,
)
from asyncgrad.ops.attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: E402
from asyncgrad.ops.dropout import dropout  # noqa: E402
from asyncgrad.ops.elementwise import sigmoid, tanh  # noqa: E402
from asyncgrad.ops.loss import binary_cross_entropy, binary_cross_entropy_with_logits  # noqa: E402
from asyncgrad.ops.norm import batch_norm, group_norm, layer_norm  # noqa: E402

__all__ += [
    "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "celu", "cosine_similarity", "dropout",
    "elu", "gelu", "group_norm", "hardsigmoid", "hardswish", "hardtanh", "huber_loss", "kl_div", "l1_loss",
    "layer_norm", "leaky_relu", "logsigmoid", "mish", "multi_head_attention_forward", "normalize", "prelu", "relu6",
    "scaled_dot_product_attention", "selu", "sigmoid", "silu", "smooth_l1_loss", "softplus", "tanh",
]

# ops-misc: in-place activations, threshold, glu, softmin, softsign, tanhshrink, shrinks, rrelu, instance_norm
from asyncgrad.ops.activation import (  # noqa: E402
    elu_,
    glu,
    hardshrink,
    hardtanh_,
    leaky_relu_,
    relu_,
    rrelu,
    rrelu_,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
    threshold_,
)
from asyncgrad.ops.ctc import ctc_loss  # noqa: E402
from asyncgrad.ops.norm import instance_norm  # noqa: E402

__all__ += ["elu_", "glu", "hardshrink", "hardtanh_", "leaky_relu_", "relu_", "rrelu", "rrelu_", "softmin",
            "softshrink", "softsign", "tanhshrink", "threshold", "threshold_", "instance_norm", "ctc_loss"]

# opsB: margin, embedding and likelihood losses, distances
from asyncgrad.nn.loss import (  # noqa: E402
    cosine_embedding_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    pairwise_distance,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from asyncgrad.ops.misc import pdist  # noqa: E402

__all__ += ["cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
            "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss", "pairwise_distance", "pdist",
            "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]

# opsB: shuffles, bilinear, RMS and local response normalisation, feature and alpha dropout, upsample_*
from asyncgrad.nn.bilinear import bilinear  # noqa: E402
from asyncgrad.nn.normalization import local_response_norm, rms_norm  # noqa: E402
from asyncgrad.nn.pixelshuffle import channel_shuffle, pixel_shuffle, pixel_unshuffle  # noqa: E402
from asyncgrad.ops.dropout import (  # noqa: E402
    alpha_dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
)

__all__ += ["alpha_dropout", "bilinear", "channel_shuffle", "dropout1d", "dropout2d", "dropout3d",
            "feature_alpha_dropout", "local_response_norm", "pixel_shuffle", "pixel_unshuffle", "rms_norm",
            "upsample", "upsample_bilinear", "upsample_nearest"]


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """torch's deprecated name for ``interpolate``."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """torch's deprecated ``interpolate(..., mode='nearest')``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """torch's deprecated ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)

# opsB: 3-D and adaptive poolings
from asyncgrad.ops.pooling import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool3d,
    max_pool3d,
)

__all__ += ["adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
            "adaptive_max_pool3d", "avg_pool3d", "max_pool3d"]

# opsB: im2col/col2im and max unpooling
from asyncgrad.nn.fold import fold, max_unpool1d, max_unpool2d, max_unpool3d, unfold  # noqa: E402

__all__ += ["fold", "max_unpool1d", "max_unpool2d", "max_unpool3d", "unfold"]

# opsB: bags of embeddings
from asyncgrad.nn.embedding_bag import embedding_bag  # noqa: E402

__all__ += ["embedding_bag"]

# opsB: fractional max pooling
from asyncgrad.nn.fractional import fractional_max_pool2d, fractional_max_pool3d  # noqa: E402

__all__ += ["fractional_max_pool2d", "fractional_max_pool3d"]

# opsB: sampling at a grid's points
from asyncgrad.nn.grid_sample import grid_sample  # noqa: E402

__all__ += ["grid_sample"]

# opsB: the classifier head's loss in one call
from asyncgrad.nn.loss import linear_cross_entropy  # noqa: E402

__all__ += ["linear_cross_entropy"]
